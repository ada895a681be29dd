//! Property tests of the model alone (proptest, 256 cases each): random operation
//! sequences on the deterministic engine, with invariants checked after every step,
//! and the checker fed the engine's answers (it must accept all of them).

use proptest::prelude::*;
use queen_reference::checker::Checker;
use queen_reference::engine::Engine;
use queen_reference::model::State;
use queen_reference::policy::*;
use queen_reference::time::Millis;
use queen_reference::wire::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const QUEUES: [&str; 2] = ["qa", "qb.sub"];
const PARTS: [&str; 3] = ["p0", "p1", "p2"];
const GROUPS: [Option<&str>; 3] = [None, Some("g1"), Some("g2")];

/// One generated step; ack and extend pick among what earlier pops delivered.
#[derive(Clone, Debug)]
enum Step {
    Push {
        queue: usize,
        items: Vec<(usize, Option<u8>)>,
    },
    Pop {
        queue: usize,
        partition: Option<usize>,
        group: usize,
        batch: u32,
        partitions: i32,
        auto_ack: bool,
        lease: u32,
    },
    Ack {
        pick: Vec<(usize, u8, bool)>,
        group: usize,
    },
    Extend {
        pick: usize,
        seconds: Option<u32>,
    },
    Configure {
        queue: usize,
        retry_limit: u32,
        retry_delay: u32,
        dedup: u32,
    },
    /// A management read (MGMT-1..7): `kind` picks the route.
    Read {
        kind: u8,
        queue: usize,
        group: usize,
        pick: usize,
    },
    Sleep(Millis),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, prop::collection::vec((0..3usize, prop::option::of(0..6u8)), 1..4))
            .prop_map(|(queue, items)| Step::Push { queue, items }),
        4 => (0..2usize, prop::option::of(0..3usize), 0..3usize, 1..5u32, -1..3i32, prop::bool::weighted(0.15), 0..3u32)
            .prop_map(|(queue, partition, group, batch, partitions, auto_ack, lease)| Step::Pop { queue, partition, group, batch, partitions, auto_ack, lease }),
        4 => (prop::collection::vec((0..64usize, 0..4u8, prop::bool::weighted(0.8)), 1..4), 0..3usize)
            .prop_map(|(pick, group)| Step::Ack { pick, group }),
        1 => (0..64usize, prop::option::of(1..4u32)).prop_map(|(pick, seconds)| Step::Extend { pick, seconds }),
        1 => (0..2usize, 0..3u32, prop_oneof![Just(0u32), Just(500u32)], prop_oneof![Just(1u32), Just(3600u32)])
            .prop_map(|(queue, retry_limit, retry_delay, dedup)| Step::Configure { queue, retry_limit, retry_delay, dedup }),
        2 => (0..2500i64).prop_map(Step::Sleep),
        2 => (0..READS, 0..2usize, 0..3usize, 0..64usize)
            .prop_map(|(kind, queue, group, pick)| Step::Read { kind, queue, group, pick }),
    ]
}

