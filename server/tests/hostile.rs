//! Hostile and unlucky clients against the PostgreSQL engine: oversized names, unusable
//! times, pops racing deletes, internal failures and broken bodies. Each answer is a
//! 400, 413 or 204 that changes nothing, or a 500 that says nothing of the database.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};

/// CFG-3: a namespace or task over 255 bytes is refused up front, not a 500 from the
/// database's index, and no queue row appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cfg_3_an_oversized_namespace_or_task_is_400_and_changes_nothing() {
    let app = pg_server().await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    for key in ["namespace", "task"] {
        let body = json!({"queue": "q", key: "n".repeat(2800)});
        let (status, answer) = post(&c, &format!("{base}/api/v1/configure"), &body).await;
        assert_eq!(status, 400, "{answer:?}");
        let error = answer.unwrap()["error"].as_str().unwrap().to_string();
        assert!(error.contains(key) && error.contains("255"), "{error}");
    }
    let queues: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_queues")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(queues, 0);
    let ok = json!({"queue": "q", "namespace": "n".repeat(255), "task": "t".repeat(255)});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &ok).await.0,
        200
    );
}

/// POP-13: a subscriptionFrom outside PostgreSQL's years is ignored like an
/// unparseable time (the group starts at the oldest message), not a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_13_an_out_of_range_subscription_time_is_ignored() {
    let app = pg_server().await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    let push = json!({"items": [{"queue": "q", "payload": 1}]});
    assert_eq!(post(&c, &format!("{base}/api/v1/push"), &push).await.0, 201);
    for (group, from) in [
        ("g1", "-200000-01-01T00:00:00"),
        ("g2", "+200000-01-01T00:00:00Z"),
    ] {
        let url = format!(
            "{base}/api/v1/pop/queue/q?consumerGroup={group}&subscriptionFrom={}",
            urlencode(from)
        );
        let (status, body) = get(&c, &url).await;
        assert_eq!(status, 200, "{from}: {body:?}");
        assert_eq!(body.unwrap()["messages"].as_array().unwrap().len(), 1);
    }
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// ERR-1, POP-6: pops racing the deletion of their queue answer 200 or 204, never a
/// 500 (a foreign-key violation from writing a cursor under a partition just deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn err_1_pops_racing_a_queue_delete_never_answer_500() {
    let app = pg_server().await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..30 {
        let push = json!({"items": (0..4).map(|p| json!({"queue": "q", "partition": format!("p{p}")})).collect::<Vec<_>>()});
        assert_eq!(post(&c, &format!("{base}/api/v1/push"), &push).await.0, 201);
        let pops = (0..8).map(|k| {
            let (c, url) = (
                c.clone(),
                format!(
                    "{base}/api/v1/pop/queue/q?consumerGroup=g{round}-{k}&autoAck={}",
                    k % 2 == 0
                ),
            );
            tokio::spawn(async move { c.get(url).send().await.unwrap().status().as_u16() })
        });
        let pops: Vec<_> = pops.collect();
        let (s, _) = delete(&c, &format!("{base}/api/v1/resources/queues/q")).await;
        assert_eq!(s, 200);
        for p in pops {
            *statuses.entry(p.await.unwrap()).or_default() += 1;
        }
    }
    assert!(
        statuses.keys().all(|s| [200, 204].contains(s)),
        "pop statuses while their queue was deleted: {statuses:?}"
    );
}

/// ERR-1: a 500 carries a generic message and the request id the log has the cause
/// under, never the database's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn err_1_an_internal_error_says_nothing_of_the_database() {
    let app = pg_server().await;
    sqlx::query("ALTER TABLE queen_dead_letters RENAME TO queen_dead_letters_gone")
        .execute(app.broker().pool())
        .await
        .unwrap();
    let c = reqwest::Client::new();
    let r = c
        .get(format!("{}/api/v1/dlq?queue=q", app.server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body, json!({"error": "internal error", "requestId": id}));
    assert_eq!(
        metric(&app.server.url(), "queen_internal_errors_total").await,
        1.0
    );
}

