//! One test (at least) per ack rule (PROTOCOL.md section 4) and per evaluation step,
//! on the deterministic engine.

mod common;
use common::*;
use queen_reference::wire::*;
use serde_json::json;

/// Pushes `n` messages `m1..mn` to `q/p` and pops them for group `g`.
fn leased(b: &mut Broker, q: &str, g: &str, n: usize) -> PopResponse {
    let txns: Vec<String> = (1..=n).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = txns.iter().map(String::as_str).collect();
    b.push_many(q, "p", &refs);
    b.pop(q, &[("consumerGroup", g), ("batch", "100")]).unwrap()
}

fn again(b: &mut Broker, q: &str, g: &str) -> Vec<String> {
    Broker::txns(&b.pop(q, &[("consumerGroup", g), ("batch", "100")]))
}

#[test]
fn ack_0_every_well_formed_call_is_200_and_malformed_is_400_changing_nothing() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 1);
    let before = b.e.state.clone();
    for body in [
        json!({"partitionId": p.partition_id}),
        json!({"transactionId": "m1"}),
        json!({"transactionId": "m1", "partitionId": p.partition_id, "status": "finished"}),
        json!({"transactionId": "m1", "partitionId": "not-a-uuid"}),
    ] {
        assert_eq!(b.post("/api/v1/ack", body).status, 400);
    }
    assert_eq!(
        b.post("/api/v1/ack/batch", json!({"acknowledgments": "x"}))
            .status,
        400
    );
    assert_eq!(b.e.state, before);
    let r = b
        .ack(json!({"transactionId": "nope", "partitionId": p.partition_id, "consumerGroup": "g"}));
    assert!(!r.success, "refused, yet 200");
}

#[test]
fn ack_1_acking_offset_n_completes_everything_below() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 3);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[2], "completed")]);
    assert!(r[0].success && r[0].lease_released && !r[0].noop);
    assert!(again(&mut b, "q", "g").is_empty());
}

#[test]
fn ack_2_failure_clamps_later_success() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 9);
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[4], "failed"),
            ack_of(&p.messages[8], "completed"),
        ],
    );
    assert!(r.iter().all(|x| x.success && x.lease_released));
    assert!(
        !r[1].noop,
        "[OPEN] ours: a blocked completion is success, not noop"
    );
    b.advance(1000); // retryDelay
    assert_eq!(again(&mut b, "q", "g"), vec!["m5", "m6", "m7", "m8", "m9"]);
}

#[test]
fn ack_2_precedence_dlq_beats_failed_beats_retry_at_one_offset() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 2);
    let m = &p.messages[0];
    let r = b.ack_batch(
        Some("g"),
        vec![ack_of(m, "retry"), ack_of(m, "dlq"), ack_of(m, "failed")],
    );
    assert!(r.iter().all(|x| x.dlq), "the offset became a dead letter");
    assert!(r.iter().all(|x| !x.lease_released), "m2 is still leased");
    assert_eq!(
        b.dlq(&[("queue", "q")]).total,
        1,
        "filed once per message and group"
    );
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "completed")]);
    assert!(again(&mut b, "q", "g").is_empty());
    let p = leased(&mut b, "q2", "g", 1);
    let m = &p.messages[0];
    b.ack_batch(
        Some("g"),
        vec![
            ack_of(m, "retry"),
            ack_of(m, "failed"),
            ack_of(m, "completed"),
        ],
    );
    assert!(
        again(&mut b, "q2", "g").is_empty(),
        "failed wins: back after retryDelay"
    );
    b.advance(1000);
    assert_eq!(again(&mut b, "q2", "g"), vec!["m1"]);
}

#[test]
fn ack_3_no_faked_acks_below_the_cursor_or_unresolvable() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 2);
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "completed")]);
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_nolease(&p.messages[0], "completed"),
            ack_nolease(&p.messages[0], "failed"),
        ],
    );
    assert!(r[0].success && r[0].noop);
    assert!(!r[1].success);
    assert_eq!(r[1].error.as_deref(), Some("already committed"));
    let r = b.ack(
        json!({"transactionId": "ghost", "partitionId": p.partition_id, "consumerGroup": "g"}),
    );
    assert_eq!(
        (r.success, r.error.as_deref()),
        (false, Some("unresolvable"))
    );
    let r = b.ack(json!({"transactionId": "m1", "partitionId": "00000000-0000-7000-8000-000000000000", "consumerGroup": "g"}));
    assert_eq!(
        r.error.as_deref(),
        Some("unresolvable"),
        "an unknown partition resolves nothing"
    );
}

