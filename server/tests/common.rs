//! Helpers for the server's own tests: JSON over HTTP, free ports, the binary.
#![allow(dead_code)]

use serde_json::Value;
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

#[allow(unused_imports)]
pub use queen_server::testing::{config, pg_server, pg_server_with, TempDir, TestServer};

/// A transaction holding the lock of every pair of `group`, as a pop, an ack or an
/// extend of the pair holds it: whatever needs one of those pairs waits until it ends.
pub async fn hold_pairs(
    broker: &queen_server::pg::PgBroker,
    group: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = broker.pool().begin().await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(queen_pair_key(c.partition_id, c.consumer_group))
         FROM queen_cursors c WHERE c.consumer_group = $1",
    )
    .bind(group)
    .fetch_all(&mut *holder)
    .await
    .unwrap();
    holder
}

/// The stored messages of `queue`, or of its `partition` when given: a count the wire
/// cannot take without consuming them.
pub async fn stored_messages(pool: &sqlx::PgPool, queue: &str, partition: Option<&str>) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM queen_messages m JOIN queen_partitions p ON p.id = m.partition_id
         JOIN queen_queues q ON q.id = p.queue_id
         WHERE q.name = $1 AND ($2::text IS NULL OR p.name = $2)",
    )
    .bind(queue)
    .bind(partition)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Takes, in `tx`, the row lock of `queue`'s partitions (or of its `partition` only) that
/// a push there takes: such a push waits until `tx` ends.
pub async fn lock_partitions(tx: &mut sqlx::PgConnection, queue: &str, partition: Option<&str>) {
    sqlx::query(
        "SELECT 1 FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
         WHERE q.name = $1 AND ($2::text IS NULL OR p.name = $2) FOR UPDATE OF p",
    )
    .bind(queue)
    .bind(partition)
    .execute(tx)
    .await
    .unwrap();
}

/// Waits until some session of this test's database waits for a lock (a row lock or an
/// advisory one), or until `finished` says the task expected to wait is done without it;
/// panics with `why` after ten seconds of neither.
pub async fn until_a_lock_is_awaited(pool: &sqlx::PgPool, finished: impl Fn() -> bool, why: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 || finished() {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{why}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A database of this test's own (dropped with it), as the tests get PostgreSQL.
pub async fn own_database() -> queen_pg::TestDb {
    queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests")
}
