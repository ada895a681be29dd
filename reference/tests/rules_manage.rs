//! Management and observability (PROTOCOL.md section 17) on the deterministic engine:
//! what each view shows, that reads take nothing, and what the two writes do.

mod common;
use common::*;
use queen_reference::wire::*;
use serde_json::json;

fn statuses(p: &MessagesPage) -> Vec<MessageStatus> {
    p.messages.iter().map(|m| m.status).collect()
}

#[test]
fn mgmt_6_peek_shows_each_messages_state_and_leases_nothing() {
    use MessageStatus::*;
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 0}));
    b.push_many("q", "p", &["a", "b", "c"]);
    let first = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    let peek = |b: &mut Broker| -> MessagesPage {
        b.view(
            "/api/v1/messages",
            &[("queue", "q"), ("consumerGroup", "g")],
        )
    };
    assert_eq!(statuses(&peek(&mut b)), [Leased, Pending, Pending]);
    b.ack_batch(Some("g"), vec![ack_of(&first.messages[0], "dlq")]);
    let second = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&second.messages[0], "completed")]);
    let page = peek(&mut b);
    assert_eq!(statuses(&page), [DeadLettered, Completed, Pending]);
    assert_eq!(page.page.total, 3);
    assert_eq!(page.messages[2].message.transaction_id, "c");
    assert_eq!(
        page.messages[0].message.partition_id,
        first.messages[0].partition_id
    );
    // The peek took nothing: the next pop delivers c, and queue mode still sees all.
    assert_eq!(Broker::txns(&b.pop("q", &[("consumerGroup", "g")])), ["c"]);
    let by_path: MessagesPage = b.view(
        "/api/v1/status/queues/q/messages",
        &[("consumerGroup", "g")],
    );
    assert_eq!(
        statuses(&by_path)[..2],
        [DeadLettered, Completed],
        "MGMT-5: the same peek"
    );
    let filtered: MessagesPage = b.view(
        "/api/v1/messages",
        &[("queue", "q"), ("status", "pending"), ("limit", "2")],
    );
    assert_eq!((filtered.messages.len(), filtered.page.total), (2, 3));
}

#[test]
fn mgmt_7_one_message_with_every_reading_groups_state() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 0}));
    b.push1("q", "p", "a");
    let g = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.ack_batch(Some("g"), vec![json!({"transactionId": "a", "partitionId": g.messages[0].partition_id, "leaseId": g.lease_id, "status": "failed", "error": "boom"})]);
    b.pop("q", &[("consumerGroup", "h")]).unwrap();
    let pid = g.messages[0].partition_id.clone();
    let m: MessageDetail = b.view(&format!("/api/v1/messages/{pid}/a"), &[]);
    assert_eq!(m.message.transaction_id, "a");
    let groups: Vec<(&str, MessageStatus, Option<&str>)> = m
        .groups
        .iter()
        .map(|x| (x.group.as_str(), x.status, x.error_message.as_deref()))
        .collect();
    assert_eq!(
        groups,
        [
            ("g", MessageStatus::DeadLettered, Some("boom")),
            ("h", MessageStatus::Leased, None)
        ]
    );
    let missing = b.send(HttpRequest::get(format!("/api/v1/messages/{pid}/zz"), &[]));
    assert_eq!(missing.status, 404);
    let bad = b.send(HttpRequest::get("/api/v1/messages/nope/a", &[]));
    assert_eq!(bad.status, 400);
}