#[test]
fn ack_4_one_leased_batch_per_partition_and_group() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    let first = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    assert!(
        b.pop("q", &[("consumerGroup", "g")]).is_none(),
        "the second consumer gets nothing"
    );
    assert!(
        b.pop("q", &[("consumerGroup", "other")]).is_some(),
        "other groups are independent"
    );
    b.ack_batch(Some("g"), vec![ack_of(&first.messages[0], "completed")]);
    assert_eq!(again(&mut b, "q", "g"), vec!["2"]);
}

#[test]
fn ack_5_wrong_or_expired_lease_is_refused_and_no_lease_is_not_checked() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 2);
    let mut wrong = ack_of(&p.messages[0], "completed");
    wrong["leaseId"] = json!("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90");
    let r = b.ack_batch(Some("g"), vec![wrong]);
    assert_eq!(r[0].error.as_deref(), Some("invalid or expired lease"));
    // Without a lease the ack completes the batch another worker holds.
    let r = b.ack_batch(Some("g"), vec![ack_nolease(&p.messages[1], "completed")]);
    assert!(r[0].success && r[0].lease_released);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "completed")]);
    assert!(r[0].noop, "at or below the cursor: ACK-3 comes first");
    // An expired lease.
    let p = leased(&mut b, "q2", "g", 1);
    b.advance(60_000);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert_eq!(r[0].error.as_deref(), Some("invalid or expired lease"));
}

#[test]
fn ack_5_live_lease_with_offset_outside_its_span_is_refused() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    let outside =
        json!({"transactionId": "2", "partitionId": p.partition_id, "leaseId": p.lease_id});
    let r = b.ack_batch(Some("g"), vec![outside]);
    assert_eq!(r[0].error.as_deref(), Some("invalid or expired lease"));
}

#[test]
fn ack_6_statuses_completed_failed_retry_dlq() {
    let mut b = Broker::new();
    // failed: back after retryDelay, one retry spent.
    let p = leased(&mut b, "f", "g", 1);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "failed")]);
    assert!(r[0].success && r[0].lease_released && !r[0].dlq);
    b.advance(999);
    assert!(again(&mut b, "f", "g").is_empty());
    b.advance(1);
    assert_eq!(again(&mut b, "f", "g"), vec!["m1"]);
    // retry: back at once, nothing spent.
    let p = leased(&mut b, "r", "g", 1);
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "retry")]);
    assert_eq!(again(&mut b, "r", "g"), vec!["m1"]);
    // dlq: filed now with its error, spending nothing.
    let p = leased(&mut b, "d", "g", 1);
    let r = b.ack_batch(Some("g"), vec![json!({"transactionId": "m1", "partitionId": p.partition_id, "leaseId": p.lease_id, "status": "dlq", "error": "bad payload"})]);
    assert!(r[0].dlq);
    let d = b.dlq(&[("queue", "d")]);
    assert_eq!(d.total, 1);
    assert_eq!(d.messages[0].error_message.as_deref(), Some("bad payload"));
    assert_eq!(d.messages[0].retry_count, 0);
    assert!(again(&mut b, "d", "g").is_empty());
}

#[test]
fn ack_7_lease_expiry_never_spends_retry_budget() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 0, "leaseTime": 1}));
    let p = leased(&mut b, "q", "g", 1);
    for _ in 0..5 {
        b.advance(1000);
        assert_eq!(
            again(&mut b, "q", "g"),
            vec!["m1"],
            "redelivered after expiry"
        );
    }
    b.advance(1000);
    let p2 = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    let r = b.ack_batch(Some("g"), vec![ack_of(&p2.messages[0], "failed")]);
    assert!(
        r[0].dlq,
        "retryLimit 0: the first failure is final, expiries spent nothing"
    );
    let _ = p;
}

#[test]
fn ack_8_resolves_the_newest_message_with_that_transaction_id() {
    let mut b = Broker::new();
    b.configure("q", json!({"dedupWindowSeconds": 1}));
    b.push1("q", "p", "t");
    b.advance(1000);
    b.push1("q", "p", "t");
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    // Acking "t" resolves offset 2: the cursor jumps past both (ACK-1).
    let r = b.ack_batch(Some("g"), vec![ack_nolease(&p.messages[0], "completed")]);
    assert!(r[0].success && r[0].lease_released);
    assert!(again(&mut b, "q", "g").is_empty());
}

#[test]
fn ack_8_open_message_older_than_window_still_resolves_on_our_engine() {
    let mut b = Broker::new();
    b.configure("q", json!({"dedupWindowSeconds": 1}));
    let p = leased(&mut b, "q", "g", 1);
    b.advance(5_000);
    let r = b.ack_batch(Some("g"), vec![ack_nolease(&p.messages[0], "completed")]);
    assert!(r[0].success);
}

