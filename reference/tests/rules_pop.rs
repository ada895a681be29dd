//! One test (at least) per pop rule (PROTOCOL.md section 3), on the deterministic engine.

mod common;
use common::*;
use queen_reference::time::{format_iso, is_iso_utc_z};
use queen_reference::wire::*;
use serde_json::json;

#[test]
fn proto_group_1_omitted_group_is_queue_mode_with_its_own_cursor() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    let p = b.pop("q", &[("batch", "1"), ("autoAck", "true")]).unwrap();
    assert_eq!(p.consumer_group, "__QUEUE_MODE__");
    assert_eq!(p.messages[0].consumer_group, "__QUEUE_MODE__");
    // Two consumers without a group share the cursor; a named group has its own.
    assert_eq!(Broker::txns(&b.pop("q", &[("autoAck", "true")])), vec!["2"]);
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g")])),
        vec!["1", "2"]
    );
}

#[test]
fn pop_1_pop_never_removes_and_leases_the_span_in_offset_order() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2", "3"]);
    let p = b.pop("q", &[("consumerGroup", "a")]).unwrap();
    assert_eq!(Broker::txns(&Some(p.clone())), vec!["1", "2", "3"]);
    assert!(p.messages.iter().all(|m| m.lease_id == p.lease_id));
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "b")])),
        vec!["1", "2", "3"]
    );
    assert_eq!(
        b.e.state
            .part(queen_reference::model::PartH(0))
            .unwrap()
            .messages
            .len(),
        3
    );
}

#[test]
fn pop_2_leased_partitions_are_skipped_not_waited_on() {
    let mut b = Broker::new();
    b.push1("q", "a", "a1");
    b.push1("q", "b", "b1");
    let first = b.pop("q", &[]).unwrap();
    assert_eq!(first.partition, "a");
    let second = b.pop("q", &[]).unwrap();
    assert_eq!(second.partition, "b", "the leased partition is skipped");
    assert!(b.pop("q", &[]).is_none());
}

#[test]
fn pop_3_batch_is_shared_and_partitions_caps_claims() {
    let mut b = Broker::new();
    b.push_many("q", "a", &["a1", "a2"]);
    b.push_many("q", "b", &["b1", "b2"]);
    b.push_many("q", "c", &["c1", "c2"]);
    let p = b.pop("q", &[("batch", "3"), ("partitions", "0")]).unwrap();
    assert_eq!(Broker::txns(&Some(p.clone())), vec!["a1", "a2", "b1"]);
    assert_eq!(p.partitions_claimed, 2);
    let p = b.pop("q", &[("batch", "10"), ("partitions", "1")]).unwrap();
    assert_eq!(p.partitions_claimed, 1);
    assert_eq!(Broker::txns(&Some(p)), vec!["c1", "c2"]);
}

#[test]
fn pop_4_our_choice_is_oldest_unconsumed_message_first() {
    let mut b = Broker::new();
    b.push1("q", "late", "x");
    b.advance(10);
    b.push1("q", "early", "y");
    b.advance(10);
    b.push1("q", "late", "z");
    assert_eq!(b.pop("q", &[]).unwrap().partition, "late");
    assert_eq!(b.pop("q", &[]).unwrap().partition, "early");
}

/// Ties on age go by partition name, whichever partition was created first: a checker
/// treats states that differ only in that order as one.
#[test]
fn pop_4_our_choice_breaks_ties_by_name_not_creation_order() {
    let mut b = Broker::new();
    b.push1("q", "zeta", "z");
    b.push1("q", "alpha", "a");
    assert_eq!(b.pop("q", &[]).unwrap().partition, "alpha");
    assert_eq!(b.pop("q", &[]).unwrap().partition, "zeta");
}

#[test]
fn pop_5_answer_shape_names_the_first_partition() {
    let mut b = Broker::new();
    b.push1("orders.created", "a", "a1");
    b.push1("orders.created", "b", "b1");
    let p = b
        .pop(
            "orders.created",
            &[("partitions", "2"), ("consumerGroup", "billing")],
        )
        .unwrap();
    assert!(p.success);
    assert_eq!(p.queue, "orders.created");
    assert_eq!(p.partition, "a");
    assert_eq!(p.partition_id, p.messages[0].partition_id);
    assert_ne!(p.messages[0].partition_id, p.messages[1].partition_id);
    assert_eq!(p.messages[1].partition, "b");
    assert_eq!(p.partitions_claimed, 2);
    let v = serde_json::to_value(&p.messages[0]).unwrap();
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "id",
            "transactionId",
            "traceId",
            "data",
            "producerSub",
            "createdAt",
            "partitionId",
            "partition",
            "leaseId",
            "consumerGroup"
        ]
    );
}

