//! Leases, dead letters, transactions, configure, delete, health and maintenance
//! (PROTOCOL.md sections 5–11), on the deterministic engine.

mod common;
use common::*;
use queen_reference::time::format_iso;
use queen_reference::wire::*;
use serde_json::json;

fn body(r: HttpResponse) -> serde_json::Value {
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body.unwrap()
}

#[test]
fn lease_1_extend_renews_every_live_lease_never_shortens_never_revives() {
    let mut b = Broker::new();
    b.push1("q", "a", "a1");
    b.push1("q", "b", "b1");
    let p = b
        .pop("q", &[("partitions", "2"), ("leaseSeconds", "10")])
        .unwrap();
    b.advance(5_000);
    let r = body(b.extend(&p.lease_id, br#"{"seconds": 20}"#));
    assert_eq!(r["renewed"], 2);
    assert_eq!(r["expiresAt"], format_iso(T0 + 25_000));
    let r = body(b.extend(&p.lease_id, br#"{"seconds": 1}"#));
    assert_eq!(r["expiresAt"], format_iso(T0 + 25_000), "never shortened");
    b.advance(20_000);
    let r = body(b.extend(&p.lease_id, br#"{"seconds": 60}"#));
    assert_eq!(
        (r["success"].clone(), r["renewed"].clone()),
        (json!(false), json!(0)),
        "not revived"
    );
    assert!(b.pop("q", &[]).is_some());
}

#[test]
fn lease_2_always_200_read_the_body() {
    let mut b = Broker::new();
    let r = body(b.extend("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90", b""));
    assert_eq!(
        r,
        json!({"leaseId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90", "success": false, "renewed": 0, "expiresAt": null, "error": "lease not found or expired"})
    );
}

#[test]
fn lease_3_body_optional_defaults_to_the_lease_duration_and_bad_seconds_are_400() {
    let mut b = Broker::new();
    b.push1("q", "p", "1");
    let p = b.pop("q", &[("leaseSeconds", "30")]).unwrap();
    b.advance(10_000);
    let r = body(b.extend(&p.lease_id, b""));
    assert_eq!(r["expiresAt"], format_iso(T0 + 40_000));
    let before = b.e.state.clone();
    for bad in [&br#"{"seconds": 0}"#[..], br#"{"seconds": "5"}"#, b"nope"] {
        assert_eq!(b.extend(&p.lease_id, bad).status, 400);
    }
    assert_eq!(b.extend("not-a-uuid", b"").status, 400);
    assert_eq!(b.e.state, before);
}

#[test]
fn dlq_1_retry_limit_n_allows_n_redeliveries() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryLimit": 2, "retryDelay": 0}));
    b.push1("q", "p", "m");
    for attempt in 0..3 {
        let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
        let r = b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "failed")]);
        assert_eq!(r[0].dlq, attempt == 2, "attempt {attempt}");
    }
    assert!(b.pop("q", &[("consumerGroup", "g")]).is_none());
}

#[test]
fn dlq_2_dead_letters_are_per_message_and_group_and_listed() {
    let mut b = Broker::new();
    b.push1("q", "p", "m");
    for g in ["a", "b"] {
        let p = b.pop("q", &[("consumerGroup", g)]).unwrap();
        b.ack_batch(Some(g), vec![json!({"transactionId": "m", "partitionId": p.partition_id, "status": "dlq", "error": format!("by {g}")})]);
    }
    let all = b.dlq(&[]);
    assert_eq!(all.total, 2);
    let d = &all.messages[0];
    assert_eq!(
        (
            d.queue.as_str(),
            d.partition.as_str(),
            d.consumer_group.as_str()
        ),
        ("q", "p", "a")
    );
    assert_eq!(d.data, json!({"txn": "m"}));
    assert!(is_uuid(&d.id) && is_uuid(&d.partition_id));
    let page = b.dlq(&[("limit", "1"), ("offset", "1")]);
    assert_eq!(
        (
            page.total,
            page.messages.len(),
            page.messages[0].consumer_group.as_str()
        ),
        (2, 1, "b")
    );
    assert_eq!(
        b.send(HttpRequest::get("/api/v1/dlq", &[("limit", "x")]))
            .status,
        400
    );
}

#[test]
fn txn_1_all_operations_commit_together_or_none() {
    let mut b = Broker::new();
    let p = {
        b.push1("in", "p", "work");
        b.pop("in", &[("consumerGroup", "g")]).unwrap()
    };
    let ok = body(b.post("/api/v1/transaction", json!({"operations": [
        {"type": "push", "items": [{"queue": "out", "payload": {"done": true}, "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}]},
        {"type": "ack", "transactionId": "work", "partitionId": p.partition_id, "leaseId": p.lease_id, "consumerGroup": "g"},
    ]})));
    assert_eq!(ok["success"], true);
    assert_eq!(ok["results"].as_array().unwrap().len(), 2);
    let out = b.pop("out", &[]).unwrap();
    assert_eq!(
        out.messages[0].trace_id.as_deref(),
        Some("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"),
        "kept in a transaction"
    );
    // TXN-2: a failing ack aborts the push too.
    let before = b.e.state.clone();
    let bad = body(b.post("/api/v1/transaction", json!({"operations": [
        {"type": "push", "items": [{"queue": "out", "payload": 2}]},
        {"type": "ack", "transactionId": "work", "partitionId": p.partition_id, "status": "failed", "consumerGroup": "g"},
    ]})));
    assert_eq!(bad["success"], false);
    assert!(bad["error"].as_str().unwrap().contains("already committed"));
    assert_eq!(bad["results"], json!([]));
    assert_eq!(b.e.state.queues, before.queues);
}

#[test]
fn txn_2_acks_follow_section_4_and_pushes_dedup() {
    let mut b = Broker::new();
    b.push1("q", "p", "dup");
    let r = body(b.post(
        "/api/v1/transaction",
        json!({"operations": [
            {"type": "push", "items": [{"queue": "q", "partition": "p", "transactionId": "dup"}]},
        ]}),
    ));
    assert_eq!(r["results"][0]["status"], "duplicate");
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    let mut wrong = json!({"type": "ack", "transactionId": "dup", "partitionId": p.partition_id, "consumerGroup": "g"});
    wrong["leaseId"] = json!("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90");
    let r = body(b.post("/api/v1/transaction", json!({"operations": [wrong]})));
    assert_eq!(r["success"], false);
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("invalid or expired lease"));
}

#[test]
fn txn_3_answer_shape_and_empty_operations_is_400() {
    let mut b = Broker::new();
    let r = body(b.post(
        "/api/v1/transaction",
        json!({"operations": [{"type": "push", "items": [{"queue": "q"}]}]}),
    ));
    assert!(is_uuid(r["transactionId"].as_str().unwrap()));
    assert_eq!(r["results"][0]["type"], "push");
    assert_eq!(r["results"][0]["status"], "queued");
    let before = b.e.state.clone();
    assert_eq!(
        b.post("/api/v1/transaction", json!({"operations": []}))
            .status,
        400
    );
    assert_eq!(
        b.post(
            "/api/v1/transaction",
            json!({"operations": [{"type": "nope"}]})
        )
        .status,
        400
    );
    assert_eq!(b.e.state, before);
    let r = body(b.post("/api/v1/transaction", json!({"operations": [{"type": "push", "items": [{"queue": "q"}]}], "requiredLeases": ["0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"]})));
    assert_eq!(
        r["success"], false,
        "[PROJECT] a required lease that is not held aborts"
    );
    assert_eq!(b.e.state.queues, before.queues);
}

#[test]
fn cfg_1_configure_is_a_full_replace() {
    let mut b = Broker::new();
    b.configure("q", json!({"dedupWindowSeconds": 5, "retryLimit": 9}));
    let r = body(b.post(
        "/api/v1/configure",
        json!({"queue": "q", "options": {"retryLimit": 1}}),
    ));
    assert_eq!(r["options"]["dedupWindowSeconds"], 3600);
    assert_eq!(r["options"]["retryLimit"], 1);
    assert_eq!(r["configured"], true);
}

#[test]
fn cfg_2_defaults_are_answered_in_full() {
    let mut b = Broker::new();
    let r = body(b.post("/api/v1/configure", json!({"queue": "q"})));
    assert_eq!(
        r["options"],
        json!({"leaseTime": 300, "retryLimit": 3, "retryDelay": 1000, "dedupWindowSeconds": 3600, "delayedProcessing": 0,
               "windowBuffer": 0, "minPopWaitTime": 0, "maxSize": 0, "retentionSeconds": 0, "completedRetentionSeconds": 0,
               "encryptionEnabled": false, "priority": 0, "retentionEnabled": false, "maxWaitTimeSeconds": 0})
    );
}

#[test]
fn cfg_3_namespace_task_derived_and_bad_options_are_400() {
    let mut b = Broker::new();
    let r = body(b.post("/api/v1/configure", json!({"queue": "shop.orders.eu"})));
    assert_eq!(
        (r["namespace"].clone(), r["task"].clone()),
        (json!("shop"), json!("orders"))
    );
    let r = body(b.post(
        "/api/v1/configure",
        json!({"queue": "x", "namespace": "n", "task": "t"}),
    ));
    assert_eq!(
        (r["namespace"].clone(), r["task"].clone()),
        (json!("n"), json!("t"))
    );
    let before = b.e.state.clone();
    assert_eq!(
        b.post(
            "/api/v1/configure",
            json!({"queue": "x", "options": {"leaseTime": -3}})
        )
        .status,
        400
    );
    assert_eq!(
        b.post(
            "/api/v1/configure",
            json!({"queue": "x", "options": {"retryLimit": "3"}})
        )
        .status,
        400
    );
    assert_eq!(b.e.state, before);
}

#[test]
fn del_1_delete_removes_everything_and_says_whether_it_existed() {
    let mut b = Broker::new();
    b.push1("q", "p", "m");
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "dlq")]);
    let r = body(b.send(HttpRequest::delete("/api/v1/resources/queues/q")));
    assert_eq!(r, json!({"deleted": true, "queue": "q", "existed": true}));
    assert_eq!(b.dlq(&[]).total, 0);
    let r = body(b.send(HttpRequest::delete("/api/v1/resources/queues/q")));
    assert_eq!(r["existed"], false);
    b.push1("q", "p", "m");
    assert_eq!(
        Broker::txns(&b.pop("q", &[("consumerGroup", "g")])),
        vec!["m"],
        "a new queue starts afresh"
    );
}

#[test]
fn health_1_healthy_and_connected() {
    let mut b = Broker::new();
    assert_eq!(
        body(b.send(HttpRequest::get("/health", &[]))),
        json!({"status": "healthy", "database": "connected"})
    );
}

#[test]
fn maint_1_push_maintenance_switch_and_bad_body() {
    let mut b = Broker::new();
    assert_eq!(
        body(b.post("/api/v1/system/maintenance", json!({"enabled": true})))["maintenanceMode"],
        true
    );
    assert_eq!(b.push1("q", "p", "m").status, PushStatus::Buffered);
    assert_eq!(
        b.post("/api/v1/system/maintenance", json!({"enabled": "no"}))
            .status,
        400
    );
    assert!(
        b.e.state.push_maintenance,
        "a rejected switch changes nothing"
    );
}

#[test]
fn maint_2_pop_maintenance_answers_bare_204() {
    let mut b = Broker::new();
    b.push1("q", "p", "m");
    assert_eq!(
        body(b.post("/api/v1/system/maintenance/pop", json!({"enabled": true}))),
        json!({"popMaintenanceMode": true})
    );
    let r = b.send(HttpRequest::get("/api/v1/pop/queue/q", &[]));
    assert_eq!((r.status, r.body), (204, None));
    assert_eq!(
        body(b.send(HttpRequest::get("/api/v1/system/maintenance/pop", &[]))),
        json!({"popMaintenanceMode": true})
    );
    b.post("/api/v1/system/maintenance/pop", json!({"enabled": false}));
    assert_eq!(Broker::txns(&b.pop("q", &[])), vec!["m"]);
}

/// A charged retry count is kept while its offset is above the cursor and forgotten once the offset is committed.
#[test]
fn dlq_1_a_committed_offset_keeps_no_retry_count() {
    let mut b = Broker::new();
    b.configure("q", json!({"retryDelay": 0}));
    b.push_many("q", "p", &["m1", "m2", "m3"]);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "3")])
        .unwrap();
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "failed")]);
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("batch", "3")])
        .unwrap();
    let ph = *b.e.state.queues["q"].partitions.values().next().unwrap();
    let retries = |b: &Broker| b.e.state.part(ph).unwrap().cursors["g"].retries.clone();
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[0], "completed")]);
    assert_eq!(
        retries(&b),
        [(2, 1)].into(),
        "m2's charged retry is kept while it is above the cursor"
    );
    b.ack_batch(Some("g"), vec![ack_of(&p.messages[1], "completed")]);
    assert!(
        retries(&b).is_empty(),
        "committed: its count is forgotten, {:?}",
        retries(&b)
    );
}

