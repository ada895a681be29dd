//! The embedded target (cargo feature `embedded`): with no `--target`, our own server
//! runs in this process on a free port, with the PostgreSQL engine (the default: on
//! `DATABASE_URL` when set, else a fresh embedded cluster in a temporary directory) or
//! with `--engine memory`, the reference model itself behind the same HTTP layer.
//! When it runs its own cluster the target offers `database-control`: the suite may stop
//! and restart that cluster ([`EmbeddedDb`]).

use crate::database::{Database, DatabaseControl, DbFuture};
use queen_pg::PersistentCluster;
use queen_server::app::{spawn, Running};
use queen_server::broker::Broker;
use queen_server::config::Config;
use queen_server::memory::MemoryBroker;
use std::path::PathBuf;
use std::sync::Arc;

/// The embedded server's own cluster: stopped and restarted on its data directory and
/// port (the server's pool reconnects; its spool replays, PUSH-7).
pub struct EmbeddedDb {
    dir: PathBuf,
    port: u16,
    cluster: std::sync::Mutex<Option<PersistentCluster>>,
}

impl EmbeddedDb {
    /// Stops the cluster for good (end of the run).
    fn shut(&self) {
        let c = self.cluster.lock().expect("cluster lock").take();
        if let Some(c) = c {
            let _ = c.shutdown();
        }
    }
}

impl DatabaseControl for EmbeddedDb {
    fn stop(&self) -> DbFuture<'_> {
        Box::pin(async move {
            let c = self.cluster.lock().expect("cluster lock").take();
            match c {
                Some(c) => tokio::task::spawn_blocking(move || c.shutdown())
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("stopping PostgreSQL: {e}")),
                None => Ok(()),
            }
        })
    }

    fn start(&self) -> DbFuture<'_> {
        Box::pin(async move {
            if self.cluster.lock().expect("cluster lock").is_some() {
                return Ok(());
            }
            let c = PersistentCluster::start(&self.dir, self.port)
                .await
                .map_err(|e| format!("starting PostgreSQL: {e}"))?;
            *self.cluster.lock().expect("cluster lock") = Some(c);
            Ok(())
        })
    }
}

/// Which engine the embedded server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// PostgreSQL: `DATABASE_URL`, else an embedded cluster in a temporary directory.
    Pg,
    /// The reference model in memory (`queen-server --engine memory`).
    Memory,
}

/// The engine used when `--engine` is not given.
pub(crate) const DEFAULT_ENGINE: Engine = Engine::Pg;

/// Our server running in-process; [`Embedded::stop`] shuts it down and cleans up.
pub struct Embedded {
    running: Option<Running>,
    /// For reports: "embedded, memory engine", ...
    pub label: String,
    /// The embedded PostgreSQL cluster (stopped on drop).
    cluster: Option<Arc<EmbeddedDb>>,
    /// The temporary directory of the cluster and the spool (removed at the end).
    dir: Option<PathBuf>,
    /// The configuration the server was started with.
    pub config: Config,
}

impl Embedded {
    /// The server's base URL (empty when it is not running).
    pub fn url(&self) -> String {
        self.running.as_ref().map(Running::url).unwrap_or_default()
    }

    /// The database the suite may stop and start: only our own cluster.
    pub fn database(&self) -> Option<Database> {
        self.cluster
            .as_ref()
            .map(|c| Database(c.clone() as Arc<dyn DatabaseControl>))
    }

    /// Stops the server, then the database, then removes the temporary files.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.stop().await;
        }
        if let Some(c) = self.cluster.take() {
            c.shut();
        }
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(c) = self.cluster.take() {
            c.shut();
        }
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "queen-conformance-{}-{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ))
}

/// RET-3: how often our embedded server's retention job runs; the suite allows it
/// [`crate::cli::EMBEDDED_RETENTION_LAG_MS`], as a round takes a moment.
const RETENTION_INTERVAL_MS: u64 = 200;

/// Starts our server with `engine`. `config` starts from the server's defaults
/// (environment included); the data directory and spool are made temporary. With
/// `jwt_secret`, authentication is on with that HS256 secret (section 14).
pub async fn start(engine: Engine, jwt_secret: Option<&str>) -> Result<Embedded, String> {
    let mut config = Config::defaults();
    if let Some(secret) = jwt_secret {
        config.auth.jwt_enabled = true;
        config.auth.jwt_algorithm = "HS256".into();
        config.auth.jwt_secret = Some(secret.to_string());
    }
    config.retention_interval_ms = RETENTION_INTERVAL_MS;
    let dir = temp_dir();
    config.data_dir = dir.join("postgres");
    config.spool_dir = dir.join("spool");
    std::fs::create_dir_all(&config.spool_dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (broker, cluster, label): (Arc<dyn Broker>, _, String) = match engine {
        Engine::Memory => (
            Arc::new(MemoryBroker::new(
                config.pop_timeout_ms(),
                config.body_limit,
            )),
            None,
            "embedded server, memory engine (the reference model)".to_string(),
        ),
        Engine::Pg => {
            let pg = queen_server::embedded::open(&config)
                .await
                .map_err(|e| format!("cannot start the PostgreSQL engine: {e}"))?;
            let label = format!("embedded server, PostgreSQL engine ({})", pg.location);
            let db = pg.cluster.map(|c| {
                Arc::new(EmbeddedDb {
                    dir: c.data_dir().to_path_buf(),
                    port: c.port(),
                    cluster: std::sync::Mutex::new(Some(c)),
                })
            });
            (Arc::new(pg.broker), db, label)
        }
    };
    let running = spawn(broker, &config, "127.0.0.1:0".parse().expect("an address"))
        .await
        .map_err(|e| format!("cannot bind: {e}"))?;
    Ok(Embedded {
        running: Some(running),
        label,
        cluster,
        dir: Some(dir),
        config,
    })
}
