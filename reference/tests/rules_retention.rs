//! Retention, queue size and the options configure keeps (PROTOCOL.md section 16), on
//! the deterministic engine, which removes a message as soon as it is removable.

mod common;
use common::*;
use queen_reference::wire::*;
use serde_json::json;

#[test]
fn ret_1_acks_never_remove_and_retention_removes_by_age() {
    let mut b = Broker::new();
    b.configure(
        "q",
        json!({"retentionEnabled": true, "retentionSeconds": 2}),
    );
    b.push_many("q", "p", &["a", "b"]);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "2")])
        .unwrap();
    b.ack_batch(
        Some("g"),
        p.messages.iter().map(|m| ack_of(m, "completed")).collect(),
    );
    // Another group still sees both: the acks removed nothing.
    let other = b.pop("q", &[("consumerGroup", "h"), ("batch", "5")]);
    assert_eq!(Broker::txns(&other), ["a", "b"]);
    b.advance(2_000);
    let late = b.pop("q", &[("consumerGroup", "late"), ("batch", "5")]);
    assert!(
        late.is_none(),
        "removed by age, whatever the cursors: {late:?}"
    );
}

#[test]
fn ret_2_retention_seconds_without_the_gate_removes_nothing_but_max_wait_does() {
    let mut b = Broker::new();
    b.configure("q", json!({"retentionSeconds": 1}));
    b.configure("w", json!({"maxWaitTimeSeconds": 1}));
    b.push1("q", "p", "a");
    b.push1("w", "p", "a");
    b.advance(5_000);
    assert_eq!(Broker::txns(&b.pop("q", &[])), ["a"]);
    assert!(b.pop("w", &[]).is_none());
}

#[test]
fn ret_2_completed_retention_removes_what_every_group_committed() {
    let mut b = Broker::new();
    b.configure(
        "q",
        json!({"retentionEnabled": true, "completedRetentionSeconds": 1}),
    );
    b.push_many("q", "p", &["a", "b"]);
    for g in ["g", "h"] {
        let p = b.pop("q", &[("consumerGroup", g), ("batch", "1")]).unwrap();
        b.ack_batch(Some(g), vec![ack_of(&p.messages[0], "completed")]);
    }
    b.advance(1_000);
    // `a` is committed by both groups and goes; `b` by neither and stays.
    let fresh = b.pop("q", &[("consumerGroup", "new"), ("batch", "5")]);
    assert_eq!(Broker::txns(&fresh), ["b"]);
}

#[test]
fn ret_4_a_removed_message_is_unresolvable_and_no_longer_deduplicates() {
    let mut b = Broker::new();
    b.configure("q", json!({"maxWaitTimeSeconds": 1, "retryLimit": 0}));
    b.push1("q", "p", "a");
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    let m = p.messages[0].clone();
    // A dead letter keeps its copy.
    b.ack_batch(Some("g"), vec![ack_of(&m, "failed")]);
    b.advance(1_000);
    let a = b.ack(json!({"transactionId": "a", "partitionId": m.partition_id, "consumerGroup": "g", "status": "completed"}));
    assert!(
        !a.success && a.error.as_deref() == Some("unresolvable"),
        "{a:?}"
    );
    assert_eq!(b.dlq(&[("queue", "q")]).messages[0].transaction_id, "a");
    let again = b.push1("q", "p", "a");
    assert_eq!(
        again.status,
        PushStatus::Queued,
        "a removed message does not deduplicate"
    );
}

#[test]
fn ret_4_a_lease_over_removed_messages_is_released() {
    let mut b = Broker::new();
    b.configure("q", json!({"maxWaitTimeSeconds": 1, "leaseTime": 600}));
    b.push1("q", "p", "a");
    assert!(b.pop("q", &[("consumerGroup", "g")]).is_some());
    b.advance(1_000);
    b.push1("q", "p", "b");
    // The lease on `a` went with it, so `b` is deliverable at once.
    assert_eq!(Broker::txns(&b.pop("q", &[("consumerGroup", "g")])), ["b"]);
}

#[test]
fn ret_5_a_push_past_max_size_is_429_and_writes_nothing() {
    let mut b = Broker::new();
    b.configure("q", json!({"maxSize": 2}));
    b.push_many("q", "p", &["a", "b"]);
    let r = b.post(
        "/api/v1/push",
        json!({"items": [{"queue": "q", "partition": "other", "transactionId": "c"}]}),
    );
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert!(r.body.unwrap()["error"]
        .as_str()
        .unwrap()
        .contains("maxSize"));
    // Duplicates do not count, and a push to another queue is not refused.
    assert_eq!(b.push1("q", "p", "a").status, PushStatus::Duplicate);
    b.push1("free", "p", "x");
    // Consuming makes room; the refused push wrote nothing (no partition `other` message).
    let p = b.pop("q", &[("batch", "1")]).unwrap();
    b.ack_batch(None, vec![ack_of(&p.messages[0], "completed")]);
    assert_eq!(b.push1("q", "p", "c").status, PushStatus::Queued);
    assert_eq!(Broker::txns(&b.pop("q", &[("batch", "5")])), ["b", "c"]);
}

#[test]
fn ret_5_a_transaction_past_max_size_is_429_and_applies_nothing() {
    let mut b = Broker::new();
    b.configure("q", json!({"maxSize": 1}));
    b.push1("q", "p", "a");
    let p = b.pop("q", &[]).unwrap();
    let m = &p.messages[0];
    let r = b.post(
        "/api/v1/transaction",
        json!({"operations": [
            {"type": "ack", "transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": "completed"},
            {"type": "push", "items": [{"queue": "q", "partition": "p", "transactionId": "b"}, {"queue": "q", "partition": "p", "transactionId": "c"}]}
        ]}),
    );
    assert_eq!(r.status, 429, "{:?}", r.body);
    // The ack in it was not applied either: `a` is still leased, not committed.
    let a = b.ack(ack_of(m, "completed"));
    assert!(a.success && !a.noop, "{a:?}");
}

#[test]
fn cfg_4_unknown_options_are_echoed_and_replaced_with_the_rest() {
    let mut b = Broker::new();
    let r = b.post(
        "/api/v1/configure",
        json!({"queue": "q", "options": {"deadLetterQueue": true, "ttl": 30, "retryLimit": 2}}),
    );
    let o = &r.body.unwrap()["options"];
    assert_eq!(
        (o["deadLetterQueue"].clone(), o["ttl"].clone()),
        (json!(true), json!(30))
    );
    assert_eq!(o["retryLimit"], 2);
    let r = b.post(
        "/api/v1/configure",
        json!({"queue": "q", "options": {"ttl": 5}}),
    );
    let o = &r.body.unwrap()["options"];
    assert!(o.get("deadLetterQueue").is_none(), "full replace (CFG-1)");
    assert_eq!(o["ttl"], 5);
}