/// The `queue` and `partition` filters of the listing apply on their own and together with `consumerGroup`.
#[test]
fn dlq_2_queue_and_partition_filters_apply_without_a_group_filter() {
    let mut b = Broker::new();
    for (q, p) in [("q", "a"), ("q", "b"), ("r", "a")] {
        b.push1(q, p, "m");
        let popped = b.pop_partition(q, p, &[("consumerGroup", "g")]).unwrap();
        b.ack_batch(Some("g"), vec![ack_of(&popped.messages[0], "dlq")]);
    }
    let listed = |b: &mut Broker, query: &[(&str, &str)]| -> Vec<(String, String)> {
        let d = b.dlq(query);
        assert_eq!(d.total as usize, d.messages.len());
        d.messages
            .iter()
            .map(|m| (m.queue.clone(), m.partition.clone()))
            .collect()
    };
    let qp = |q: &str, p: &str| (q.to_string(), p.to_string());
    assert_eq!(listed(&mut b, &[]).len(), 3);
    assert_eq!(
        listed(&mut b, &[("queue", "q")]),
        vec![qp("q", "a"), qp("q", "b")]
    );
    assert_eq!(
        listed(&mut b, &[("partition", "a")]),
        vec![qp("q", "a"), qp("r", "a")]
    );
    assert_eq!(
        listed(&mut b, &[("queue", "r"), ("consumerGroup", "g")]),
        vec![qp("r", "a")]
    );
    assert!(listed(&mut b, &[("queue", "q"), ("consumerGroup", "other")]).is_empty());
}

