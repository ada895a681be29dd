//! PUSH-7, TXN-4 and STOP-1 across a real outage: our server whose database goes away
//! and comes back, with a TCP forwarder between them that the test cuts and heals (the
//! fault scenarios' `Proxy`). Stopping PostgreSQL would take it from every test at
//! once; cutting one broker's link takes it from that broker only, as a lost route does.
//!
//! While the database cannot be reached, pushes answer `buffered` and a transaction with a
//! push is refused with 503 (TXN-4), since it cannot be spooled; once it answers again
//! and the spool is replayed, pushes are written and answer `queued`, and everything
//! buffered is delivered once, in order. A broker that kept buffering after the database
//! came back would answer every later push `buffered` and show each message only after a
//! replay. A stop once it is back writes what the spool still holds (STOP-1).

use queen_conformance::faults::proxy::Proxy;
use queen_server::app::spawn;
use queen_server::pg::PgBroker;
use queen_server::testing::{config, TempDir};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `url` with its port replaced by `port`; the database must be on this machine, since
/// the forwarder listens and connects on loopback.
fn through(url: &str, port: u16) -> String {
    let mut parsed = reqwest::Url::parse(url).expect("the test database's URL parses");
    let host = parsed.host_str().unwrap_or_default();
    assert!(
        ["127.0.0.1", "localhost", "[::1]"].contains(&host),
        "the outage test forwards to a database on loopback, not {host}"
    );
    parsed.set_port(Some(port)).expect("a URL with a port");
    parsed.into()
}

/// Our server on a database of its own, through a forwarder the test can cut.
struct Linked {
    link: Proxy,
    server: queen_server::app::Running,
    db: queen_pg::TestDb,
    dir: TempDir,
}

async fn linked() -> Linked {
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests");
    let upstream = reqwest::Url::parse(db.url())
        .unwrap()
        .port()
        .unwrap_or(5432);
    let link = Proxy::start(upstream).await.unwrap();
    let dir = TempDir::new("outage");
    let cfg = config(dir.path());
    let broker = PgBroker::connect(&through(db.url(), link.port()), &cfg)
        .await
        .unwrap();
    let server = spawn(Arc::new(broker), &cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    Linked {
        link,
        server,
        db,
        dir,
    }
}

/// Posts `body` as JSON to `url`: the response, whatever its status.
async fn post(c: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    c.post(url).json(body).send().await.unwrap()
}

/// Pushes `txn` to queue `outage`: each item's status.
async fn push(c: &reqwest::Client, base: &str, txn: &str) -> Vec<String> {
    let body = json!({"items": [{"queue": "outage", "transactionId": txn, "payload": txn}]});
    let r = post(c, &format!("{base}/api/v1/push"), &body).await;
    assert_eq!(r.status().as_u16(), 201, "push {txn}");
    let answer: Value = r.json().await.unwrap();
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|it| it["status"].as_str().unwrap().to_string())
        .collect()
}

/// Waits (up to 20 s) until push maintenance's view counts no spooled message.
async fn until_the_spool_is_empty(c: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c
            .get(format!("{base}/api/v1/system/maintenance"))
            .send()
            .await
            .unwrap();
        let view: Value = r.json().await.unwrap();
        if view["bufferedMessages"] == json!(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the spool was never replayed: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every message of queue `outage`, in order, by transactionId.
async fn drain(c: &reqwest::Client, base: &str) -> Vec<String> {
    let url = format!("{base}/api/v1/pop/queue/outage?batch=100&autoAck=true&wait=false");
    let popped: Value = c.get(url).send().await.unwrap().json().await.unwrap();
    popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

/// PUSH-7: pushes buffer only while the database cannot be reached; TXN-4: a transaction
/// that meets the outage is refused, and none of it is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_7_pushes_buffer_while_the_database_is_away_and_are_written_once_it_is_back() {
    let Linked {
        link,
        server,
        db: _db,
        dir: _dir,
    } = linked().await;
    let (c, base) = (reqwest::Client::new(), server.url());

    assert_eq!(push(&c, &base, "before").await, ["queued"]);
    link.cut();
    // The first call to meet the cut is a transaction: it cannot wait in the spool.
    let txn = json!({"operations": [{"type": "push", "items": [{"queue": "outage", "transactionId": "txn"}]}]});
    let r = post(&c, &format!("{base}/api/v1/transaction"), &txn).await;
    assert_eq!(
        r.status().as_u16(),
        503,
        "TXN-4: a transaction while the database is away"
    );
    assert!(
        r.headers().contains_key("retry-after"),
        "TXN-4: with Retry-After"
    );
    assert_eq!(
        push(&c, &base, "away-1").await,
        ["buffered"],
        "database away"
    );
    assert_eq!(
        push(&c, &base, "away-2").await,
        ["buffered"],
        "database away"
    );
    link.heal();
    until_the_spool_is_empty(&c, &base).await;
    // Past the second after the last failure in which pushes spool without trying.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        push(&c, &base, "after").await,
        ["queued"],
        "the database answers again, so a push is written, not buffered"
    );
    assert_eq!(
        drain(&c, &base).await,
        ["before", "away-1", "away-2", "after"]
    );
    server.stop().await.unwrap();
}

/// STOP-1: a stop replays what the spool holds once the database answers again, so a
/// push buffered during an outage is in the database when the broker has stopped, not
/// only when a broker next starts on that spool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_1_a_stop_writes_what_an_outage_buffered() {
    let Linked {
        link,
        server,
        db,
        dir: _dir,
    } = linked().await;
    let (c, base) = (reqwest::Client::new(), server.url());
    assert_eq!(push(&c, &base, "before").await, ["queued"]);
    link.cut();
    assert_eq!(push(&c, &base, "away").await, ["buffered"], "database away");
    // Longer than the pool's check-before-use threshold, so the connections the cut
    // broke are found broken, not used, once the link heals.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    link.heal();
    server.stop().await.unwrap();
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT transaction_id FROM queen_messages ORDER BY \"offset\"")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        stored,
        ["before", "away"],
        "what the spool held is written at the stop"
    );
    pool.close().await;
}
