//! The PostgreSQL engine in-process: long-poll wake-ups and their cost (POP-11), and
//! the spool when PostgreSQL goes away and comes back (PUSH-7).

mod common;
use common::*;
use queen_reference::wire::{Answer, PopQuery, PopRoute, Request};
use queen_server::app::spawn;
use queen_server::broker::{Broker, Popped};
use queen_server::pg::PgBroker;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_11_push_wakes_parked_pops_at_once_and_parked_pops_hold_no_connection() {
    let TestServer {
        server,
        broker: _,
        db: _db,
        dir: _dir,
    } = pg_server_with(|c| {
        c.pool_size = 4;
        // A parked pop looks again only after a minute: one that delivers before its
        // timeout was woken by the push's bell, however slow the machine.
        c.pop_wait_initial_interval_ms = 60_000;
        c.pop_wait_max_interval_ms = 60_000;
    })
    .await;
    let base = server.url();
    let c = reqwest::Client::new();

    // 50 parked pops on a pool of 4 connections: if they held connections, the push
    // below could not get one, and would be spooled (`buffered`) instead of stored.
    let parked: Vec<_> = (0..50)
        .map(|i| {
            let c = c.clone();
            let url =
                format!("{base}/api/v1/pop/queue/wake?wait=true&timeout=8000&consumerGroup=g{i}");
            tokio::spawn(async move { (get(&c, &url).await.0, Instant::now()) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pushed = Instant::now();
    let (s, body) = post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "wake", "payload": 1}]}),
    )
    .await;
    let body = body.unwrap_or_default();
    assert_eq!((s, &body[0]["status"]), (201, &json!("queued")), "{body}");
    let push_took = pushed.elapsed();
    let mut worst = Duration::ZERO;
    for p in parked {
        let (status, at) = p.await.unwrap();
        assert_eq!(
            status, 200,
            "every group's parked pop is woken and delivered"
        );
        worst = worst.max(at.duration_since(pushed));
    }
    eprintln!("push with 50 parked pops took {push_took:?}; slowest wake-up {worst:?} after the push started");

    // One parked pop, woken by one push (the latency is the benchmark's to judge).
    let url = format!("{base}/api/v1/pop/queue/lat?wait=true&timeout=10000");
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { (get(&c, &url).await.0, Instant::now()) })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let pushed = Instant::now();
    post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "lat", "payload": 1}]}),
    )
    .await;
    let (s, at) = waiter.await.unwrap();
    assert_eq!(s, 200, "delivered before its timeout: woken by the push");
    let latency = at.duration_since(pushed);
    eprintln!("single wake-up: {latency:?} from push start to pop return");

    // A timeout answers 204, not an error, and not before the timeout.
    let t = Instant::now();
    let (s, body) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/empty?wait=true&timeout=600"),
    )
    .await;
    assert_eq!((s, body), (204, None));
    assert!(t.elapsed() >= Duration::from_millis(590));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_7_postgres_down_spools_and_replays_exactly_once_in_order() {
    let dir = TempDir::new("spool");
    let port = free_port();
    let cluster = queen_pg::PersistentCluster::start(dir.join("pg"), port)
        .await
        .expect("a local cluster");
    let url = cluster.url().to_string();
    let cfg = config(&dir.join("spool"));
    let broker = PgBroker::connect(&url, &cfg).await.unwrap();
    let server = spawn(
        Arc::new(broker.clone()),
        &cfg,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let base = server.url();
    let c = reqwest::Client::new();
    let push = |i: usize| json!({"items": [{"queue": "durable", "partition": "p", "transactionId": format!("m{i:03}"), "payload": {"i": i}}]});

    for i in 0..5 {
        let (s, b) = post(&c, &format!("{base}/api/v1/push"), &push(i)).await;
        assert_eq!((s, b.unwrap()[0]["status"].clone()), (201, json!("queued")));
    }
    cluster.shutdown().expect("PostgreSQL stops");
    for i in 5..25 {
        let (s, b) = post(&c, &format!("{base}/api/v1/push"), &push(i)).await;
        assert_eq!(s, 201, "{b:?}");
        assert_eq!(
            b.unwrap()[0]["status"],
            "buffered",
            "push {i} while PostgreSQL is down"
        );
    }
    // A push of an id already stored, while down: buffered now, a duplicate at replay.
    let (_, b) = post(&c, &format!("{base}/api/v1/push"), &push(2)).await;
    assert_eq!(b.unwrap()[0]["status"], "buffered");
    let (s, b) = get(&c, &format!("{base}/health")).await;
    let b = b.unwrap();
    assert_eq!(
        (s, &b["status"], &b["database"]),
        (503, &json!("unhealthy"), &json!("disconnected")),
        "HEALTH-1: unhealthy while the database is away: {b}"
    );
    assert!(
        b["error"].as_str().is_some_and(|e| !e.is_empty()),
        "HEALTH-1: why the database is not connected: {b}"
    );
    assert_eq!(
        (&b["spool"]["items"], &b["spool"]["replay"]),
        (&json!(21), &json!("pending")),
        "HEALTH-2: the 21 pushes spooled, waiting for the database: {b}"
    );

    let cluster = queen_pg::PersistentCluster::start(dir.join("pg"), port)
        .await
        .expect("PostgreSQL restarts");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, b) = get(&c, &format!("{base}/api/v1/system/maintenance")).await;
        if s == 200 && b.unwrap()["bufferedMessages"] == 0 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the spool was not replayed within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT m.transaction_id, m.\"offset\" FROM queen_messages m JOIN queen_partitions p ON p.id = m.partition_id
         JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'durable' ORDER BY m.\"offset\"",
    )
    .fetch_all(broker.pool())
    .await
    .unwrap();
    let txns: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let expected: Vec<String> = (0..25).map(|i| format!("m{i:03}")).collect();
    assert_eq!(txns, expected, "every message exactly once, in push order");
    server.stop().await.unwrap();
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maint_1_push_maintenance_spools_then_replays_on_switch_off() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    let (_, b) = post(
        &c,
        &format!("{base}/api/v1/system/maintenance"),
        &json!({"enabled": true}),
    )
    .await;
    assert_eq!(
        b.unwrap(),
        json!({"maintenanceMode": true, "bufferedMessages": 0})
    );
    let (_, b) = post(&c, &format!("{base}/api/v1/push"), &json!({"items": [{"queue": "m", "transactionId": "a"}, {"queue": "m", "transactionId": "b"}]})).await;
    assert!(b
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["status"] == "buffered"));
    let (s, _) = get(&c, &format!("{base}/api/v1/pop/queue/m")).await;
    assert_eq!(s, 204, "nothing written while spooled");
    let (_, b) = get(&c, &format!("{base}/api/v1/system/maintenance")).await;
    assert_eq!(b.unwrap()["bufferedMessages"], 2);
    let (_, b) = post(
        &c,
        &format!("{base}/api/v1/system/maintenance"),
        &json!({"enabled": false}),
    )
    .await;
    assert_eq!(
        b.unwrap(),
        json!({"maintenanceMode": false, "bufferedMessages": 0})
    );
    let (s, b) = get(&c, &format!("{base}/api/v1/pop/queue/m?batch=10")).await;
    assert_eq!(s, 200);
    let txns: Vec<_> = b.unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].clone())
        .collect();
    assert_eq!(txns, vec![json!("a"), json!("b")]);
    // MAINT-2: pop maintenance answers a bare 204, even for a long poll.
    post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "m2"}]}),
    )
    .await;
    post(
        &c,
        &format!("{base}/api/v1/system/maintenance/pop"),
        &json!({"enabled": true}),
    )
    .await;
    let t = Instant::now();
    let (s, body) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/m2?wait=true&timeout=30000"),
    )
    .await;
    assert_eq!((s, body), (204, None));
    // The event that tells the cases apart is the pop's own 30 s timeout.
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "a paused broker does not park pops until their timeout"
    );
    post(
        &c,
        &format!("{base}/api/v1/system/maintenance/pop"),
        &json!({"enabled": false}),
    )
    .await;
    assert_eq!(get(&c, &format!("{base}/api/v1/pop/queue/m2")).await.0, 200);
    server.stop().await.unwrap();
}