/// The listing's `partition` filter keeps only that partition's dead letters, also
/// when the `queue` filter matches the others too.
#[test]
fn dlq_2_partition_filter_applies_with_the_queue_filter() {
    let mut b = Broker::new();
    for part in ["a", "b"] {
        b.push1("q", part, part);
        let p = b.pop_partition("q", part, &[]).unwrap();
        let r = b.ack_batch(None, vec![ack_of(&p.messages[0], "dlq")]);
        assert!(r[0].dlq, "{r:?}");
    }
    let only_b = b.dlq(&[("queue", "q"), ("partition", "b")]);
    assert_eq!(only_b.total, 1);
    assert_eq!(only_b.messages[0].partition, "b");
    assert_eq!(b.dlq(&[("queue", "q")]).total, 2);
}

/// TXN-6: a transaction whose required lease is live commits; once that lease has
/// expired the same transaction aborts.
#[test]
fn txn_6_a_held_required_lease_lets_the_transaction_commit() {
    let mut b = Broker::new();
    b.push1("q", "p", "work");
    let p = b
        .pop("q", &[("consumerGroup", "g"), ("leaseSeconds", "10")])
        .unwrap();
    let txn = |n: u32| {
        json!({"operations": [{"type": "push", "items": [{"queue": "out", "payload": n}]}],
               "requiredLeases": [p.lease_id]})
    };
    let r = body(b.post("/api/v1/transaction", txn(1)));
    assert_eq!(r["success"], true, "{r}");
    b.advance(10_000);
    let r = body(b.post("/api/v1/transaction", txn(2)));
    assert_eq!(r["success"], false, "the lease has expired: {r}");
    assert_eq!(Broker::txns(&b.pop("out", &[("batch", "10")])).len(), 1);
}