#[test]
fn pop_6_nothing_delivered_is_a_bare_204() {
    let mut b = Broker::new();
    b.push1("q", "p", "1");
    b.pop("q", &[]).unwrap();
    let r = b.send(HttpRequest::get("/api/v1/pop/queue/q", &[]));
    assert_eq!((r.status, r.body), (204, None));
}

#[test]
fn pop_7_auto_ack_commits_without_lease() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    let p = b.pop("q", &[("autoAck", "true"), ("batch", "1")]).unwrap();
    assert_eq!(p.lease_id, "");
    assert_eq!(p.messages[0].lease_id, "");
    assert_eq!(
        Broker::txns(&b.pop("q", &[])),
        vec!["2"],
        "the cursor moved and no lease blocks"
    );
}

#[test]
fn pop_8_pop_on_unknown_queue_creates_its_row_and_answers_204() {
    let mut b = Broker::new();
    assert!(b.pop("billing.invoices.v1", &[]).is_none());
    let q = &b.e.state.queues["billing.invoices.v1"];
    assert_eq!(
        (q.namespace.as_str(), q.task.as_str()),
        ("billing", "invoices")
    );
    assert!(q.partitions.is_empty());
    let r = b.send(HttpRequest::delete(
        "/api/v1/resources/queues/billing.invoices.v1",
    ));
    assert_eq!(r.body.unwrap()["existed"], true);
}

#[test]
fn pop_9_lease_deadline_from_lease_seconds_or_queue_lease_time() {
    let mut b = Broker::new();
    b.push1("implicit", "p", "1");
    b.pop("implicit", &[]).unwrap();
    b.advance(59_999);
    assert!(b.pop("implicit", &[]).is_none(), "60 s lease still live");
    b.advance(1);
    assert!(b.pop("implicit", &[]).is_some(), "expired at 60 s");

    b.configure("explicit", json!({}));
    b.push1("explicit", "p", "1");
    b.pop("explicit", &[("leaseSeconds", "0")]).unwrap();
    b.advance(299_999);
    assert!(b.pop("explicit", &[]).is_none(), "configure default 300 s");
    b.advance(1);
    b.pop("explicit", &[("leaseSeconds", "2")]).unwrap();
    b.advance(2_000);
    assert!(b.pop("explicit", &[]).is_some(), "leaseSeconds overrides");
}

#[test]
fn pop_10_discovery_needs_a_scope_and_parameters_must_parse() {
    let mut b = Broker::new();
    let r = b.send(HttpRequest::get("/api/v1/pop", &[]));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body.unwrap(),
        json!({"success": false, "error": "namespace or task is required", "messages": []})
    );
    let r = b.send(HttpRequest::get("/api/v1/pop/queue/q", &[("batch", "abc")]));
    assert_eq!(r.status, 400);
    assert!(
        b.e.state.queues.is_empty(),
        "a rejected pop creates nothing"
    );
}

#[test]
fn pop_11_wait_true_answers_like_a_check_at_the_time_it_returns() {
    // The model has no clock: a long poll is judged at the moment it answers. A push
    // before that moment makes it deliver; a timeout is a 204.
    let mut b = Broker::new();
    assert!(b
        .pop("q", &[("wait", "true"), ("timeout", "100")])
        .is_none());
    b.push1("q", "p", "1");
    assert_eq!(Broker::txns(&b.pop("q", &[("wait", "true")])), vec!["1"]);
}

#[test]
fn pop_12_created_at_is_the_write_time_shared_by_one_push_call() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["1", "2"]);
    b.advance(5);
    b.push1("q", "p", "3");
    let p = b.pop("q", &[]).unwrap();
    assert!(p.messages.iter().all(|m| is_iso_utc_z(&m.created_at)));
    assert_eq!(p.messages[0].created_at, format_iso(T0));
    assert_eq!(p.messages[0].created_at, p.messages[1].created_at);
    assert_eq!(p.messages[2].created_at, format_iso(T0 + 5));
}