/// POP-15 on both engines: an under-full batch waits up to minPopWaitTime to fill, ends
/// as soon as it fills, and never applies to batch=1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_15_min_pop_wait_time_fills_under_full_batches() {
    let db = own_database().await;
    let dir = TempDir::new("minwait");
    let cfg = config(&dir);
    let pg: Arc<dyn queen_server::broker::Broker> =
        Arc::new(PgBroker::connect(db.url(), &cfg).await.unwrap());
    let mem: Arc<dyn queen_server::broker::Broker> =
        Arc::new(queen_server::memory::MemoryBroker::new(30_000, 1 << 20));
    for broker in [pg, mem] {
        let server = spawn(broker, &cfg, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let base = server.url();
        let c = reqwest::Client::new();
        let push = |n: usize| json!({"items": (0..n).map(|i| json!({"queue": "fill", "payload": i})).collect::<Vec<_>>()});
        post(
            &c,
            &format!("{base}/api/v1/configure"),
            &json!({"queue": "fill", "options": {"minPopWaitTime": 1500}}),
        )
        .await;

        // Under-full: one message, batch 5: held back ~1.5 s, then delivered.
        post(&c, &format!("{base}/api/v1/push"), &push(1)).await;
        let t = Instant::now();
        let (s, b) = get(
            &c,
            &format!("{base}/api/v1/pop/queue/fill?wait=true&batch=5&autoAck=true&timeout=20000"),
        )
        .await;
        let held = t.elapsed();
        assert_eq!(
            (s, b.unwrap()["messages"].as_array().unwrap().len()),
            (200, 1)
        );
        assert!(
            held >= Duration::from_millis(1400) && held < Duration::from_secs(20),
            "held {held:?}: the fill time ends the wait, not the 20 s timeout"
        );

        // Fills while waiting: ends as soon as the batch is full.
        post(&c, &format!("{base}/api/v1/push"), &push(1)).await;
        let waiter = {
            let c = c.clone();
            let url = format!("{base}/api/v1/pop/queue/fill?wait=true&batch=5&autoAck=true");
            tokio::spawn(async move { (get(&c, &url).await, Instant::now()) })
        };
        let asked = Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let filled = Instant::now();
        post(&c, &format!("{base}/api/v1/push"), &push(4)).await;
        let ((s, b), at) = waiter.await.unwrap();
        assert_eq!(
            (s, b.unwrap()["messages"].as_array().unwrap().len()),
            (200, 5)
        );
        // Filling ends the wait: before the 1.5 s fill time would have ended it.
        assert!(
            at.duration_since(asked) < Duration::from_millis(1500),
            "ended {:?} after filling",
            at.duration_since(filled)
        );

        // Never for batch=1, never with wait=false, never past the timeout.
        for q in [
            "wait=true&batch=1",
            "wait=false&batch=5",
            "wait=true&batch=50&timeout=300",
        ] {
            post(&c, &format!("{base}/api/v1/push"), &push(1)).await;
            let t = Instant::now();
            let (s, _) = get(
                &c,
                &format!("{base}/api/v1/pop/queue/fill?autoAck=true&{q}"),
            )
            .await;
            assert_eq!(s, 200, "{q}");
            // Not held for the 1.5 s fill time.
            assert!(
                t.elapsed() < Duration::from_millis(1500),
                "{q} took {:?}",
                t.elapsed()
            );
        }
        server.stop().await.unwrap();
    }
}

/// PUSH-8 [PROJECT]: text PostgreSQL cannot store (U+0000) is a 400 on every route, and
/// nothing is written — not a 500 from the database half-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_characters_are_400_and_change_nothing() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    for body in [
        json!({"items": [{"queue": "nul", "payload": {"text": "a\u{0}b"}}]}),
        json!({"items": [{"queue": "nul", "transactionId": "t\u{0}"}]}),
        json!({"items": [{"queue": "nul\u{0}"}]}),
    ] {
        let (s, b) = post(&c, &format!("{base}/api/v1/push"), &body).await;
        assert_eq!(s, 400, "{body}");
        assert!(b.unwrap()["error"].as_str().unwrap().contains("NUL"));
    }
    let (s, _) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/nul?consumerGroup=g%00"),
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = get(&c, &format!("{base}/api/v1/pop/queue/nul")).await;
    assert_eq!(s, 204, "nothing was written");
    server.stop().await.unwrap();
}

/// POP-5: `data` comes back verbatim, object key order included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_5_data_keeps_its_key_order() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    let payload = r#"{"zebra":1,"apple":{"z":[3,2,1],"a":null},"mid":"x"}"#;
    let text = push_raw_then_pop(&c, &base, "order", payload).await;
    assert!(
        text.contains(r#""data":{"zebra":1,"apple":{"z":[3,2,1],"a":null},"mid":"x"}"#),
        "{text}"
    );
    server.stop().await.unwrap();
}

