//! The seed documents' own examples, reproduced exactly.

mod common;
use common::*;
use serde_json::json;

/// `ack-statuses.md`, the figure "A batch of four messages acked with different
/// statuses": offset 0 completed, offset 1 failed, offsets 2 and 3 completed. The
/// cursor moves past offset 0 only; offsets 1, 2 and 3 are delivered again, the
/// completed ones included. (The seed counts offsets from 0; the spec from 1.)
#[test]
fn seed_ack_statuses_four_message_batch_figure() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["o0", "o1", "o2", "o3"]);
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "completed"),
            ack_of(&p.messages[1], "failed"),
            ack_of(&p.messages[2], "completed"),
            ack_of(&p.messages[3], "completed"),
        ],
    );
    assert!(r.iter().all(|x| x.success && x.lease_released && !x.dlq));
    let cursor = b.e.state.part(p_handle(&b)).unwrap().cursors["g"].committed;
    assert_eq!(cursor, 1, "past offset 0 only");
    b.advance(1000);
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g")])),
        vec!["o1", "o2", "o3"]
    );
}

/// `ack-statuses.md` figure 1: two groups, one copy; acks moved cursors, nothing deleted.
#[test]
fn seed_ack_statuses_two_groups_one_copy() {
    let mut b = Broker::new();
    let txns: Vec<String> = (0..8).map(|i| format!("o{i}")).collect();
    let refs: Vec<&str> = txns.iter().map(String::as_str).collect();
    b.push_many("q", "p", &refs);
    let p = b
        .pop("q", &[("consumerGroup", "billing"), ("batch", "6")])
        .unwrap();
    b.ack_batch(Some("billing"), vec![ack_of(&p.messages[5], "completed")]);
    let p = b
        .pop("q", &[("consumerGroup", "analytics"), ("batch", "3")])
        .unwrap();
    b.ack_batch(Some("analytics"), vec![ack_of(&p.messages[2], "completed")]);
    let held = b.pop("q", &[("consumerGroup", "billing")]).unwrap();
    assert_eq!(
        Broker::txns(&Some(held)),
        vec!["o6", "o7"],
        "billing holds a lease on 6 and 7"
    );
    let part = b.e.state.part(p_handle(&b)).unwrap();
    assert_eq!(part.messages.len(), 8, "stored once, nothing deleted");
    assert_eq!(
        (
            part.cursors["billing"].committed,
            part.cursors["analytics"].committed
        ),
        (6, 3)
    );
}

/// `producer-consumer.md`, "What to expect when things break", row 1: the consumer
/// crashes before acking; the lease expires, the cursor is unchanged, the whole span
/// redelivers and the retry budget is untouched.
#[test]
fn seed_table_consumer_crashes_before_acking() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2", "3"]);
    b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.advance(60_000);
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    assert_eq!(Broker::txns(&Some(p)), vec!["1", "2", "3"]);
    let c = &b.e.state.part(p_handle(&b)).unwrap().cursors["g"];
    assert_eq!(c.committed, 0);
    assert!(c.retries.is_empty(), "budget untouched");
}

/// Row 2: the handler throws and the SDK nacks. The cursor clamps below the failed
/// offset, the lease is released, the budget is charged once; the failed message and
/// everything after it in the batch redeliver.
#[test]
fn seed_table_handler_throws_sdk_nacks() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2", "3", "4"]);
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    // The SDK acks what succeeded and nacks the failed one; the rest are skipped.
    let r = b.ack_batch(
        Some("g"),
        vec![
            ack_of(&p.messages[0], "completed"),
            ack_of(&p.messages[1], "failed"),
        ],
    );
    assert!(r.iter().all(|x| x.lease_released));
    let c = &b.e.state.part(p_handle(&b)).unwrap().cursors["g"];
    assert_eq!(c.committed, 1);
    assert_eq!(c.retries.get(&2), Some(&1), "charged once");
    b.advance(1000);
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g")])),
        vec!["2", "3", "4"]
    );
}

/// Row 3: an ack arrives after the lease expired: HTTP 200, `success:false`,
/// `invalid or expired lease`.
#[test]
fn seed_table_ack_after_lease_expired() {
    let mut b = Broker::new();
    b.push1("q", "p", "1");
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("leaseSeconds", "1")])
        .unwrap();
    b.advance(1000);
    let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert_eq!(
        (r[0].success, r[0].error.as_deref()),
        (false, Some("invalid or expired lease"))
    );
}

/// Row 4: two consumers, one group, one partition: the second pop finds the row
/// leased and skips it; empty result until the lease clears.
#[test]
fn seed_table_two_consumers_one_group_one_partition() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    let first = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    assert!(b.pop("q", &[("consumerGroup", "g")]).is_none());
    b.ack_batch(Some("g"), vec![ack_of(&first.messages[0], "completed")]);
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g")])),
        vec!["2"]
    );
}

/// Row 5: PostgreSQL unreachable during a push: appended to the spool and replayed
/// later, HTTP 201 with `buffered`. A model without I/O cannot lose its database; it
/// expresses the same contract through push maintenance (PUSH-7, MAINT-1).
#[test]
fn seed_table_push_while_database_unreachable_is_buffered() {
    let mut b = Broker::new();
    b.post("/api/v1/system/maintenance", json!({"enabled": true}));
    let r = b.push1("q", "p", "1");
    assert_eq!(r.status, queen_reference::wire::PushStatus::Buffered);
    b.post("/api/v1/system/maintenance", json!({"enabled": false}));
    assert_eq!(Broker::txns(&b.pop("q", &[])), vec!["1"]);
}

/// `producer-consumer.md`: the first push's answer and the first pop's message shape.
#[test]
fn seed_producer_consumer_answers() {
    let mut b = Broker::new();
    let r = b.post(
        "/api/v1/push",
        json!({"items": [{"queue": "orders", "payload": {"message": "Hello, world!"}}]}),
    );
    let arr = r.body.unwrap();
    let keys: Vec<_> = arr[0].as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "index",
            "message_id",
            "transaction_id",
            "queueName",
            "status"
        ]
    );
    let p = b.pop("orders", &[]).unwrap();
    let m = &p.messages[0];
    assert_eq!(m.data.value(), json!({"message": "Hello, world!"}));
    assert_eq!((m.trace_id.clone(), m.producer_sub.clone()), (None, None));
    assert_eq!(
        (m.partition.as_str(), m.consumer_group.as_str()),
        ("Default", "__QUEUE_MODE__")
    );
}

fn p_handle(b: &Broker) -> queen_reference::model::PartH {
    *b.e.state.queues["q"].partitions.values().next().unwrap()
}
