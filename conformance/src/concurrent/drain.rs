//! The final drain of a concurrent run: every queue of the history is popped with every
//! consumer group the history used (and queue mode), acking each delivery `completed`
//! with its lease, until the broker answers 204 at a moment when every lease the clients
//! may still hold has expired and every retry delay has passed. Its calls are recorded
//! like the workload's, so [`super::invariants`] checks them together: what the drain
//! does not find was lost. Optionally the drain also reads every queue with a group no
//! client used ([`DrainOptions::fresh_group`], subscribed from the oldest message,
//! POP-13): it must receive every message answered 201, so a message that disappeared
//! after every client group had already seen it (a write acknowledged before it was
//! durable, then lost in a crash) is found too.

use super::history::{Answer, History, Op};
use crate::session::{now_ms, transmit, Target};
use queen_reference::time::Millis;
use queen_reference::wire::{
    parse_request, HttpRequest, PopResponse, PopRoute, Request, QUEUE_MODE,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How the drain runs.
#[derive(Clone, Debug)]
pub struct DrainOptions {
    /// `leaseSeconds` of the drain's own pops.
    pub lease_seconds: u32,
    /// A 204 counts as "empty" only when invoked this long after the history's last
    /// completion: the longest lease a client may hold plus the retry delay.
    pub settle_ms: Millis,
    /// Past this long, a `(queue, group)` still not empty is reported unfinished.
    pub max_ms: Millis,
    /// Client-side timeout of one drain call (ms).
    pub op_timeout_ms: u64,
    /// `batch` of the drain's pops.
    pub batch: u32,
    /// `(queue, group)` pairs drained at once. Each holds its turn from its first pop to
    /// its 204, so that its acks follow its pops closely: with too many at once, the
    /// broker's connection pool queues an ack past its pop's lease (`leaseSeconds`),
    /// and every such span is delivered again.
    pub parallel: usize,
    /// A consumer group no client used, drained on every queue as well (`None`: only
    /// the groups of the history).
    pub fresh_group: Option<String>,
}

impl DrainOptions {
    /// For a history whose pops lease for at most `lease_ms`, on queues with the
    /// default `retryDelay` (1 s, PROTOCOL.md section 8).
    pub fn after_leases(lease_ms: Millis) -> DrainOptions {
        DrainOptions {
            lease_seconds: 2,
            settle_ms: lease_ms + 1_000 + 300,
            max_ms: lease_ms + 30_000,
            op_timeout_ms: 10_000,
            batch: 100,
            parallel: 16,
            fresh_group: None,
        }
    }
}

/// One `(queue, group)` the drain emptied, or did not.
#[derive(Clone, Debug, PartialEq)]
pub struct Drained {
    pub queue: String,
    pub group: String,
    pub emptied: bool,
}

/// The drain's calls and what it emptied.
#[derive(Clone, Debug, Default)]
pub struct Drain {
    pub ops: Vec<Op>,
    pub targets: Vec<Drained>,
    pub elapsed_ms: f64,
}

impl Drain {
    /// Whether every `(queue, group)` was emptied.
    pub fn complete(&self) -> bool {
        self.targets.iter().all(|t| t.emptied)
    }

    /// `queue group` of each target not emptied.
    pub fn unfinished(&self) -> Vec<String> {
        self.targets
            .iter()
            .filter(|t| !t.emptied)
            .map(|t| format!("queue {} group {}", t.queue, t.group))
            .collect()
    }

    /// The groups emptied on `queue`: for each, every message must have been delivered.
    pub fn drained_groups(&self, queue: &str) -> Vec<&str> {
        self.targets
            .iter()
            .filter(|t| t.emptied && t.queue == queue)
            .map(|t| t.group.as_str())
            .collect()
    }
}

/// The queues a history touched (pushes and queue-scoped pops), each with the groups its
/// pops used, queue mode always among them.
pub fn queues_and_groups(history: &History) -> BTreeMap<String, BTreeSet<String>> {
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |q: &str, g: Option<&str>| {
        let e = m.entry(q.to_string()).or_default();
        e.insert(QUEUE_MODE.to_string());
        if let Some(g) = g {
            e.insert(g.to_string());
        }
    };
    for op in &history.ops {
        match parse_request(&op.request, 30_000, usize::MAX) {
            Ok(Request::Push(p)) => p.items.iter().for_each(|i| add(&i.queue, None)),
            Ok(Request::Pop {
                route: PopRoute::Queue(q) | PopRoute::Partition(q, _),
                query,
            }) => add(&q, Some(&query.consumer_group)),
            _ => {}
        }
    }
    m
}

/// Drains every queue of `history` with every group it used (concurrently), then lists
/// each queue's dead letters.
pub async fn drain(target: &Target, history: &History, opts: &DrainOptions) -> Drain {
    let t0 = std::time::Instant::now();
    let last = history.ops.iter().map(|o| o.complete_ms).max().unwrap_or(0);
    let quiet_at = last.max(now_ms()) + opts.settle_ms;
    let deadline = now_ms() + opts.max_ms;
    let first_client = history.ops.iter().map(|o| o.client + 1).max().unwrap_or(0);
    let mut plan = queues_and_groups(history);
    if let Some(g) = &opts.fresh_group {
        plan.values_mut().for_each(|gs| {
            gs.insert(g.clone());
        });
    }
    let turns = std::sync::Arc::new(tokio::sync::Semaphore::new(opts.parallel.max(1)));
    let mut tasks = Vec::new();
    let mut client = first_client;
    for (queue, groups) in &plan {
        for g in groups {
            let (target, opts, queue, g) = (target.clone(), opts.clone(), queue.clone(), g.clone());
            let turns = turns.clone();
            let c = client;
            client += 1;
            tasks.push(tokio::spawn(async move {
                let _turn = turns.acquire_owned().await.expect("never closed");
                drain_one(&target, &opts, c, &queue, &g, quiet_at, deadline).await
            }));
        }
    }
    let mut out = Drain::default();
    for t in tasks {
        if let Ok((ops, drained)) = t.await {
            out.ops.extend(ops);
            out.targets.push(drained);
        }
    }
    for queue in plan.keys() {
        let req = HttpRequest::get("/api/v1/dlq", &[("queue", queue), ("limit", "1000")]);
        out.ops.push(call(target, opts, client, queue, req).await.0);
    }
    out.elapsed_ms = t0.elapsed().as_secs_f64() * 1000.0;
    out
}

async fn call(
    target: &Target,
    opts: &DrainOptions,
    client: usize,
    key: &str,
    req: HttpRequest,
) -> (Op, Answer) {
    let invoke = now_ms();
    let r = tokio::time::timeout(
        Duration::from_millis(opts.op_timeout_ms),
        transmit(target, &req),
    )
    .await;
    let complete = now_ms();
    let answer = match r {
        Err(_) => Answer::Unknown(format!("no answer within {} ms", opts.op_timeout_ms)),
        Ok(Err(e)) => Answer::Unknown(e),
        Ok(Ok(a)) if a.status >= 500 => Answer::Unknown(format!("status {}", a.status)),
        Ok(Ok(a)) => Answer::Known(a),
    };
    let op = Op {
        id: 0,
        client,
        key: key.to_string(),
        request: req,
        invoke_ms: invoke,
        complete_ms: complete,
        answer: answer.clone(),
    };
    (op, answer)
}

async fn drain_one(
    target: &Target,
    opts: &DrainOptions,
    client: usize,
    queue: &str,
    group: &str,
    quiet_at: Millis,
    deadline: Millis,
) -> (Vec<Op>, Drained) {
    let mut ops = Vec::new();
    let batch = opts.batch.to_string();
    let lease = opts.lease_seconds.to_string();
    let mut query: Vec<(&str, &str)> = vec![
        ("batch", &batch),
        ("partitions", "0"),
        ("leaseSeconds", &lease),
    ];
    if group != QUEUE_MODE {
        query.push(("consumerGroup", group));
    }
    let mut emptied = false;
    let mut quiet_at = quiet_at;
    while now_ms() < deadline {
        let req = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &query);
        let (op, answer) = call(target, opts, client, queue, req).await;
        let invoked = op.invoke_ms;
        ops.push(op);
        let popped = match answer {
            Answer::Known(a) if a.status == 204 && invoked >= quiet_at => {
                emptied = true;
                break;
            }
            Answer::Known(a) if a.status == 200 => a
                .body
                .and_then(|b| serde_json::from_value::<PopResponse>(b).ok()),
            _ => None,
        };
        let Some(p) = popped.filter(|p| !p.messages.is_empty()) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let acks: Vec<Value> = p
            .messages
            .iter()
            .map(|m| {
                json!({"transactionId": m.transaction_id, "partitionId": m.partition_id,
                    "leaseId": m.lease_id, "status": "completed"})
            })
            .collect();
        let mut body = json!({ "acknowledgments": acks });
        if group != QUEUE_MODE {
            body["consumerGroup"] = json!(group);
        }
        let req = HttpRequest::post("/api/v1/ack/batch", &body);
        let (op, answer) = call(target, opts, client, queue, req).await;
        ops.push(op);
        let all_taken = match &answer {
            Answer::Known(a) => a
                .body
                .as_ref()
                .and_then(|b| b.as_array())
                .is_some_and(|r| r.iter().all(|i| i["success"] == json!(true))),
            Answer::Unknown(_) => false,
        };
        if !all_taken {
            // The drain itself may still hold a lease: wait it out too.
            quiet_at = quiet_at.max(now_ms() + Millis::from(opts.lease_seconds) * 1000 + 1_000);
        }
    }
    (
        ops,
        Drained {
            queue: queue.to_string(),
            group: group.to_string(),
            emptied,
        },
    )
}