/// TXN-2 and POP-2: an aborted transaction releases the (partition, group) lock its ack
/// took before it answers, so a pop sent right after the answer finds the partition
/// claimable. (sqlx rolls a dropped transaction back lazily, after the answer may
/// have gone out; the lockstep run caught a pop answering 204 in that window under
/// load. The window is narrow, so this test guards the contract over many rounds
/// rather than reproducing the race every time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_2_abort_releases_locks_before_answering() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    let items = json!({"items": [{"queue": "abort", "partition": "p", "payload": 1},
                                 {"queue": "abort", "partition": "p", "payload": 2}]});
    let (s, pushed) = post(&c, &format!("{base}/api/v1/push"), &items).await;
    assert_eq!(s, 201);
    let first = pushed.unwrap()[0]["transaction_id"].clone();
    let pop = format!("{base}/api/v1/pop/queue/abort?consumerGroup=g&batch=1");
    let (s, b) = get(&c, &pop).await;
    assert_eq!(s, 200);
    let b = b.unwrap();
    let partition = b["partitionId"].clone();
    let ack = json!({"transactionId": first, "partitionId": partition, "consumerGroup": "g", "leaseId": b["leaseId"]});
    let (s, _) = post(&c, &format!("{base}/api/v1/ack"), &ack).await;
    assert_eq!(s, 200);
    for round in 0..50 {
        // A failure signal below the cursor: "already committed" aborts the transaction.
        let txn = json!({"operations": [{"type": "ack", "transactionId": first, "partitionId": partition,
                                         "consumerGroup": "g", "status": "failed"}]});
        let (s, b) = post(&c, &format!("{base}/api/v1/transaction"), &txn).await;
        assert_eq!(
            (s, b.as_ref().unwrap()["success"].as_bool()),
            (200, Some(false))
        );
        let (s, b) = get(&c, &pop).await;
        assert_eq!(
            s, 200,
            "round {round}: the second message is claimable right after the abort"
        );
        let b = b.unwrap();
        let back = json!({"transactionId": b["messages"][0]["transactionId"], "partitionId": partition,
                          "consumerGroup": "g", "leaseId": b["leaseId"], "status": "retry"});
        let (s, b) = post(&c, &format!("{base}/api/v1/ack"), &back).await;
        assert_eq!((s, b.unwrap()[0]["success"].as_bool()), (200, Some(true)));
    }
    server.stop().await.unwrap();
}

/// POP-12 under cancellation: clients that give up after a few milliseconds (hyper then
/// drops their requests' futures) must not leave a transaction behind that the next
/// request runs inside. Caught by the `client-timeouts` fault scenario as pushes whose
/// `createdAt` preceded the push itself; here every stored message's `createdAt` must
/// not precede the moment its push was handled (the time in its UUIDv7 message id,
/// minted before the write). Without the fix this failed about one run in three (a
/// message created 16 ms before its push was handled); it guards the contract rather
/// than reproducing the race every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_12_abandoned_requests_leave_no_transaction_behind() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(3))
        .build()
        .unwrap();
    let patient = reqwest::Client::new();
    let mut tasks = Vec::new();
    for c in 0..3 {
        let (base, impatient, patient) = (base.clone(), impatient.clone(), patient.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..150 {
                let client = if c == 0 { &patient } else { &impatient };
                let push = json!({"items": [{"queue": "cancel", "partition": format!("p{c}"),
                    "transactionId": format!("c{c}m{i}"), "payload": i}]});
                let _ = client
                    .post(format!("{base}/api/v1/push"))
                    .json(&push)
                    .send()
                    .await;
                let group = ["g1", "g2"][i % 2];
                let _ = client
                    .get(format!(
                        "{base}/api/v1/pop/queue/cancel?consumerGroup={group}&batch=3"
                    ))
                    .send()
                    .await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pool = sqlx::PgPool::connect(_db.as_ref().unwrap().url())
        .await
        .unwrap();
    let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
        "SELECT id, (extract(epoch FROM created_at) * 1000)::bigint FROM queen_messages",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(rows.len() >= 60, "the patient client's pushes are stored");
    let early: Vec<String> = rows
        .iter()
        .filter_map(|(id, created)| {
            let (secs, nanos) = id.get_timestamp()?.to_unix();
            let minted = secs as i64 * 1000 + i64::from(nanos / 1_000_000);
            (*created + 1 < minted).then(|| format!("{id}: created {created}, handled {minted}"))
        })
        .collect();
    assert!(
        early.is_empty(),
        "createdAt before the push was handled: {early:?}"
    );
    server.stop().await.unwrap();
}

/// DLQ-2 [PROJECT]: dead letters are listed in filing order, and one batch ack files
/// them in the order it names them, whichever partition ids sort first. The server
/// locks (partition, group) pairs in id order; it used to file in that order too, and
/// a lockstep run (seed 9622367076) caught the listing differing from the model's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_2_one_batch_ack_files_dead_letters_in_the_order_it_names_them() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    // Partition "a" is created first, so its id (a UUIDv7) sorts before "b"'s.
    for p in ["a", "b"] {
        let items = json!({"items": [{"queue": "dlqorder", "partition": p, "payload": p}]});
        let (s, _) = post(&c, &format!("{base}/api/v1/push"), &items).await;
        assert_eq!(s, 201);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pop = format!("{base}/api/v1/pop/queue/dlqorder?batch=2&partitions=2");
    let (s, b) = get(&c, &pop).await;
    assert_eq!(s, 200);
    let msgs = b.unwrap()["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 2, "one message from each partition");
    // Name "b"'s message first, then "a"'s: the reverse of the id order.
    let mut named: Vec<&serde_json::Value> = msgs.iter().collect();
    named.sort_by_key(|m| std::cmp::Reverse(m["partition"].as_str().unwrap().to_string()));
    let acks: Vec<serde_json::Value> = named
        .iter()
        .map(|m| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "leaseId": m["leaseId"], "status": "dlq"})
        })
        .collect();
    let (s, _) = post(
        &c,
        &format!("{base}/api/v1/ack/batch"),
        &json!({"acknowledgments": acks}),
    )
    .await;
    assert_eq!(s, 200);
    let (s, d) = get(&c, &format!("{base}/api/v1/dlq?queue=dlqorder")).await;
    assert_eq!(s, 200);
    let listed: Vec<String> = d.unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["partition"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed,
        ["b", "a"],
        "filing order is the ack's order (DLQ-2)"
    );
    server.stop().await.unwrap();
}

