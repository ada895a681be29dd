//! Encryption at rest on the PostgreSQL engine (PROTOCOL.md section 15): what the table
//! holds (ENC-2), what the wire shows (ENC-1), and what a broker with the wrong key or
//! none does with sealed messages (ENC-3). Each broker here is a second server on the
//! same database with other settings, as after a restart.

mod common;

use common::*;
use queen_server::app::spawn;
use queen_server::pg::PgBroker;
use serde_json::{json, Value};
use std::sync::Arc;

const KEY: &str = "8f1c2e3d4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const OTHER_KEY: &str = "1111111111111111111111111111111111111111111111111111111111111111";
/// A payload whose text must survive sealing exactly (POP-5 verbatim numbers).
const SECRET: &str = r#"{"card":"4111-1111","big":18446744073709551616,"f":0.10}"#;

/// Another server on `app`'s database with `key`.
async fn restarted(app: &TestServer, tag: &str, key: Option<&str>) -> queen_server::app::Running {
    let dir = TempDir::new(tag);
    let mut cfg = config(&dir);
    cfg.encryption_key = key.map(str::to_string);
    let broker = PgBroker::connect(app.database_url().unwrap(), &cfg)
        .await
        .unwrap();
    spawn(Arc::new(broker), &cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn push_raw(c: &reqwest::Client, base: &str, body: String) -> u16 {
    c.post(format!("{base}/api/v1/push"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The stored rows of `queue`: (sealed, data as stored), in offset order.
async fn stored(app: &TestServer, queue: &str) -> Vec<(bool, Value)> {
    sqlx::query_as(
        "SELECT m.sealed, m.data::jsonb FROM queen_messages m
         JOIN queen_partitions p ON p.id = m.partition_id JOIN queen_queues q ON q.id = p.queue_id
         WHERE q.name = $1 ORDER BY m.\"offset\"",
    )
    .bind(queue)
    .fetch_all(app.broker().pool())
    .await
    .unwrap()
}

async fn configure(c: &reqwest::Client, base: &str, queue: &str, encrypted: bool) -> u16 {
    let body = json!({"queue": queue, "options": {"encryptionEnabled": encrypted, "leaseTime": 1}});
    post(c, &format!("{base}/api/v1/configure"), &body).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enc_2_payloads_are_sealed_in_the_table_and_verbatim_on_the_wire() {
    let app = pg_server_with(|c| c.encryption_key = Some(KEY.into())).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    assert_eq!(configure(&c, &base, "e", true).await, 200);
    // Every write path: client ids (the general path), minted ids, a transaction.
    let item = |t: &str| format!(r#"{{"queue":"e","transactionId":"{t}","payload":{SECRET}}}"#);
    assert_eq!(
        push_raw(&c, &base, format!(r#"{{"items":[{}]}}"#, item("a"))).await,
        201
    );
    let minted = format!(r#"{{"items":[{{"queue":"e","payload":{SECRET}}}]}}"#);
    assert_eq!(push_raw(&c, &base, minted).await, 201);
    let txn = json!({"operations": [{"type": "push", "items": [{"queue": "e", "transactionId": "t", "payload": 7}]}]});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/transaction"), &txn)
            .await
            .0,
        200
    );
    let rows = stored(&app, "e").await;
    assert_eq!(rows.len(), 3);
    for (sealed, data) in &rows {
        assert!(*sealed, "{data}");
        let text = data
            .as_str()
            .expect("a sealed payload is stored as a string");
        assert!(
            !text.contains("4111") && !text.contains("18446744073709551616"),
            "{text}"
        );
    }
    // ENC-1: the pop shows the payloads exactly as pushed.
    let r = c
        .get(format!("{base}/api/v1/pop/queue/e?batch=10&autoAck=true"))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert_eq!(text.matches(SECRET).count(), 2, "{text}");
    assert!(text.contains(r#""data":7"#), "{text}");
    // Turned off, the queue writes in clear and still reads what it sealed before.
    assert_eq!(configure(&c, &base, "e", false).await, 200);
    push_raw(&c, &base, format!(r#"{{"items":[{}]}}"#, item("later"))).await;
    let rows = stored(&app, "e").await;
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [true, true, true, false]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enc_3_the_wrong_key_answers_500_and_loses_nothing() {
    let app = pg_server_with(|c| c.encryption_key = Some(KEY.into())).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    assert_eq!(configure(&c, &base, "w", true).await, 200);
    push_raw(
        &c,
        &base,
        format!(r#"{{"items":[{{"queue":"w","transactionId":"a","payload":{SECRET}}}]}}"#),
    )
    .await;
    // One for autoAck pops, which commit as they claim.
    push_raw(&c, &base, format!(r#"{{"items":[{{"queue":"w","partition":"auto","transactionId":"z","payload":{SECRET}}}]}}"#)).await;
    // A dead letter too, so the listing meets a sealed payload.
    push_raw(
        &c,
        &base,
        r#"{"items":[{"queue":"w","partition":"d","transactionId":"d","payload":1}]}"#.into(),
    )
    .await;
    let (_, p) = get(&c, &format!("{base}/api/v1/pop/queue/w/partition/d")).await;
    let p = p.unwrap();
    let ack = json!({"transactionId": "d", "partitionId": p["partitionId"], "status": "dlq", "leaseId": p["leaseId"]});
    assert_eq!(post(&c, &format!("{base}/api/v1/ack"), &ack).await.0, 200);
    for (tag, key) in [("wrong", Some(OTHER_KEY)), ("none", None)] {
        let other = restarted(&app, tag, key).await;
        let ob = other.url();
        let (status, body) = get(&c, &format!("{ob}/api/v1/pop/queue/w/partition/Default")).await;
        assert_eq!(status, 500, "{tag}: {body:?}");
        let error = body.unwrap()["error"].as_str().unwrap().to_string();
        assert_eq!(error, queen_server::seal::UNSEALABLE, "{tag}");
        let auto = format!("{ob}/api/v1/pop/queue/w/partition/auto?autoAck=true");
        assert_eq!(get(&c, &auto).await.0, 500, "{tag}: an autoAck pop");
        let (status, _) = get(&c, &format!("{ob}/api/v1/dlq?queue=w")).await;
        assert_eq!(status, 500, "{tag}: the dead-letter listing");
        // ENC-2 on a broker without a key: no new encrypted queue, no push to one.
        if key.is_none() {
            assert_eq!(configure(&c, &ob, "fresh", true).await, 400);
            let rows: i64 =
                sqlx::query_scalar("SELECT count(*) FROM queen_queues WHERE name = 'fresh'")
                    .fetch_one(app.broker().pool())
                    .await
                    .unwrap();
            assert_eq!(rows, 0, "a refused configure created nothing");
            let n = stored(&app, "w").await.len();
            let s = push_raw(
                &c,
                &ob,
                r#"{"items":[{"queue":"w","transactionId":"x","payload":2}]}"#.into(),
            )
            .await;
            assert_eq!(s, 500, "a push to an encrypted queue without the key");
            assert_eq!(
                stored(&app, "w").await.len(),
                n,
                "nothing was written in clear"
            );
        }
        // The refused pop's lease (leaseTime 1 s) runs out before the next try.
        tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    }
    // With the right key the message is there, as pushed.
    let r = c
        .get(format!("{base}/api/v1/pop/queue/w/partition/Default"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains(SECRET));
    // The autoAck pops that failed committed nothing: the message is still there.
    let (status, auto) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/w/partition/auto?autoAck=true"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(auto.unwrap()["messages"][0]["transactionId"], "z");
    let (_, dlq) = get(&c, &format!("{base}/api/v1/dlq?queue=w")).await;
    assert_eq!(dlq.unwrap()["messages"][0]["data"], json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enc_3_a_key_that_is_not_64_hex_digits_stops_the_start() {
    let db = own_database().await;
    let dir = TempDir::new("enc-bad");
    let mut cfg = config(&dir);
    cfg.encryption_key = Some("not-hex".into());
    let err = PgBroker::connect(db.url(), &cfg)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("QUEEN_ENCRYPTION_KEY"), "{err}");
}

/// ENC-2 on the write paths the wire cannot tell apart: the spool's replay after push
/// maintenance and a dead letter written again (MGMT-12). Each stored row is sealed, and
/// the dead letter between them keeps no clear copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enc_2_replayed_dead_lettered_and_redriven_payloads_are_sealed() {
    let app = pg_server_with(|c| c.encryption_key = Some(KEY.into())).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let body = json!({"queue": "r", "options": {"encryptionEnabled": true, "retryLimit": 0}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &body).await.0,
        200
    );
    let maintenance = format!("{base}/api/v1/system/maintenance");
    post(&c, &maintenance, &json!({"enabled": true})).await;
    let item = format!(r#"{{"items":[{{"queue":"r","transactionId":"s","payload":{SECRET}}}]}}"#);
    assert_eq!(push_raw(&c, &base, item).await, 201);
    assert!(stored(&app, "r").await.is_empty(), "spooled, not written");
    let (_, b) = post(&c, &maintenance, &json!({"enabled": false})).await;
    assert_eq!(b.unwrap()["bufferedMessages"], 0, "replayed");
    let sealed_text = |data: &Value| {
        let text = data
            .as_str()
            .expect("a sealed payload is stored as a string");
        assert!(!text.contains("4111"), "{text}");
    };
    let rows = stored(&app, "r").await;
    assert_eq!(rows.len(), 1);
    assert!(rows[0].0, "the replayed row is sealed: {:?}", rows[0].1);
    sealed_text(&rows[0].1);
    // A failure with no retries left files a dead letter, which keeps a copy.
    let (_, p) = get(&c, &format!("{base}/api/v1/pop/queue/r")).await;
    let m = &p.unwrap()["messages"][0];
    let ack = json!({"transactionId": "s", "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "failed"});
    let (_, a) = post(&c, &format!("{base}/api/v1/ack"), &ack).await;
    assert_eq!(a.unwrap()[0]["dlq"], true);
    // The dead letter holds no clear copy (a copy is taken only when the message row goes).
    let (letters, clear): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE d.data IS NOT NULL AND NOT d.sealed)
         FROM queen_dead_letters d JOIN queen_partitions p ON p.id = d.partition_id
         JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'r'",
    )
    .fetch_one(app.broker().pool())
    .await
    .unwrap();
    assert_eq!((letters, clear), (1, 0));
    // Written again at the end of its partition: a new row, sealed too.
    let retry = format!(
        "{base}/api/v1/messages/{}/s/retry",
        m["partitionId"].as_str().unwrap()
    );
    assert_eq!(post(&c, &retry, &json!({})).await.0, 200);
    let rows = stored(&app, "r").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.0), "{rows:?}");
    sealed_text(&rows[1].1);
    // And it still reads back exactly as pushed.
    let r = c
        .get(format!("{base}/api/v1/pop/queue/r"))
        .send()
        .await
        .unwrap();
    assert!(r.text().await.unwrap().contains(SECRET));
}