#[test]
fn mgmt_3_groups_with_lag_state_and_the_lagging_filter() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["a", "b", "c"]);
    b.push1("r", "p", "x");
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    b.pop("r", &[("consumerGroup", "g")]).unwrap();
    let g: GroupView = b.view("/api/v1/consumer-groups/g", &[]);
    let rows: Vec<(&str, u64, u64, GroupState)> = g
        .queues
        .iter()
        .map(|q| (q.queue.as_str(), q.lag, q.leased, q.state))
        .collect();
    assert_eq!(
        rows,
        [
            ("q", 3, 1, GroupState::Consuming),
            ("r", 1, 1, GroupState::Consuming)
        ]
    );
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    b.advance(61_000);
    let g: GroupView = b.view("/api/v1/consumer-groups/g", &[]);
    assert_eq!((g.lag, g.state, g.lag_seconds), (3, GroupState::Behind, 61));
    let lagging: Lagging = b.view(
        "/api/v1/consumer-groups/lagging",
        &[("minLagSeconds", "61")],
    );
    assert_eq!(lagging.consumer_groups.len(), 1);
    assert_eq!((lagging.page.total, lagging.page.limit), (1, 100));
    // MGMT-2: the lagging groups are a page; the total still counts them all.
    let past: Lagging = b.view(
        "/api/v1/consumer-groups/lagging",
        &[("minLagSeconds", "61"), ("offset", "1")],
    );
    assert_eq!((past.consumer_groups.len(), past.page.total), (0, 1));
    let bad = HttpRequest::get("/api/v1/consumer-groups/lagging", &[("limit", "0")]);
    assert_eq!(b.send(bad).status, 400);
    let none: Lagging = b.view(
        "/api/v1/consumer-groups/lagging",
        &[("minLagSeconds", "62")],
    );
    assert!(none.consumer_groups.is_empty());
    let all: GroupsPage = b.view("/api/v1/consumer-groups", &[]);
    assert_eq!(all.consumer_groups.len(), 1, "queue mode never popped here");
    assert_eq!(
        b.send(HttpRequest::get("/api/v1/consumer-groups/nobody", &[]))
            .status,
        404
    );
}

#[test]
fn mgmt_4_overview_queues_depth_and_partitions() {
    let mut b = Broker::new();
    b.push_many("b.one", "p1", &["a", "b"]);
    b.push_many("a.two", "p1", &["c"]);
    b.push1("b.one", "p2", "d");
    b.pop_partition(
        "b.one",
        "p1",
        &[("consumerGroup", "g"), ("autoAck", "true"), ("batch", "1")],
    );
    let o: Overview = b.view("/api/v1/resources/overview", &[]);
    assert_eq!(
        (o.queues, o.partitions, o.messages, o.consumer_groups),
        (2, 3, 4, 1)
    );
    // g's first pop gave it a cursor on both partitions of b.one (POP-13): p1 has 1
    // left, p2 1; a.two is read by nobody (1).
    assert_eq!(o.unconsumed, 3);
    let qs: QueuesPage = b.view("/api/v1/resources/queues", &[]);
    let names: Vec<&str> = qs.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["a.two", "b.one"], "by name");
    let depth: Depth = b.view("/api/v1/resources/queues/b.one/depth", &[("group", "g")]);
    assert_eq!((depth.pending, depth.partitions_pending), (2, 2));
    let depth: Depth = b.view("/api/v1/resources/queues/b.one/depth", &[]);
    assert_eq!((depth.pending, depth.partitions.len()), (2, 2));
    let parts: PartitionsPage = b.view("/api/v1/resources/partitions", &[("queue", "b.one")]);
    let rows: Vec<(&str, u64, u64)> = parts
        .partitions
        .iter()
        .map(|p| (p.name.as_str(), p.messages, p.consumer_groups))
        .collect();
    assert_eq!(rows, [("p1", 2, 1), ("p2", 1, 1)]);
    let ns: Namespaces = b.view("/api/v1/resources/namespaces", &[]);
    assert_eq!(ns.namespaces.len(), 2);
    // MGMT-2: namespaces and tasks are pages like every listing.
    let second: Namespaces = b.view(
        "/api/v1/resources/namespaces",
        &[("limit", "1"), ("offset", "1")],
    );
    let rows: Vec<(&str, u64)> = second
        .namespaces
        .iter()
        .map(|n| (n.namespace.as_str(), n.queues))
        .collect();
    assert_eq!(rows, [("b", 1)]);
    assert_eq!(
        (second.page.total, second.page.limit, second.page.offset),
        (2, 1, 1)
    );
    let tasks: Tasks = b.view("/api/v1/resources/tasks", &[("offset", "5")]);
    assert_eq!((tasks.tasks.len(), tasks.page.total), (0, 2));
    for bad in [("limit", "1001"), ("offset", "x")] {
        for path in ["/api/v1/resources/namespaces", "/api/v1/resources/tasks"] {
            assert_eq!(
                b.send(HttpRequest::get(path, &[bad])).status,
                400,
                "{path} {bad:?}"
            );
        }
    }
    assert_eq!(
        b.send(HttpRequest::get("/api/v1/resources/queues/nope", &[]))
            .status,
        404
    );
    assert_eq!(
        b.send(HttpRequest::get(
            "/api/v1/resources/queues",
            &[("limit", "0")]
        ))
        .status,
        400
    );
}

