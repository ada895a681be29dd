//! Choosing where PostgreSQL comes from, and the process-wide servers.
//!
//! Exists to hold the rules in one place: `QUEEN_TEST_PG=url|docker|local` forces a
//! source; otherwise `DATABASE_URL` if set, else Docker if an engine answers (falling back to
//! local binaries, with a warning, if the container cannot start), else local binaries, else an
//! error that names all three. Each source is started at most once per process (one container
//! or cluster per test binary, never one per test); tests then get their own database on it.
//!
//! Statics are never dropped, so an `atexit` hook removes the container or cluster when the
//! test binary exits normally; if it is killed instead, the cluster's server dies with it
//! (parent-death signal) and its temp dir is swept by the next run.

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, Once};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::docker::{self, DockerPg};
use crate::error::{Error, Result};
use crate::local::LocalCluster;
use crate::testdb::TestDb;
use crate::{bins, sql, urls};

/// Where a server comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// An existing server named by `DATABASE_URL`.
    Url,
    /// A container started through testcontainers.
    Docker,
    /// A throwaway cluster from the local `initdb`/`postgres` binaries.
    Local,
}

impl Source {
    /// The value of `QUEEN_TEST_PG` that forces this source.
    pub fn name(self) -> &'static str {
        match self {
            Source::Url => "url",
            Source::Docker => "docker",
            Source::Local => "local",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Source {
    type Err = Error;
    fn from_str(s: &str) -> Result<Source> {
        match s.trim().to_ascii_lowercase().as_str() {
            "url" => Ok(Source::Url),
            "docker" => Ok(Source::Docker),
            "local" => Ok(Source::Local),
            _ => Err(Error::InvalidChoice(s.to_owned())),
        }
    }
}

/// The source forced by `QUEEN_TEST_PG`, if any (unset or empty: none).
pub fn forced_source() -> Result<Option<Source>> {
    match std::env::var("QUEEN_TEST_PG") {
        Ok(v) if !v.trim().is_empty() => v.parse().map(Some),
        _ => Ok(None),
    }
}

/// `DATABASE_URL` when set and not empty.
pub fn database_url() -> Option<String> {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// `Ok` when local server binaries can be found (they may still fail to start).
pub fn local_binaries() -> Result<std::path::PathBuf> {
    bins::Bins::find().map(|b| b.dir().to_path_buf())
}

enum Backend {
    Docker(Box<DockerPg>),
    Local(LocalCluster),
}

/// A running (or reachable) PostgreSQL server with superuser-ish access.
pub struct Server {
    source: Source,
    admin_url: String,
    detail: String,
    backend: Mutex<Option<Backend>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("source", &self.source)
            .field("admin_url", &urls::redact(&self.admin_url))
            .field("detail", &self.detail)
            .finish()
    }
}

impl Server {
    /// Starts (or, for [`Source::Url`], connects to) a new server of `source`, owned by the
    /// caller and stopped when dropped. Tests normally want [`server`] or [`shared`] instead.
    pub async fn start(source: Source) -> Result<Server> {
        match source {
            Source::Url => {
                Server::from_url(&database_url().ok_or(Error::MissingDatabaseUrl)?).await
            }
            Source::Docker => {
                docker::engine_answers().await?;
                let pg = DockerPg::start().await?;
                Ok(Server {
                    source,
                    admin_url: pg.url().to_owned(),
                    detail: pg.describe(),
                    backend: Mutex::new(Some(Backend::Docker(Box::new(pg)))),
                })
            }
            Source::Local => {
                // Nothing of the start lingers on the caller's runtime: initdb has exited, the
                // readiness connections are closed, and `postgres` is a plain child process.
                let cluster = LocalCluster::start().await?;
                Ok(Server {
                    source,
                    admin_url: cluster.url().to_owned(),
                    detail: format!(
                        "local cluster in {}, port {}",
                        cluster.dir().display(),
                        cluster.port()
                    ),
                    backend: Mutex::new(Some(Backend::Local(cluster))),
                })
            }
        }
    }

    /// An existing server at `url` (what `DATABASE_URL` names), checked by connecting. The
    /// role needs CREATEDB for [`TestDb`]s.
    pub async fn from_url(url: &str) -> Result<Server> {
        urls::with_database(url, "postgres")?; // validates the URL
        let conn = sql::connect_within(url, Duration::from_secs(10)).await?;
        drop(conn);
        Ok(Server {
            source: Source::Url,
            admin_url: url.to_owned(),
            detail: format!("existing server {}", urls::redact(url)),
            backend: Mutex::new(None),
        })
    }

    /// Where this server comes from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// A URL with rights to create databases (superuser `postgres` for Docker and local).
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// Human-readable origin, e.g. `docker image queen-postgres:15, container 0123abcd`.
    pub fn describe(&self) -> &str {
        &self.detail
    }

    /// A fresh, empty database on this server, dropped when the [`TestDb`] is.
    pub async fn test_db(&self) -> Result<TestDb> {
        TestDb::on(self).await
    }

    /// Stops the container or cluster now (nothing for [`Source::Url`]). Afterwards the server
    /// is gone; this is what the exit hook calls for the process-wide servers.
    pub fn shutdown(&self) {
        let backend = self
            .backend
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match backend {
            Some(Backend::Docker(mut pg)) => pg.remove(),
            Some(Backend::Local(cluster)) => cluster.shutdown(),
            None => {}
        }
    }
}

type Cell = OnceCell<Result<Server>>;
static URL: Cell = Cell::const_new();
static DOCKER: Cell = Cell::const_new();
static LOCAL: Cell = Cell::const_new();
static SHARED: OnceCell<Result<&'static Server>> = OnceCell::const_new();

fn cell(source: Source) -> &'static Cell {
    match source {
        Source::Url => &URL,
        Source::Docker => &DOCKER,
        Source::Local => &LOCAL,
    }
}

/// The process-wide server of `source`, started on first use and removed at exit. A failed
/// start is remembered, so later callers get the same error quickly.
pub async fn server(source: Source) -> Result<&'static Server> {
    let result = cell(source)
        .get_or_init(|| async move {
            let server = Server::start(source).await?;
            register_exit_hook();
            Ok(server)
        })
        .await;
    result.as_ref().map_err(Clone::clone)
}

