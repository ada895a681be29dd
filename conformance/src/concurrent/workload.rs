//! The concurrent workload: N clients, each a loop of generated calls over a few
//! queues (pushes of one or two items with unique transactionIds to two partitions of
//! the client's own, so that the order of concurrent pushes to one partition, which
//! only a later pop reveals, does not make the search backtrack far; pops still
//! contend for every partition,
//! pops by queue in queue mode or by one of two groups, acks of what the client holds,
//! mostly `completed`, some `failed`), with short leases (`leaseSeconds`) so that the
//! final drain can wait them out. Every call touches one queue, which is the key
//! its history is checked under. A call whose answer does not arrive within the
//! client's timeout, or answers 5xx, is recorded as unknown.

use super::answers::{read_pop, PopRead};
use super::history::{Answer, History, Op};
use crate::session::{now_ms, transmit, Target};
use queen_reference::wire::HttpRequest;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The shape of a concurrent run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Clients calling at once.
    pub clients: usize,
    /// Calls each client makes.
    pub ops_per_client: usize,
    /// Queues the calls spread over.
    pub queues: usize,
    pub seed: u64,
    /// Client-side timeout of one call (ms): past it the answer is unknown.
    pub op_timeout_ms: u64,
    /// Queue names start with this (letters and digits).
    pub prefix: String,
    /// `leaseSeconds` of every pop (`None`: the queue's `leaseTime`, 60 s). Short leases
    /// let the final drain finish soon after the clients stop.
    pub lease_seconds: Option<u32>,
}

impl Workload {
    /// `clients` x `ops_per_client` calls over `queues` queues with a fresh name prefix,
    /// a 10 s call timeout and 1 s leases.
    pub fn new(clients: usize, ops_per_client: usize, queues: usize, seed: u64) -> Workload {
        Workload {
            clients,
            ops_per_client,
            queues: queues.max(1),
            seed,
            op_timeout_ms: 10_000,
            prefix: format!("cc{}", &uuid::Uuid::new_v4().simple().to_string()[..10]),
            lease_seconds: Some(1),
        }
    }

    /// The longest a pop of this workload leases for (ms).
    pub fn lease_ms(&self) -> i64 {
        i64::from(self.lease_seconds.unwrap_or(60)) * 1000
    }

    pub fn queue(&self, i: usize) -> String {
        format!("{}-cq{}", self.prefix, i % self.queues.max(1))
    }
}

const GROUPS: [Option<&str>; 3] = [None, Some("g1"), Some("g2")];

/// splitmix64: a tiny deterministic generator per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A delivery a client holds until it acks it.
struct Held {
    queue: usize,
    group: Option<&'static str>,
    txn: String,
    partition_id: String,
    lease: String,
}

/// Runs the workload against `target` and returns the recorded history.
pub async fn run_workload(target: &Target, w: &Workload) -> History {
    run_workload_spread(std::slice::from_ref(target), w).await
}

/// Runs the workload with its clients spread over `targets` (client `c` calls
/// `targets[c % n]`: several processes of one broker) and returns the history.
pub async fn run_workload_spread(targets: &[Target], w: &Workload) -> History {
    let log: Arc<Mutex<Vec<Op>>> = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..w.clients.max(1) {
        let target = targets[c % targets.len().max(1)].clone();
        let (w, log) = (w.clone(), log.clone());
        tasks.push(tokio::spawn(
            async move { client(&target, &w, c, &log).await },
        ));
    }
    for t in tasks {
        let _ = t.await;
    }
    let ops = std::mem::take(&mut *log.lock().expect("log"));
    History::new(ops)
}

async fn call(
    target: &Target,
    w: &Workload,
    c: usize,
    key: String,
    req: HttpRequest,
    log: &Mutex<Vec<Op>>,
) -> Answer {
    let invoke = now_ms();
    let r = tokio::time::timeout(
        Duration::from_millis(w.op_timeout_ms),
        transmit(target, &req),
    )
    .await;
    let complete = now_ms();
    let answer = match r {
        Err(_) => Answer::Unknown(format!("no answer within {} ms", w.op_timeout_ms)),
        Ok(Err(e)) => Answer::Unknown(e),
        Ok(Ok(a)) if a.status >= 500 => Answer::Unknown(format!("status {}", a.status)),
        Ok(Ok(a)) => Answer::Known(a),
    };
    log.lock().expect("log").push(Op {
        id: 0,
        client: c,
        key,
        request: req,
        invoke_ms: invoke,
        complete_ms: complete,
        answer: answer.clone(),
    });
    answer
}

async fn client(target: &Target, w: &Workload, c: usize, log: &Mutex<Vec<Op>>) {
    let mut rng = Rng(w.seed ^ (c as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut held: Vec<Held> = Vec::new();
    let mut pushed = 0u32;
    for _ in 0..w.ops_per_client {
        let r = rng.below(10);
        if !held.is_empty() && r < 4 {
            // Ack everything held from one pop's queue and group, with its lease.
            let (q, g, lease) = {
                let h = &held[rng.below(held.len() as u64) as usize];
                (h.queue, h.group, h.lease.clone())
            };
            let mine: Vec<Held> = {
                let (m, rest): (Vec<Held>, Vec<Held>) =
                    held.drain(..).partition(|h| h.lease == lease);
                held = rest;
                m
            };
            let acks: Vec<Value> = mine
                .iter()
                .map(|h| {
                    let status = if rng.below(7) == 0 {
                        "failed"
                    } else {
                        "completed"
                    };
                    json!({"transactionId": h.txn, "partitionId": h.partition_id,
                        "leaseId": h.lease, "status": status})
                })
                .collect();
            let mut body = json!({ "acknowledgments": acks });
            if let Some(g) = g {
                body["consumerGroup"] = json!(g);
            }
            let req = HttpRequest::post("/api/v1/ack/batch", &body);
            call(target, w, c, w.queue(q), req, log).await;
        } else if r < 7 {
            let q = rng.below(w.queues as u64) as usize;
            let group = GROUPS[rng.below(3) as usize];
            let batch = (1 + rng.below(3)).to_string();
            let lease = w.lease_seconds.map(|s| s.to_string());
            let mut query: Vec<(&str, &str)> = vec![("batch", &batch)];
            if let Some(l) = &lease {
                query.push(("leaseSeconds", l));
            }
            if let Some(g) = group {
                query.push(("consumerGroup", g));
            }
            let queue = w.queue(q);
            let req = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &query);
            // Read leniently (any 2xx with a `messages` array), like the invariants read it:
            // what a client got, it acks.
            if let PopRead::Delivered(msgs) = read_pop(&call(target, w, c, queue, req, log).await) {
                held.extend(msgs.into_iter().map(|m| Held {
                    queue: q,
                    group,
                    txn: m.transaction_id,
                    partition_id: m.partition_id,
                    lease: m.lease_id,
                }));
            }
        } else {
            let q = rng.below(w.queues as u64) as usize;
            let queue = w.queue(q);
            let n = 1 + rng.below(2);
            let items: Vec<Value> = (0..n)
                .map(|_| {
                    pushed += 1;
                    let t = format!("c{c}m{pushed}");
                    json!({"queue": queue, "partition": format!("p{c}x{}", rng.below(2)),
                        "transactionId": t, "payload": {"c": c, "n": pushed}})
                })
                .collect();
            let req = HttpRequest::post("/api/v1/push", &json!({ "items": items }));
            call(target, w, c, queue, req, log).await;
        }
    }
}
