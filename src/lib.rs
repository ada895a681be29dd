//! Shared helpers for the workspace-level integration tests in `tests/`: our server on
//! a fresh PostgreSQL database (or the memory engine), and an HTTP client that speaks
//! the reference model's `HttpRequest`/`HttpResponse`, timing each exchange so the
//! checker knows the interval the broker's "now" lay in.

pub mod python;

use queen_reference::time::Millis;
use queen_reference::wire::{HttpRequest, HttpResponse};
use queen_server::app::{spawn, Running};
use queen_server::config::Config;
use queen_server::pg::PgBroker;
use std::sync::Arc;

/// Our server on its own database, stopped (and the database dropped) on drop.
pub struct TestServer {
    pub running: Running,
    pub broker: Option<PgBroker>,
    /// Keeps the isolated database alive for the test.
    pub db: Option<queen_pg::TestDb>,
    /// Keeps the spool directory alive for the test.
    pub spool: Option<TempDir>,
}

impl TestServer {
    pub fn url(&self) -> String {
        self.running.url()
    }
}

/// A directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "queen-test-{tag}-{}-{}",
            std::process::id(),
            uuid_like()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn uuid_like() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst) ^ (now_ms() as u64)
}

/// A test configuration: short long-poll defaults, a private spool.
pub fn test_config(spool: &TempDir) -> Config {
    let mut c = Config::defaults();
    c.spool_dir = spool.0.clone();
    c.pool_size = 8;
    c
}

/// Our server with the PostgreSQL engine on a fresh database from the provider.
pub async fn pg_server() -> TestServer {
    pg_server_with(|_| {}).await
}

/// [`pg_server`] with `tweak` applied to the test configuration.
pub async fn pg_server_with(tweak: impl FnOnce(&mut Config)) -> TestServer {
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests (see pg/NOTES.md)");
    let spool = TempDir::new("spool");
    let mut config = test_config(&spool);
    tweak(&mut config);
    let broker = PgBroker::connect(db.url(), &config)
        .await
        .expect("PgBroker starts");
    let running = spawn(
        Arc::new(broker.clone()),
        &config,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("server binds");
    TestServer {
        running,
        broker: Some(broker),
        db: Some(db),
        spool: Some(spool),
    }
}

/// Our server with the reference model as its engine.
pub async fn memory_server() -> TestServer {
    memory_server_with(|_| {}).await
}

/// [`memory_server`] with `tweak` applied to the test configuration.
pub async fn memory_server_with(tweak: impl FnOnce(&mut Config)) -> TestServer {
    let spool = TempDir::new("spool");
    let mut config = test_config(&spool);
    tweak(&mut config);
    let broker =
        queen_server::memory::MemoryBroker::new(config.pop_timeout_ms(), config.body_limit);
    let running = spawn(Arc::new(broker), &config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("server binds");
    TestServer {
        running,
        broker: None,
        db: None,
        spool: Some(spool),
    }
}

/// The wall clock in milliseconds, the checker's time base.
pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// Sends `req` to `base` and returns the answer with the send and receive times.
pub async fn send(
    client: &reqwest::Client,
    base: &str,
    req: &HttpRequest,
) -> (HttpResponse, Millis, Millis) {
    let mut url = reqwest::Url::parse(&format!("{base}{}", req.path)).expect("url");
    if !req.query.is_empty() {
        url.query_pairs_mut().extend_pairs(req.query.iter());
    }
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).expect("method");
    let sent = now_ms();
    let r = client
        .request(method, url)
        .header("content-type", "application/json")
        .body(req.body.clone())
        .send()
        .await
        .expect("the server answers");
    let status = r.status().as_u16();
    let bytes = r.bytes().await.expect("body");
    let received = now_ms();
    let body = if bytes.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        }))
    };
    (HttpResponse { status, body }, sent, received)
}