#[test]
fn mgmt_8_seek_to_the_end_and_back_to_a_time() {
    let mut b = Broker::new();
    b.push1("q", "p", "a");
    b.advance(1_000);
    let mark = b.now;
    b.push1("q", "p", "b");
    let held = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    let seek = "/api/v1/consumer-groups/g/queues/q/seek";
    let r = b.post(seek, json!({"toEnd": true}));
    assert_eq!(r.body.unwrap()["partitions"], 1);
    assert!(
        b.pop("q", &[("consumerGroup", "g")]).is_none(),
        "at the end"
    );
    // The released lease no longer acks.
    let acked = b.ack_batch(Some("g"), vec![ack_of(&held.messages[0], "completed")]);
    assert!(
        acked[0].success && acked[0].noop,
        "at or below the cursor: ACK-3 {acked:?}"
    );
    let t = queen_reference::time::format_iso(mark);
    assert_eq!(b.post(seek, json!({"timestamp": t})).status, 200);
    assert_eq!(Broker::txns(&b.pop("q", &[("consumerGroup", "g")])), ["b"]);
    assert_eq!(
        b.post(
            "/api/v1/consumer-groups/g/queues/nope/seek",
            json!({"toEnd": true})
        )
        .status,
        404
    );
    assert_eq!(b.post(seek, json!({"toEnd": false})).status, 400);
}

#[test]
fn mgmt_9_a_deleted_group_starts_again() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["a", "b"]);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "2")])
        .unwrap();
    b.ack_batch(
        Some("g"),
        p.messages.iter().map(|m| ack_of(m, "completed")).collect(),
    );
    let r = b.send(HttpRequest::delete("/api/v1/consumer-groups/g"));
    assert_eq!(r.body.unwrap()["deleted"], 1);
    let groups: GroupsPage = b.view("/api/v1/consumer-groups", &[]);
    assert!(groups.consumer_groups.is_empty());
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g"), ("batch", "5")])),
        ["a", "b"]
    );
    let again = b.send(HttpRequest::delete(
        "/api/v1/consumer-groups/other/queues/q",
    ));
    assert_eq!(again.body.unwrap()["deleted"], 0);
}

#[test]
fn mgmt_8_one_partition_and_the_subscription_time() {
    let mut b = Broker::new();
    b.push1("q", "p1", "a");
    b.push1("q", "p2", "b");
    b.pop(
        "q",
        &[
            ("consumerGroup", "g"),
            ("autoAck", "true"),
            ("batch", "5"),
            ("partitions", "2"),
        ],
    );
    let one = "/api/v1/consumer-groups/g/queues/q/partitions/p1/seek";
    let r = b.post(
        one,
        json!({"timestamp": queen_reference::time::format_iso(T0 - 1)}),
    );
    assert_eq!(r.body.unwrap()["partitions"], 1);
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g"), ("batch", "5")])),
        ["a"],
        "only p1 went back"
    );
    let missing = b.post(
        "/api/v1/consumer-groups/g/queues/q/partitions/nope/seek",
        json!({"toEnd": true}),
    );
    assert_eq!(missing.status, 404);
    let r = b.post(
        "/api/v1/consumer-groups/g/subscription",
        json!({"subscriptionTimestamp": queen_reference::time::format_iso(T0 - 1)}),
    );
    let body = r.body.unwrap();
    assert_eq!(
        (body["queues"].clone(), body["partitions"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(
        Broker::txns(&b.pop(
            "q",
            &[("consumerGroup", "g"), ("batch", "5"), ("partitions", "2")]
        ))
        .len(),
        2
    );
    assert_eq!(
        b.post(
            "/api/v1/consumer-groups/g/subscription",
            json!({"subscriptionTimestamp": "later"})
        )
        .status,
        400
    );
}

#[test]
fn mgmt_11_a_deleted_message_is_passed_by_every_path() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["a", "b", "c", "d"]);
    let held = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "3")])
        .unwrap();
    let pid = held.messages[0].partition_id.clone();
    let path = |t: &str| format!("/api/v1/messages/{pid}/{t}");
    for t in ["c", "b"] {
        let r = b.send(HttpRequest::delete(path(t)));
        assert_eq!(r.status, 200, "{r:?}");
        let r: MessageDeleted = serde_json::from_value(r.body.unwrap()).unwrap();
        assert_eq!(r.message_id, held.messages[if t == "b" { 1 } else { 2 }].id);
    }
    assert_eq!(b.send(HttpRequest::delete(path("c"))).status, 404);
    assert_eq!(b.send(HttpRequest::get(path("c"), &[])).status, 404);
    // The span ended at c: it now ends at a, so acking a releases the lease.
    let acked = b.ack_batch(Some("g"), vec![ack_of(&held.messages[0], "completed")]);
    assert!(acked[0].success && acked[0].lease_released, "{acked:?}");
    let late = b.ack_batch(Some("g"), vec![ack_of(&held.messages[2], "completed")]);
    assert_eq!(late[0].error.as_deref(), Some("unresolvable"));
    // Figures leave the deleted messages out.
    let depth: Depth = b.view("/api/v1/resources/queues/q/depth", &[("group", "g")]);
    assert_eq!(depth.pending, 1);
    let queue: QueueDetail = b.view("/api/v1/resources/queues/q", &[]);
    assert_eq!(queue.summary.messages, 2);
    let peek: MessagesPage = b.view("/api/v1/messages", &[("queue", "q")]);
    let listed: Vec<&str> = peek
        .messages
        .iter()
        .map(|m| m.message.transaction_id.as_str())
        .collect();
    assert_eq!(listed, ["a", "d"]);
    // A new group is never handed them; the old transactionId deduplicates nothing.
    let fresh = b.pop("q", &[("consumerGroup", "h"), ("batch", "10")]);
    assert_eq!(Broker::txns(&fresh), ["a", "d"]);
    assert_eq!(b.push1("q", "p", "c").status, PushStatus::Queued);
    let rest = b.pop("q", &[("consumerGroup", "g"), ("batch", "10")]);
    assert_eq!(Broker::txns(&rest), ["d", "c"]);
}

