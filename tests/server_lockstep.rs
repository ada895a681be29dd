//! Our server, both engines, driven by random operation sequences over HTTP, with every
//! answer checked by the reference model's checker (PROTOCOL.md section 13). A
//! divergence prints the request, the answer and what the model allowed.

use queen_reference::checker::{Checker, StepError};
use queen_reference::wire::*;
use queen_tests::{memory_server, pg_server, send, TestServer};
use serde_json::{json, Value};

/// A small deterministic generator (xorshift), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// The next request of the sequence, given the messages delivered so far.
fn next_request(r: &mut Rng, ns: &str, delivered: &[PopMessage]) -> Option<HttpRequest> {
    let queue = |r: &mut Rng| format!("{ns}.q{}", r.below(2));
    let groups = [None, Some("g1"), Some("g2")];
    let kind = r.below(100);
    Some(match kind {
        0..=24 => {
            let items: Vec<Value> = (0..1 + r.below(3))
                .map(|_| {
                    let mut v = json!({"queue": queue(r), "partition": format!("p{}", r.below(3)), "payload": {"n": r.below(1000)}});
                    if r.chance(60) {
                        v["transactionId"] = json!(format!("t{}", r.below(8)));
                    }
                    v
                })
                .collect();
            HttpRequest::post("/api/v1/push", &json!({ "items": items }))
        }
        25..=54 => {
            let path = if r.chance(25) {
                PopRoute::Partition(queue(r), format!("p{}", r.below(3))).path()
            } else if r.chance(10) {
                "/api/v1/pop".to_string()
            } else {
                PopRoute::Queue(queue(r)).path()
            };
            let mut q: Vec<(String, String)> = vec![
                ("batch".into(), (1 + r.below(4)).to_string()),
                ("partitions".into(), (r.below(4) as i64 - 1).to_string()),
                ("leaseSeconds".into(), (1 + r.below(2)).to_string()),
            ];
            if path == "/api/v1/pop" {
                q.push(("namespace".into(), ns.to_string()));
            }
            if r.chance(15) {
                q.push(("autoAck".into(), "true".into()));
            }
            if let Some(g) = groups[r.below(3) as usize] {
                q.push(("consumerGroup".into(), g.into()));
            }
            HttpRequest {
                method: "GET".into(),
                path,
                query: q,
                body: vec![],
                bearer: None,
            }
        }
        55..=79 => {
            if delivered.is_empty() {
                return None;
            }
            let items: Vec<Value> = (0..1 + r.below(3))
                .map(|_| {
                    let m = &delivered[r.below(delivered.len() as u64) as usize];
                    let status = ["completed", "completed", "failed", "retry", "dlq"][r.below(5) as usize];
                    let mut v = json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status});
                    if r.chance(80) && !m.lease_id.is_empty() {
                        v["leaseId"] = json!(m.lease_id);
                    }
                    v
                })
                .collect();
            let mut body = json!({ "acknowledgments": items });
            if let Some(g) = groups[r.below(3) as usize] {
                body["consumerGroup"] = json!(g);
            }
            HttpRequest::post("/api/v1/ack/batch", &body)
        }
        80..=83 => {
            let m = delivered.iter().rev().find(|m| !m.lease_id.is_empty())?;
            let body = if r.chance(50) {
                vec![]
            } else {
                b"{\"seconds\":2}".to_vec()
            };
            HttpRequest::post_raw(format!("/api/v1/lease/{}/extend", m.lease_id), body)
        }
        84..=87 => {
            let (delay, window) = (
                [0, 300][r.below(2) as usize],
                [1, 3600][r.below(2) as usize],
            );
            let options = json!({"retryLimit": r.below(3), "retryDelay": delay, "dedupWindowSeconds": window, "leaseTime": 1 + r.below(2)});
            HttpRequest::post(
                "/api/v1/configure",
                &json!({"queue": queue(r), "options": options}),
            )
        }
        88..=90 => HttpRequest::get("/api/v1/dlq", &[("queue", &queue(r))]),
        91..=92 => HttpRequest::post_raw("/api/v1/push", br#"{"items":[{"queue":""}]}"#.to_vec()),
        93 => HttpRequest::post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push", "items": [{"queue": queue(r), "partition": "p0", "payload": 1}]}]}),
        ),
        94..=99 => {
            let (q, g) = (queue(r), groups[r.below(3) as usize]);
            management_read(r, &q, g, delivered)?
        }
        _ => return None,
    })
}