#[test]
fn pop_13_subscription_modes_seed_new_cursors() {
    let mut b = Broker::new();
    b.push_many("q", "p", &["old1", "old2"]);
    b.advance(1000);
    let cut = format_iso(b.now);
    b.push1("q", "p", "mid");
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "all")])),
        vec!["old1", "old2", "mid"]
    );
    assert!(b
        .pop(
            "q",
            &[("consumerGroup", "new"), ("subscriptionMode", "new")]
        )
        .is_none());
    assert!(b
        .pop(
            "q",
            &[("consumerGroup", "now"), ("subscriptionFrom", "now")]
        )
        .is_none());
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "ts"), ("subscriptionFrom", &cut)])),
        vec!["mid"]
    );
    assert_eq!(
        Broker::txns(&b.pop(
            "q",
            &[
                ("consumerGroup", "junk"),
                ("subscriptionFrom", "yesterday-ish")
            ]
        ))
        .len(),
        3,
        "an unparseable time is ignored"
    );
    assert_eq!(
        Broker::txns(&b.pop(
            "q",
            &[("consumerGroup", "odd"), ("subscriptionMode", "weird")]
        ))
        .len(),
        3
    );
    // Queue mode is never seeded.
    assert_eq!(
        Broker::txns(&b.pop("q", &[("subscriptionMode", "new")])).len(),
        3
    );
    // The recorded subscription wins: the `new` group sees later messages.
    b.push1("q", "p", "later");
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "new")])),
        vec!["later"]
    );
}

#[test]
fn pop_13_first_pop_records_subscription_even_on_204_and_later_partitions_start_at_beginning() {
    let mut b = Broker::new();
    b.push1("q", "existing", "e1");
    assert!(b
        .pop("q", &[("consumerGroup", "g"), ("subscriptionMode", "new")])
        .is_none());
    b.push1("q", "existing", "e2");
    b.push1("q", "created-later", "c1");
    let got = Broker::txns(&b.pop("q", &[("consumerGroup", "g"), ("partitions", "0")]));
    assert_eq!(
        got,
        vec!["c1", "e2"],
        "e1 skipped; the later partition starts at its beginning (ties by name, POP-4)"
    );
}

/// A subscription's parameters act once, at the group's first pop: the state keeps only
/// that the group is subscribed, so two brokers whose first pops ran at different times
/// (or with different parameters that seeded alike) are in one state.
#[test]
fn pop_13_a_subscription_is_one_state_whenever_its_first_pop_ran() {
    let first_pop = |wait: i64, mode: &str| {
        let mut b = Broker::new();
        b.configure("q", json!({}));
        b.advance(wait);
        let query = [("consumerGroup", "g"), ("subscriptionMode", mode)];
        assert!(b.pop("q", &query).is_none());
        b.e.state
    };
    let early = first_pop(0, "all");
    let mut unsubscribed = Broker::new();
    unsubscribed.configure("q", json!({}));
    assert_ne!(early, unsubscribed.e.state, "the 204 records it (POP-18)");
    assert_eq!(early, first_pop(50, "all"));
    assert_eq!(early, first_pop(0, "new"));
}

#[test]
fn pop_14_delayed_processing_and_window_buffer() {
    let mut b = Broker::new();
    b.configure("d", json!({"delayedProcessing": 2}));
    b.push1("d", "p", "1");
    b.advance(1_000);
    b.push1("d", "p", "2");
    b.advance(999);
    assert!(b.pop("d", &[]).is_none());
    b.advance(1);
    assert_eq!(
        Broker::txns(&b.pop("d", &[])),
        vec!["1"],
        "only messages at least 2 s old"
    );

    b.configure("w", json!({"windowBuffer": 1}));
    b.push1("w", "p", "1");
    b.advance(900);
    b.push1("w", "p", "2");
    b.advance(900);
    assert!(b.pop("w", &[]).is_none(), "written within the last second");
    b.advance(100);
    assert_eq!(Broker::txns(&b.pop("w", &[])), vec!["1", "2"]);
}

#[test]
fn pop_15_min_pop_wait_time_does_not_change_what_is_delivered() {
    // minPopWaitTime only delays an under-full batch; in a model without concurrent
    // writers the batch delivered is the same. Its timing is checked by the suite.
    let mut b = Broker::new();
    b.configure("q", json!({"minPopWaitTime": 500}));
    b.push1("q", "p", "1");
    assert_eq!(
        Broker::txns(&b.pop("q", &[("wait", "true"), ("batch", "10")])),
        vec!["1"]
    );
}

#[test]
fn pop_routes_partition_and_discovery() {
    let mut b = Broker::new();
    b.push1("shop.orders", "a", "a1");
    b.push1("shop.orders", "b", "b1");
    b.push1("shop.refunds", "a", "r1");
    b.push1("other.orders", "a", "o1");
    let p = b.pop_partition("shop.orders", "b", &[]).unwrap();
    assert_eq!(Broker::txns(&Some(p)), vec!["b1"]);
    assert!(b.pop_partition("shop.orders", "zzz", &[]).is_none());
    let d = b
        .pop_path(
            "/api/v1/pop",
            &[("namespace", "shop"), ("partitions", "0"), ("batch", "10")],
        )
        .unwrap();
    assert_eq!(d.queue, "", "discovery answers an empty queue");
    assert_eq!(Broker::txns(&Some(d)), vec!["a1", "r1"]);
    let d = b.pop_path("/api/v1/pop", &[("task", "orders")]).unwrap();
    assert_eq!(Broker::txns(&Some(d)), vec!["o1"]);
}

