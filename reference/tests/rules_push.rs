//! One test per push rule (PROTOCOL.md section 2), run on the deterministic engine.

mod common;
use common::*;
use queen_reference::wire::*;
use serde_json::json;

#[test]
fn push_1_answers_201_with_one_result_per_item_in_order() {
    let mut b = Broker::new();
    let r = b.push(json!([
        {"queue": "orders", "payload": 1},
        {"queue": "orders", "partition": "p2", "transactionId": "t-2", "payload": 2},
        {"queue": "other", "payload": 3},
    ]));
    assert_eq!(r.len(), 3);
    for (i, item) in r.iter().enumerate() {
        assert_eq!(item.index, i);
        assert_eq!(item.status, PushStatus::Queued);
        assert!(is_uuid_v7(&item.message_id));
    }
    assert_eq!(r[1].transaction_id, "t-2");
    assert_eq!(r[2].queue_name, "other");
}

#[test]
fn push_2_unknown_queue_is_created_with_lease_time_60() {
    let mut b = Broker::new();
    b.push1("fresh.q", "Default", "t1");
    let q = &b.e.state.queues["fresh.q"];
    assert_eq!(q.options.lease_time, 60);
    assert_eq!(q.options.retry_limit, 3);
    assert_eq!((q.namespace.as_str(), q.task.as_str()), ("fresh", "q"));
    assert!(q.partitions.contains_key("Default"));
}

#[test]
fn push_3_request_is_atomic_and_missing_partition_means_default() {
    let mut b = Broker::new();
    let r = b.post(
        "/api/v1/push",
        json!({"items": [{"queue": "q", "payload": 1}, {"queue": 7}]}),
    );
    assert_eq!(r.status, 400);
    assert!(
        b.e.state.queues.is_empty(),
        "nothing written when one item is bad"
    );
    b.push(json!([{"queue": "q"}, {"queue": "q", "partition": "new-p"}]));
    let parts: Vec<_> = b.e.state.queues["q"].partitions.keys().cloned().collect();
    assert_eq!(parts, vec!["Default".to_string(), "new-p".to_string()]);
}

#[test]
fn push_4_missing_transaction_id_is_minted() {
    let mut b = Broker::new();
    let r = b.push(json!([{"queue": "q"}, {"queue": "q"}]));
    assert!(is_uuid(&r[0].transaction_id));
    assert_ne!(r[0].transaction_id, r[1].transaction_id);
    let p = b.pop("q", &[("batch", "10")]).unwrap();
    assert_eq!(p.messages[0].transaction_id, r[0].transaction_id);
}

#[test]
fn push_5_dedup_within_window_per_partition() {
    let mut b = Broker::new();
    let first = b.push1("q", "a", "same");
    let again = b.push1("q", "a", "same");
    assert_eq!(again.status, PushStatus::Duplicate);
    assert_eq!(
        again.message_id, first.message_id,
        "[PROJECT] duplicate carries the original id"
    );
    let other = b.push1("q", "b", "same");
    assert_eq!(
        other.status,
        PushStatus::Queued,
        "another partition is a new message"
    );
    let r = b.push(json!([
        {"queue": "q", "partition": "c", "transactionId": "x"},
        {"queue": "q", "partition": "c", "transactionId": "x"},
    ]));
    assert_eq!(r[0].status, PushStatus::Queued);
    assert_eq!(r[1].status, PushStatus::Duplicate);
}

#[test]
fn push_5_dedup_window_expires() {
    let mut b = Broker::new();
    b.configure("q", json!({"dedupWindowSeconds": 1}));
    b.push1("q", "a", "t");
    b.advance(999);
    assert_eq!(b.push1("q", "a", "t").status, PushStatus::Duplicate);
    b.advance(1);
    assert_eq!(b.push1("q", "a", "t").status, PushStatus::Queued);
}

#[test]
fn push_6_offsets_follow_request_order_then_commit_order() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    b.push_many("q", "p", &["3"]);
    let p = b.pop("q", &[("batch", "10")]);
    assert_eq!(Broker::txns(&p), vec!["1", "2", "3"]);
}