/// PUSH-6: one push of broker-minted ids over interleaved partitions (the one-statement
/// path, `pg/minted.rs`) numbers each partition's messages in request order, right after
/// what the partition already held, and a pop returns them in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_6_a_minted_push_over_interleaved_partitions_keeps_request_order() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    let push = |items: serde_json::Value| {
        let (c, url) = (c.clone(), format!("{base}/api/v1/push"));
        async move {
            let (s, b) = post(&c, &url, &json!({ "items": items })).await;
            assert_eq!(s, 201, "{b:?}");
        }
    };
    // Creates both partitions (the general path); the pushes after it take the
    // one-statement path, which needs them to exist.
    push(json!([
        {"queue": "il", "partition": "a", "payload": "a0"},
        {"queue": "il", "partition": "b", "payload": "b0"},
    ]))
    .await;
    push(json!([
        {"queue": "il", "partition": "b", "payload": "b1"},
        {"queue": "il", "partition": "a", "payload": "a1"},
        {"queue": "il", "partition": "b", "payload": "b2"},
        {"queue": "il", "partition": "a", "payload": "a2"},
        {"queue": "il", "partition": "a", "payload": "a3"},
    ]))
    .await;
    push(json!([{"queue": "il", "partition": "b", "payload": "b3"}])).await;
    // Numbered right after the interleaved ones: a gap or an overlap (a rank or a
    // partition's count off by some) would lose or refuse these.
    push(json!([
        {"queue": "il", "partition": "a", "payload": "a4"},
        {"queue": "il", "partition": "b", "payload": "b4"},
    ]))
    .await;
    for (p, want) in [
        ("a", json!(["a0", "a1", "a2", "a3", "a4"])),
        ("b", json!(["b0", "b1", "b2", "b3", "b4"])),
    ] {
        let (s, b) = get(
            &c,
            &format!("{base}/api/v1/pop/queue/il/partition/{p}?batch=10"),
        )
        .await;
        assert_eq!(s, 200);
        let got: Vec<_> = b.unwrap()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["data"].clone())
            .collect();
        assert_eq!(json!(got), want, "partition {p}");
    }
    server.stop().await.unwrap();
}

/// ACK-4 for the one-statement claim (`pop.rs`, `locked`): its snapshot is taken before
/// it takes the pair's lock, so a holder of the lock may commit a new lease in between,
/// unseen. Emulated here by a transaction that changes the cursor row without the lock:
/// the claim reads the old cursor, waits for the row, and must then see that the row
/// moved and claim nothing, instead of leasing the span a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_4_a_one_statement_claim_does_not_lease_over_a_cursor_that_moved_after_its_snapshot() {
    let after = moved_under_a_claim(
        "UPDATE queen_cursors SET lease_id = gen_random_uuid(), lease_end = 2,
                lease_deadline = now() + interval '60 seconds', lease_duration_ms = 60000
         WHERE consumer_group = '__QUEUE_MODE__'",
    )
    .await;
    assert_eq!(
        (after.lease_end, after.live),
        (Some(2), true),
        "the other's lease stands"
    );
}

/// ACK-4, ACK-2 the same way, when the holder was an ack: the cursor moved past m2 and
/// is free. The claim read it at m1, so it must claim nothing rather than set the cursor
/// back and deliver m2 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_4_a_one_statement_claim_does_not_move_back_a_cursor_committed_after_its_snapshot() {
    let after = moved_under_a_claim(
        "UPDATE queen_cursors SET committed = 2 WHERE consumer_group = '__QUEUE_MODE__'",
    )
    .await;
    assert_eq!(
        (after.committed, after.lease_end),
        (2, None),
        "the other's commit stands"
    );
}

/// The cursor row of queue `cas` after [`moved_under_a_claim`].
struct CursorAfter {
    committed: i64,
    lease_end: Option<i64>,
    live: bool,
}

/// Pushes m1 and m2 to `cas`, takes m1 (the cursor row now exists, committed 1), then
/// changes the row with `change` in another transaction, without the pair's lock, while a
/// pop claims: the pop must wait for the row, then claim nothing (204).
async fn moved_under_a_claim(change: &str) -> CursorAfter {
    let TestServer {
        server,
        broker,
        db: _db,
        dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    for m in ["m1", "m2"] {
        push_one(&c, &base, "cas", json!(m)).await;
    }
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/cas?autoAck=true&batch=1&wait=false"),
    )
    .await;
    assert_eq!(
        (s, b.unwrap()["messages"][0]["data"].clone()),
        (200, json!("m1"))
    );

    let mut other = broker.pool().begin().await.unwrap();
    let changed = sqlx::query(change)
        .execute(&mut *other)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(changed, 1);
    // The pop reads the old cursor (one candidate: the one-statement claim) and waits
    // for the row; the other commits its change.
    let (s, b) = waits_for(
        &c,
        format!("{base}/api/v1/pop/queue/cas?wait=false"),
        other,
        "the claim should be waiting for the cursor row",
    )
    .await;
    assert_eq!(s, 204, "claimed over a cursor that moved: {b:?}");
    let (committed, lease_end, live): (i64, Option<i64>, bool) = sqlx::query_as(
        "SELECT committed, lease_end, coalesce(lease_deadline > now(), false)
         FROM queen_cursors WHERE consumer_group = '__QUEUE_MODE__'",
    )
    .fetch_one(broker.pool())
    .await
    .unwrap();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    CursorAfter {
        committed,
        lease_end,
        live,
    }
}

/// Sends `url` while `holder` keeps its transaction open, checks that no answer comes
/// within half a second (`why` says what it waits for), then commits and returns it.
async fn waits_for(
    c: &reqwest::Client,
    url: String,
    holder: sqlx::Transaction<'static, sqlx::Postgres>,
    why: &str,
) -> (u16, Option<serde_json::Value>) {
    let c = c.clone();
    waits_for_call(async move { get(&c, &url).await }, holder, why).await
}

/// [`waits_for`] with any call.
async fn waits_for_call(
    call: impl std::future::Future<Output = (u16, Option<serde_json::Value>)> + Send + 'static,
    holder: sqlx::Transaction<'static, sqlx::Postgres>,
    why: &str,
) -> (u16, Option<serde_json::Value>) {
    let call = tokio::spawn(call);
    tokio::time::sleep(Duration::from_millis(500)).await;
    if call.is_finished() {
        panic!("{why}: {:?}", call.await.unwrap());
    }
    holder.commit().await.unwrap();
    call.await.unwrap()
}