/// Turns a step into a request, given what was delivered so far.
fn request(s: &Step, delivered: &[(PopMessage, Option<&'static str>)]) -> Option<HttpRequest> {
    let group_q = |g: usize| GROUPS[g].map(|g| ("consumerGroup", g));
    Some(match s {
        Step::Push { queue, items } => {
            let items: Vec<Value> = items
                .iter()
                .map(|(p, t)| {
                    let mut v = json!({"queue": QUEUES[*queue], "partition": PARTS[*p], "payload": {"p": p}});
                    if let Some(t) = t {
                        v["transactionId"] = json!(format!("t{t}"));
                    }
                    v
                })
                .collect();
            HttpRequest::post("/api/v1/push", &json!({ "items": items }))
        }
        Step::Pop {
            queue,
            partition,
            group,
            batch,
            partitions,
            auto_ack,
            lease,
        } => {
            let path = match partition {
                Some(p) => PopRoute::Partition(QUEUES[*queue].into(), PARTS[*p].into()).path(),
                None => PopRoute::Queue(QUEUES[*queue].into()).path(),
            };
            let (b, n, l) = (batch.to_string(), partitions.to_string(), lease.to_string());
            let mut q = vec![
                ("batch", b.as_str()),
                ("partitions", n.as_str()),
                ("leaseSeconds", l.as_str()),
            ];
            if *auto_ack {
                q.push(("autoAck", "true"));
            }
            q.extend(group_q(*group));
            HttpRequest::get(path, &q)
        }
        Step::Ack { pick, group } => {
            if delivered.is_empty() {
                return None;
            }
            let items: Vec<Value> = pick
                .iter()
                .map(|(i, st, with_lease)| {
                    let (m, _) = &delivered[i % delivered.len()];
                    let status = ["completed", "failed", "retry", "dlq"][*st as usize];
                    let mut v = json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status});
                    if *with_lease {
                        v["leaseId"] = json!(m.lease_id);
                    }
                    v
                })
                .collect();
            let mut body = json!({ "acknowledgments": items });
            if let Some(g) = GROUPS[*group] {
                body["consumerGroup"] = json!(g);
            }
            HttpRequest::post("/api/v1/ack/batch", &body)
        }
        Step::Extend { pick, seconds } => {
            let (m, _) = delivered.get(pick % delivered.len().max(1))?;
            if m.lease_id.is_empty() {
                return None;
            }
            let body = seconds.map_or(vec![], |s| format!("{{\"seconds\":{s}}}").into_bytes());
            HttpRequest::post_raw(format!("/api/v1/lease/{}/extend", m.lease_id), body)
        }
        Step::Configure {
            queue,
            retry_limit,
            retry_delay,
            dedup,
        } => HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": QUEUES[*queue], "options": {"retryLimit": retry_limit, "retryDelay": retry_delay, "dedupWindowSeconds": dedup, "leaseTime": 2}}),
        ),
        Step::Read {
            kind,
            queue,
            group,
            pick,
        } => read(
            *kind,
            QUEUES[*queue],
            GROUPS[*group],
            delivered.get(pick % delivered.len().max(1)),
        ),
        Step::Sleep(_) => return None,
    })
}

/// How many management reads [`read`] builds.
const READS: u8 = 14;

