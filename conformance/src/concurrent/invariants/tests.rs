//! Each invariant on hand-built histories: one that breaks it and a clean one.

use super::*;
use crate::concurrent::drain::Drained;
use crate::concurrent::history::{Answer, Op};
use queen_reference::wire::{HttpRequest, QUEUE_MODE};
use serde_json::json;

const T: Millis = 1_700_000_000_000;
const PART: &str = "0190f0d0-0000-7000-8000-0000000000aa";
const L1: &str = "0190f0d0-0000-7000-8000-000000000001";
const L2: &str = "0190f0d0-0000-7000-8000-000000000002";

fn op(client: usize, request: HttpRequest, at: (Millis, Millis), answer: Answer) -> Op {
    Op {
        id: 0,
        client,
        key: "q".into(),
        request,
        invoke_ms: T + at.0,
        complete_ms: T + at.1,
        answer,
    }
}

fn known(status: u16, body: Option<Value>) -> Answer {
    Answer::Known(queen_reference::wire::HttpResponse { status, body })
}

fn unknown() -> Answer {
    Answer::Unknown("no answer within 10 ms".into())
}

/// A push of `txns` to q/p, answered `queued` (or unknown with `queued == false`).
fn push(txns: &[&str], at: (Millis, Millis), queued: bool) -> Op {
    let items: Vec<Value> = txns
        .iter()
        .map(|t| json!({"queue": "q", "partition": "p", "transactionId": t, "payload": 1}))
        .collect();
    let answer = if queued {
        let body: Vec<Value> = txns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({"index": i, "status": "queued", "queueName": "q",
                    "transaction_id": t, "message_id": format!("0190f0d0-0000-7000-8000-00000000010{i}")})
            })
            .collect();
        known(201, Some(json!(body)))
    } else {
        unknown()
    };
    op(
        0,
        HttpRequest::post("/api/v1/push", &json!({ "items": items })),
        at,
        answer,
    )
}

/// A pop of group `g` (None: queue mode) with 1 s leases, delivering `txns` under `lease`
/// (204 when empty).
fn pop(client: usize, g: Option<&str>, at: (Millis, Millis), lease: &str, txns: &[&str]) -> Op {
    let mut q = vec![("batch", "10"), ("leaseSeconds", "1")];
    if let Some(g) = g {
        q.push(("consumerGroup", g));
    }
    let req = HttpRequest::get("/api/v1/pop/queue/q", &q);
    if txns.is_empty() {
        return op(client, req, at, known(204, None));
    }
    let group = g.unwrap_or(QUEUE_MODE);
    let msgs: Vec<Value> = txns
        .iter()
        .map(|t| {
            json!({"id": "0190f0d0-0000-7000-8000-0000000000b1", "transactionId": t,
                "partition": "p", "partitionId": PART, "leaseId": lease, "consumerGroup": group,
                "data": 1, "createdAt": "2023-11-14T22:13:20.005Z", "producerSub": null,
                "traceId": null})
        })
        .collect();
    let body = json!({"success": true, "queue": "q", "partition": "p", "partitionId": PART,
        "leaseId": lease, "consumerGroup": group, "partitionsClaimed": 1, "messages": msgs});
    op(client, req, at, known(200, Some(body)))
}

/// An ack call of queue mode: (txn, status, lease) items, all answered `success`
/// (or unknown with `answered == false`).
fn ack(
    client: usize,
    at: (Millis, Millis),
    items: &[(&str, &str, Option<&str>)],
    answered: bool,
) -> Op {
    let acks: Vec<Value> = items
        .iter()
        .map(
            |(t, s, l)| json!({"transactionId": t, "partitionId": PART, "status": s, "leaseId": l}),
        )
        .collect();
    let req = HttpRequest::post("/api/v1/ack/batch", &json!({ "acknowledgments": acks }));
    let answer = if answered {
        let body: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(i, (t, _, _))| {
                json!({"index": i, "transactionId": t, "success": true, "error": null,
                    "leaseReleased": i + 1 == items.len(), "dlq": false, "noop": false})
            })
            .collect();
        known(200, Some(json!(body)))
    } else {
        unknown()
    };
    op(client, req, at, answer)
}

/// A drain that emptied queue mode on q (its calls are in the history already).
fn drained() -> Drain {
    Drain {
        ops: vec![],
        targets: vec![Drained::emptied_at("q", QUEUE_MODE, T + 60_000)],
        elapsed_ms: 0.0,
    }
}