/// POP-2, ACK-4: pops, acks and extends of one cursor take turns through the pair's
/// advisory lock (`pair.rs`). A pop whose walk finds the pair held skips it, then, having
/// claimed nothing else, waits for it (the holder may be an ack that frees the
/// partition) and claims with what the holder left. A pop that claimed without the lock
/// would read the cursor while an ack of it is under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_2_a_pop_takes_its_turn_at_a_pair_held_by_another() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    push_one(&c, &base, "turns", json!("m1")).await;
    // The cursor row exists, unleased: the partition is free to claim.
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/turns?autoAck=true&batch=1&wait=false"),
    )
    .await;
    assert_eq!(
        (s, b.unwrap()["messages"][0]["data"].clone()),
        (200, json!("m1"))
    );
    push_one(&c, &base, "turns", json!("m2")).await;

    // Another transaction holds the pair, as an ack or an extend of it would.
    let holder = hold_pairs(&broker, "__QUEUE_MODE__").await;
    let (s, b) = waits_for(
        &c,
        format!("{base}/api/v1/pop/queue/turns?wait=false"),
        holder,
        "the pop should wait for the pair's lock",
    )
    .await;
    assert_eq!(
        (s, b.unwrap()["messages"][0]["data"].clone()),
        (200, json!("m2"))
    );
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// PUSH-6 with two writers on one partition: a push of 50 items or more to a single
/// partition goes to its partition's writer, smaller ones (and ones over several
/// partitions) to their queue's (`writers.rs`, `lane`). Pushed concurrently to the same
/// partition, every message must still arrive exactly once, and each producer's
/// messages in the order it pushed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_6_large_and_small_pushes_to_one_partition_keep_each_producers_order() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    // Creates the partitions (the general path), so that the rest race on the minted path.
    let (s, b) = post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "ln", "partition": "a", "payload": {"p": "seed", "n": 1}},
                          {"queue": "ln", "partition": "b", "payload": {"p": "seed", "n": 1}}]}),
    )
    .await;
    assert_eq!(s, 201, "{b:?}");
    // (producer, requests, items per request, also to partition b)
    let producers = [
        ("big1", 6, 60, false),
        ("big2", 6, 60, false),
        ("small1", 40, 1, false),
        ("small2", 40, 3, true),
    ];
    let mut tasks = Vec::new();
    for (p, requests, per, spread) in producers {
        let (c, url) = (c.clone(), format!("{base}/api/v1/push"));
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            for _ in 0..requests {
                let items: Vec<_> = (0..per)
                    .flat_map(|_| {
                        n += 1;
                        let a =
                            json!({"queue": "ln", "partition": "a", "payload": {"p": p, "n": n}});
                        let b =
                            json!({"queue": "ln", "partition": "b", "payload": {"p": p, "n": n}});
                        if spread {
                            vec![a, b]
                        } else {
                            vec![a]
                        }
                    })
                    .collect();
                let (s, b) = post(&c, &url, &json!({ "items": items })).await;
                assert_eq!(s, 201, "{b:?}");
            }
            n
        }));
    }
    let mut sent = std::collections::BTreeMap::from([("seed", 1)]);
    for (t, (p, ..)) in tasks.into_iter().zip(producers) {
        sent.insert(p, t.await.unwrap());
    }
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/ln/partition/a?batch=10000&autoAck=true&wait=false"),
    )
    .await;
    assert_eq!(s, 200);
    let mut last = std::collections::BTreeMap::new();
    for m in b.unwrap()["messages"].as_array().unwrap() {
        let (p, n) = (
            m["data"]["p"].as_str().unwrap().to_string(),
            m["data"]["n"].as_i64().unwrap(),
        );
        let prev = last.insert(p.clone(), n).unwrap_or(0);
        assert_eq!(
            n,
            prev + 1,
            "{p}'s message {n} came after its message {prev}"
        );
    }
    for (p, n) in sent {
        assert_eq!(
            last.get(p),
            Some(&n),
            "{p} pushed {n} messages to partition a"
        );
    }
    server.stop().await.unwrap();
}

/// DEL-1: deleting a queue while pushes race with it removes every message of the
/// partitions it deleted, including those of pushes that committed while the delete
/// waited for their locks, and no push writes under a partition after it is gone.
/// Pushes with a transactionId take the general path, the others the one-statement
/// minted path. (A delete that removed messages by a snapshot taken before it waited,
/// as one statement with data-modifying CTEs would, fails this test with hundreds of
/// messages left behind.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_1_a_queue_deleted_while_pushes_race_leaves_no_message_behind() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut producers = Vec::new();
    for p in 0..4 {
        let (c, url, stop) = (c.clone(), format!("{base}/api/v1/push"), stop.clone());
        producers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let items: Vec<_> = (0..20)
                    .map(|i| {
                        let mut item = json!({"queue": "dr", "partition": format!("p{}", i % 3), "payload": {"p": p, "n": n}});
                        if p % 2 == 1 {
                            item["transactionId"] = json!(format!("t{p}-{n}-{i}"));
                        }
                        item
                    })
                    .collect();
                let (s, b) = post(&c, &url, &json!({ "items": items })).await;
                assert_eq!(s, 201, "{b:?}");
            }
            n
        }));
    }
    let queue_url = format!("{base}/api/v1/resources/queues/dr");
    let mut deleted = 0;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let (s, b) = delete(&c, &queue_url).await;
        assert_eq!(s, 200);
        deleted += b.unwrap()["existed"].as_bool().unwrap() as u32;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut pushed = 0;
    for p in producers {
        pushed += p.await.unwrap();
    }
    assert!(
        deleted >= 5 && pushed >= 20,
        "the race ran: {deleted} deletes found the queue, {pushed} pushes"
    );
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM queen_messages m
         WHERE NOT EXISTS (SELECT 1 FROM queen_partitions p WHERE p.id = m.partition_id)",
    )
    .fetch_one(broker.pool())
    .await
    .unwrap();
    assert_eq!(orphans, 0, "messages left under deleted partitions");
    // And the final delete leaves nothing at all.
    assert_eq!(delete(&c, &queue_url).await.0, 200);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_messages")
        .fetch_one(broker.pool())
        .await
        .unwrap();
    assert_eq!(left, 0, "messages left after the queue was deleted");
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// POP-4, our engine's documented choice: a queue pop walks the partitions in name order
/// from the one after this broker's last claim for the group, wrapping around, and a
/// discovery pop walks its queues the same way in creation order. Every partition here
/// always has a message, so a walk that starts anywhere else picks another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_4_pops_go_round_robin_over_partitions_and_discovered_queues() {
    let app = pg_server().await;
    let base = app.server.url();
    let c = reqwest::Client::new();
    let mut items = vec![];
    for (queue, partition) in [
        ("rr.a", "p0"),
        ("rr.a", "p1"),
        ("rr.a", "p2"),
        ("rr.b", "p0"),
    ] {
        for n in 0..3 {
            let payload = format!("{queue}/{partition}/{n}");
            items.push(json!({"queue": queue, "partition": partition, "payload": payload}));
        }
    }
    let (s, b) = post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    assert_eq!(s, 201, "{b:?}");
    // Each payload names its queue and partition: a discovery answer names no queue.
    let taken = |path: String| {
        let c = c.clone();
        async move {
            let (s, b) = get(&c, &path).await;
            assert_eq!(s, 200, "{path}: {b:?}");
            let data = b.unwrap()["messages"][0]["data"]
                .as_str()
                .unwrap()
                .to_string();
            data.rsplit_once('/').unwrap().0.to_string()
        }
    };
    let mut walk = vec![];
    for _ in 0..4 {
        let path = format!("{base}/api/v1/pop/queue/rr.a?consumerGroup=g&batch=1&autoAck=true");
        walk.push(taken(path).await);
    }
    assert_eq!(walk, ["rr.a/p0", "rr.a/p1", "rr.a/p2", "rr.a/p0"]);
    // Each group walks on its own: another group's pop does not move g's start, and
    // forgetting every start (a test hook) sends g back to the first partition.
    let pop = |group: &str| {
        format!("{base}/api/v1/pop/queue/rr.a?consumerGroup={group}&batch=1&autoAck=true")
    };
    assert_eq!(taken(pop("h")).await, "rr.a/p0");
    assert_eq!(
        taken(pop("g")).await,
        "rr.a/p1",
        "g's walk goes on after h's pop"
    );
    app.broker().reset_rotation();
    assert_eq!(
        taken(pop("g")).await,
        "rr.a/p0",
        "a forgotten walk starts at the first"
    );
    let mut walk = vec![];
    for _ in 0..3 {
        let path = format!("{base}/api/v1/pop?namespace=rr&consumerGroup=d&batch=1&autoAck=true");
        walk.push(taken(path).await);
    }
    assert_eq!(walk, ["rr.a/p0", "rr.b/p0", "rr.a/p0"]);
    app.server.stop().await.unwrap();
}