/// The batch budget left after one partition is what the next one gets: 5 across a
/// partition of 2 and one of 4 delivers 2 + 3.
#[test]
fn pop_3_each_partition_gets_the_budget_left_by_the_ones_before() {
    let mut b = Broker::new();
    b.push_many("q", "a", &["a1", "a2"]);
    b.advance(10);
    b.push_many("q", "b", &["b1", "b2", "b3", "b4"]);
    let p = b.pop("q", &[("batch", "5"), ("partitions", "0")]).unwrap();
    assert_eq!(p.partitions_claimed, 2);
    assert_eq!(Broker::txns(&Some(p)), vec!["a1", "a2", "b1", "b2", "b3"]);
}

/// An autoAck commit forgets the retry count spent on the offset it commits, as an ack
/// does: failing a message and then consuming it with autoAck leaves the same state as
/// sending it back with `retry` (which spends nothing) and then consuming it.
#[test]
fn pop_7_auto_ack_commit_forgets_retries_spent_on_the_committed_span() {
    let run = |status: &str| {
        let mut b = Broker::new();
        b.configure("q", json!({"retryLimit": 3, "retryDelay": 0}));
        b.push_many("q", "p", &["m1", "m2"]);
        let p = b
            .pop("q", &[("consumerGroup", "g"), ("batch", "1")])
            .unwrap();
        let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], status)]);
        assert!(r[0].success && r[0].lease_released, "{r:?}");
        let p = b.pop(
            "q",
            &[("consumerGroup", "g"), ("batch", "1"), ("autoAck", "true")],
        );
        assert_eq!(Broker::txns(&p), vec!["m1"]);
        b
    };
    let (failed, retried) = (run("failed"), run("retry"));
    assert_eq!(failed.e.state, retried.e.state);
}

/// A named group that pops again with `subscriptionMode=new` does not skip the backlog
/// of a partition created after its first pop: our server seeds only at the first pop.
#[test]
fn pop_13_later_pops_parameters_do_not_seed_partitions_created_after_the_first_pop() {
    let mut b = Broker::new();
    b.push1("q", "a", "a1");
    let new = [("consumerGroup", "g"), ("subscriptionMode", "new")];
    assert!(b.pop("q", &new).is_none());
    b.push1("q", "b", "b1");
    assert_eq!(
        Broker::txns(&b.pop("q", &new)),
        vec!["b1"],
        "the later partition starts at its beginning"
    );
}

/// [PROJECT] alternative of POP-13: every pop seeds the partitions its group has no
/// cursor on yet with that pop's parameters, for `new`, `now` and a time alike, even
/// when the group's first pop found the queue empty.
#[test]
fn pop_13_project_alternative_seeds_later_partitions_with_each_pops_parameters() {
    let mut b = Broker::new();
    b.e.policy.subscription_per_partition = 1;
    let future = format_iso(T0 + 3_600_000);
    let groups: [(&str, (&str, &str)); 4] = [
        ("new", ("subscriptionMode", "new")),
        ("now", ("subscriptionFrom", "now")),
        ("ts", ("subscriptionFrom", &future)),
        ("all", ("subscriptionMode", "all")),
    ];
    for (g, param) in groups {
        assert!(b.pop("q", &[("consumerGroup", g), param]).is_none());
    }
    b.push1("q", "b", "b1");
    for (g, param) in groups {
        let got = Broker::txns(&b.pop("q", &[("consumerGroup", g), param]));
        let want: Vec<&str> = if g == "all" { vec!["b1"] } else { vec![] };
        assert_eq!(got, want, "group {g}");
    }
}

/// POP-8 as our server reads it for the partition route: a pop on an unknown queue
/// creates its configuration row, with the defaults of an implicit queue.
#[test]
fn pop_8_partition_route_on_unknown_queue_creates_its_row() {
    let mut b = Broker::new();
    assert!(b.pop_partition("shop.orders", "p", &[]).is_none());
    let q = &b.e.state.queues["shop.orders"];
    assert_eq!(
        (q.namespace.as_str(), q.task.as_str(), q.options.lease_time),
        ("shop", "orders", 60)
    );
    assert!(q.partitions.is_empty());
}