/// A chunked body that breaks the chunked encoding is a 400, not "body exceeds the
/// limit" (413 is for bodies that are too large).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_chunked_body_is_400() {
    let app = pg_server().await;
    let addr = app.server.addr;
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(
            b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("could not be read"), "{answer}");
}

/// A raw connection to `addr` that has sent `bytes`.
fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    s.write_all(bytes).unwrap();
    s
}

/// Reads until the server closes the connection (or 20 s pass): what it sent.
fn read_to_close(mut s: std::net::TcpStream) -> (String, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&out).into(), true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&out).into(), true)
            }
            Err(_) => return (String::from_utf8_lossy(&out).into(), false),
        }
    }
}

fn short_timeouts(c: &mut queen_server::config::Config) {
    c.header_timeout_ms = 300;
    c.body_timeout_ms = 300;
}

/// CONN-1: a half-sent head, a body that stops half-way and an idle kept-alive
/// connection are each closed by the server (the body with a 408), instead of holding
/// a connection for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conn_1_slow_clients_are_cut_off() {
    let app = pg_server_with(short_timeouts).await;
    let addr = app.server.addr;
    let (head, body, idle) = tokio::task::spawn_blocking(move || {
        let head = raw(addr, b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Le");
        let body = raw(
            addr,
            b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"items\"",
        );
        let idle = raw(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        (
            read_to_close(head),
            read_to_close(body),
            read_to_close(idle),
        )
    })
    .await
    .unwrap();
    assert!(head.1, "a half-sent head is closed: {head:?}");
    assert!(
        head.0.is_empty() || head.0.starts_with("HTTP/1.1 408"),
        "{head:?}"
    );
    assert!(body.1, "a stalled body's connection is closed: {body:?}");
    assert!(body.0.starts_with("HTTP/1.1 408"), "{body:?}");
    assert!(body.0.contains("did not arrive within 300 ms"), "{body:?}");
    assert!(idle.1, "an idle kept-alive connection is closed: {idle:?}");
    assert!(idle.0.starts_with("HTTP/1.1 200"), "{idle:?}");
}

/// CONN-1: a parked pop is not a slow client: it waits its own timeout, well past the
/// head and body timeouts, and then answers 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conn_1_a_parked_pop_outlives_the_connection_timeouts() {
    let app = pg_server_with(short_timeouts).await;
    let started = std::time::Instant::now();
    let r = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/pop/queue/q?wait=true&timeout=1500",
            app.server.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1400),
        "answered after {:?}, before its own timeout",
        started.elapsed()
    );
}

