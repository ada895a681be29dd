//! The final drain of a concurrent run: every queue of the history is popped with every
//! consumer group the history used (and queue mode), acking each delivery `completed`
//! with its lease, until the broker answers empty at a moment when every lease the clients
//! may still hold has expired and every retry delay has passed. Its calls are recorded
//! like the workload's, so [`super::invariants`] checks them together: what the drain
//! does not find was lost. Optionally the drain also reads every queue with a group no
//! client used ([`DrainOptions::fresh_group`], subscribed from the oldest message,
//! POP-13): it must receive every message answered 201, so a message that disappeared
//! after every client group had already seen it (a write acknowledged before it was
//! durable, then lost in a crash) is found too.
//!
//! When leases expire is the broker's to decide: it may ignore `leaseSeconds` (a broker
//! that leased 300 s had every message its clients still held counted lost, as the drain
//! took the clients' 1 s leases to be over). So the settle time derived from the
//! requested leases is only when the drain starts to trust an empty answer, and an empty
//! answer ends a `(queue, group)` at once only when nothing answered 201 is missing for
//! that group (our own broker: no call more, no wait more). Otherwise the drain asks the
//! broker about every lease the history names on the partitions of the missing
//! messages, once each, with `POST /api/v1/lease/{leaseId}/extend` `{"seconds":1}`: the
//! answer says whether the lease is gone (never revived, LEASE-1) or live and until when
//! (`expiresAt`: extend never shortens a lease, so that is its real deadline, or at
//! most a second past our asking, which the drain then waits out too). With that
//! evidence, judged by [`super::invariants::leases`] exactly as the invariants judge it
//! afterwards, it pops on until an empty answer comes when no lease can still hold a
//! missing message (they are lost); when the last such lease outlives the drain's time
//! it stops there, and those messages are `still-leased` (allowed), not lost. A broker
//! whose extend answer does not read shows no deadline: the drain then keeps trying
//! until a second before its own, and what a pop got in the meantime proves the leases
//! on that partition gone.

use super::answers::{read_acks, read_pop, PopRead, Popped};
use super::history::{Answer, History, Op};
use super::invariants::facts::Facts;
use super::invariants::leases::Leases;
use crate::target::Target;
use crate::transport::{now_ms, transmit};
use queen_reference::time::Millis;
use queen_reference::wire::{parse_request, HttpRequest, PopRoute, Request, QUEUE_MODE};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How the drain runs.
#[derive(Clone, Debug)]
pub struct DrainOptions {
    /// `leaseSeconds` of the drain's own pops.
    pub(crate) lease_seconds: u32,
    /// An empty answer is trusted only when invoked this long after the history's last
    /// completion: the longest lease a client asked for plus the retry delay (a longer
    /// lease the broker applies is found by asking it, see the module comment).
    pub(crate) settle_ms: Millis,
    /// Past this long, a `(queue, group)` still not empty is reported unfinished.
    pub max_ms: Millis,
    /// Client-side timeout of one drain call (ms).
    pub(crate) op_timeout_ms: u64,
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
    pub(crate) fn after_leases(lease_ms: Millis) -> DrainOptions {
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
    /// The queue drained.
    pub queue: String,
    /// The consumer group it was drained for.
    pub group: String,
    /// Ended by an empty answer when no lease could still hold a missing message, or
    /// when only leases outliving the drain's time could.
    pub emptied: bool,
    /// When the pop whose empty answer ended it was invoked (client clock).
    pub(crate) empty_at: Option<Millis>,
}

impl Drained {
    /// A `(queue, group)` whose last empty answer came from a pop invoked at `at`.
    pub fn emptied_at(queue: &str, group: &str, at: Millis) -> Drained {
        Drained {
            queue: queue.to_string(),
            group: group.to_string(),
            emptied: true,
            empty_at: Some(at),
        }
    }
}

/// The drain's calls and what it emptied.
#[derive(Clone, Debug, Default)]
pub struct Drain {
    /// The drain's pops and acks, as recorded in the history.
    pub ops: Vec<Op>,
    /// Each `(queue, group)` drained, and whether it was emptied.
    pub targets: Vec<Drained>,
    /// How long the drain took (ms).
    pub elapsed_ms: f64,
}

impl Drain {
    /// Whether every `(queue, group)` was emptied.
    pub fn complete(&self) -> bool {
        self.targets.iter().all(|t| t.emptied)
    }

    /// `queue group` of each target not emptied.
    pub(crate) fn unfinished(&self) -> Vec<String> {
        self.targets
            .iter()
            .filter(|t| !t.emptied)
            .map(|t| format!("queue {} group {}", t.queue, t.group))
            .collect()
    }

