//! Retention and queue size on the PostgreSQL engine (PROTOCOL.md section 16): what a
//! retention round removes and what it moves (RET-2, RET-4), that the job runs on its
//! own (RET-3), `maxSize` under concurrent pushes (RET-5), and the option keys
//! configure keeps (CFG-4). Rounds are run by hand where a test needs to know when.

mod common;

use common::*;
use serde_json::{json, Value};

/// A server whose retention job never fires on its own during a test.
async fn manual() -> TestServer {
    pg_server_with(|c| c.retention_interval_ms = 3_600_000).await
}

async fn rows(app: &TestServer, queue: &str) -> i64 {
    stored_messages(app.broker().pool(), queue, None).await
}

/// The stored messages of `queue`'s `partition`.
async fn rows_in(app: &TestServer, queue: &str, partition: &str) -> i64 {
    stored_messages(app.broker().pool(), queue, Some(partition)).await
}

async fn pop(c: &reqwest::Client, base: &str, queue: &str, query: &str) -> Option<Value> {
    get(c, &format!("{base}/api/v1/pop/queue/{queue}?{query}"))
        .await
        .1
}

fn txns(pop: &Option<Value>) -> Vec<String> {
    pop.as_ref()
        .map(|p| {
            p["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["transactionId"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn push(c: &reqwest::Client, base: &str, items: Value) -> (u16, Option<Value>) {
    post(
        c,
        &format!("{base}/api/v1/push"),
        &json!({ "items": items }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_4_a_round_removes_by_age_and_moves_what_pointed_at_the_messages() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"queue": "r", "options": {"maxWaitTimeSeconds": 1, "retryLimit": 0, "leaseTime": 600}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
        200
    );
    let items = json!([{"queue": "r", "partition": "p", "transactionId": "a", "payload": {"n": 1}},
                       {"queue": "r", "partition": "p", "transactionId": "b", "payload": {"n": 2}}]);
    assert_eq!(push(&c, &base, items).await.0, 201);
    // `a` becomes a dead letter of g; `b` is leased by g and stays leased.
    let first = pop(&c, &base, "r", "consumerGroup=g&batch=1")
        .await
        .unwrap();
    let m = &first["messages"][0];
    let fail = json!({"transactionId": "a", "partitionId": m["partitionId"], "leaseId": first["leaseId"], "consumerGroup": "g", "status": "failed"});
    assert_eq!(post(&c, &format!("{base}/api/v1/ack"), &fail).await.0, 200);
    let second = pop(&c, &base, "r", "consumerGroup=g&batch=1")
        .await
        .unwrap();
    assert_eq!(txns(&Some(second.clone())), ["b"]);
    assert_eq!(
        app.broker().retention_round(100).await.unwrap(),
        0,
        "not removable yet"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 2);
    assert_eq!(rows(&app, "r").await, 0);
    // The dead letter kept its own copy of `a`.
    let (_, dlq) = get(&c, &format!("{base}/api/v1/dlq?queue=r")).await;
    let dlq = dlq.unwrap();
    assert_eq!(dlq["total"], 1);
    assert_eq!(dlq["messages"][0]["transactionId"], "a");
    assert_eq!(dlq["messages"][0]["data"], json!({"n": 1}));
    // An ack of the removed `b` is unresolvable; its lease is gone and the cursor moved.
    let done = json!({"transactionId": "b", "partitionId": m["partitionId"], "leaseId": second["leaseId"], "consumerGroup": "g", "status": "completed"});
    let (_, a) = post(&c, &format!("{base}/api/v1/ack"), &done).await;
    assert_eq!(a.unwrap()[0]["error"], "unresolvable");
    let (committed, lease): (i64, Option<uuid::Uuid>) =
        sqlx::query_as("SELECT committed, lease_id FROM queen_cursors WHERE consumer_group = 'g'")
            .fetch_one(app.broker().pool())
            .await
            .unwrap();
    assert_eq!((committed, lease), (2, None));
    // `a` may be pushed again, and a new group starts at the oldest retained message.
    let again = json!([{"queue": "r", "partition": "p", "transactionId": "a"}]);
    let (_, r) = push(&c, &base, again).await;
    assert_eq!(r.unwrap()[0]["status"], "queued");
    assert_eq!(
        txns(&pop(&c, &base, "r", "consumerGroup=new&batch=5").await),
        ["a"]
    );
    assert_eq!(
        txns(&pop(&c, &base, "r", "consumerGroup=g&batch=5").await),
        ["a"]
    );
    // The peek lists and counts only the retained `a`, above the removed offsets (MGMT-6).
    for query in ["queue=r", "queue=r&consumerGroup=g&status=leased"] {
        let (_, peek) = get(&c, &format!("{base}/api/v1/messages?{query}")).await;
        let peek = peek.unwrap();
        assert_eq!(
            (txns(&Some(peek.clone())), &peek["total"]),
            (vec!["a".to_string()], &json!(1)),
            "{query}: {peek}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_2_completed_retention_and_the_gate() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for (q, enabled) in [("done", true), ("gated", false)] {
        let opts = json!({"queue": q, "options": {"retentionEnabled": enabled, "completedRetentionSeconds": 1, "retentionSeconds": 1}});
        assert_eq!(
            post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
            200
        );
    }
    let opts = json!({"queue": "done", "options": {"retentionEnabled": true, "completedRetentionSeconds": 1}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
        200
    );
    for q in ["done", "gated"] {
        let items = json!([{"queue": q, "partition": "p", "transactionId": "a"},
                           {"queue": q, "partition": "p", "transactionId": "b"}]);
        assert_eq!(push(&c, &base, items).await.0, 201);
    }
    // One of two groups commits `a` (autoAck); the other holds it leased.
    pop(&c, &base, "done", "consumerGroup=g&batch=1&autoAck=true")
        .await
        .unwrap();
    let held = pop(&c, &base, "done", "consumerGroup=h&batch=1")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    app.broker().retention_round(100).await.unwrap();
    assert_eq!(rows(&app, "done").await, 2, "h has committed nothing");
    assert_eq!(rows(&app, "gated").await, 2, "retentionEnabled is off");
    let m = &held["messages"][0];
    let done = json!({"transactionId": "a", "partitionId": m["partitionId"], "leaseId": held["leaseId"], "consumerGroup": "h", "status": "completed"});
    assert_eq!(post(&c, &format!("{base}/api/v1/ack"), &done).await.0, 200);
    app.broker().retention_round(100).await.unwrap();
    assert_eq!(
        rows(&app, "done").await,
        1,
        "a, committed by every group, goes"
    );
}

/// MGMT-11 with RET-2: a deleted offset holds nothing to keep, so retention's prefix
/// passes it, and once below the floor it is no longer counted as deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_11_retention_passes_a_deleted_offset() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"queue": "d", "options": {"retentionEnabled": true, "completedRetentionSeconds": 1}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
        200
    );
    let items = json!([{"queue": "d", "partition": "p", "transactionId": "a"},
                       {"queue": "d", "partition": "p", "transactionId": "b"},
                       {"queue": "d", "partition": "p", "transactionId": "c"}]);
    assert_eq!(push(&c, &base, items).await.0, 201);
    let first = pop(&c, &base, "d", "consumerGroup=g&batch=1&autoAck=true")
        .await
        .unwrap();
    let pid = first["messages"][0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let gone = delete(&c, &format!("{base}/api/v1/messages/{pid}/b")).await;
    assert_eq!(gone.0, 200, "{gone:?}");
    let figures = || async {
        sqlx::query_as::<_, (i64, i64, i64)>(
            "SELECT p.removed_through, p.deleted,
                    (SELECT count(*) FROM queen_deleted_offsets d WHERE d.partition_id = p.id)
             FROM queen_partitions p WHERE p.id = $1",
        )
        .bind(uuid::Uuid::parse_str(&pid).unwrap())
        .fetch_one(app.broker().pool())
        .await
        .unwrap()
    };
    assert_eq!(figures().await, (0, 1, 1));
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    app.broker().retention_round(100).await.unwrap();
    // a (committed and old) goes, b's offset is passed, c (pending) stays.
    assert_eq!(figures().await, (2, 0, 0));
    assert_eq!(rows(&app, "d").await, 1);
    let depth = get(
        &c,
        &format!("{base}/api/v1/resources/queues/d/depth?group=g"),
    )
    .await;
    assert_eq!(depth.1.unwrap()["pending"], 1);
    assert_eq!(txns(&pop(&c, &base, "d", "consumerGroup=g").await), ["c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_3_the_job_removes_on_its_own() {
    let app = pg_server_with(|c| c.retention_interval_ms = 100).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"queue": "j", "options": {"maxWaitTimeSeconds": 1}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
        200
    );
    assert_eq!(
        push(&c, &base, json!([{"queue": "j", "transactionId": "a"}]))
            .await
            .0,
        201
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while rows(&app, "j").await > 0 {
        assert!(std::time::Instant::now() < until, "the job removed nothing");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(pop(&c, &base, "j", "").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_5_concurrent_pushes_never_pass_max_size() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"queue": "s", "options": {"maxSize": 5}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &opts).await.0,
        200
    );
    let mut tasks = Vec::new();
    for i in 0..12 {
        let (c, base) = (c.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            let item = json!({"items": [{"queue": "s", "partition": format!("p{}", i % 3), "transactionId": format!("t{i}")}]});
            let r = c.post(format!("{base}/api/v1/push")).json(&item).send().await.unwrap();
            let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
            (r.status().as_u16(), retry, r.json::<Value>().await.unwrap())
        }));
    }
    let mut accepted = 0;
    for t in tasks {
        let (status, retry, body) = t.await.unwrap();
        match status {
            201 => accepted += 1,
            429 => {
                assert!(retry.is_some(), "429 says when to try again");
                assert!(
                    body["error"].as_str().unwrap().contains("maxSize"),
                    "{body}"
                );
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(accepted, 5);
    assert_eq!(rows(&app, "s").await, 5);
    // A transaction past the limit applies nothing; consuming makes room.
    let txn =
        json!({"operations": [{"type": "push", "items": [{"queue": "s", "transactionId": "x"}]}]});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/transaction"), &txn)
            .await
            .0,
        429
    );
    assert!(pop(&c, &base, "s", "batch=2&autoAck=true").await.is_some());
    assert_eq!(
        post(&c, &format!("{base}/api/v1/transaction"), &txn)
            .await
            .0,
        200
    );
    assert_eq!(rows(&app, "s").await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cfg_4_unknown_options_are_stored_and_echoed() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"queue": "o", "options": {"deadLetterQueue": true, "ttl": {"s": 3}, "leaseTime": 9}});
    let (status, r) = post(&c, &format!("{base}/api/v1/configure"), &opts).await;
    assert_eq!(status, 200);
    let o = &r.unwrap()["options"];
    assert_eq!(
        (
            o["deadLetterQueue"].clone(),
            o["ttl"].clone(),
            o["leaseTime"].clone()
        ),
        (json!(true), json!({"s": 3}), json!(9))
    );
    let stored: Value = sqlx::query_scalar("SELECT options FROM queen_queues WHERE name = 'o'")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(stored["ttl"], json!({"s": 3}));
    // Over CFG-4's bounds: 400, and the stored options stay.
    let big = json!({"queue": "o", "options": {"blob": "x".repeat(20_000)}});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &big).await.0,
        400
    );
    let after: Value = sqlx::query_scalar("SELECT options FROM queen_queues WHERE name = 'o'")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(after, stored);
}

/// Makes every retained message of `queue` (or those at `offsets` when given) an hour
/// old: age limits are then passed without waiting for them.
async fn age(app: &TestServer, queue: &str, offsets: Option<&[i64]>) {
    sqlx::query(
        "UPDATE queen_messages m SET created_at = now() - interval '1 hour'
         FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
         WHERE p.id = m.partition_id AND q.name = $1
           AND ($2::bigint[] IS NULL OR m.\"offset\" = ANY($2))",
    )
    .bind(queue)
    .bind(offsets.map(|o| o.to_vec()))
    .execute(app.broker().pool())
    .await
    .unwrap();
}

async fn configure(c: &reqwest::Client, base: &str, queue: &str, options: Value) {
    let body = json!({"queue": queue, "options": options});
    let (status, answer) = post(c, &format!("{base}/api/v1/configure"), &body).await;
    assert_eq!(status, 200, "{answer:?}");
}

/// RET-2: an option at 0 sets no limit. `retentionSeconds: 0` beside `maxWaitTimeSeconds`
/// does not make the smaller limit 0, and `completedRetentionSeconds: 0` removes no
/// consumed message, however old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_2_an_option_at_zero_removes_nothing() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let zero_age =
        json!({"retentionEnabled": true, "maxWaitTimeSeconds": 7200, "retentionSeconds": 0});
    configure(&c, &base, "zero-age", zero_age).await;
    let zero_done =
        json!({"retentionEnabled": true, "retentionSeconds": 7200, "completedRetentionSeconds": 0});
    configure(&c, &base, "zero-done", zero_done).await;
    for q in ["zero-age", "zero-done"] {
        assert_eq!(push(&c, &base, json!([{"queue": q}])).await.0, 201);
        assert!(pop(&c, &base, q, "consumerGroup=g&autoAck=true")
            .await
            .is_some());
        age(&app, q, None).await;
    }
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 0);
    assert_eq!(rows(&app, "zero-age").await, 1, "an hour is within 7200 s");
    assert_eq!(
        rows(&app, "zero-done").await,
        1,
        "consumed, yet no completed retention"
    );
}

/// RET-2: completed retention removes every committed message, the one at the lowest
/// cursor included, and stops at the first one some group has not committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_2_completed_retention_reaches_the_lowest_cursor() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let opts = json!({"retentionEnabled": true, "completedRetentionSeconds": 60});
    configure(&c, &base, "low", opts).await;
    let items = json!([{"queue": "low", "partition": "p"}, {"queue": "low", "partition": "p"},
                       {"queue": "low", "partition": "p"}]);
    assert_eq!(push(&c, &base, items).await.0, 201);
    assert!(
        pop(&c, &base, "low", "consumerGroup=g&batch=3&autoAck=true")
            .await
            .is_some()
    );
    assert!(
        pop(&c, &base, "low", "consumerGroup=h&batch=2&autoAck=true")
            .await
            .is_some()
    );
    age(&app, "low", None).await;
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 2);
    assert_eq!(rows(&app, "low").await, 1, "h has not committed the third");
    assert!(
        pop(&c, &base, "low", "consumerGroup=g").await.is_none(),
        "a cursor past the removal stays where it was (RET-4)"
    );
}

/// Holds, on a connection of its own, the advisory lock of each (queue, partition,
/// group) pair, as a pop or an ack of that pair holds it while it runs.
async fn hold_pairs(
    app: &TestServer,
    pairs: &[(&str, &str, &str)],
) -> sqlx::pool::PoolConnection<sqlx::Postgres> {
    let mut conn = app.broker().pool().acquire().await.unwrap();
    for (queue, partition, group) in pairs {
        let held: i64 = sqlx::query_scalar(
            "SELECT count(pg_advisory_lock(queen_pair_key(p.id, $3)))
             FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
             WHERE q.name = $1 AND p.name = $2",
        )
        .bind(queue)
        .bind(partition)
        .bind(group)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(held, 1, "{queue}/{partition} exists");
    }
    conn
}

/// RET-4 under concurrency: a round moves a cursor only under its pair's lock, as pops
/// and acks do, so a partition with a pair busy right now (a cursor the removal would
/// move) is left for the next round. Only the pairs the removal moves count: a busy
/// pair of another partition, or of a cursor already at the new floor, holds nothing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_4_a_round_leaves_a_partition_whose_moved_pair_is_busy() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    configure(&c, &base, "b", json!({"maxWaitTimeSeconds": 60})).await;
    let items = json!([{"queue": "b", "partition": "p"}, {"queue": "b", "partition": "o"}]);
    assert_eq!(push(&c, &base, items).await.0, 201);
    // g leases p's message (its cursor stays below it); h commits o's (its cursor is at
    // the floor a removal of o reaches).
    assert!(pop(&c, &base, "b/partition/p", "consumerGroup=g")
        .await
        .is_some());
    assert!(
        pop(&c, &base, "b/partition/o", "consumerGroup=h&autoAck=true")
            .await
            .is_some()
    );
    age(&app, "b", None).await;
    let mut held = hold_pairs(&app, &[("b", "p", "g"), ("b", "o", "h")]).await;
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 1);
    assert_eq!(rows_in(&app, "b", "p").await, 1, "p's moved pair is busy");
    assert_eq!(rows_in(&app, "b", "o").await, 0, "o moves no busy pair");
    sqlx::query("SELECT pg_advisory_unlock_all()")
        .execute(&mut *held)
        .await
        .unwrap();
    drop(held);
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 1);
    assert_eq!(rows_in(&app, "b", "p").await, 0, "the next round takes p");
}