/// ACK evaluation step 6, our engine's documented choice at an OPEN point: in one call, a
/// completion above a failure of the same batch is blocked (the cursor stops before the
/// failure), and our server answers it `success:true, noop:false`. The suite accepts a
/// refusal too, so only this test pins which answer ours gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_step_6_a_completion_blocked_by_a_lower_failure_answers_success() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server().await;
    let base = server.url();
    let c = reqwest::Client::new();
    for m in ["m0", "m1"] {
        push_one(&c, &base, "blocked", json!(m)).await;
    }
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/blocked?batch=2&wait=false"),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let msgs = b.unwrap()["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    let acks: Vec<serde_json::Value> = msgs
        .iter()
        .zip(["failed", "completed"])
        .map(|(m, status)| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": m["leaseId"], "status": status})
        })
        .collect();
    let (s, b) = post(
        &c,
        &format!("{base}/api/v1/ack/batch"),
        &json!({"acknowledgments": acks}),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let answers = b.unwrap();
    let blocked = &answers[1];
    assert_eq!(
        (&blocked["success"], &blocked["noop"], &blocked["error"]),
        (&json!(true), &json!(false), &json!(null)),
        "the completion above the failure: {answers}"
    );
    assert_eq!(answers[0]["success"], json!(true), "the failure: {answers}");
    server.stop().await.unwrap();
}

/// PUSH-1: a push that PostgreSQL aborts to break a deadlock is written again, not
/// answered 500. Pushes lock partitions in one canonical order, so only another kind of
/// transaction can close the cycle: here one that holds the push's second partition and
/// then asks for its first, with a longer deadlock timeout than the push's, so that
/// PostgreSQL aborts the push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_1_a_push_aborted_by_a_deadlock_is_written_again() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir: _dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    let push = |payloads: &[&str]| {
        let items: Vec<_> = payloads
            .iter()
            .map(|p| json!({"queue": "deadlock", "partition": p, "payload": p}))
            .collect();
        json!({"items": items})
    };
    let (s, b) = post(&c, &format!("{base}/api/v1/push"), &push(&["a", "b"])).await;
    assert_eq!(s, 201, "{b:?}");
    let deadlocks = || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(broker.pool())
        .await
        .unwrap();
        n
    };
    let before = deadlocks().await;

    let mut other = broker.pool().begin().await.unwrap();
    sqlx::query("SET LOCAL deadlock_timeout = '60s'")
        .execute(&mut *other)
        .await
        .unwrap();
    lock_partitions(&mut other, "deadlock", Some("b")).await;
    let pushed = {
        let (c, url, body) = (c.clone(), format!("{base}/api/v1/push"), push(&["a", "b"]));
        tokio::spawn(async move { post(&c, &url, &body).await })
    };
    // The push holds "a" and waits for "b"; asking for "a" closes the cycle, and the
    // push's deadlock check (after its shorter timeout) aborts the push.
    until_a_lock_is_awaited(broker.pool(), || false, "the push never waited for \"b\"").await;
    lock_partitions(&mut other, "deadlock", Some("a")).await;
    other.commit().await.unwrap();
    let (s, b) = pushed.await.unwrap();
    assert_eq!(s, 201, "a deadlocked push must be written again: {b:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while deadlocks().await == before {
        assert!(Instant::now() < deadline, "PostgreSQL counted no deadlock");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored = stored_messages(broker.pool(), "deadlock", None).await;
    assert_eq!(stored, 4, "each push's two messages, once each");
    server.stop().await.unwrap();
}

/// MGMT-12, PUSH-7: a dead letter's retry is written at once or not at all. While the
/// spool still holds pushes (push maintenance is off, but the replay waits for a
/// partition another transaction holds), a retry answers 503, spools nothing and leaves
/// its dead letter; a spooled retry would be written later while its dead letter stayed,
/// and the next retry would put the message back a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_12_a_retry_is_never_spooled() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir: _dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    push_one(&c, &base, "dl", json!("m")).await;
    let (s, b) = get(&c, &format!("{base}/api/v1/pop/queue/dl?wait=false")).await;
    assert_eq!(s, 200, "{b:?}");
    let m = b.unwrap()["messages"][0].clone();
    let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "dlq"});
    let acks = json!({"acknowledgments": [ack]});
    let (s, b) = post(&c, &format!("{base}/api/v1/ack/batch"), &acks).await;
    assert_eq!(
        (s, &b.as_ref().unwrap()[0]["dlq"]),
        (200, &json!(true)),
        "{b:?}"
    );
    let retry = format!(
        "{base}/api/v1/messages/{}/{}/retry",
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap()
    );
    let maintenance = format!("{base}/api/v1/system/maintenance");

    // A push spooled under maintenance, whose replay will wait for its partition.
    push_one(&c, &base, "held", json!("h0")).await;
    let (s, _) = post(&c, &maintenance, &json!({"enabled": true})).await;
    assert_eq!(s, 200);
    push_one(&c, &base, "held", json!("h1")).await;
    let mut other = broker.pool().begin().await.unwrap();
    lock_partitions(&mut other, "held", None).await;
    let switched_off = {
        let (c, url) = (c.clone(), maintenance.clone());
        tokio::spawn(async move { post(&c, &url, &json!({"enabled": false})).await })
    };
    until_a_lock_is_awaited(
        broker.pool(),
        || false,
        "the replay never waited for \"held\"",
    )
    .await;

    let (s, b) = post(&c, &retry, &json!({})).await;
    assert_eq!(s, 503, "a retry while the spool holds pushes: {b:?}");
    let (_, b) = get(&c, &maintenance).await;
    assert_eq!(
        b.unwrap(),
        json!({"maintenanceMode": false, "bufferedMessages": 1}),
        "the retry spooled nothing"
    );
    other.commit().await.unwrap();
    let (s, b) = switched_off.await.unwrap();
    assert_eq!(s, 200, "{b:?}");
    assert_eq!(b.unwrap()["bufferedMessages"], 0);

    let (s, b) = post(&c, &retry, &json!({})).await;
    assert_eq!(s, 200, "{b:?}");
    assert_eq!(b.unwrap()["retried"], 1);
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/dl?batch=10&wait=false"),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let back: Vec<_> = b.unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(back, [json!("m")], "the dead letter's message, back once");
    server.stop().await.unwrap();
}