    /// The groups emptied on `queue`: for each, every message must have been delivered,
    /// or be still leased ([`super::invariants::leases`]).
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
fn queues_and_groups(history: &History) -> BTreeMap<String, BTreeSet<String>> {
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
    let turns = Arc::new(tokio::sync::Semaphore::new(opts.parallel.max(1)));
    let mut by_queue = history.partitions();
    let mut tasks = Vec::new();
    let mut client = first_client;
    for (queue, groups) in &plan {
        let seen = Arc::new(by_queue.remove(queue).unwrap_or_default());
        for g in groups {
            let (target, opts, queue, g) = (target.clone(), opts.clone(), queue.clone(), g.clone());
            let (turns, seen) = (turns.clone(), seen.clone());
            let c = client;
            client += 1;
            let when = Times {
                quiet_at,
                deadline,
                horizon: last,
            };
            tasks.push(tokio::spawn(async move {
                let _turn = turns.acquire_owned().await.expect("never closed");
                drain_one(&target, &opts, c, (&queue, &g), &seen, when).await
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
    let req = target.authorized(req);
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

/// The moments one `(queue, group)` is drained by.
#[derive(Clone, Copy, Debug)]
struct Times {
    /// Empty answers are trusted from here on.
    quiet_at: Millis,
    /// The drain gives up here.
    deadline: Millis,
    /// The workload's last completion.
    horizon: Millis,
}

/// What an empty answer means for one `(queue, group)`.
#[derive(Debug, PartialEq)]
enum Settle {
    /// Done: nothing missing, or no lease can still hold what is (lost), or only
    /// leases outliving the drain can (still leased).
    Done,
    /// Ask the broker about these leases first.
    Probe(BTreeSet<String>),
    /// A lease may hold a missing message until then: trust no empty answer before.
    Until(Millis),
}

/// Judges an empty answer to a pop invoked at `at`, on the history's calls of the
/// queue (`seen`) and the drain's own so far; `asked`: the leases probed already (each
/// is asked once, even if its answer did not read).
fn settle(
    (seen, own): (&[Op], &[Op]),
    (queue, group): (&str, &str),
    at: Millis,
    (skew, asked): (Millis, &BTreeSet<String>),
    when: Times,
) -> Settle {
    let f = Facts::from_ops(seen.iter().chain(own));
    let missing = f.missing(queue, group);
    if missing.is_empty() {
        return Settle::Done;
    }
    let leases = Leases::new(&f, skew, when.horizon);
    let unprobed: BTreeSet<String> = missing
        .iter()
        .flat_map(|m| leases.unprobed(group, m))
        .filter(|l| !asked.contains(l))
        .collect();
    if !unprobed.is_empty() {
        return Settle::Probe(unprobed);
    }
    let Some(held) = missing
        .iter()
        .filter_map(|m| leases.holding(group, m, at))
        .max_by_key(|h| h.until)
    else {
        return Settle::Done;
    };
    // Past the deadline the broker showed; or, when it would not show one, as late as
    // the drain may (what is still missing then is `still-leased`).
    let last_try = when.deadline - LAST_TRY_MS;
    match held.until.saturating_add(2 * skew + 300) {
        t if t < when.deadline => Settle::Until(t),
        _ if held.cause == "unobserved-lease" && at < last_try => Settle::Until(last_try),
        _ => Settle::Done,
    }
}

/// How long before its deadline the drain makes its last try for a lease the broker
/// would not show the deadline of.
const LAST_TRY_MS: Millis = 1_000;

/// Asks the broker about `lease` (LEASE-1: an extend never shortens a lease, and a
/// second is the least it can ask for).
fn probe(lease: &str) -> HttpRequest {
    HttpRequest::post(
        format!("/api/v1/lease/{lease}/extend"),
        &json!({"seconds": 1}),
    )
}

/// Completes every message one drain pop delivered, in one batch; whether the broker
/// took every ack.
async fn ack_all(
    target: &Target,
    opts: &DrainOptions,
    client: usize,
    (queue, group): (&str, &str),
    msgs: &[Popped],
) -> (Op, bool) {
    let acks: Vec<Value> = msgs
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
    let all_taken = read_acks(&answer).is_some_and(|r| {
        r.len() == acks.len() && r.iter().all(|i| i.as_ref().is_some_and(|i| i.success))
    });
    (op, all_taken)
}

/// Drains one queue (as one group) until the broker shows it empty and no lease can
/// still bring a message back, completing whatever it delivers.
async fn drain_one(
    target: &Target,
    opts: &DrainOptions,
    client: usize,
    (queue, group): (&str, &str),
    seen: &[Op],
    when: Times,
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
    let mut empty_at = None;
    let mut quiet_at = when.quiet_at;
    let skew = target.settings.skew_ms;
    let mut asked = BTreeSet::new();
    while now_ms() < when.deadline {
        let req = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &query);
        let (op, answer) = call(target, opts, client, queue, req).await;
        let invoked = op.invoke_ms;
        ops.push(op);
        let msgs = match read_pop(&answer) {
            PopRead::Empty if invoked >= quiet_at => {
                let facts = (seen, ops.as_slice());
                match settle(facts, (queue, group), invoked, (skew, &asked), when) {
                    Settle::Done => {
                        empty_at = Some(invoked);
                        break;
                    }
                    Settle::Probe(leases) => {
                        for l in leases {
                            ops.push(call(target, opts, client, queue, probe(&l)).await.0);
                            asked.insert(l);
                        }
                        continue;
                    }
                    Settle::Until(t) => {
                        quiet_at = t;
                        None
                    }
                }
            }
            PopRead::Delivered(m) => Some(m),
            _ => None,
        };
        let Some(msgs) = msgs else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let (op, all_taken) = ack_all(target, opts, client, (queue, group), &msgs).await;
        ops.push(op);
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
            emptied: empty_at.is_some(),
            empty_at,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_reference::time::format_iso;
    use queen_reference::wire::HttpResponse;

    const T: Millis = 1_700_000_000_000;
    const PART: &str = "0190f0d0-0000-7000-8000-0000000000aa";
    const L1: &str = "0190f0d0-0000-7000-8000-000000000001";

    fn op(request: HttpRequest, at: Millis, status: u16, body: Option<Value>) -> Op {
        Op {
            id: 0,
            client: 0,
            key: "q".into(),
            request,
            invoke_ms: T + at,
            complete_ms: T + at + 2,
            answer: Answer::Known(HttpResponse { status, body }),
        }
    }

    /// The workload: `a` pushed, delivered to queue mode under L1 and never acked; `b`
    /// pushed after, never delivered.
    fn seen() -> Vec<Op> {
        let push = |t: &str, at| {
            let item = json!({"queue": "q", "partition": "p", "transactionId": t});
            op(
                HttpRequest::post("/api/v1/push", &json!({"items": [item]})),
                at,
                201,
                Some(json!([{"index": 0, "status": "queued", "transaction_id": t}])),
            )
        };
        let pop = op(
            HttpRequest::get("/api/v1/pop/queue/q", &[("leaseSeconds", "1")]),
            10,
            200,
            Some(
                json!({"messages": [{"transactionId": "a", "partitionId": PART,
                "partition": "p", "leaseId": L1}]}),
            ),
        );
        vec![push("a", 0), pop, push("b", 20)]
    }

    fn extended(until: Option<Millis>) -> Op {
        let body = match until {
            Some(u) => json!({"success": true, "expiresAt": format_iso(T + u)}),
            None => json!({"success": false, "expiresAt": null}),
        };
        op(probe(L1), 3_005, 200, Some(body))
    }

    fn times() -> Times {
        Times {
            quiet_at: T + 2_300,
            deadline: T + 31_000,
            horizon: T + 22,
        }
    }

    fn judge(own: &[Op], at: Millis) -> Settle {
        let asked = BTreeSet::new();
        settle(
            (&seen(), own),
            ("q", QUEUE_MODE),
            T + at,
            (5, &asked),
            times(),
        )
    }

    #[test]
    fn an_empty_answer_with_nothing_missing_ends_at_once() {
        let got_b = op(
            HttpRequest::get("/api/v1/pop/queue/q", &[]),
            3_000,
            200,
            Some(
                json!({"messages": [{"transactionId": "b", "partitionId": PART,
                "partition": "p", "leaseId": L1}]}),
            ),
        );
        assert_eq!(judge(&[got_b], 3_100), Settle::Done);
    }

    #[test]
    fn missing_messages_make_the_drain_ask_about_the_leases_on_their_partition() {
        assert_eq!(
            judge(&[], 3_000),
            Settle::Probe(BTreeSet::from([L1.to_string()]))
        );
        // Asked once only, even when the answer did not read.
        let asked = BTreeSet::from([L1.to_string()]);
        let s = settle(
            (&seen(), &[]),
            ("q", QUEUE_MODE),
            T + 3_000,
            (5, &asked),
            times(),
        );
        assert_eq!(s, Settle::Done);
    }

    #[test]
    fn the_drain_waits_for_a_lease_shown_live_or_stops_when_it_outlives_the_drain() {
        // Live until 10 s: trust no empty answer before then.
        let s = judge(&[extended(Some(10_000))], 3_010);
        assert_eq!(s, Settle::Until(T + 10_000 + 10 + 300));
        // Live for 300 s, past the drain's time: stop now (`still-leased`, allowed).
        assert_eq!(judge(&[extended(Some(300_010))], 3_010), Settle::Done);
        // Gone: the next empty answer shows `b` lost.
        assert_eq!(judge(&[extended(None)], 3_010), Settle::Done);
    }

    #[test]
    fn a_lease_the_broker_would_not_show_is_waited_for_as_long_as_the_drain_may() {
        let unread = op(probe(L1), 3_005, 404, None);
        let last_try = T + 31_000 - LAST_TRY_MS;
        assert_eq!(
            judge(std::slice::from_ref(&unread), 3_010),
            Settle::Until(last_try)
        );
        assert_eq!(judge(&[unread], 30_000), Settle::Done);
    }
}