fn run(ops: Vec<Op>) -> InvariantReport {
    check(&History::new(ops), &drained())
}

fn count(r: &InvariantReport, kind: &str) -> Count {
    r.counts()[kind]
}

#[test]
fn a_queued_push_never_delivered_is_lost() {
    let r = run(vec![
        push(&["a", "b"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
    ]);
    assert_eq!(count(&r, "lost"), Count { bad: 1, allowed: 0 });
    assert!(!r.passed());
    let clean = run(vec![
        push(&["a", "b"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a", "b"]),
        ack(1, (20, 25), &[("b", "completed", Some(L1))], true),
    ]);
    assert!(clean.passed(), "{:?}", clean.anomalies);
}

#[test]
fn a_push_with_unknown_outcome_may_be_absent_or_applied() {
    let absent = run(vec![
        push(&["a"], (0, 5), false),
        pop(1, None, (10, 15), L1, &[]),
    ]);
    assert!(absent.passed(), "{:?}", absent.anomalies);
    assert_eq!(count(&absent, "unknown-push"), Count { bad: 0, allowed: 1 });
    let applied = run(vec![
        push(&["a"], (0, 5), false),
        pop(1, None, (10, 15), L1, &["a"]),
    ]);
    assert!(applied.passed(), "{:?}", applied.anomalies);
    assert_eq!(applied.allowed_causes()["unknown-push/applied"], 1);
}

#[test]
fn a_delivery_nobody_pushed_is_a_phantom() {
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a", "zz"]),
    ]);
    assert_eq!(count(&r, "phantom"), Count { bad: 1, allowed: 0 });
}

#[test]
fn a_delivery_out_of_partition_order_is_bad() {
    // b was pushed after a's push completed: a has the lower offset.
    let swapped = run(vec![
        push(&["a"], (0, 5), true),
        push(&["b"], (6, 9), true),
        pop(1, None, (10, 15), L1, &["b", "a"]),
    ]);
    assert!(count(&swapped, "order").bad >= 1, "{:?}", swapped.anomalies);
    // Overlapping pushes may commit in either order: no claim about their order.
    let overlapping = run(vec![
        push(&["a"], (0, 8), true),
        push(&["b"], (2, 9), true),
        pop(1, None, (10, 15), L1, &["b", "a"]),
    ]);
    assert_eq!(
        count(&overlapping, "order").bad,
        0,
        "{:?}",
        overlapping.anomalies
    );
    // A later delivery bringing back what an earlier one skipped (the cursor was past it).
    let skipped = run(vec![
        push(&["a", "b"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["b"]),
        pop(2, None, (3000, 3005), L2, &["a", "b"]),
    ]);
    assert!(count(&skipped, "order").bad >= 1, "{:?}", skipped.anomalies);
}

#[test]
fn a_delivery_at_or_below_a_committed_cursor_is_bad() {
    let base = || {
        vec![
            push(&["a", "b"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a", "b"]),
        ]
    };
    let mut bad = base();
    bad.push(ack(1, (20, 25), &[("a", "completed", Some(L1))], true));
    // Long after the lease expired: b may come back, a must not.
    bad.push(pop(2, None, (3000, 3005), L2, &["a", "b"]));
    let r = run(bad);
    assert_eq!(
        count(&r, "past-cursor"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    let mut ok = base();
    ok.push(ack(1, (20, 25), &[("a", "completed", Some(L1))], true));
    ok.push(pop(2, None, (3000, 3005), L2, &["b"]));
    let r = run(ok);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["duplicate/lease-expiry"], 1);
    // The same ack with an unknown outcome may not have committed: no claim.
    let mut unsure = base();
    unsure.push(ack(1, (20, 25), &[("a", "completed", Some(L1))], false));
    unsure.push(pop(2, None, (3000, 3005), L2, &["a", "b"]));
    assert!(run(unsure).passed());
}

#[test]
fn two_live_leases_on_one_partition_and_group_are_bad() {
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        pop(2, None, (20, 25), L2, &["a"]),
    ]);
    assert_eq!(count(&r, "double-lease"), Count { bad: 1, allowed: 0 });
    assert_eq!(count(&r, "duplicate").bad, 1);
    // Another group has its own cursor and lease.
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        pop(2, Some("g"), (20, 25), L2, &["a"]),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    // After the 1 s lease certainly expired: allowed.
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        pop(2, None, (1100, 1105), L2, &["a"]),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
}

#[test]
fn a_later_span_claimed_under_a_live_lease_is_a_double_lease() {
    // ACK-4: the second pop got `b`, past the first lease's span, while that lease was
    // live and nothing released it (a broker that leases "the rest" of a partition).
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        push(&["b"], (16, 17), true),
        pop(2, None, (20, 25), L2, &["b"]),
        ack(1, (40, 45), &[("a", "completed", Some(L1))], true),
    ]);
    assert_eq!(
        count(&r, "double-lease"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
}

#[test]
fn an_ack_invoked_in_the_millisecond_the_next_pop_completed_may_have_released_first() {
    // The false positive once seen on a clean memory-engine run (`run --engine memory
    // --concurrency 8 --seed 9`): times are whole milliseconds, and the ack releasing L1
    // (ACK-1: it commits the whole span, so the lease is released, section 4 step 5) was
    // invoked in the very millisecond the next pop completed. It may have been applied
    // first; the linearizability search agrees. Not a double lease (ACK-4).
    let clean = |ack_at: (Millis, Millis)| {
        vec![
            push(&["a"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a"]),
            push(&["b"], (16, 17), true),
            pop(2, None, (20, 30), L2, &["b"]),
            ack(1, ack_at, &[("a", "completed", Some(L1))], true),
        ]
    };
    let r = run(clean((30, 30)));
    assert!(r.passed(), "{:?}", r.anomalies);
    // One millisecond later the ack certainly came after the claim.
    let r = run(clean((31, 31)));
    assert_eq!(
        count(&r, "double-lease"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    // The same for a redelivery: a `failed` ack (ACK-6) sharing the millisecond in
    // which the second pop completed explains it.
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        pop(2, None, (20, 30), L2, &["a"]),
        ack(1, (30, 30), &[("a", "failed", Some(L1))], true),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["duplicate/failed-retry"], 1);
}

#[test]
fn every_duplicate_needs_an_allowed_cause() {
    let head = || {
        vec![
            push(&["a", "b"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a", "b"]),
        ]
    };
    // failed on a: both come back at once (ACK-6), b acked completed is the ACK-2 clamp.
    let mut clamp = head();
    clamp.push(ack(
        1,
        (20, 25),
        &[("a", "failed", Some(L1)), ("b", "completed", Some(L1))],
        true,
    ));
    clamp.push(pop(2, None, (30, 35), L2, &["a", "b"]));
    let r = run(clamp);
    assert!(r.passed(), "{:?}", r.anomalies);
    let causes = r.allowed_causes();
    assert_eq!(causes["duplicate/failed-retry"], 1, "{causes:?}");
    assert_eq!(causes["duplicate/ack2-clamp"], 1, "{causes:?}");
    // retry with an unknown answer may have released the lease.
    let mut retry = head();
    retry.push(ack(1, (20, 25), &[("a", "retry", Some(L1))], false));
    retry.push(pop(2, None, (30, 35), L2, &["a", "b"]));
    assert!(run(retry).passed());
    // An ack without lease can release a batch another worker holds (ACK-5).
    let mut nolease = head();
    nolease.push(ack(2, (20, 25), &[("a", "retry", None)], true));
    nolease.push(pop(2, None, (30, 35), L2, &["a", "b"]));
    assert!(run(nolease).passed());
    // Nothing between the two deliveries: bad.
    let mut bare = head();
    bare.push(ack(1, (20, 25), &[("zz", "completed", Some(L2))], true));
    bare.push(pop(2, None, (30, 35), L2, &["a", "b"]));
    let r = run(bare);
    assert_eq!(
        count(&r, "duplicate"),
        Count { bad: 2, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    assert!(r.summary(&History::default(), 5).contains("BAD duplicate"));
}

#[test]
fn overlapping_pops_may_have_claimed_in_either_order() {
    // Client 2's pop (invoked second) claimed first and failed the message at once;
    // client 1's slower pop got it back: allowed (failed-retry).
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 60), L1, &["a"]),
        pop(2, None, (12, 20), L2, &["a"]),
        ack(2, (25, 30), &[("a", "failed", Some(L2))], true),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["duplicate/failed-retry"], 1);
    // Without the failure, both leases would have been live at once.
    let r = run(vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 60), L1, &["a"]),
        pop(2, None, (12, 20), L2, &["a"]),
    ]);
    assert_eq!(count(&r, "duplicate").bad, 1, "{:?}", r.anomalies);
}

#[test]
fn an_unfinished_drain_is_bad_and_checks_no_loss() {
    let h = History::new(vec![push(&["a"], (0, 5), true)]);
    let mut d = drained();
    d.targets[0].emptied = false;
    let r = check(&h, &d);
    assert_eq!(count(&r, "drain-incomplete"), Count { bad: 1, allowed: 0 });
    assert_eq!(count(&r, "lost").bad, 0);
    let j = r.to_json();
    assert_eq!(j["counts"]["drain-incomplete"]["bad"], 1);
    assert_eq!(j["passed"], false);
}

#[test]
fn a_fresh_drain_group_finds_a_message_lost_after_every_client_group_saw_it() {
    // PUSH-7 (nothing acknowledged with 201 is lost): `a` was delivered to queue mode and
    // acked, so queue mode alone proves nothing more; the drain's fresh group, subscribed
    // from the oldest message (POP-13 `all`), emptied the queue without ever seeing it.
    let ops = vec![
        push(&["a"], (0, 5), true),
        pop(1, None, (10, 15), L1, &["a"]),
        ack(1, (20, 25), &[("a", "completed", Some(L1))], true),
    ];
    let mut d = drained();
    let r = check(&History::new(ops.clone()), &d);
    assert!(r.passed(), "{:?}", r.anomalies);
    d.targets
        .push(Drained::emptied_at("q", "audit1", T + 60_000));
    let r = check(&History::new(ops), &d);
    assert_eq!(count(&r, "lost"), Count { bad: 1, allowed: 0 });
    assert!(
        r.anomalies[0].cause.contains("group audit1"),
        "{:?}",
        r.anomalies
    );
}

/// A lease extend of `lease` with `{"seconds":1}`, answered live until `until` (ms after
/// T) or `success:false` (`None`).
fn extend(at: (Millis, Millis), lease: &str, until: Option<Millis>) -> Op {
    let req = HttpRequest::post(
        format!("/api/v1/lease/{lease}/extend"),
        &json!({"seconds": 1}),
    );
    let body = match until {
        Some(u) => json!({"leaseId": lease, "success": true, "renewed": 1, "error": null,
            "expiresAt": queen_reference::time::format_iso(T + u)}),
        None => json!({"leaseId": lease, "success": false, "renewed": 0, "expiresAt": null,
            "error": "lease not found or expired"}),
    };
    op(9, req, at, known(200, Some(body)))
}

/// A drain of queue mode on q made of `ops`, whose last empty answer came from a pop
/// invoked at `at`.
fn drain_of(ops: Vec<Op>, at: Millis) -> Drain {
    Drain {
        ops,
        targets: vec![Drained::emptied_at("q", QUEUE_MODE, T + at)],
        elapsed_ms: 0.0,
    }
}

/// An empty answer to the drain's pop at `at`.
fn empty(at: (Millis, Millis)) -> Op {
    pop(8, None, at, L2, &[])
}

#[test]
fn a_message_leased_under_a_longer_observed_lease_is_not_lost() {
    // The broker leases for 300 s whatever `leaseSeconds` says: `b`, pushed after the
    // client's pop claimed the partition, stays behind that lease, and the drain's pop
    // at 3 s (when a 1 s lease would long be over) answers 204.
    let head = || {
        History::new(vec![
            push(&["a"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a"]),
            push(&["b"], (20, 25), true),
        ])
    };
    // The drain asked: L1 is live until 300 s after its pop.
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            extend((3005, 3007), L1, Some(300_010)),
            empty((3010, 3012)),
        ],
        3010,
    );
    let r = check(&head(), &d);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(count(&r, "lost"), Count::default());
    assert_eq!(count(&r, "still-leased"), Count { bad: 0, allowed: 1 });
    assert_eq!(r.allowed_causes()["still-leased/live-lease"], 1);
    // Another group's lease shown live that long bounds every lease of the history,
    // even one no extend asked about.
    let mut h = head().ops;
    h.push(pop(3, Some("g"), (30, 35), L2, &["a"]));
    let d = drain_of(
        vec![empty((3000, 3002)), extend((3005, 3007), L2, Some(300_030))],
        3000,
    );
    let r = check(&History::new(h), &d);
    assert_eq!(count(&r, "still-leased").allowed, 1, "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["still-leased/lease-bound"], 1);
    // The drain asked and the lease was gone before its last 204: `b` is lost.
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            extend((3005, 3007), L1, None),
            empty((3010, 3012)),
        ],
        3010,
    );
    let r = check(&head(), &d);
    assert_eq!(
        count(&r, "lost"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    // A 204 after the deadline the extend showed proves the loss too.
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            extend((3005, 3007), L1, Some(5_000)),
            empty((5_400, 5_402)),
        ],
        5_400,
    );
    let r = check(&head(), &d);
    assert_eq!(
        count(&r, "lost"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    // Without any extend, the 1 s lease asked for is all the broker showed: lost.
    let r = check(&head(), &drain_of(vec![empty((3000, 3002))], 3000));
    assert_eq!(
        count(&r, "lost"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
}

#[test]
fn a_pop_whose_answer_was_lost_may_hold_a_partition_for_the_observed_lease() {
    // A client's pop timed out: it may have leased the partition under an id nobody saw,
    // for as long as the broker observably leases (300 s, shown by an extend of another
    // group's lease).
    let req = HttpRequest::get(
        "/api/v1/pop/queue/q",
        &[("batch", "10"), ("leaseSeconds", "1")],
    );
    let h = History::new(vec![
        push(&["a", "c"], (0, 5), true),
        op(1, req, (10, 15), unknown()),
        pop(2, Some("g"), (20, 22), L1, &["a", "c"]),
    ]);
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            extend((3005, 3007), L1, Some(300_020)),
            empty((3010, 3012)),
        ],
        3010,
    );
    let r = check(&h, &d);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["still-leased/unseen-lease"], 2);
    // With no longer lease ever shown, the lost pop's 1 s lease was over by the drain.
    let r = check(&h, &drain_of(vec![empty((3000, 3002))], 3000));
    assert_eq!(count(&r, "lost").bad, 2, "{:?}", r.anomalies);
}

#[test]
fn a_lease_the_broker_would_not_show_holds_until_a_later_pop_gets_its_partition() {
    // The broker answers the drain's extend 404: its lease on p may live on.
    let probe = |at| {
        let Op { request, .. } = extend(at, L1, None);
        op(
            9,
            request,
            at,
            known(404, Some(json!({"error": "Not Found"}))),
        )
    };
    let h = || {
        History::new(vec![
            push(&["a"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a"]),
            push(&["b", "c"], (20, 25), true),
        ])
    };
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            probe((3005, 3007)),
            empty((30_000, 30_002)),
        ],
        30_000,
    );
    let r = check(&h(), &d);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.allowed_causes()["still-leased/unobserved-lease"], 2);
    // Once the drain got p (L1 was gone by then, POP-2), what it did not get is lost.
    let d = drain_of(
        vec![
            empty((3000, 3002)),
            probe((3005, 3007)),
            pop(8, None, (20_000, 20_002), L2, &["c"]),
            ack(8, (20_003, 20_004), &[("c", "completed", Some(L2))], true),
            empty((20_010, 20_012)),
        ],
        20_010,
    );
    let r = check(&h(), &d);
    assert_eq!(
        count(&r, "lost"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
}

/// An ack call of queue mode with a raw answer.
fn ack_answered(at: (Millis, Millis), items: &[(&str, &str, Option<&str>)], answer: Answer) -> Op {
    let Op { request, .. } = ack(1, at, items, true);
    op(1, request, at, answer)
}

#[test]
fn an_ack_answer_missing_noop_whose_success_is_true_releases_the_lease() {
    let answers = [
        known(
            200,
            Some(json!([{"index": 0, "transactionId": "a", "success": true}])),
        ),
        // Another 2xx, and an error text in another case: `success` alone is read.
        known(
            201,
            Some(json!([{"success": true, "error": "None", "noop": null}])),
        ),
    ];
    for answer in answers {
        let r = run(vec![
            push(&["a"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a"]),
            push(&["b"], (16, 17), true),
            ack_answered((18, 19), &[("a", "completed", Some(L1))], answer),
            pop(2, None, (20, 25), L2, &["b"]),
            ack(2, (30, 35), &[("b", "completed", Some(L2))], true),
        ]);
        assert!(r.passed(), "{:?}", r.anomalies);
        assert_eq!(count(&r, "double-lease"), Count::default());
    }
}

#[test]
fn an_ack_answer_that_does_not_parse_is_unknown() {
    let unreadable = [
        known(200, Some(json!({"Error": "Invalid Lease"}))),
        known(201, Some(json!("OK"))),
        known(
            200,
            Some(json!([{"index": 0, "ok": true}, {"index": 1, "success": "yes"}])),
        ),
        known(400, Some(json!({"error": "Bad Request"}))),
    ];
    for answer in unreadable {
        // It may have released L1 (acking the whole span): no double lease.
        let r = run(vec![
            push(&["a", "b"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a", "b"]),
            push(&["c"], (16, 17), true),
            ack_answered(
                (20, 25),
                &[("a", "completed", Some(L1)), ("b", "completed", Some(L1))],
                answer.clone(),
            ),
            pop(2, None, (30, 35), L2, &["c"]),
            ack(2, (40, 45), &[("c", "completed", Some(L2))], true),
        ]);
        assert!(r.passed(), "{answer:?}: {:?}", r.anomalies);
        assert_eq!(count(&r, "double-lease"), Count::default());
        // And it proves no commit: a delivered again after L1 expired is no past-cursor.
        let r = run(vec![
            push(&["a", "b"], (0, 5), true),
            pop(1, None, (10, 15), L1, &["a", "b"]),
            ack_answered((20, 25), &[("a", "completed", Some(L1))], answer.clone()),
            pop(2, None, (3000, 3005), L2, &["a", "b"]),
        ]);
        assert!(r.passed(), "{answer:?}: {:?}", r.anomalies);
        assert_eq!(count(&r, "past-cursor"), Count::default());
    }
}

/// A push of `txns` to q/p answered `status` with per-item `statuses`.
fn push_answered(txns: &[&str], at: (Millis, Millis), status: u16, item: &str) -> Op {
    let Op { request, .. } = push(txns, at, false);
    let body: Vec<Value> = txns
        .iter()
        .map(|t| json!({"status": item, "transactionId": t}))
        .collect();
    op(0, request, at, known(status, Some(json!(body))))
}

#[test]
fn a_push_answered_200_with_item_statuses_is_an_answered_push() {
    // Delivered: pushed, no phantom.
    let r = run(vec![
        push_answered(&["a"], (0, 5), 200, "queued"),
        pop(1, None, (10, 15), L1, &["a"]),
        ack(1, (20, 25), &[("a", "completed", Some(L1))], true),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(count(&r, "phantom"), Count::default());
    assert_eq!(count(&r, "unknown-push"), Count::default());
    // Queued, so required: never delivered is lost.
    let r = run(vec![
        push_answered(&["a", "b"], (0, 5), 200, "Queued"),
        pop(1, None, (10, 15), L1, &["a"]),
    ]);
    assert_eq!(
        count(&r, "lost"),
        Count { bad: 1, allowed: 0 },
        "{:?}",
        r.anomalies
    );
    // A `duplicate` item wrote nothing of its own: not required.
    let r = run(vec![push_answered(&["a"], (0, 5), 202, "duplicate")]);
    assert!(r.passed(), "{:?}", r.anomalies);
    // An item status that does not read is unknown: neither required nor a phantom.
    let r = run(vec![
        push_answered(&["a", "b"], (0, 5), 200, "stored"),
        pop(1, None, (10, 15), L1, &["a"]),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(count(&r, "unknown-push"), Count { bad: 0, allowed: 2 });
}

#[test]
fn a_pop_answered_with_another_2xx_is_a_delivery() {
    let Op { request, .. } = pop(1, None, (10, 15), L1, &["a"]);
    let body = json!({"messages": [{"transactionId": "a", "partitionId": PART,
        "partition": "p", "leaseId": L1}]});
    let r = run(vec![
        push(&["a"], (0, 5), true),
        op(1, request, (10, 15), known(202, Some(body))),
        ack(1, (20, 25), &[("a", "completed", Some(L1))], true),
    ]);
    assert!(r.passed(), "{:?}", r.anomalies);
    assert_eq!(r.deliveries, 1);
}