/// MGMT-11, POP-11: a delete that releases a lease (the span ended at the deleted
/// message, and nothing of it is left) frees the partition, so it wakes the pops parked
/// on its queue: one delivers the next message long before its timeout, although parked
/// pops look again on their own only after a minute (and claim once more at their
/// timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_11_a_delete_that_releases_a_lease_wakes_parked_pops() {
    let TestServer {
        server,
        db: _db,
        dir: _dir,
        ..
    } = pg_server_with(|c| {
        c.pop_wait_initial_interval_ms = 60_000;
        c.pop_wait_max_interval_ms = 60_000;
    })
    .await;
    let base = server.url();
    let c = reqwest::Client::new();
    for m in ["m1", "m2"] {
        push_one(&c, &base, "delwake", json!(m)).await;
    }
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/delwake?batch=1&wait=false"),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let m1 = b.unwrap()["messages"][0].clone();
    assert_eq!(m1["data"], json!("m1"));
    let parked = {
        let (c, url) = (
            c.clone(),
            format!("{base}/api/v1/pop/queue/delwake?wait=true&timeout=30000"),
        );
        tokio::spawn(async move { get(&c, &url).await })
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !parked.is_finished(),
        "the partition is leased: the pop parks"
    );
    let deleted = Instant::now();
    let (s, b) = delete(
        &c,
        &format!(
            "{base}/api/v1/messages/{}/{}",
            m1["partitionId"].as_str().unwrap(),
            m1["transactionId"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let (s, b) = parked.await.unwrap();
    assert_eq!(
        (s, b.as_ref().map(|b| b["messages"][0]["data"].clone())),
        (200, Some(json!("m2"))),
        "the next message is delivered"
    );
    // A pop that was not woken answers only at its timeout, 29 s after the delete.
    let took = deleted.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "woken by the delete, not by its timeout: {took:?}"
    );
    server.stop().await.unwrap();
}

/// MGMT-11, POP-2: a delete changes the cursors that point at the message (its retries,
/// a lease span ending at it), so it takes every pair's lock of the partition first, as
/// a pop or an ack of the pair holds it: while another holds it, the delete waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_11_a_delete_takes_its_turn_at_the_pairs_of_its_partition() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir: _dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    for m in ["m1", "m2"] {
        push_one(&c, &base, "delturn", json!(m)).await;
    }
    // A cursor row for group g: the pair the delete must lock.
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/delturn?consumerGroup=g&autoAck=true&wait=false"),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let m1 = b.unwrap()["messages"][0].clone();
    let holder = hold_pairs(&broker, "g").await;
    let url = format!(
        "{base}/api/v1/messages/{}/{}",
        m1["partitionId"].as_str().unwrap(),
        m1["transactionId"].as_str().unwrap()
    );
    let (s, b) = waits_for_call(
        {
            let c = c.clone();
            async move { delete(&c, &url).await }
        },
        holder,
        "the delete should wait for the pair's lock",
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    server.stop().await.unwrap();
}

/// ACK-4 without a lock held across the call: an ack reads its cursor without the
/// pair's lock and writes only if the cursor is still the version it read
/// (`queen_ack_write`). Here another holder of the lock changes the cursor after the
/// ack has read it; the ack must decide again from what that holder left, not write
/// over it with what it read first (the retry count it set would be lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_4_an_ack_that_read_a_cursor_since_changed_decides_again() {
    let TestServer {
        server,
        broker,
        db: _db,
        dir: _dir,
    } = pg_server().await;
    let broker = broker.expect("the PostgreSQL engine");
    let base = server.url();
    let c = reqwest::Client::new();
    push_one(&c, &base, "acked-race", json!("m1")).await;
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/acked-race?consumerGroup=g&wait=false"),
    )
    .await;
    assert_eq!(s, 200, "{b:?}");
    let b = b.unwrap();
    let ack = json!({"transactionId": b["messages"][0]["transactionId"],
                     "partitionId": b["messages"][0]["partitionId"],
                     "consumerGroup": "g", "leaseId": b["leaseId"], "status": "completed"});
    let mut holder = hold_pairs(&broker, "g").await;
    sqlx::query("UPDATE queen_cursors SET retries = '{\"99\": 7}' WHERE consumer_group = 'g'")
        .execute(&mut *holder)
        .await
        .unwrap();
    let (s, b) = waits_for_call(
        {
            let c = c.clone();
            async move { post(&c, &format!("{base}/api/v1/ack"), &ack).await }
        },
        holder,
        "the ack's write should wait for the pair's lock",
    )
    .await;
    assert_eq!(
        (s, b.as_ref().unwrap()[0]["success"].as_bool()),
        (200, Some(true)),
        "{b:?}"
    );
    let (committed, retries): (i64, serde_json::Value) =
        sqlx::query_as("SELECT committed, retries FROM queen_cursors WHERE consumer_group = 'g'")
            .fetch_one(broker.pool())
            .await
            .unwrap();
    assert_eq!(
        (committed, retries),
        (1, json!({"99": 7})),
        "the ack moved the cursor and kept the retry count written after its first read"
    );
    server.stop().await.unwrap();
}

/// Makes the database refuse (an exception in a trigger, SQLSTATE P0001) every message
/// whose payload is the string "poison", counting the tries in sequence `poison_tries`.
async fn refuse_poison(pool: &sqlx::PgPool) {
    for ddl in [
        "CREATE SEQUENCE poison_tries",
        "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.data::text = '\"poison\"' THEN
                 PERFORM nextval('poison_tries');
                 RAISE EXCEPTION 'poisoned';
             END IF;
             RETURN NEW;
         END $$",
        "CREATE TRIGGER poison BEFORE INSERT ON queen_messages FOR EACH ROW EXECUTE FUNCTION poison()",
    ] {
        sqlx::query(ddl).execute(pool).await.unwrap();
    }
}

