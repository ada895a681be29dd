//! Helpers for the server's own tests: JSON over HTTP, free ports, the binary.
#![allow(dead_code)]

use queen_server::app::spawn;
use queen_server::config::Config;
use queen_server::pg::PgBroker;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub async fn get(c: &reqwest::Client, url: &str) -> (u16, Option<Value>) {
    answer(c.get(url)).await
}

pub async fn post(c: &reqwest::Client, url: &str, body: &Value) -> (u16, Option<Value>) {
    answer(c.post(url).json(body)).await
}

pub async fn delete(c: &reqwest::Client, url: &str) -> (u16, Option<Value>) {
    answer(c.delete(url)).await
}

/// Pushes one item with `payload` to `queue`, which must answer 201.
pub async fn push_one(c: &reqwest::Client, base: &str, queue: &str, payload: Value) {
    let body = serde_json::json!({"items": [{"queue": queue, "payload": payload}]});
    let (s, b) = post(c, &format!("{base}/api/v1/push"), &body).await;
    assert_eq!(s, 201, "{b:?}");
}

/// Pushes one item whose payload is the JSON text `payload`, exactly as written, then
/// pops `queue`: the pop's body as text.
pub async fn push_raw_then_pop(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    payload: &str,
) -> String {
    let body = format!(r#"{{"items":[{{"queue":"{queue}","payload":{payload}}}]}}"#);
    let r = c
        .post(format!("{base}/api/v1/push"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let r = c
        .get(format!("{base}/api/v1/pop/queue/{queue}"))
        .send()
        .await
        .unwrap();
    r.text().await.unwrap()
}

/// The text of `/metrics/prometheus`.
pub async fn prometheus(base: &str) -> String {
    reqwest::get(format!("{base}/metrics/prometheus"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of metric `name` (a sample line `name value`) at `/metrics/prometheus`.
pub async fn metric(base: &str, name: &str) -> f64 {
    let text = prometheus(base).await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample of {name} in:\n{text}"))
}

/// Sends `req`: the status and the JSON body, if any.
async fn answer(req: reqwest::RequestBuilder) -> (u16, Option<Value>) {
    let r = req.send().await.expect("server answers");
    let s = r.status().as_u16();
    let b = r.bytes().await.unwrap();
    (
        s,
        (!b.is_empty()).then(|| serde_json::from_slice(&b).unwrap()),
    )
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!(
        "queen-server-test-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Waits until `/health` answers 200.
pub async fn wait_healthy(c: &reqwest::Client, base: &str, within: Duration) {
    let until = std::time::Instant::now() + within;
    loop {
        if let Ok(r) = c.get(format!("{base}/health")).send().await {
            if r.status().as_u16() == 200 {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "{base} did not become healthy in {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn config(spool: &std::path::Path) -> Config {
    let mut c = Config::defaults();
    c.spool_dir = spool.to_path_buf();
    c
}

/// Our server with the PostgreSQL engine on a fresh database, with what must outlive it.
pub struct PgApp {
    pub server: queen_server::app::Running,
    /// The broker behind the server: tests look at its tables through its pool.
    pub broker: PgBroker,
    pub _db: queen_pg::TestDb,
    pub dir: std::path::PathBuf,
}

pub async fn pg_app(tag: &str) -> PgApp {
    pg_app_with(tag, |_| {}).await
}

/// [`pg_app`] with `adjust` applied to the configuration first.
pub async fn pg_app_with(tag: &str, adjust: impl FnOnce(&mut Config)) -> PgApp {
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests");
    let dir = temp_dir(tag);
    let mut cfg = config(&dir);
    adjust(&mut cfg);
    PgApp::start(db, dir, &cfg).await
}

impl PgApp {
    /// A broker and its server on `db`, with its spool in `dir`.
    async fn start(db: queen_pg::TestDb, dir: std::path::PathBuf, cfg: &Config) -> PgApp {
        let broker = PgBroker::connect(db.url(), cfg).await.unwrap();
        let server = spawn(
            Arc::new(broker.clone()),
            cfg,
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        PgApp {
            server,
            broker,
            _db: db,
            dir,
        }
    }

    /// Stops this server and its broker (the process is gone: its spool's lock with it)
    /// and starts a new one on the same database and spool directory.
    pub async fn restart(self) -> PgApp {
        let PgApp {
            server,
            broker,
            _db,
            dir,
        } = self;
        server.stop().await.unwrap();
        drop(broker);
        let cfg = config(&dir);
        PgApp::start(_db, dir, &cfg).await
    }
}