#[test]
fn mgmt_11_a_deleted_messages_dead_letter_stays_and_can_be_retried() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 0}));
    b.push1("q", "p", "a");
    let g = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&g.messages[0], "dlq")]);
    let pid = g.messages[0].partition_id.clone();
    assert_eq!(
        b.send(HttpRequest::delete(format!("/api/v1/messages/{pid}/a")))
            .status,
        200
    );
    assert_eq!(
        b.dlq(&[("queue", "q")]).total,
        1,
        "the dead letter keeps its copy"
    );
    let r = b.post(&format!("/api/v1/messages/{pid}/a/retry"), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let again = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    assert_eq!(again.messages.len(), 1);
    assert_eq!(again.messages[0].data, g.messages[0].data);
}

/// MGMT-11, MGMT-2: a delete with a partitionId that is not a UUID, or naming no
/// message, changes nothing: the message is still listed and delivered.
#[test]
fn mgmt_11_a_refused_delete_changes_nothing() {
    let mut b = Broker::new();
    b.push1("q", "p", "a");
    let bad = b.send(HttpRequest::delete(
        "/api/v1/messages/not-a-uuid/a".to_string(),
    ));
    assert_eq!(bad.status, 400);
    let peek: MessagesPage = b.view("/api/v1/messages", &[("queue", "q")]);
    let pid = peek.messages[0].message.partition_id.clone();
    let none = b.send(HttpRequest::delete(format!("/api/v1/messages/{pid}/zz")));
    assert_eq!(none.status, 404);
    let after: MessagesPage = b.view("/api/v1/messages", &[("queue", "q")]);
    assert_eq!(after, peek, "the listing is as it was");
    assert_eq!(Broker::txns(&b.pop("q", &[])), ["a"]);
}

#[test]
fn mgmt_11_a_bad_partition_id_is_400() {
    let mut b = Broker::new();
    let r = b.send(HttpRequest::delete(
        "/api/v1/messages/not-a-uuid/a".to_string(),
    ));
    assert_eq!(r.status, 400);
}