#[test]
fn step_3_at_most_one_retry_charged_per_call_and_exhausted_become_dead_letters() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 1, "retryDelay": 0}));
    let p = leased(&mut b, "q", "g", 3);
    // First call: m1 failed (charged), m2 failed (comes back uncharged).
    b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "failed"),
            ack_of(&p.messages[1], "failed"),
        ],
    );
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "100")])
        .unwrap();
    // Second: m1 exhausted -> dead letter; m2 charged now and comes back.
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "failed"),
            ack_of(&p.messages[1], "failed"),
        ],
    );
    assert!(r[0].dlq && !r[1].dlq);
    assert_eq!(again(&mut b, "q", "g"), vec!["m2", "m3"]);
    let d = b.dlq(&[("consumerGroup", "g")]);
    assert_eq!((d.total, d.messages[0].retry_count), (1, 1));
}

#[test]
fn step_4_cursor_stops_below_first_comeback_even_past_dead_letters() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryDelay": 0}));
    let p = leased(&mut b, "q", "g", 4);
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "dlq"),
            ack_of(&p.messages[1], "completed"),
            ack_of(&p.messages[2], "retry"),
            ack_of(&p.messages[3], "completed"),
        ],
    );
    assert!(r[0].dlq);
    assert_eq!(again(&mut b, "q", "g"), vec!["m3", "m4"]);
}

#[test]
fn step_5_partial_ack_keeps_the_lease_on_the_rest() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 3);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert!(r[0].success && !r[0].lease_released);
    assert!(
        b.pop("q", &[("consumerGroup", "g")]).is_none(),
        "still leased"
    );
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[2], "completed")]);
    assert!(r[0].lease_released);
}

#[test]
fn step_7_ack_without_lease_for_group_without_cursor_is_unresolvable() {
    let mut b = Broker::new();
    b.push1("q", "p", "m1");
    let p = b.pop("q", &[("consumerGroup", "seen")]).unwrap();
    let r = b.ack(json!({"transactionId": "m1", "partitionId": p.partition_id, "consumerGroup": "never-popped"}));
    assert_eq!(
        (r.success, r.error.as_deref()),
        (false, Some("unresolvable"))
    );
}

/// A `dlq` ack on the last offset of the span is terminal: the cursor passes it and the lease is released.
#[test]
fn ack_6_dlq_on_the_last_leased_offset_commits_it_and_releases_the_lease() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 1);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "dlq")]);
    assert!(r[0].success && r[0].dlq);
    assert!(
        r[0].lease_released,
        "a dead letter is terminal: the cursor reaches the end of the span"
    );
    b.push1("q", "p", "m2");
    assert_eq!(
        again(&mut b, "q", "g"),
        vec!["m2"],
        "m1 is never delivered again"
    );
}

/// ACK-8 [OPEN] alternative: a message resolves until `dedupWindowSeconds` have passed since it was written, and is unresolvable from that moment on.
#[test]
fn ack_8_open_alternative_is_unresolvable_exactly_from_the_dedup_window_on() {
    let mut b = Broker::new();
    b.e.policy.ack_beyond_dedup_window = 1;
    b.configure("q", json!({"dedupWindowSeconds": 2}));
    let p = leased(&mut b, "q", "g", 2);
    b.advance(1_999);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert!(r[0].success, "inside the window: resolved ({:?})", r[0]);
    b.advance(1);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "completed")]);
    assert_eq!(
        (r[0].success, r[0].error.as_deref()),
        (false, Some("unresolvable"))
    );
}

/// Step 3 [PROJECT] alternative: every failed offset with budget left is charged, so a later failure of one that was not the call's first finds its budget spent.
#[test]
fn step_3_project_alternative_charges_every_failed_offset_of_a_call() {
    let mut b = Broker::new();
    b.e.policy.ack_charges_every_failure = 1;
    b.configure("q", json!({"retryLimit": 1, "retryDelay": 0}));
    let p = leased(&mut b, "q", "g", 3);
    // m2 and m3 both have budget left: both are charged, neither is a dead letter.
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[1], "failed"),
            ack_of(&p.messages[2], "failed"),
        ],
    );
    assert!(r.iter().all(|x| x.success && !x.dlq), "{r:?}");
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "100")])
        .unwrap();
    assert_eq!(Broker::txns(&Some(p.clone())), vec!["m1", "m2", "m3"]);
    // m1 is charged first; m2 spent its only retry in the call before, though it was
    // not that call's first failure: it becomes a dead letter.
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "failed"),
            ack_of(&p.messages[1], "failed"),
        ],
    );
    assert!(!r[0].dlq && r[1].dlq, "{r:?}");
    let d = b.dlq(&[("queue", "q")]);
    assert_eq!(d.total, 1);
    assert_eq!(
        (
            d.messages[0].transaction_id.as_str(),
            d.messages[0].retry_count
        ),
        ("m2", 1)
    );
}