/// The management read `kind`, on `queue` and `group`, or about a delivered message.
fn read(
    kind: u8,
    queue: &str,
    group: Option<&str>,
    m: Option<&(PopMessage, Option<&'static str>)>,
) -> HttpRequest {
    let g = group.unwrap_or(QUEUE_MODE);
    let page = [("limit", "2"), ("offset", "1")];
    match kind {
        0 => HttpRequest::get("/api/v1/resources/overview", &[]),
        1 => HttpRequest::get("/api/v1/status", &[]),
        2 => HttpRequest::get("/api/v1/resources/queues", &page),
        3 => HttpRequest::get(format!("/api/v1/resources/queues/{queue}"), &[]),
        4 => HttpRequest::get(format!("/api/v1/status/queues/{queue}"), &[]),
        5 => HttpRequest::get(
            format!("/api/v1/resources/queues/{queue}/depth"),
            &[("group", g)],
        ),
        6 => HttpRequest::get(format!("/api/v1/resources/queues/{queue}/depth"), &[]),
        7 => HttpRequest::get("/api/v1/resources/partitions", &[("queue", queue)]),
        8 => HttpRequest::get("/api/v1/resources/namespaces", &[]),
        9 => HttpRequest::get("/api/v1/consumer-groups", &[]),
        10 => HttpRequest::get(format!("/api/v1/consumer-groups/{g}"), &[]),
        11 => HttpRequest::get("/api/v1/consumer-groups/lagging", &[("minLagSeconds", "1")]),
        12 => HttpRequest::get(
            "/api/v1/messages",
            &[("queue", queue), ("consumerGroup", g)],
        ),
        _ => match m {
            Some((m, _)) => HttpRequest::get(
                format!("/api/v1/messages/{}/{}", m.partition_id, m.transaction_id),
                &[],
            ),
            None => HttpRequest::get("/api/v1/resources/tasks", &[]),
        },
    }
}

/// Cursor, lease and retry facts of a state, by (partition, group).
fn cursors(st: &State) -> BTreeMap<(u32, String), (u32, BTreeMap<u32, u32>)> {
    st.partitions
        .iter()
        .flatten()
        .flat_map(|p| {
            p.cursors
                .iter()
                .map(move |(g, c)| ((p.handle.0, g.clone()), (c.committed, c.retries.clone())))
        })
        .collect()
}

/// The offset of a message in its partition.
fn offset_of(p: &queen_reference::model::Partition, h: queen_reference::model::MsgH) -> u32 {
    p.messages.iter().position(|m| m.msg == h).unwrap() as u32 + 1
}

/// Runs the steps on an engine, checking the model invariants after each one.
/// The invariants, each checked by its own property test.
const CURSOR_MONOTONE: u8 = 1;
const BUDGET: u8 = 2;
const DEAD_LETTERS: u8 = 4;
const ONE_LEASE: u8 = 8;
const ORDER: u8 = 16;
const NO_VANISH: u8 = 32;
const NO_SKIP: u8 = 64;

fn run_invariants(steps: &[Step], checks: u8) -> Result<(), TestCaseError> {
    let on = |c: u8| checks & c != 0;
    let mut e = Engine::default();
    let mut now: Millis = 1_800_000_000_000;
    let mut delivered: Vec<(PopMessage, Option<&'static str>)> = Vec::new();
    // (partitionId, group) -> (lease id, deadline) of the lease a pop handed out.
    let mut live: BTreeMap<(String, String), (String, Millis)> = BTreeMap::new();
    let mut queued: BTreeSet<String> = BTreeSet::new();
    // (partition, group) -> the highest offset the group acknowledged or autoAck'ed.
    let mut endorsed: BTreeMap<(u32, String), u32> = BTreeMap::new();
    for s in steps {
        if let Step::Sleep(ms) = s {
            now += ms;
            continue;
        }
        let Some(req) = request(s, &delivered) else {
            continue;
        };
        let before = e.state.clone();
        let r = e.handle(&req, now);
        let after = &e.state;
        if let Step::Read { .. } = s {
            // MGMT-1: a read changes nothing, and answers 200 or, for something named
            // that does not exist, 404.
            prop_assert!(
                before == *after,
                "a management read changed the state: {} {}",
                req.method,
                req.path
            );
            prop_assert!(
                matches!(r.status, 200 | 404),
                "{} {} answered {:?}",
                req.method,
                req.path,
                r
            );
        }
        // A cursor never moves back; retries change only in acks, by one, at a failed offset.
        let (cb, ca) = (cursors(&before), cursors(after));
        for (k, (c0, r0)) in &cb {
            let (c1, r1) = &ca[k];
            prop_assert!(
                !on(CURSOR_MONOTONE) || c1 >= c0,
                "cursor {k:?} moved back {c0} -> {c1}"
            );
            if !on(BUDGET) {
                continue;
            }
            for (off, n1) in r1 {
                let n0 = r0.get(off).copied().unwrap_or(0);
                if !matches!(s, Step::Ack { .. }) {
                    prop_assert_eq!(*n1, n0, "ACK-7: retries changed outside an ack at {:?}", k);
                } else {
                    prop_assert!(*n1 <= n0 + 1, "more than one retry charged at one offset");
                }
            }
            let charged = r1
                .iter()
                .filter(|(o, n)| **n > r0.get(o).copied().unwrap_or(0))
                .count();
            prop_assert!(
                charged <= 1,
                "step 3: at most one retry charged per (partition, group) per call"
            );
        }
        // A dead letter only through dlq, or a failed ack on an exhausted offset.
        for d in after
            .dead_letters
            .iter()
            .skip(before.dead_letters.len())
            .filter(|_| on(DEAD_LETTERS))
        {
            let Step::Ack { .. } = s else {
                return Err(TestCaseError::fail("dead letter outside an ack"));
            };
            let p = after.part(d.part).unwrap();
            let txn = &p.at(d.offset).transaction_id;
            let pid = e.ids.parts.id(d.part).unwrap();
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let statuses: Vec<&str> = body["acknowledgments"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["transactionId"] == json!(txn) && a["partitionId"] == json!(pid))
                .map(|a| a["status"].as_str().unwrap())
                .collect();
            let limit = after.queues[&p.queue].options.retry_limit;
            let spent = cb
                .get(&(d.part.0, d.group.clone()))
                .and_then(|(_, r)| r.get(&d.offset).copied())
                .unwrap_or(0);
            prop_assert!(
                statuses.contains(&"dlq") || (statuses.contains(&"failed") && spent >= limit),
                "DLQ-1: dead letter without dlq or spent budget ({statuses:?}, {spent}/{limit})"
            );
        }
        match s {
            Step::Push { .. } => {
                for item in
                    serde_json::from_value::<Vec<PushResult>>(r.body.clone().unwrap()).unwrap()
                {
                    if item.status == PushStatus::Queued {
                        queued.insert(item.message_id);
                    }
                }
            }
            Step::Pop { group, .. } if r.status == 200 => {
                let p: PopResponse = serde_json::from_value(r.body.clone().unwrap()).unwrap();
                let g = p.consumer_group.clone();
                let mut parts: Vec<&str> = vec![];
                for m in &p.messages {
                    if !parts.contains(&m.partition_id.as_str()) {
                        parts.push(&m.partition_id);
                    }
                }
                for pid in parts {
                    // ACK-4: nobody else holds a live lease on this (partition, group).
                    if let Some((lease, deadline)) = live.get(&(pid.to_string(), g.clone())) {
                        prop_assert!(
                            !on(ONE_LEASE) || *deadline <= now,
                            "ACK-4: lease {lease} still live when another pop claimed {pid}"
                        );
                    }
                    if !p.lease_id.is_empty() {
                        let ph = e.ids.parts.handle(pid).unwrap();
                        let deadline = e.state.part(ph).unwrap().cursors[&g]
                            .lease
                            .as_ref()
                            .unwrap()
                            .deadline
                            .lo;
                        live.insert((pid.to_string(), g.clone()), (p.lease_id.clone(), deadline));
                    } else {
                        live.remove(&(pid.to_string(), g.clone()));
                    }
                    // Per-partition order: consecutive offsets right after the cursor.
                    let ph = e.ids.parts.handle(pid).unwrap();
                    let part = before.part(ph).unwrap();
                    let start = before
                        .part(ph)
                        .unwrap()
                        .cursors
                        .get(&g)
                        .map_or(0, |c| c.committed);
                    let offs: Vec<u32> = p
                        .messages
                        .iter()
                        .filter(|m| m.partition_id == pid)
                        .map(|m| offset_of(part, e.ids.msgs.handle(&m.id).unwrap()))
                        .collect();
                    let want: Vec<u32> = (start + 1..=start + offs.len() as u32).collect();
                    prop_assert!(
                        !on(ORDER) || offs == want,
                        "{:?} != {:?}: order: a partition's span starts after the cursor",
                        offs,
                        want,
                    );
                }
                for m in &p.messages {
                    if p.lease_id.is_empty() {
                        let ph = e.ids.parts.handle(&m.partition_id).unwrap();
                        let off =
                            offset_of(before.part(ph).unwrap(), e.ids.msgs.handle(&m.id).unwrap());
                        let best = endorsed.entry((ph.0, g.clone())).or_default();
                        *best = (*best).max(off);
                    }
                    delivered.push((m.clone(), GROUPS[*group]));
                }
            }
            Step::Ack { .. } => {
                let body: Value = serde_json::from_slice(&req.body).unwrap();
                let g = body["consumerGroup"]
                    .as_str()
                    .unwrap_or(QUEUE_MODE)
                    .to_string();
                let results: Vec<AckResult> =
                    serde_json::from_value(r.body.clone().unwrap()).unwrap();
                for (a, res) in body["acknowledgments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(&results)
                {
                    if res.success {
                        let ph = e
                            .ids
                            .parts
                            .handle(a["partitionId"].as_str().unwrap())
                            .unwrap();
                        let off = before
                            .part(ph)
                            .unwrap()
                            .txn_offset(a["transactionId"].as_str().unwrap())
                            .unwrap();
                        let best = endorsed.entry((ph.0, g.clone())).or_default();
                        *best = (*best).max(off);
                    }
                    // ACK-2: an accepted failure that comes back is never passed by the cursor.
                    let status = a["status"].as_str().unwrap();
                    if on(NO_SKIP)
                        && res.success
                        && !res.dlq
                        && (status == "failed" || status == "retry")
                    {
                        let ph = e
                            .ids
                            .parts
                            .handle(a["partitionId"].as_str().unwrap())
                            .unwrap();
                        let off = before
                            .part(ph)
                            .unwrap()
                            .txn_offset(a["transactionId"].as_str().unwrap())
                            .unwrap();
                        let c = e.state.part(ph).unwrap().cursors[&g].committed;
                        prop_assert!(c < off, "ACK-2: cursor {c} passed the failed offset {off}");
                    }
                    if res.lease_released {
                        live.remove(&(a["partitionId"].as_str().unwrap().to_string(), g.clone()));
                    }
                }
            }
            Step::Extend { .. } => {
                let res: ExtendResponse = serde_json::from_value(r.body.clone().unwrap()).unwrap();
                for ((_, _), (lease, deadline)) in live.iter_mut() {
                    if *lease == res.lease_id && *deadline > now {
                        *deadline =
                            queen_reference::time::parse_iso(res.expires_at.as_deref().unwrap())
                                .unwrap();
                    }
                }
            }
            _ => {}
        }
        // ACK-1: a cursor only reaches offsets its group acknowledged (cumulatively) or
        // took with autoAck; nothing is committed behind a group's back.
        for ((part, g), (c, _)) in cursors(&e.state) {
            let best = endorsed.get(&(part, g.clone())).copied().unwrap_or(0);
            prop_assert!(!on(NO_VANISH) || c <= best, "cursor of {g} on partition {part} at {c}, beyond anything it acknowledged ({best})");
        }
        if delivered.len() > 64 {
            delivered.drain(..delivered.len() - 64);
        }
    }
    // No pushed message vanishes: a fresh group drains every queue and sees them all,
    // and every group that has a cursor can still reach what it has not committed.
    now += 10_000_000;
    let mut drained = BTreeSet::new();
    for q in QUEUES {
        loop {
            let r = e.handle(
                &HttpRequest::get(
                    PopRoute::Queue(q.into()).path(),
                    &[
                        ("consumerGroup", "drain"),
                        ("batch", "1000"),
                        ("partitions", "0"),
                        ("autoAck", "true"),
                    ],
                ),
                now,
            );
            if r.status == 204 {
                break;
            }
            let p: PopResponse = serde_json::from_value(r.body.unwrap()).unwrap();
            drained.extend(p.messages.into_iter().map(|m| m.id));
        }
    }
    for id in &queued {
        prop_assert!(
            !on(NO_VANISH) || drained.contains(id),
            "message {id} vanished"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// A cursor never moves back.
    #[test]
    fn cursor_never_moves_back(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, CURSOR_MONOTONE)?;
    }

    /// At most one live lease per (partition, group), seen from the outside (ACK-4).
    #[test]
    fn at_most_one_live_lease_per_partition_and_group(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, ONE_LEASE)?;
    }

    /// No pushed message vanishes: a fresh group drains every one, and a cursor only
    /// reaches what its group acknowledged or took with autoAck (ACK-1).
    #[test]
    fn no_pushed_message_ever_vanishes(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, NO_VANISH)?;
    }

    /// Per-partition order holds across redeliveries: a delivered span is consecutive
    /// offsets right after the group's cursor.
    #[test]
    fn per_partition_order_holds_across_redeliveries(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, ORDER)?;
    }

    /// A message becomes a dead letter only through `dlq` or a failed ack that finds
    /// its `retryLimit` spent (DLQ-1).
    #[test]
    fn dead_letters_only_through_dlq_or_a_spent_budget(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, DEAD_LETTERS)?;
    }

    /// A failure is never skipped by a later success: the cursor stops below every
    /// offset that comes back (ACK-2).
    #[test]
    fn a_failure_is_never_skipped_by_a_later_success(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, NO_SKIP)?;
    }

    /// Lease expiry never charges the retry budget; an ack charges at most one retry
    /// per (partition, group) (ACK-7, ACK step 3).
    #[test]
    fn lease_expiry_never_charges_the_budget(steps in prop::collection::vec(step(), 1..60)) {
        run_invariants(&steps, BUDGET)?;
    }

    /// The checker accepts every answer of the engine, whatever its policy, with the
    /// engine answering anywhere inside each request's time interval (section 13).
    #[test]
    fn checker_accepts_the_engine_under_any_policy_and_timing(
        steps in prop::collection::vec((step(), 0..400i64, 0..100u8), 1..40),
        alt in any::<bool>(),
        project in any::<bool>(),
    ) {
        let mut policy = if alt {
            Policy::alternative()
        } else {
            Policy::default()
        };
        if project {
            // A broker that also departs from every PROJECT decision modelled as a
            // choice: accepted by a lax checker (which records it), as ours is strictly.
            let p = Policy::project_alternative();
            policy.ack_outside_span = p.ack_outside_span;
            policy.ack_charges_every_failure = p.ack_charges_every_failure;
            policy.ack_releases_on_partial_commit = p.ack_releases_on_partial_commit;
            policy.txn_keeps_failed_ack = p.txn_keeps_failed_ack;
            policy.subscription_per_partition = p.subscription_per_partition;
        }
        let mut e = Engine { policy, ..Engine::default() };
        let mut c = Checker::new();
        c.skew_ms = 0;
        c.strict_project = !project;
        let mut now: Millis = 1_800_000_000_000;
        let mut delivered: Vec<(PopMessage, Option<&'static str>)> = Vec::new();
        for (s, took, at_pct) in &steps {
            if let Step::Sleep(ms) = s {
                now += ms;
                continue;
            }
            let Some(req) = request(s, &delivered) else { continue };
            let at = now + took * (*at_pct as i64) / 100;
            let r = e.handle(&req, at);
            if let Err(err) = c.step(&req, now, now + took, &r) {
                return Err(TestCaseError::fail(format!("{err:?}")));
            }
            now += took;
            if r.status == 200 && matches!(s, Step::Pop { .. }) {
                let p: PopResponse = serde_json::from_value(r.body.unwrap()).unwrap();
                delivered.extend(p.messages.into_iter().map(|m| (m, None)));
            }
            if delivered.len() > 64 {
                delivered.drain(..delivered.len() - 64);
            }
        }
        // The rules of the PROJECT points the policy above departs from.
        use queen_reference::rules::{ACK_10, ACK_STEP_3, ACK_STEP_5, POP_18, TXN_2};
        const PROJECT_POINTS: [queen_reference::rules::RuleId; 5] = [ACK_10, ACK_STEP_3, ACK_STEP_5, TXN_2, POP_18];
        for d in c.findings() {
            prop_assert!(project && PROJECT_POINTS.contains(&d.rule), "{d}");
        }
    }
}