/// While push maintenance is on, a transaction with a push is answered 503 and nothing
/// of it is applied; one with acks only runs as usual.
#[test]
fn txn_4_push_maintenance_refuses_a_transaction_with_a_push() {
    let mut b = Broker::new();
    b.push1("q", "p", "work");
    let p = b.pop("q", &[("consumerGroup", "g")]).unwrap();
    b.post("/api/v1/system/maintenance", json!({"enabled": true}));
    let before = b.e.state.clone();
    let ack = json!({"type": "ack", "transactionId": "work", "partitionId": p.partition_id, "leaseId": p.lease_id, "consumerGroup": "g"});
    let r = b.post(
        "/api/v1/transaction",
        json!({"operations": [{"type": "push", "items": [{"queue": "out"}]}, ack]}),
    );
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert!(r.body.unwrap()["error"].is_string());
    assert_eq!(b.e.state, before);
    let r = body(b.post("/api/v1/transaction", json!({"operations": [ack]})));
    assert_eq!(r["success"], true, "{r}");
    assert!(b.pop("q", &[("consumerGroup", "g")]).is_none(), "acked");
}

#[test]
fn enc_2_a_broker_with_a_key_encrypts_one_without_refuses_and_changes_nothing() {
    let ask = json!({"queue": "e", "options": {"encryptionEnabled": true, "retryLimit": 0}});
    // Ours (a broker with a key): configured, and the option answered.
    let mut b = Broker::new();
    let r = body(b.post("/api/v1/configure", ask.clone()));
    assert_eq!(r["options"]["encryptionEnabled"], true);
    // The other allowed broker (no key): 400, and the queue was not created.
    let mut b = Broker::new();
    b.e.policy = queen_reference::policy::Policy::alternative();
    let r = b.post("/api/v1/configure", ask);
    assert_eq!(r.status, 400);
    assert_eq!(r.body.unwrap()["error"], ENCRYPTION_UNAVAILABLE);
    let r = body(b.post("/api/v1/configure", json!({"queue": "e"})));
    assert_eq!(
        r["options"]["retryLimit"], 3,
        "the refused options never applied"
    );
    // Not asking to encrypt is never refused.
    let r = b.post(
        "/api/v1/configure",
        json!({"queue": "f", "options": {"encryptionEnabled": false}}),
    );
    assert_eq!(r.status, 200);
}