/// RET-4, in the row the wire cannot show: a lease whose whole span retention removed
/// is released, every column of it, and the cursor moves to the floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_4_a_lease_over_removed_messages_leaves_no_trace_in_its_row() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    configure(&c, &base, "l", json!({"maxWaitTimeSeconds": 60})).await;
    let items = json!([{"queue": "l", "partition": "p"}, {"queue": "l", "partition": "p"}]);
    assert_eq!(push(&c, &base, items).await.0, 201);
    assert!(pop(&c, &base, "l", "consumerGroup=g&batch=2")
        .await
        .is_some());
    age(&app, "l", None).await;
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 2);
    let row: (i64, Option<uuid::Uuid>, bool, Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT committed, lease_id, lease_deadline IS NOT NULL, lease_duration_ms::bigint,
                lease_end::bigint
         FROM queen_cursors WHERE consumer_group = 'g'",
    )
    .fetch_one(app.broker().pool())
    .await
    .unwrap();
    assert_eq!(row, (2, None, false, None, None));
}

/// MGMT-11 with RET-2: a round forgets only the deleted offsets it passed, those of its
/// own partition at or below the new floor; another queue's and the ones above stay
/// counted as deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_11_a_round_forgets_only_the_deleted_offsets_it_passed() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    configure(&c, &base, "swept", json!({"maxWaitTimeSeconds": 60})).await;
    let mut partition = std::collections::HashMap::new();
    for q in ["swept", "kept"] {
        let items: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|t| json!({"queue": q, "partition": "p", "transactionId": t}))
            .collect();
        assert_eq!(push(&c, &base, json!(items)).await.0, 201);
        let first = pop(&c, &base, q, "consumerGroup=peek&batch=1")
            .await
            .unwrap();
        partition.insert(
            q,
            first["messages"][0]["partitionId"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // Offset 3 of `swept` (above the floor the round reaches) and offset 1 of `kept`
    // (a queue without retention) are deleted.
    for (q, t) in [("swept", "c"), ("kept", "a")] {
        let url = format!("{base}/api/v1/messages/{}/{t}", partition[q]);
        assert_eq!(delete(&c, &url).await.0, 200);
    }
    age(&app, "swept", Some(&[1])).await;
    assert_eq!(app.broker().retention_round(100).await.unwrap(), 1);
    let figures: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT q.name, p.removed_through, p.deleted,
                (SELECT count(*) FROM queen_deleted_offsets d WHERE d.partition_id = p.id)
         FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id ORDER BY q.name",
    )
    .fetch_all(app.broker().pool())
    .await
    .unwrap();
    assert_eq!(
        figures,
        [
            ("kept".to_string(), 0, 1, 1),
            ("swept".to_string(), 1, 1, 1)
        ]
    );
}

/// A round removes at most its batch from a partition, even when more is removable
/// behind a message that is not: the job's work per round stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_3_a_round_removes_at_most_its_batch_per_partition() {
    let app = manual().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    configure(&c, &base, "b", json!({"maxWaitTimeSeconds": 60})).await;
    let items: Vec<Value> = (0..6)
        .map(|_| json!({"queue": "b", "partition": "p"}))
        .collect();
    assert_eq!(push(&c, &base, json!(items)).await.0, 201);
    age(&app, "b", Some(&[1, 2, 3, 4, 5])).await;
    assert_eq!(app.broker().retention_round(2).await.unwrap(), 2);
    assert_eq!(app.broker().retention_round(2).await.unwrap(), 2);
    assert_eq!(app.broker().retention_round(2).await.unwrap(), 1);
    assert_eq!(rows(&app, "b").await, 1, "the sixth is not old");
}