/// TXN-4, ERR-1: only a database that cannot be reached makes a transaction 503. One the
/// database refuses for another reason is a 500 that says nothing of the database, and
/// it does not take the database for away: the next push is written, not buffered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_4_a_transaction_the_database_refuses_is_500_not_503() {
    let ts = pg_server().await;
    let (base, c) = (ts.url(), reqwest::Client::new());
    refuse_poison(ts.broker().pool()).await;
    let txn =
        json!({"operations": [{"type": "push", "items": [{"queue": "t", "payload": "poison"}]}]});
    let (s, b) = post(&c, &format!("{base}/api/v1/transaction"), &txn).await;
    assert_eq!((s, &b.unwrap()["error"]), (500, &json!("internal error")));
    let push = json!({"items": [{"queue": "t", "payload": "fine"}]});
    let (s, b) = post(&c, &format!("{base}/api/v1/push"), &push).await;
    assert_eq!((s, &b.unwrap()[0]["status"]), (201, &json!("queued")));
}

/// A wrapper that answers pops through [`Broker::call`], as a double that rewrites pop
/// answers does, so it takes the trait's default pop and asks the engine's
/// `pop_paused` after an empty answer.
struct PopsThroughCall(PgBroker);

#[async_trait::async_trait]
impl Broker for PopsThroughCall {
    async fn call(&self, req: Request) -> Answer {
        self.0.call(req).await
    }

    fn wakes(&self) -> &queen_server::wakes::Wakes {
        self.0.wakes()
    }

    async fn pop_paused(&self) -> bool {
        self.0.pop_paused().await
    }
}

/// MAINT-2: a wrapper over the engine that pops through `call` tells an empty queue from
/// pop maintenance, by the engine's switch, so its long polls stop waiting only for the
/// latter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maint_2_a_wrapper_popping_through_call_tells_maintenance_from_empty() {
    let ts = pg_server().await;
    let wrapped = PopsThroughCall(ts.broker().clone());
    let (route, query) = (PopRoute::Queue("quiet".into()), PopQuery::defaults(0));
    let popped = wrapped.pop(&route, &query).await;
    assert!(matches!(popped, Popped::Empty), "{popped:?}");
    wrapped.call(Request::SetPopMaintenance(true)).await;
    let popped = wrapped.pop(&route, &query).await;
    assert!(matches!(popped, Popped::Paused), "{popped:?}");
}

/// ERR-1: a push the database refuses (here a trigger raises for one payload) answers 500
/// and is tried once: only a deadlock is tried again. Written in a transaction shared
/// with other pushes, it fails alone: each of them is written again on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn err_1_a_push_the_database_refuses_fails_alone_and_is_tried_once() {
    let ts = pg_server().await;
    let pool = ts.broker().pool().clone();
    let (base, c) = (ts.url(), reqwest::Client::new());
    let url = format!("{base}/api/v1/push");
    let push = |payload: &str| json!({"items": [{"queue": "refused", "partition": "p", "transactionId": payload, "payload": payload}]});
    assert_eq!(post(&c, &url, &push("warm")).await.0, 201);
    refuse_poison(&pool).await;
    let tries = || async {
        let n: i64 = sqlx::query_scalar("SELECT last_value FROM poison_tries")
            .fetch_one(&pool)
            .await
            .unwrap();
        n
    };
    let (s, b) = post(&c, &url, &push("poison")).await;
    assert_eq!((s, &b.unwrap()["error"]), (500, &json!("internal error")));
    assert_eq!(tries().await, 1, "a refusal is not a deadlock: tried once");

    // The writer of the queue waits for the partition's lock with one push while the
    // others queue up behind it, so that they share its next transaction. (One that
    // arrives after the lock is released is written all the same: the test then shows
    // less, never a false failure.)
    let mut other = pool.begin().await.unwrap();
    lock_partitions(&mut other, "refused", Some("p")).await;
    let send = |payload: String| {
        let (c, url, body) = (c.clone(), url.clone(), push(&payload));
        tokio::spawn(async move { (payload, post(&c, &url, &body).await.0) })
    };
    let first = send("first".into());
    until_a_lock_is_awaited(
        &pool,
        || false,
        "the first push never waited for the partition",
    )
    .await;
    let mut rest: Vec<_> = (0..10).map(|i| send(format!("m{i}"))).collect();
    rest.push(send("poison".into()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    other.commit().await.unwrap();
    assert_eq!(first.await.unwrap().1, 201);
    for r in rest {
        let (payload, status) = r.await.unwrap();
        let expected = if payload == "poison" { 500 } else { 201 };
        assert_eq!(status, expected, "{payload}");
    }
    let stored = stored_messages(&pool, "refused", None).await;
    assert_eq!(stored, 12, "warm, first and the ten others");
}

/// How many sessions other than `conn`'s are on its database and match `filter`.
async fn other_sessions(conn: &mut sqlx::PgConnection, filter: &str) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND backend_type = 'client backend'
           AND pid <> pg_backend_pid() AND {filter}"
    );
    sqlx::query_scalar(&sql).fetch_one(conn).await.unwrap()
}

/// STOP-1, CLUSTER-2: a broker that is dropped stops its background tasks (the listener,
/// the notifier, the spool's replay, retention, the writers), so none of its sessions
/// stays on the database. A listener left behind would also keep the other brokers
/// notifying a broker that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_1_a_dropped_broker_leaves_no_session_on_its_database() {
    use sqlx::Connection;
    let db = own_database().await;
    let dir = TempDir::new("dropped");
    let broker = PgBroker::connect(db.url(), &config(&dir)).await.unwrap();
    let mut watcher = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while other_sessions(&mut watcher, "application_name = 'queen-listener'").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the broker's listener never connected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(broker);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = other_sessions(&mut watcher, "true").await;
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} sessions of a dropped broker stay"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// HEALTH-1, ERR-1: pooled connections that died while idle (the database restarted, or
/// an operator ended them) are replaced before they are used, so the broker keeps
/// answering as connected: a healthy `/health`, and a pop that delivers, not a 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_1_connections_that_died_while_idle_are_replaced_before_use() {
    use sqlx::Connection;
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    push_one(&c, &base, "idle", json!(1)).await;
    let mut admin = sqlx::PgConnection::connect(app.database_url().unwrap())
        .await
        .unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND application_name <> 'queen-listener'",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    // Idle for longer than the pool's check-before-use threshold (a second).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, health) = get(&c, &format!("{base}/health")).await;
    assert_eq!(status, 200, "{health:?}");
    assert_eq!(health.unwrap()["database"], "connected");
    let (status, popped) = get(&c, &format!("{base}/api/v1/pop/queue/idle?wait=false")).await;
    assert_eq!(status, 200, "{popped:?}");
    assert_eq!(popped.unwrap()["messages"][0]["data"], json!(1));
}