/// CONN-1: connections past the cap are answered 503 and closed; those under it are
/// served, and a freed slot serves the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conn_1_connections_past_the_cap_are_refused() {
    let app = pg_server_with(|c| c.max_connections = 3).await;
    let addr = app.server.addr;
    let held: Vec<_> = (0..3)
        .map(|_| raw(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let refused = tokio::task::spawn_blocking(move || {
        read_to_close(raw(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
    })
    .await
    .unwrap();
    assert!(refused.0.starts_with("HTTP/1.1 503"), "{refused:?}");
    assert!(refused.0.contains("connection limit"), "{refused:?}");
    drop(held);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let base = app.server.url();
    assert_eq!(metric(&base, "queen_connections_refused_total").await, 1.0);
    let url = format!("{}/health", app.server.url());
    let mut status = 0;
    for _ in 0..50 {
        match reqwest::get(&url).await {
            Ok(r) if r.status().as_u16() == 200 => {
                status = 200;
                break;
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    assert_eq!(status, 200, "a freed slot serves the next connection");
}

/// STOP-1: shutting down with pops parked for an hour and half-sent heads open answers
/// every parked pop 204 at once and ends; the flush has run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_1_shutdown_answers_parked_pops_and_ends() {
    let app = pg_server_with(|c| c.shutdown_grace_ms = 2000).await;
    let (url, addr) = (app.server.url(), app.server.addr);
    let c = reqwest::Client::new();
    let pops: Vec<_> = (0..50)
        .map(|k| {
            let (c, url) = (
                c.clone(),
                format!("{url}/api/v1/pop/queue/q{k}?wait=true&timeout=3600000"),
            );
            tokio::spawn(async move { c.get(url).send().await.map(|r| r.status().as_u16()) })
        })
        .collect();
    let _heads: Vec<_> = (0..10)
        .map(|_| raw(addr, b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let TestServer { server, .. } = app;
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(30), server.stop()).await;
    assert!(
        matches!(stopped, Ok(Ok(()))),
        "the server stopped: {stopped:?}"
    );
    for p in pops {
        assert_eq!(
            p.await.unwrap().ok(),
            Some(204),
            "a parked pop is answered 204"
        );
    }
}

/// STOP-1: shutdown under push load loses nothing it acknowledged: every message a
/// 201 said was queued is in the table afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_1_shutdown_under_push_load_loses_nothing_acknowledged() {
    let app = pg_server().await;
    let (url, pool) = (app.server.url(), app.broker().pool().clone());
    let c = reqwest::Client::new();
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for n in 0.. {
                    let items: Vec<_> = (0..10)
                        .map(|i| json!({"queue": format!("q{p}"), "payload": n * 10 + i}))
                        .collect();
                    let Ok(r) = c
                        .post(format!("{url}/api/v1/push"))
                        .json(&json!({ "items": items }))
                        .send()
                        .await
                    else {
                        break;
                    };
                    if r.status().as_u16() != 201 {
                        break;
                    }
                    let Ok(body) = r.json::<serde_json::Value>().await else {
                        break;
                    };
                    for item in body.as_array().unwrap() {
                        assert_eq!(item["status"], "queued");
                        acked.push(
                            uuid::Uuid::parse_str(item["message_id"].as_str().unwrap()).unwrap(),
                        );
                    }
                }
                acked
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let TestServer {
        server, db: _db, ..
    } = app;
    server.stop().await.unwrap();
    let mut acked = Vec::new();
    for p in producers {
        acked.extend(p.await.unwrap());
    }
    assert!(
        acked.len() > 100,
        "the load ran: {} acknowledged",
        acked.len()
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_messages WHERE id = ANY($1)")
        .bind(&acked)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        stored as usize,
        acked.len(),
        "every acknowledged push is stored"
    );
    drop(_db);
}

/// LIMIT-1: a push, a batch ack or a transaction over the item limit is a 413 naming
/// the limit, and nothing of it is written; at the limit it goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_1_requests_over_the_item_limit_are_413_and_write_nothing() {
    let app = pg_server_with(|c| c.max_items = 50).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let items = |n: usize| {
        (0..n)
            .map(|i| json!({"queue": "q", "payload": i}))
            .collect::<Vec<_>>()
    };
    let ack = json!({"transactionId": "t", "partitionId": uuid::Uuid::nil().to_string()});
    let over = [
        (
            "/api/v1/push",
            json!({ "items": items(51) }),
            "51 push items",
        ),
        (
            "/api/v1/ack/batch",
            json!({ "acknowledgments": vec![ack.clone(); 51] }),
            "51 acknowledgments",
        ),
        (
            "/api/v1/transaction",
            json!({"operations": [{"type": "push", "items": items(50)}, {"type": "push", "items": items(1)}]}),
            "51 transaction operations",
        ),
    ];
    for (path, body, what) in over {
        let (status, answer) = post(&c, &format!("{base}{path}"), &body).await;
        assert_eq!(status, 413, "{path}: {answer:?}");
        let error = answer.unwrap()["error"].as_str().unwrap().to_string();
        assert!(
            error.contains(what) && error.contains("at most 50"),
            "{error}"
        );
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_messages")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(stored, 0);
    assert_eq!(
        metric(&base, "queen_requests_over_item_limit_total").await,
        3.0
    );
    let (status, _) = post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({ "items": items(50) }),
    )
    .await;
    assert_eq!(status, 201, "at the limit a push goes through");
}

/// POP-5: `data` comes back verbatim: numbers with their digits as written (past u64
/// and f64 precision, negative zero, trailing zeros) and object keys in their order,
/// from both engines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_5_numbers_come_back_as_written() {
    let payload =
        r#"[18446744073709551616,-0,1E2,3.141592653589793238462643383279,{"b":1e-7,"a":[0.10]}]"#;
    let app = pg_server().await;
    let mem: std::sync::Arc<dyn queen_server::broker::Broker> =
        std::sync::Arc::new(queen_server::memory::MemoryBroker::new(30_000, 1 << 20));
    let mem_server = queen_server::app::spawn(
        mem,
        &queen_server::config::Config::defaults(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let c = reqwest::Client::new();
    for base in [app.server.url(), mem_server.url()] {
        let popped = push_raw_then_pop(&c, &base, "q", payload).await;
        // The exponent's spelling is the one thing that may change (POP-5): 1E2 as 1e+2
        // (the memory engine's model keeps values; the PostgreSQL engine keeps the text).
        let respelled = payload.replace("1E2", "1e+2");
        assert!(
            [payload, respelled.as_str()]
                .iter()
                .any(|want| popped.contains(&format!(r#""data":{want}"#))),
            "{base}: {popped}"
        );
    }
}

/// POP-2: a partition is skipped only for a live lease. A pop that finds the
/// `(partition, group)` lock held by a transaction that then leases nothing (another
/// pop only looking at it, emulated here by a transaction holding that lock) must not
/// answer 204: it asks again, waiting for the lock, and claims the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_2_a_partition_locked_by_a_transaction_that_leases_nothing_is_not_skipped() {
    let app = pg_server().await;
    // "lone": one candidate (the pop's one-statement head); "two": the general path.
    for (queue, partitions) in [("lone", &["p0"][..]), ("two", &["p0", "p1"][..])] {
        let pushed: Vec<(&str, usize)> = partitions.iter().map(|&p| (p, 1)).collect();
        let [first, _] = pop_around_held_locks(&app, queue, &pushed, partitions, "").await;
        assert_eq!(
            partitions_of(&[first]).len(),
            1,
            "{queue}: the pop waited for the lock and claimed"
        );
    }
}

/// Pushes `partitions` (name, messages) to `queue`, whose group g is subscribed, then pops
/// `query` for g while a transaction that leases nothing holds g's lock of each partition
/// in `locked`, releasing them once the pop answers or waits for one; then pops again.
/// Both answers.
async fn pop_around_held_locks(
    app: &TestServer,
    queue: &str,
    partitions: &[(&str, usize)],
    locked: &[&str],
    query: &str,
) -> [Option<Value>; 2] {
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let url = format!("{base}/api/v1/pop/queue/{queue}?consumerGroup=g&{query}");
    assert_eq!(get(&c, &url).await.0, 204, "subscribes g");
    let items: Vec<Value> = partitions
        .iter()
        .flat_map(|&(p, n)| (0..n).map(move |_| json!({"queue": queue, "partition": p})))
        .collect();
    let pushed = post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({ "items": items }),
    )
    .await;
    assert_eq!(pushed.0, 201);
    let mut looking = app.broker().pool().begin().await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(queen_pair_key(p.id, 'g'))
         FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
         WHERE q.name = $1 AND p.name = ANY($2)",
    )
    .bind(queue)
    .bind(locked)
    .fetch_all(&mut *looking)
    .await
    .unwrap();
    let pop = tokio::spawn({
        let (c, url) = (c.clone(), url.clone());
        async move { get(&c, &url).await }
    });
    let why = "the pop neither answered nor waited for a lock";
    until_a_lock_is_awaited(app.broker().pool(), || pop.is_finished(), why).await;
    looking.rollback().await.unwrap();
    let first = pop.await.unwrap().1;
    [first, get(&c, &url).await.1]
}

/// The partition of every message the answers delivered, sorted.
fn partitions_of(answers: &[Option<Value>]) -> Vec<String> {
    let mut partitions: Vec<String> = answers
        .iter()
        .flatten()
        .flat_map(|p| p["messages"].as_array().unwrap().clone())
        .map(|m| m["partition"].as_str().unwrap().to_string())
        .collect();
    partitions.sort();
    partitions
}

/// POP-2: a pop over several partitions that claims some and finds another's lock held
/// answers what it claimed; it does not trade those claims for a second pass over the
/// locked one, which would leave them leased to nobody until the lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_2_a_pop_that_claimed_around_a_held_lock_delivers_its_claims() {
    let app = pg_server().await;
    let answers = pop_around_held_locks(
        &app,
        "some",
        &[("p0", 1), ("p1", 1)],
        &["p1"],
        "batch=2&partitions=2",
    )
    .await;
    assert_eq!(
        partitions_of(&answers),
        ["p0", "p1"],
        "each message delivered once, none held back"
    );
}

/// POP-2, POP-1: a pop that found every lock held asks each partition again, waiting,
/// and fills its batch across them: what one partition gave is what the next may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_2_a_second_pass_fills_the_batch_across_partitions() {
    let app = pg_server().await;
    let [first, _] = pop_around_held_locks(
        &app,
        "full",
        &[("p0", 2), ("p1", 3)],
        &["p0", "p1"],
        "batch=5&partitions=2",
    )
    .await;
    let taken = partitions_of(&[first]);
    assert_eq!(
        taken,
        ["p0", "p0", "p1", "p1", "p1"],
        "a batch of 5 from 5 messages"
    );
}

/// A push writer whose task dies (as on a panic) is started again: the next push is
/// written, and `/health` counts the restart and lists the writer as degraded (HEALTH-3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_writer_that_dies_is_started_again() {
    let app = pg_server_with(|c| c.push_writers = Some(1)).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let push = json!({"items": [{"queue": "q", "transactionId": "a"}]});
    assert_eq!(post(&c, &format!("{base}/api/v1/push"), &push).await.0, 201);
    let (_, health) = get(&c, &format!("{base}/health")).await;
    let health = health.unwrap();
    assert_eq!(
        (&health["pushWriterRestarts"], &health["degraded"]),
        (&json!(0), &json!([])),
        "no writer died yet: {health}"
    );
    app.broker().abort_push_writer(0);
    for (n, t) in ["b", "c"].iter().enumerate() {
        let push = json!({"items": [{"queue": "q", "transactionId": t}]});
        let (status, body) = post(&c, &format!("{base}/api/v1/push"), &push).await;
        assert_eq!(status, 201, "push {n} after the writer died: {body:?}");
        assert_eq!(body.unwrap()[0]["status"], "queued");
    }
    assert_eq!(app.broker().writer_restarts(), 1);
    let (_, health) = get(&c, &format!("{base}/health")).await;
    let health = health.unwrap();
    assert_eq!(health["pushWriterRestarts"], 1);
    assert_eq!(
        health["status"], "healthy",
        "a recovered failure does not stop service"
    );
    let degraded = health["degraded"].as_array().expect("degraded list");
    assert_eq!(degraded.len(), 1, "{health}");
    assert_eq!(degraded[0]["component"], "push-writer");
    assert_eq!(degraded[0]["failures"], 1);
    assert!(degraded[0]["lastAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
}

/// A push writer keeps its connection from one write to the next only while requests
/// are waiting: once the pushes stop, every connection is back in the pool for the pops
/// and acks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_push_writer_gives_its_connection_back() {
    let app = pg_server_with(|c| c.push_writers = Some(1)).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let pushes: Vec<_> = (0..64)
        .map(|n| {
            let (c, url) = (c.clone(), format!("{base}/api/v1/push"));
            let push = json!({"items": [{"queue": "q", "partition": format!("p{}", n % 8), "payload": {"n": n}}]});
            tokio::spawn(async move { post(&c, &url, &push).await.0 })
        })
        .collect();
    for p in pushes {
        assert_eq!(p.await.unwrap(), 201);
    }
    let pool = app.broker().pool();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pool.num_idle() as u32 != pool.size() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        (pool.num_idle() as u32, pool.size()),
        (pool.size(), pool.size()),
        "every connection idle once the pushes are answered"
    );
}

/// CFG-4: a kept option's number that PostgreSQL's `numeric` cannot hold is a 400 that
/// writes nothing (it was a 500); the edges that fit are kept, and so is an empty key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cfg_4_numbers_postgresql_cannot_keep_are_400_and_an_empty_key_is_kept() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let configure = |text: &str| {
        let body = format!(r#"{{"queue":"q","options":{{"x":{text}}}}}"#);
        c.post(format!("{base}/api/v1/configure"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for past in ["1e1000000", "1e-20000", "-1e131073"] {
        let r = configure(past).await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{past}");
        assert!(r.text().await.unwrap().contains("digits"), "{past}");
    }
    let queues: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_queues")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(queues, 0, "a refused configure writes nothing");
    for fits in ["1e131071", "1e-16383"] {
        let r = configure(fits).await.unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "{fits}: {}",
            r.text().await.unwrap()
        );
    }
    let (s, b) = post(
        &c,
        &format!("{base}/api/v1/configure"),
        &json!({"queue": "q", "options": {"": 1}}),
    )
    .await;
    assert_eq!((s, &b.unwrap()["options"][""]), (200, &json!(1)));
}

/// A server on each engine: PostgreSQL, and the model in memory beside it.
async fn both_engines() -> (TestServer, queen_server::app::Running) {
    let app = pg_server().await;
    let memory = queen_server::app::spawn(
        std::sync::Arc::new(queen_server::memory::MemoryBroker::new(30_000, 1 << 20)),
        &config(&app.dir),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    (app, memory)
}

/// MGMT-1, MGMT-5: the messages of a queue named in the path that does not exist are
/// 404, on both engines, while the same filter on `/api/v1/messages` is an empty page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_5_the_messages_of_a_missing_queue_are_404() {
    let (app, memory) = both_engines().await;
    let c = reqwest::Client::new();
    for base in [app.server.url(), memory.url()] {
        let (s, b) = get(&c, &format!("{base}/api/v1/status/queues/nowhere/messages")).await;
        assert_eq!(s, 404, "{base}: {b:?}");
        let (s, b) = get(&c, &format!("{base}/api/v1/messages?queue=nowhere")).await;
        assert_eq!((s, &b.unwrap()["total"]), (200, &json!(0)), "{base}");
        // A queue that exists but holds nothing is an empty page.
        post(
            &c,
            &format!("{base}/api/v1/configure"),
            &json!({"queue": "empty"}),
        )
        .await;
        let (s, _) = get(&c, &format!("{base}/api/v1/status/queues/empty/messages")).await;
        assert_eq!(s, 200, "{base}");
    }
}

/// WIRE-1: an escape in a query string that is not UTF-8 is a 400 (as it is in a path),
/// never a group named with U+FFFD that the client did not send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_1_query_escapes_that_are_not_utf8_are_400_and_make_no_group() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    push_one(&c, &base, "q", json!(1)).await;
    for url in [
        format!("{base}/api/v1/pop/queue/q?consumerGroup=%ff&autoAck=true"),
        format!("{base}/api/v1/pop/queue/q?consumerGroup=a%c3"),
        format!("{base}/api/v1/dlq?queue=%fe"),
    ] {
        let (s, b) = get(&c, &url).await;
        assert_eq!(s, 400, "{url}");
        assert!(b.unwrap()["error"].as_str().unwrap().contains("UTF-8"));
    }
    let cursors: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_cursors")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(cursors, 0, "no group consumed anything");
    let (s, _) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/q?consumerGroup=%C3%A9"),
    )
    .await;
    assert_eq!(s, 200, "a name that decodes to UTF-8 is an ordinary group");
}

/// MGMT-2, MGMT-3: an offset past 2^32 and a lag past 2^64 are integers ≥ 0 like any
/// other: an empty page, and no group lagging that much.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_2_offsets_and_lags_of_any_size_are_pages() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    push_one(&c, &base, "q", json!(1)).await;
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/resources/queues?offset=4294967296"),
    )
    .await;
    let b = b.unwrap();
    assert_eq!(
        (s, &b["total"], &b["offset"]),
        (200, &json!(1), &json!(4294967296u64)),
        "{b}"
    );
    assert_eq!(b["queues"], json!([]));
    let (s, b) = get(
        &c,
        &format!("{base}/api/v1/messages?offset=99999999999999999999999"),
    )
    .await;
    assert_eq!((s, &b.unwrap()["messages"]), (200, &json!([])));
    let url = format!("{base}/api/v1/consumer-groups/lagging?minLagSeconds=18446744073709551616");
    let (s, b) = get(&c, &url).await;
    assert_eq!((s, &b.unwrap()["consumerGroups"]), (200, &json!([])));
}