#[test]
fn mgmt_12_a_retried_dead_letter_is_written_again_for_every_group() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 0}));
    b.push1("q", "p", "a");
    let g = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&g.messages[0], "dlq")]);
    let h = b
        .pop("q", &[("consumerGroup", "h"), ("autoAck", "true")])
        .unwrap();
    let pid = g.messages[0].partition_id.clone();
    let retry = format!("/api/v1/messages/{pid}/a/retry");
    let r: RetryResponse = serde_json::from_value(b.post(&retry, json!({})).body.unwrap()).unwrap();
    assert_eq!(r.retried, 1);
    assert!(is_uuid(&r.transaction_id), "a minted transactionId: {r:?}");
    assert_eq!(b.dlq(&[("queue", "q")]).total, 0, "the dead letter is gone");
    // Both groups get the new message, as they would a push.
    for group in ["g", "h"] {
        let again = b
            .pop("q", &[("consumerGroup", group), ("autoAck", "true")])
            .unwrap();
        assert_eq!(again.messages[0].transaction_id, r.transaction_id);
        assert_eq!(again.messages[0].data, h.messages[0].data);
    }
    assert_eq!(b.post(&retry, json!({})).status, 404, "no dead letter left");
    // While pushes are spooled, a retry is refused and the dead letter stays.
    b.push1("q", "p", "b");
    let g = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&g.messages[0], "dlq")]);
    b.post("/api/v1/system/maintenance", json!({"enabled": true}));
    let refused = b.post(&format!("/api/v1/messages/{pid}/b/retry"), json!({}));
    assert_eq!(refused.status, 503);
    assert_eq!(b.dlq(&[("queue", "q")]).total, 1);
}

#[test]
fn mgmt_13_analytics_count_messages_and_dead_letters_per_bucket() {
    let mut b = Broker::new();
    b.configure("n.q", json!({"retryLimit": 0}));
    b.push_many("n.q", "p", &["a", "b"]);
    b.advance(65 * 60_000);
    b.push1("n.q", "p", "c");
    b.push1("other", "p", "x");
    let g = b
        .pop("n.q", &[("consumerGroup", "g"), ("batch", "1")])
        .unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&g.messages[0], "dlq")]);
    let read = |b: &mut Broker, query: &[(&str, &str)]| -> Analytics {
        b.view("/api/v1/status/analytics", query)
    };
    let rows = |a: &Analytics| -> Vec<(String, u64, u64)> {
        a.buckets
            .iter()
            .map(|x| (x.timestamp.clone(), x.ingested, x.dead_lettered))
            .collect()
    };
    let window = [
        ("namespace", "n"),
        ("from", "2027-01-15T07:30:00Z"),
        ("to", "2027-01-15T09:30:00Z"),
    ];
    let a = read(&mut b, &window);
    assert_eq!(
        rows(&a),
        [
            ("2027-01-15T07:00:00.000Z".to_string(), 0, 0),
            ("2027-01-15T08:00:00.000Z".to_string(), 2, 0),
            ("2027-01-15T09:00:00.000Z".to_string(), 1, 1),
        ],
        "a and b at 08:00, c at 09:05, the dead letter of a filed at 09:05"
    );
    assert_eq!((a.totals.ingested, a.totals.dead_lettered), (3, 1));
    // The window's ends cut the first and last buckets: a and b are a millisecond early.
    let cut = read(
        &mut b,
        &[("from", "2027-01-15T08:00:00.001Z"), ("queue", "n.q")],
    );
    assert_eq!((cut.totals.ingested, cut.buckets.len()), (1, 2));
    // The default window is the last 24 hours, by the hour: 25 buckets meet it.
    let d = read(&mut b, &[("queue", "n.q")]);
    assert_eq!(
        (d.interval, d.buckets.len(), d.totals.ingested),
        (Interval::Hour, 25, 3)
    );
    // A deleted message is not retained, so not counted; its dead letter stays.
    let pid = g.messages[0].partition_id.clone();
    assert_eq!(
        b.send(HttpRequest::delete(format!("/api/v1/messages/{pid}/c")))
            .status,
        200
    );
    let after = read(&mut b, &window);
    assert_eq!((after.totals.ingested, after.totals.dead_lettered), (2, 1));
    // The dead letter of a stays in the hour of its filing, not of its message.
    assert_eq!(
        rows(&after)[2],
        ("2027-01-15T09:00:00.000Z".to_string(), 0, 1)
    );
    for bad in [
        &[("interval", "week")][..],
        &[
            ("to", "2027-01-15T07:00:00Z"),
            ("from", "2027-01-15T08:00:00Z"),
        ],
        &[("from", "2027-01-16T00:00:00Z")],
        &[("from", "2027-01-01T00:00:00Z"), ("interval", "minute")],
    ] {
        let r = b.send(HttpRequest::get("/api/v1/status/analytics", bad));
        assert_eq!(r.status, 400, "{bad:?}: {:?}", r.body);
    }
}