/// The process-wide server chosen by `QUEEN_TEST_PG` or, when unset, by the order
/// DATABASE_URL → Docker → local binaries. Prints the choice once to stderr.
pub async fn shared() -> Result<&'static Server> {
    SHARED
        .get_or_init(|| async {
            let server = choose().await?;
            eprintln!(
                "queen-pg: PostgreSQL source for this test binary: {} ({})",
                server.source(),
                server.describe()
            );
            Ok(server)
        })
        .await
        .clone()
}

async fn choose() -> Result<&'static Server> {
    if let Some(source) = forced_source()? {
        return server(source).await;
    }
    if database_url().is_some() {
        return server(Source::Url).await;
    }
    let docker_why = match docker::engine_answers().await {
        Ok(()) => match server(Source::Docker).await {
            Ok(server) => return Ok(server),
            Err(e) => {
                eprintln!("queen-pg: Docker answers but could not provide PostgreSQL ({e}); trying local binaries");
                e.to_string()
            }
        },
        Err(e) => e.to_string(),
    };
    server(Source::Local)
        .await
        .map_err(|local| Error::NoSource {
            url: "DATABASE_URL is not set".into(),
            docker: docker_why,
            local: local.to_string(),
            default_image: docker::DEFAULT_IMAGE.into(),
        })
}

fn register_exit_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: atexit only stores the function pointer; `on_exit` is a plain extern "C" fn.
        unsafe { libc::atexit(on_exit) };
    });
}

extern "C" fn on_exit() {
    let _ = std::panic::catch_unwind(|| {
        for source in [Source::Docker, Source::Local] {
            if let Some(Ok(server)) = cell(source).get() {
                server.shutdown();
            }
        }
    });
}