#[test]
fn push_7_maintenance_spools_and_replays_in_order_subject_to_dedup() {
    let mut b = Broker::new();
    b.push1("q", "p", "before");
    let r = b.post("/api/v1/system/maintenance", json!({"enabled": true}));
    assert_eq!(
        r.body.unwrap(),
        json!({"maintenanceMode": true, "bufferedMessages": 0})
    );
    let r = b.push(json!([
        {"queue": "q", "partition": "p", "transactionId": "s1"},
        {"queue": "q", "partition": "p", "transactionId": "before"},
        {"queue": "q", "partition": "p", "transactionId": "s2"},
    ]));
    assert!(r.iter().all(|x| x.status == PushStatus::Buffered));
    assert_eq!(
        Broker::txns(&b.pop("q", &[("batch", "10"), ("autoAck", "true")])),
        vec!["before"]
    );
    let r = b.send(HttpRequest::get("/api/v1/system/maintenance", &[]));
    assert_eq!(r.body.unwrap()["bufferedMessages"], 3);
    let r = b.post("/api/v1/system/maintenance", json!({"enabled": false}));
    assert_eq!(
        r.body.unwrap(),
        json!({"maintenanceMode": false, "bufferedMessages": 0})
    );
    assert_eq!(
        Broker::txns(&b.pop("q", &[("batch", "10")])),
        vec!["s1", "s2"]
    );
}

#[test]
fn push_8_bad_input_is_400_and_changes_nothing() {
    let mut b = Broker::new();
    let before = b.e.state.clone();
    for body in [
        &b"not json"[..],
        br#"{"items": 5}"#,
        br#"{"items": [{"queue": ""}]}"#,
        br#"{"items": [{"queue": "q", "traceId": "not-a-uuid"}]}"#,
        br#"{"items": [{"queue": "q", "partition": ["x"]}]}"#,
    ] {
        let r = b.send(HttpRequest::post_raw("/api/v1/push", body.to_vec()));
        assert_eq!(r.status, 400);
        assert!(r.body.unwrap()["error"]
            .as_str()
            .is_some_and(|s| !s.is_empty()));
    }
    assert_eq!(b.e.state, before);
    assert!(b.push(json!([])).is_empty(), "empty items is 201 []");
    b.e.body_limit = 64;
    let r = b.post(
        "/api/v1/push",
        json!({"items": [{"queue": "q", "payload": "x".repeat(100)}]}),
    );
    assert_eq!(r.status, 413);
}

#[test]
fn push_9_absent_payload_is_null_and_plain_push_trace_follows_the_seed() {
    let mut b = Broker::new();
    let trace = "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90";
    b.push(json!([{"queue": "q", "traceId": trace}]));
    let p = b.pop("q", &[]).unwrap();
    assert_eq!(p.messages[0].data.value(), serde_json::Value::Null);
    assert_eq!(
        p.messages[0].trace_id, None,
        "seed: null unless written by a transaction"
    );
}

#[test]
fn hostile_and_unicode_queue_names_are_ordinary_names() {
    let mut b = Broker::new();
    for name in ["'; drop table queues; --", "очередь/ü", &"q".repeat(255)] {
        b.push1(name, "Default", "t");
        assert_eq!(Broker::txns(&b.pop(name, &[])), vec!["t"]);
    }
    let r = b.post(
        "/api/v1/push",
        json!({"items": [{"queue": "q".repeat(256)}]}),
    );
    assert_eq!(r.status, 400);
}

/// The dedup decision both engines share: only a client-given transactionId in a queue
/// with a window can duplicate, and only while the window since the original runs.
#[test]
fn push_5_only_a_client_given_id_within_a_window_duplicates() {
    use queen_reference::model::push::duplicate_of;
    let found = || Some(("orig", ()));
    let always = |_: (), _: i64| true;
    assert_eq!(duplicate_of(false, 1000, found(), always), Some("orig"));
    assert_eq!(duplicate_of(false, 1000, found(), |_, _| false), None);
    assert_eq!(duplicate_of(true, 1000, found(), always), None, "minted");
    assert_eq!(duplicate_of(false, 0, found(), always), None, "no window");
    assert_eq!(duplicate_of::<&str, ()>(false, 1000, None, always), None);
}

/// Every stored message is listed once with its partition and its 1-based offset, in
/// request order within a partition.
#[test]
fn push_6_every_message_has_the_next_offset_of_its_partition() {
    let mut b = Broker::new();
    b.push_many("q", "a", &["a1", "a2"]);
    b.push_many("q", "b", &["b1"]);
    b.push_many("q", "a", &["a3"]);
    let listed: Vec<(String, u32, String)> =
        b.e.state
            .all_messages()
            .map(|(p, off, m)| (p.name.clone(), off, m.transaction_id.clone()))
            .collect();
    let want = [
        ("a", 1, "a1"),
        ("a", 2, "a2"),
        ("a", 3, "a3"),
        ("b", 1, "b1"),
    ];
    let want: Vec<(String, u32, String)> = want
        .iter()
        .map(|(p, o, t)| (p.to_string(), *o, t.to_string()))
        .collect();
    assert_eq!(listed, want);
}
