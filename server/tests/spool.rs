//! The spool under pressure (PUSH-10, HEALTH-2): a full spool refuses pushes instead of
//! accepting what it cannot keep, replay goes in bounded chunks and resumes after a
//! failure, a replay that cannot make progress shows in `/health`, and start-up does
//! not wait for it. The large form of these (a gigabyte spooled) is the `spool-capacity`
//! fault scenario.

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

async fn maintenance(c: &reqwest::Client, base: &str, on: bool) -> Value {
    let (s, b) = post(
        c,
        &format!("{base}/api/v1/system/maintenance"),
        &json!({ "enabled": on }),
    )
    .await;
    assert_eq!(s, 200);
    b.unwrap()
}

/// Pushes one request of `n` items of `size` bytes each to `queue`: the status, and the
/// transactionIds a 201 answered `buffered`.
async fn push(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    tag: usize,
    n: usize,
    size: usize,
) -> (u16, Vec<String>, Option<String>) {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"queue": queue, "transactionId": format!("t{tag}-{i}"), "payload": "x".repeat(size)}))
        .collect();
    let r = c
        .post(format!("{base}/api/v1/push"))
        .json(&json!({ "items": items }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body: Value = r.json().await.unwrap();
    let buffered = match body.as_array() {
        Some(a) => a
            .iter()
            .filter(|it| it["status"] == "buffered")
            .map(|it| it["transaction_id"].as_str().unwrap().to_string())
            .collect(),
        None => vec![],
    };
    (status, buffered, retry)
}

/// Every message of `queue`, in order, by transactionId.
async fn drain(c: &reqwest::Client, base: &str, queue: &str) -> Vec<String> {
    let mut out = vec![];
    loop {
        let (s, b) = get(
            c,
            &format!("{base}/api/v1/pop/queue/{queue}?batch=1000&autoAck=true"),
        )
        .await;
        if s == 204 {
            return out;
        }
        for m in b.unwrap()["messages"].as_array().unwrap() {
            out.push(m["transactionId"].as_str().unwrap().to_string());
        }
    }
}

/// PUSH-10: under maintenance, pushes spool until the next would pass the capacity;
/// that one is answered 503 with Retry-After and is not kept. Everything answered
/// `buffered` is delivered once, in order, after maintenance ends, in chunks of at most
/// the configured items (one transaction each: one `createdAt` each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_10_a_full_spool_refuses_with_503_and_replays_in_chunks() {
    let app = pg_server_with(|c| {
        c.spool_max_bytes = 64 * 1024;
        c.spool_chunk_items = 7;
    })
    .await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    maintenance(&c, &base, true).await;
    let (mut accepted, mut refused) = (vec![], 0);
    for tag in 0..40 {
        let (status, buffered, retry) = push(&c, &base, "q", tag, 5, 500).await;
        match status {
            201 => {
                assert_eq!(
                    buffered.len(),
                    5,
                    "every item of a push under maintenance is buffered"
                );
                accepted.extend(buffered)
            }
            503 => {
                assert_eq!(
                    retry.as_deref(),
                    Some("1"),
                    "a refusal says when to come back"
                );
                refused += 1;
            }
            s => panic!("push answered {s}"),
        }
    }
    assert!(
        refused > 0 && !accepted.is_empty(),
        "{} accepted, {refused} refused",
        accepted.len()
    );
    let (_, health) = get(&c, &format!("{base}/health")).await;
    let spool = &health.unwrap()["spool"];
    assert_eq!(spool["items"], accepted.len());
    assert_eq!(spool["replay"], "pending");
    assert!(spool["bytes"].as_u64().unwrap() <= 64 * 1024);
    // The same depth in the metrics Prometheus scrapes.
    assert_eq!(
        metric(&base, "queen_spool_items").await,
        accepted.len() as f64
    );
    assert_eq!(metric(&base, "queen_spool_capacity_bytes").await, 65536.0);
    let off = maintenance(&c, &base, false).await;
    assert_eq!(off["bufferedMessages"], 0, "{off}");
    assert_eq!(
        drain(&c, &base, "q").await,
        accepted,
        "each accepted push once, in order"
    );
    let chunks: i64 = sqlx::query_scalar("SELECT count(DISTINCT created_at) FROM queen_messages")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    let lines = accepted.len() / 5;
    assert_eq!(
        chunks as usize,
        lines.div_ceil(2),
        "two 5-item lines pass 7 items: one chunk"
    );
    assert_eq!(
        push(&c, &base, "q", 99, 1, 10).await.0,
        201,
        "pushes are taken again"
    );
}

/// HEALTH-2: a replay that keeps failing while the database answers is `stuck`, and
/// `/health` says 503; once the cause is gone the replay goes through and health is
/// back. Start-up does not wait for a spool it cannot replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_2_a_stuck_replay_is_unhealthy_until_it_goes_through() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    maintenance(&c, &base, true).await;
    let (_, accepted, _) = push(&c, &base, "q", 0, 3, 10).await;
    let pool = app.broker().pool().clone();
    sqlx::query("ALTER TABLE queen_messages RENAME TO queen_messages_away")
        .execute(&pool)
        .await
        .unwrap();
    maintenance(&c, &base, false).await;
    let stuck = wait_for_health(&c, &base, 503).await;
    assert_eq!(stuck["spool"]["replay"], "stuck", "{stuck}");
    assert_eq!(metric(&base, "queen_spool_replay_stuck").await, 1.0);
    assert_eq!(stuck["database"], "connected");
    // A restart meanwhile starts serving without waiting for the replay.
    let TestServer {
        server,
        db: _db,
        dir,
        broker,
    } = app;
    let broker = broker.expect("the PostgreSQL engine");
    server.stop().await.unwrap();
    drop(broker); // the process is gone: its spool's lock with it
    let mut cfg = config(&dir);
    cfg.spool_dir = dir.to_path_buf();
    let broker = tokio::time::timeout(
        Duration::from_secs(30),
        queen_server::pg::PgBroker::connect(_db.as_ref().unwrap().url(), &cfg),
    )
    .await
    .expect("start-up does not wait for the replay")
    .unwrap();
    let server = queen_server::app::spawn(
        std::sync::Arc::new(broker),
        &cfg,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let base = server.url();
    let (_, h) = get(&c, &format!("{base}/health")).await;
    assert_eq!(h.unwrap()["spool"]["items"], 3);
    sqlx::query("ALTER TABLE queen_messages_away RENAME TO queen_messages")
        .execute(&pool)
        .await
        .unwrap();
    let mut replay = Value::Null;
    for _ in 0..200 {
        let (s, b) = get(&c, &format!("{base}/health")).await;
        replay = b.unwrap()["spool"]["replay"].clone();
        if s == 200 && replay == "idle" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(replay, "idle", "the replay went through");
    assert_eq!(drain(&c, &base, "q").await, accepted);
    server.stop().await.unwrap();
}

/// Polls `/health` until it answers `status` (up to 20 s): its body.
async fn wait_for_health(c: &reqwest::Client, base: &str, status: u16) -> Value {
    for _ in 0..200 {
        let (s, b) = get(c, &format!("{base}/health")).await;
        if s == status {
            return b.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/health never answered {status}");
}