/// Step 4: a dead letter counts as terminal, but the cursor still stops below an unacked offset that precedes a comeback.
#[test]
fn step_4_a_dead_letter_is_terminal_but_the_cursor_never_passes_an_unacked_offset() {
    let mut b = Broker::new();
    let p = leased(&mut b, "q", "g", 3);
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "dlq"),
            ack_of(&p.messages[2], "retry"),
        ],
    );
    assert!(r[0].dlq && !r[1].dlq);
    assert!(r.iter().all(|x| x.lease_released));
    assert_eq!(
        again(&mut b, "q", "g"),
        vec!["m2", "m3"],
        "m1 is committed as a dead letter, m2 was never acked"
    );
}

/// Step 5 [PROJECT] alternative: a partial commit releases the lease, so the rest of the span is claimable at once.
#[test]
fn step_5_project_alternative_releases_the_lease_on_a_partial_commit() {
    let mut b = Broker::new();
    b.e.policy.ack_releases_on_partial_commit = 1;
    let p = leased(&mut b, "q", "g", 3);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert!(r[0].success && r[0].lease_released, "{:?}", r[0]);
    assert_eq!(
        again(&mut b, "q", "g"),
        vec!["m2", "m3"],
        "the rest is claimable at once"
    );
}

/// Step 5: filing a dead letter is idempotent per message and group, and the same offset of another partition is another message.
#[test]
fn step_5_dead_letter_filing_is_idempotent_per_message_and_group() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryDelay": 0}));
    let p = leased(&mut b, "q", "g", 2);
    // m2 is filed, but m1 comes back: so does m2, and it can be filed again.
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "failed"),
            ack_of(&p.messages[1], "dlq"),
        ],
    );
    assert!(!r[0].dlq && r[1].dlq);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "100")])
        .unwrap();
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "completed"),
            ack_of(&p.messages[1], "dlq"),
        ],
    );
    assert!(r[1].dlq);
    assert_eq!(b.dlq(&[("queue", "q")]).total, 1, "m2 is filed once");
    // The same offset of another partition is another message.
    b.push1("q", "other", "x1");
    let p = b
        .pop_partition("q", "other", &[("consumerGroup", "g")])
        .unwrap();
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "dlq")]);
    assert!(r[0].dlq);
    let d = b.dlq(&[("queue", "q")]);
    assert_eq!(d.total, 2);
    assert_eq!(
        (
            d.messages[1].partition.as_str(),
            d.messages[1].transaction_id.as_str()
        ),
        ("other", "x1")
    );
}

/// Step 6 [OPEN] alternative: only a completion above a lower failure of the same call is refused; the completion below it and the failure succeed.
#[test]
fn step_6_open_alternative_refuses_only_completions_blocked_by_a_lower_failure() {
    let mut b = Broker::new();
    b.e.policy.blocked_completion = queen_reference::policy::BlockedCompletion::Failure;
    let p = leased(&mut b, "q", "g", 3);
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "completed"),
            ack_of(&p.messages[1], "failed"),
            ack_of(&p.messages[2], "completed"),
        ],
    );
    let verdicts: Vec<(bool, Option<&str>)> =
        r.iter().map(|x| (x.success, x.error.as_deref())).collect();
    assert_eq!(
        verdicts,
        vec![
            (true, None),
            (true, None),
            (false, Some(queen_reference::model::ack::ERR_BLOCKED)),
        ]
    );
    b.advance(1000); // retryDelay
    assert_eq!(again(&mut b, "q", "g"), vec!["m2", "m3"], "m1 is committed");
}

/// Step 7 [OPEN] alternative: an ack without lease for a group with no cursor commits, and that group's pops start after it.
#[test]
fn step_7_open_alternative_commits_for_a_group_without_cursor() {
    let mut b = Broker::new();
    b.e.policy.ack_without_cursor = 1;
    b.push_many("q", "p", &["m1", "m2"]);
    let p = b.pop("q", &[("consumerGroup", "seen")]).unwrap();
    let r = b.ack(
        json!({"transactionId": "m1", "partitionId": p.partition_id, "consumerGroup": "newcomer"}),
    );
    assert!(r.success && !r.noop && r.error.is_none(), "{r:?}");
    assert_eq!(
        again(&mut b, "q", "newcomer"),
        vec!["m2"],
        "the newcomer's cursor starts past m1"
    );
}