/// A management read on one of the sequence's queues (MGMT-1..7), or a seek to the end.
fn management_read(
    r: &mut Rng,
    queue: &str,
    group: Option<&str>,
    delivered: &[PopMessage],
) -> Option<HttpRequest> {
    let g = group.unwrap_or("__QUEUE_MODE__");
    Some(match r.below(9) {
        0 => HttpRequest::get(format!("/api/v1/resources/queues/{queue}"), &[]),
        1 => HttpRequest::get(
            format!("/api/v1/resources/queues/{queue}/depth"),
            &[("group", g)],
        ),
        2 => HttpRequest::get(format!("/api/v1/status/queues/{queue}"), &[]),
        3 => {
            let status =
                ["", "pending", "leased", "completed", "deadLettered"][r.below(5) as usize];
            let (offset, limit) = (r.below(4).to_string(), (1 + r.below(4)).to_string());
            let mut q = vec![
                ("queue", queue),
                ("consumerGroup", g),
                ("offset", &offset),
                ("limit", &limit),
            ];
            if !status.is_empty() {
                q.push(("status", status));
            }
            HttpRequest::get("/api/v1/messages", &q)
        }
        4 => HttpRequest::get("/api/v1/resources/partitions", &[("queue", queue)]),
        5 => {
            let m = delivered.last()?;
            HttpRequest::get(
                format!("/api/v1/messages/{}/{}", m.partition_id, m.transaction_id),
                &[],
            )
        }
        6 => {
            // MGMT-12: the retry of a delivered message (404 unless it was dead-lettered).
            let m = &delivered
                [r.below(delivered.len().max(1) as u64) as usize % delivered.len().max(1)..]
                .first()?
                .clone();
            HttpRequest::post(
                format!(
                    "/api/v1/messages/{}/{}/retry",
                    m.partition_id, m.transaction_id
                ),
                &json!({}),
            )
        }
        7 => HttpRequest::post(
            format!(
                "/api/v1/consumer-groups/{g}/queues/{queue}/partitions/p{}/seek",
                r.below(3)
            ),
            &json!({"toEnd": true}),
        ),
        _ => HttpRequest::post(
            format!("/api/v1/consumer-groups/{g}/queues/{queue}/seek"),
            &json!({"toEnd": true}),
        ),
    })
}

async fn run(server: &TestServer, seed: u64, steps: usize) {
    let client = reqwest::Client::new();
    let base = server.url();
    let mut r = Rng(seed);
    let ns = format!("ls{seed}x{}", queen_tests::now_ms() % 1_000_000);
    let mut checker = Checker::new();
    checker.skew_ms = 2;
    let mut delivered: Vec<PopMessage> = Vec::new();
    for step in 0..steps {
        if r.chance(12) {
            tokio::time::sleep(std::time::Duration::from_millis(r.below(1300))).await;
        }
        let Some(req) = next_request(&mut r, &ns, &delivered) else {
            continue;
        };
        let (answer, sent, received) = send(&client, &base, &req).await;
        match checker.step(&req, sent, received, &answer) {
            Ok(_) => {}
            Err(StepError::Diverged(d)) => {
                panic!("seed {seed}, step {step}: the server diverged from the model\n{d}")
            }
            Err(StepError::Inconclusive(why)) => {
                panic!("seed {seed}, step {step}: inconclusive: {why}")
            }
        }
        if answer.status == 200 && req.path.starts_with("/api/v1/pop") {
            let p: PopResponse = serde_json::from_value(answer.body.unwrap()).unwrap();
            delivered.extend(p.messages);
            if delivered.len() > 40 {
                delivered.drain(..delivered.len() - 40);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_engine_agrees_with_the_model_on_random_sequences() {
    let server = pg_server().await;
    for seed in [1u64, 7, 42] {
        run(&server, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, 120).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_engine_agrees_with_the_model_on_random_sequences() {
    let server = memory_server().await;
    for seed in [1u64, 7, 42] {
        run(&server, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, 120).await;
    }
}
