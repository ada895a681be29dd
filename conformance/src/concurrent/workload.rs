//! The concurrent workload: N clients, each a loop of generated calls over a few
//! queues (pushes of one or two items with unique transactionIds to two partitions of
//! the client's own, so that the order of concurrent pushes to one partition, which
//! only a later pop reveals, does not make the search backtrack far; pops still
//! contend for every partition,
//! pops by queue in queue mode or by one of two groups, acks of what the client holds,
//! mostly `completed`, some `failed`), with short leases (`leaseSeconds`) so that the
//! final drain can wait them out. Every few calls the clients meet and call at once on
//! one queue and group (a burst), so that pops race pops and acks race pops on one
//! cursor by design: a broker that does not serialise them is caught in most runs, not
//! by luck. Every third burst races a lease's end instead: client 0 pops, and when its
//! lease runs out it extends it while the others pop the same cursor. Every call touches one queue, which is the key
//! its history is checked under. A call whose answer does not arrive within the
//! client's timeout, or answers 5xx, is recorded as unknown.

use super::answers::{read_pop, PopRead};
use super::history::{Answer, History, Op};
use crate::target::Target;
use crate::transport::{now_ms, transmit};
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
    pub(crate) ops_per_client: usize,
    /// Queues the calls spread over.
    pub queues: usize,
    /// Seed of the calls' random choices: the same seed makes the same calls.
    pub seed: u64,
    /// Client-side timeout of one call (ms): past it the answer is unknown.
    pub(crate) op_timeout_ms: u64,
    /// Queue names start with this (letters and digits).
    pub(crate) prefix: String,
    /// `leaseSeconds` of every pop (`None`: the queue's `leaseTime`, 60 s). Short leases
    /// let the final drain finish soon after the clients stop.
    pub(crate) lease_seconds: Option<u32>,
    /// Every this many calls the clients meet and call at once on one queue and group
    /// (0: never), so that races between pops, and between acks and pops, happen on
    /// purpose rather than by luck.
    pub burst_every: usize,
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
            burst_every: BURST_EVERY,
        }
    }

    /// The longest a pop of this workload leases for (ms).
    pub(crate) fn lease_ms(&self) -> i64 {
        i64::from(self.lease_seconds.unwrap_or(60)) * 1000
    }

    /// Whether burst `k` races client 0's lease expiry (every third burst, when leases
    /// are short enough to wait out).
    pub fn expiry_burst(&self, k: usize) -> bool {
        k % 3 == 2 && self.lease_seconds.is_some_and(|s| s <= EXPIRY_LEASE_MAX_S)
    }

    /// The name of the workload's `i`-th queue (modulo the queue count).
    pub fn queue(&self, i: usize) -> String {
        format!("{}-cq{}", self.prefix, i % self.queues.max(1))
    }
}

const GROUPS: [Option<&str>; 3] = [None, Some("g1"), Some("g2")];

/// The default: every fourth call of each client is part of a burst.
pub(crate) const BURST_EVERY: usize = 4;

/// The longest lease (s) an expiry burst waits out.
const EXPIRY_LEASE_MAX_S: u32 = 2;

