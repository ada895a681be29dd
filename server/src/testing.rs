//! One harness for every test that needs our server running: on a fresh PostgreSQL
//! database from the provider (`queen_pg::TestDb`), or on the memory engine, with a
//! private directory for its spool, stopped and cleaned up when dropped. The server's
//! own tests and the workspace's tests share it (feature `testing`), so a change to how
//! a server starts is made once.

use crate::app::{spawn, Running};
use crate::config::Config;
use crate::pg::PgBroker;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Our server on its own database (or the memory engine), stopped on drop.
pub struct TestServer {
    /// The running server: its URL, its stop.
    pub server: Running,
    /// The PostgreSQL engine behind it (`None` on the memory engine).
    pub broker: Option<PgBroker>,
    /// The database the test owns, dropped with it.
    pub db: Option<queen_pg::TestDb>,
    /// The test's own directory: the spool, and any files the test writes.
    pub dir: TempDir,
}

impl TestServer {
    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The PostgreSQL engine: tests look at its tables through its pool.
    pub fn broker(&self) -> &PgBroker {
        self.broker
            .as_ref()
            .expect("a server on the PostgreSQL engine")
    }

    /// The PostgreSQL engine, if the server runs on it.
    pub fn pg(&self) -> Option<&PgBroker> {
        self.broker.as_ref()
    }

    /// The database's URL (PostgreSQL engine only).
    pub fn database_url(&self) -> Option<&str> {
        self.db.as_ref().map(queen_pg::TestDb::url)
    }

    /// Stops this server and its broker (the process is gone: its spool's lock with it)
    /// and starts a new one on the same database and directory, with the defaults.
    pub async fn restart(self) -> TestServer {
        let cfg = config(self.dir.path());
        self.restart_with(&cfg).await
    }

    /// [`TestServer::restart`] with `config`.
    pub async fn restart_with(self, config: &Config) -> TestServer {
        let TestServer {
            server,
            broker,
            db,
            dir,
        } = self;
        server.stop().await.expect("the server stops");
        drop(broker);
        let db = db.expect("a restart keeps the PostgreSQL database");
        start_pg(db, dir, config).await
    }
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new empty directory under the system's temp dir, named for `tag`.
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "queen-test-{tag}-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            crate::clock::now_ms()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("a temp dir");
        TempDir(p)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The defaults, with the spool in `dir`.
pub fn config(dir: &Path) -> Config {
    let mut c = Config::defaults();
    c.spool_dir = dir.to_path_buf();
    c
}

/// Our server with the PostgreSQL engine on a fresh database.
pub async fn pg_server() -> TestServer {
    pg_server_with(|_| {}).await
}

/// [`pg_server`] with `adjust` applied to the configuration first.
pub async fn pg_server_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests");
    let dir = TempDir::new("pg");
    let mut cfg = config(dir.path());
    adjust(&mut cfg);
    start_pg(db, dir, &cfg).await
}

/// Our server with the reference model as its engine.
pub async fn memory_server() -> TestServer {
    memory_server_with(|_| {}).await
}

/// [`memory_server`] with `adjust` applied to the configuration first.
pub async fn memory_server_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
    let dir = TempDir::new("memory");
    let mut cfg = config(dir.path());
    adjust(&mut cfg);
    let broker = crate::memory::MemoryBroker::new(cfg.pop_timeout_ms(), cfg.body_limit);
    TestServer {
        server: listen(Arc::new(broker), &cfg).await,
        broker: None,
        db: None,
        dir,
    }
}

async fn start_pg(db: queen_pg::TestDb, dir: TempDir, cfg: &Config) -> TestServer {
    let broker = PgBroker::connect(db.url(), cfg)
        .await
        .expect("the PostgreSQL engine starts");
    TestServer {
        server: listen(Arc::new(broker.clone()), cfg).await,
        broker: Some(broker),
        db: Some(db),
        dir,
    }
}

async fn listen(broker: Arc<dyn crate::broker::Broker>, cfg: &Config) -> Running {
    spawn(broker, cfg, "127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("the server binds")
}