/// CONN-1, AUTH-4: header lines up to 32 KiB are read (a large token reaches its 401);
/// more is a 431 with a JSON error, not a bare status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conn_1_headers_up_to_32_kib_are_read_and_more_is_a_json_431() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let with = |bytes: usize| {
        c.get(format!("{base}/health"))
            .header("x-padding", "p".repeat(bytes))
            .send()
    };
    assert_eq!(with(30 * 1024).await.unwrap().status().as_u16(), 200);
    let r = with(40 * 1024).await.unwrap();
    assert_eq!(r.status().as_u16(), 431);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("32768"), "{body}");
}

/// SCOPE-1: the routes upstream brokers offer outside this protocol (key-value store,
/// locks, timers, reads by offset) are unknown routes here: 404 with a JSON error that
/// names the route, on both engines, and nothing is written (no queue appears, not even
/// one a body names).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_1_routes_outside_the_protocol_are_404_and_change_nothing() {
    let (app, memory) = both_engines().await;
    let c = reqwest::Client::new();
    let outside = [
        (
            "POST",
            "/api/v1/kv",
            json!({"ops": [{"op": "set", "key": "k", "value": 1}]}),
        ),
        ("GET", "/api/v1/kv/k", json!(null)),
        (
            "POST",
            "/api/v1/locks",
            json!({"op": "acquire", "name": "l", "owner": "o"}),
        ),
        (
            "POST",
            "/api/v1/timers",
            json!({"ops": [{"op": "schedule", "queue": "scope-q"}]}),
        ),
        (
            "POST",
            "/api/v1/fetch",
            json!({"entries": [{"queue": "scope-q", "partitions": ["p"]}]}),
        ),
        (
            "POST",
            "/api/v1/partitions/changed",
            json!({"entries": [{"queue": "scope-q"}]}),
        ),
    ];
    for base in [app.server.url(), memory.url()] {
        for (method, path, body) in &outside {
            let url = format!("{base}{path}");
            let (s, b) = match *method {
                "GET" => get(&c, &url).await,
                _ => post(&c, &url, body).await,
            };
            let error = b.as_ref().and_then(|b| b["error"].as_str()).unwrap_or("");
            assert_eq!(s, 404, "{base} {method} {path}: {b:?}");
            assert_eq!(error, format!("no route {method} {path}"), "{base}");
        }
        let (s, b) = get(&c, &format!("{base}/api/v1/status/queues/scope-q/messages")).await;
        assert_eq!(
            s, 404,
            "{base}: a route outside the protocol made a queue: {b:?}"
        );
    }
}