/// How far either side of a lease's end (ms) the calls of an expiry burst spread.
const EXPIRY_SPREAD_MS: u64 = 40;

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
pub(crate) async fn run_workload_spread(targets: &[Target], w: &Workload) -> History {
    let log: Arc<Mutex<Vec<Op>>> = Arc::new(Mutex::new(Vec::new()));
    let meet = Arc::new(tokio::sync::Barrier::new(w.clients.max(1)));
    let mut tasks = Vec::new();
    for c in 0..w.clients.max(1) {
        let target = targets[c % targets.len().max(1)].clone();
        let (w, log, meet) = (w.clone(), log.clone(), meet.clone());
        tasks.push(tokio::spawn(async move {
            client(&target, &w, c, &log, &meet).await
        }));
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
    let req = target.authorized(req);
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

/// One client's state between its calls.
struct Client<'a> {
    target: &'a Target,
    w: &'a Workload,
    c: usize,
    log: &'a Mutex<Vec<Op>>,
    rng: Rng,
    /// What it was delivered and has not acked yet.
    held: Vec<Held>,
    pushed: u32,
}

async fn client(
    target: &Target,
    w: &Workload,
    c: usize,
    log: &Mutex<Vec<Op>>,
    meet: &tokio::sync::Barrier,
) {
    let mut me = Client {
        target,
        w,
        c,
        log,
        rng: Rng(w.seed ^ (c as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407)),
        held: Vec::new(),
        pushed: 0,
    };
    for i in 0..w.ops_per_client {
        if w.burst_every > 0 && i % w.burst_every == w.burst_every - 1 {
            me.meet(i / w.burst_every, meet).await;
            continue;
        }
        let r = me.rng.below(10);
        if !me.held.is_empty() && r < 4 {
            me.ack_held().await;
        } else if r < 7 {
            let q = me.rng.below(w.queues as u64) as usize;
            let group = GROUPS[me.rng.below(3) as usize];
            let batch = 1 + me.rng.below(3);
            me.pop(q, group, batch).await;
        } else {
            me.push().await;
        }
    }
}

impl Client<'_> {
    /// Burst `k`: client 0 pushes (and, in an expiry burst, pops what it pushed), then
    /// every client waits for the others and they call at once.
    async fn meet(&mut self, k: usize, meet: &tokio::sync::Barrier) {
        let (q, group) = (k % self.w.queues, GROUPS[k % GROUPS.len()]);
        let expiry = self.w.expiry_burst(k);
        if self.c == 0 {
            // Something to race for, pushed (and answered) before anyone pops.
            self.push_to(q).await;
            if expiry {
                self.pop(q, group, 1).await;
            }
        }
        // Bounded: a client whose call hangs cannot hold the others for long.
        let wait = Duration::from_millis(self.w.op_timeout_ms);
        let _ = tokio::time::timeout(wait, meet.wait()).await;
        if expiry {
            self.race_expiry(q, group).await;
        } else if self.c != 0 {
            self.burst(k).await;
        }
    }

    /// An expiry burst: around the moment client 0's lease runs out, client 0 extends
    /// it while the others pop the same queue and group, so an extend that revives an
    /// expired lease, or renews one another pop has just taken, shows in the history.
    async fn race_expiry(&mut self, q: usize, group: Option<&'static str>) {
        // Spread the calls over the instant the lease ends (it began before the meeting).
        let at =
            self.w.lease_ms() as u64 - EXPIRY_SPREAD_MS + self.rng.below(2 * EXPIRY_SPREAD_MS + 1);
        tokio::time::sleep(Duration::from_millis(at)).await;
        if self.c != 0 {
            return self.pop(q, group, 1).await;
        }
        let held = self
            .held
            .iter()
            .rev()
            .find(|h| h.queue == q && h.group == group);
        if let Some(lease) = held.map(|h| h.lease.clone()) {
            let seconds = self.w.lease_seconds.unwrap_or(1);
            let path = format!("/api/v1/lease/{lease}/extend");
            self.call(q, HttpRequest::post(path, &json!({ "seconds": seconds })))
                .await;
        }
    }

    /// Burst `k`: the other clients call at once on the same queue and group, where
    /// client 0 has just pushed; a holder may ack what it holds, the others pop one
    /// message, so pops race pops and acks for the same `(partition, group)` and a
    /// broker that claims without serialising them hands one span out twice.
    async fn burst(&mut self, k: usize) {
        if !self.held.is_empty() && self.rng.below(3) == 0 {
            self.ack_held().await;
        } else {
            self.pop(k % self.w.queues, GROUPS[k % GROUPS.len()], 1)
                .await;
        }
    }

    async fn call(&self, q: usize, req: HttpRequest) -> Answer {
        call(self.target, self.w, self.c, self.w.queue(q), req, self.log).await
    }

    /// Acks everything held from one pop's queue and group, with its lease.
    async fn ack_held(&mut self) {
        let (q, g, lease) = {
            let h = &self.held[self.rng.below(self.held.len() as u64) as usize];
            (h.queue, h.group, h.lease.clone())
        };
        let (mine, rest): (Vec<Held>, Vec<Held>) =
            self.held.drain(..).partition(|h| h.lease == lease);
        self.held = rest;
        let acks: Vec<Value> = mine
            .iter()
            .map(|h| {
                let status = if self.rng.below(7) == 0 {
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
        self.call(q, HttpRequest::post("/api/v1/ack/batch", &body))
            .await;
    }

    /// Pops up to `batch` messages of queue `q` as `group`, and holds what it gets.
    async fn pop(&mut self, q: usize, group: Option<&'static str>, batch: u64) {
        let batch = batch.to_string();
        let lease = self.w.lease_seconds.map(|s| s.to_string());
        let mut query: Vec<(&str, &str)> = vec![("batch", &batch)];
        if let Some(l) = &lease {
            query.push(("leaseSeconds", l));
        }
        if let Some(g) = group {
            query.push(("consumerGroup", g));
        }
        let queue = self.w.queue(q);
        let req = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &query);
        // Read leniently (any 2xx with a `messages` array), like the invariants read it:
        // what a client got, it acks.
        if let PopRead::Delivered(msgs) = read_pop(&self.call(q, req).await) {
            self.held.extend(msgs.into_iter().map(|m| Held {
                queue: q,
                group,
                txn: m.transaction_id,
                partition_id: m.partition_id,
                lease: m.lease_id,
            }));
        }
    }

    /// Pushes one or two items with fresh transactionIds to the client's partitions.
    async fn push(&mut self) {
        let q = self.rng.below(self.w.queues as u64) as usize;
        self.push_to(q).await;
    }

    /// Pushes one or two items with fresh transactionIds to queue `q`, to the client's
    /// partitions.
    async fn push_to(&mut self, q: usize) {
        let queue = self.w.queue(q);
        let n = 1 + self.rng.below(2);
        let (c, mut items) = (self.c, Vec::new());
        for _ in 0..n {
            self.pushed += 1;
            let t = format!("c{c}m{}", self.pushed);
            items.push(
                json!({"queue": queue, "partition": format!("p{c}x{}", self.rng.below(2)),
                "transactionId": t, "payload": {"c": c, "n": self.pushed}}),
            );
        }
        self.call(
            q,
            HttpRequest::post("/api/v1/push", &json!({ "items": items })),
        )
        .await;
    }
}
