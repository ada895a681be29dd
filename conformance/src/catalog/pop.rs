//! Pop cases (PROTOCOL.md section 3: PROTO-GROUP-1, POP-1..15).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::{ensure, ensure_timely};
use crate::rules::*;
use crate::session::*;
use crate::transport::now_ms;
use queen_reference::time::format_iso;
use queen_reference::wire::*;
use serde_json::{json, Value};

pub fn cases() -> Vec<Case> {
    cases![
        queue_mode: "proto-group-1/omitted-group-is-queue-mode-with-its-own-cursor", [PROTO_GROUP_1], Seed, Core;
        never_removes: "pop-1/never-removes-and-leases-the-span-in-offset-order", [POP_1], Seed, Core;
        leased_skipped: "pop-2/leased-partitions-are-skipped-not-waited-on", [POP_2, ACK_4], Seed, Core;
        batch_shared: "pop-3/batch-is-shared-and-partitions-caps-claims", [POP_3], Seed, Core;
        defaults: "pop-3/defaults-batch-200-and-partitions-1", [POP_3], Seed, Core;
        partition_route: "pop-3/partition-route-claims-exactly-one-partition", [POP_3, POP_5], Seed, Core;
        any_order: "pop-4/any-claimable-partition-may-come-first", [POP_4], Open, Core;
        answer_shape: "pop-5/answer-shape-without-internal-fields", [POP_5], Seed, Core;
        bare_204: "pop-6/nothing-delivered-is-a-bare-204", [POP_6], Seed, Core;
        auto_ack: "pop-7/auto-ack-commits-without-lease", [POP_7], Seed, Core;
        unknown_queue: "pop-8/pop-on-unknown-queue-creates-its-row", [POP_8, DEL_1], Seed, Core, needs [Delete];
        lease_expiry: "pop-9/lease-from-lease-seconds-or-lease-time", [POP_9, ACK_7], Seed, Core, needs [Configure];
        discovery_scope: "pop-10/discovery-without-scope-is-400", [POP_10], Seed, Discovery;
        discovery_routes: "pop-10/discovery-by-namespace-and-task", [POP_10, POP_5], Seed, Discovery, needs [Configure];
        wakes: "pop-11/push-wakes-a-parked-pop", [POP_11], Seed, LongPoll;
        wait_timeout: "pop-11/wait-answers-204-at-the-timeout", [POP_11, POP_6], Seed, LongPoll;
        wakes_discovery: "pop-11/push-in-scope-wakes-a-parked-discovery-pop", [POP_11], Seed, LongPoll, needs [Discovery];
        wakes_across: "cluster-2/a-push-on-one-broker-wakes-a-pop-parked-on-another", [CLUSTER_2, POP_11], Project, LongPoll;
        created_at: "pop-12/created-at-is-the-write-time-of-the-push-call", [POP_12], Seed, Core;
        sub_new: "pop-13/mode-new-skips-the-backlog", [POP_13], Seed, Subscription;
        sub_from: "pop-13/subscription-from-a-time", [POP_13], Seed, Subscription;
        sub_misc: "pop-13/from-now-unknown-mode-and-bad-time", [POP_13, POP_18], Seed, Subscription;
        sub_queue_mode: "pop-13/queue-mode-is-never-seeded", [POP_13, PROTO_GROUP_1], Seed, Subscription;
        sub_recorded: "pop-13/first-pop-records-the-subscription", [POP_13], Project, Subscription;
        sub_discovery: "pop-13/a-second-group-discovering-is-seeded-by-its-own-mode", [POP_13, POP_10], Seed, Subscription, needs [Discovery];
        delayed: "pop-14/delayed-processing", [POP_14], Seed, Visibility, needs [Configure];
        delayed_cap: "pop-14/a-partition-too-young-to-deliver-is-not-claimed", [POP_14, POP_3, POP_2], Seed, Visibility, needs [Configure];
        window: "pop-14/window-buffer", [POP_14], Seed, Visibility, needs [Configure];
        window_discovery: "pop-14/window-buffer-holds-a-discovery-pop-too", [POP_14, POP_10], Seed, Visibility, needs [Configure, Discovery];
        min_wait: "pop-15/min-pop-wait-time-bounds", [POP_15], Seed, LongPoll, needs [Configure];
    ]
}

async fn queue_mode(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    ensure!(
        p.consumer_group == QUEUE_MODE,
        PROTO_GROUP_1,
        "an omitted group is __QUEUE_MODE__"
    )?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    // Queue mode's cursor does not move a named group's, and naming the reserved group
    // is the same as omitting it.
    let g = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(
        txns(&g) == ["m"],
        PROTO_GROUP_1,
        "a named group has its own cursor"
    )?;
    let again = s.pop_q(&q, &[("consumerGroup", QUEUE_MODE)]).await?;
    ensure!(
        again.is_none(),
        PROTO_GROUP_1,
        "__QUEUE_MODE__ by name is the queue-mode group"
    )
}

async fn never_removes(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let g1 = s.pop_q(&q, &[("consumerGroup", "g1")]).await?;
    let g2 = s.pop_q(&q, &[("consumerGroup", "g2")]).await?;
    ensure!(
        txns(&g1) == ["a", "b", "c"] && txns(&g2) == txns(&g1),
        POP_1,
        "each group sees every message, in offset order"
    )?;
    let g1 = g1.expect("checked");
    s.ack_batch(Some("g1"), acks_for(&g1, "completed")).await?;
    s.pop_q(&q, &[("consumerGroup", "g3"), ("batch", "1")])
        .await?;
    Ok(())
}

async fn leased_skipped(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p1", "a").await?;
    s.push1(&q, "p2", "b").await?;
    let first = s.pop_some(&q, &[]).await?;
    let second = s.pop_some(&q, &[]).await?;
    ensure!(
        first.partition != second.partition,
        POP_2,
        "the second pop skips the leased partition"
    )?;
    let third = s.pop_q(&q, &[]).await?;
    ensure!(third.is_none(), ACK_4, "both partitions are leased")
}

/// Section 3's defaults, sent raw (the session's pop helpers name `batch`): without
/// `batch` a pop takes every message of the partition it claims, without `partitions` it
/// claims one, and `partitions=0` claims them all.
async fn defaults(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p1", &["a", "b", "c"]).await?;
    s.push1(&q, "p2", "d").await?;
    s.push1(&q, "p3", "e").await?;
    let path = PopRoute::Queue(q.clone()).path();
    let r = s.get(&path, &[("consumerGroup", "g")]).await?;
    let p: PopResponse = decode(&r, 200, "pop")?;
    // POP-4 lets the broker pick the partition; all of its messages come.
    let all = if p.partition == "p1" { 3 } else { 1 };
    ensure!(p.messages.len() == all && p.partitions_claimed == 1, POP_3, "without batch and partitions a pop takes every message of one partition (batch 200, partitions 1)")?;
    let r = s
        .get(&path, &[("consumerGroup", "g"), ("partitions", "0")])
        .await?;
    let rest: PopResponse = decode(&r, 200, "pop")?;
    ensure!(
        rest.partitions_claimed == 2 && rest.messages.len() == 5 - all,
        POP_3,
        "partitions=0 claims every claimable partition"
    )
}

async fn batch_shared(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    for p in ["p1", "p2", "p3"] {
        s.push_many(&q, p, &[&format!("{p}a"), &format!("{p}b")])
            .await?;
    }
    let p = s
        .pop_some(
            &q,
            &[("batch", "3"), ("partitions", "0"), ("consumerGroup", "g")],
        )
        .await?;
    ensure!(
        p.messages.len() == 3 && p.partitions_claimed == 2,
        POP_3,
        "batch 3 across 2-message partitions: 3 messages, 2 partitions"
    )?;
    let capped = s
        .pop_some(
            &q,
            &[("batch", "10"), ("partitions", "1"), ("consumerGroup", "h")],
        )
        .await?;
    ensure!(
        capped.partitions_claimed == 1 && capped.messages.len() == 2,
        POP_3,
        "partitions=1 caps the claim to one partition"
    )
}

async fn partition_route(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p1", "a").await?;
    s.push1(&q, "p2", "b").await?;
    let p = s
        .pop(
            PopRoute::Partition(q.clone(), "p2".into()),
            &[("partitions", "0")],
        )
        .await?;
    ensure!(
        txns(&p) == ["b"],
        POP_3,
        "the partition route claims exactly its partition"
    )?;
    let none = s
        .pop(PopRoute::Partition(q.clone(), "p3".into()), &[])
        .await?;
    ensure!(none.is_none(), POP_6, "an unknown partition is empty")
}

async fn any_order(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "old", "a").await?;
    s.push1(&q, "new", "b").await?;
    // Whichever the broker takes first, the model follows it.
    s.pop_some(&q, &[]).await?;
    s.pop_some(&q, &[]).await?;
    Ok(())
}

async fn answer_shape(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    let r = s
        .get(
            &PopRoute::Queue(q.clone()).path(),
            &[("consumerGroup", "g")],
        )
        .await?;
    let body = r.body.unwrap_or(Value::Null);
    for key in [
        "success",
        "queue",
        "partition",
        "partitionId",
        "leaseId",
        "consumerGroup",
        "messages",
        "partitionsClaimed",
    ] {
        ensure!(body.get(key).is_some(), POP_5, "the answer lacks {key}")?;
    }
    let forbidden = [
        "offset",
        "attempts",
        "attemptCount",
        "retryCount",
        "leaseExpiresAt",
        "expiresAt",
        "queue",
        "queueName",
        "headers",
        "status",
    ];
    for m in body["messages"].as_array().into_iter().flatten() {
        for key in [
            "id",
            "transactionId",
            "traceId",
            "data",
            "producerSub",
            "createdAt",
            "partitionId",
            "partition",
            "leaseId",
            "consumerGroup",
        ] {
            ensure!(m.get(key).is_some(), POP_5, "a message lacks {key}")?;
        }
        for key in forbidden {
            ensure!(
                m.get(key).is_none(),
                POP_5,
                "a message carries {key}, which POP-5 excludes"
            )?;
        }
    }
    Ok(())
}

async fn bare_204(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s.get(&PopRoute::Queue(q.clone()).path(), &[]).await?;
    ensure!(
        r.status == 204 && r.body.is_none(),
        POP_6,
        "an empty pop is a 204 without body"
    )?;
    s.push1(&q, "p", "m").await?;
    s.pop_some(&q, &[]).await?;
    let r = s.get(&PopRoute::Queue(q.clone()).path(), &[]).await?;
    ensure!(
        r.status == 204 && r.body.is_none(),
        POP_6,
        "a leased partition gives a bare 204"
    )
}

async fn auto_ack(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    let p = s.pop_some(&q, &[("autoAck", "true")]).await?;
    ensure!(
        p.lease_id.is_empty() && p.messages.iter().all(|m| m.lease_id.is_empty()),
        POP_7,
        "autoAck answers leaseId \"\""
    )?;
    let again = s.pop_q(&q, &[]).await?;
    ensure!(again.is_none(), POP_7, "autoAck committed the span")?;
    s.push1(&q, "p", "c").await?;
    let next = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&next) == ["c"],
        POP_7,
        "the cursor is past the autoAck'ed span"
    )
}

async fn unknown_queue(s: &mut Session) -> CaseResult {
    let q = s.name("ghost");
    let p = s.pop_q(&q, &[]).await?;
    ensure!(p.is_none(), POP_8, "an unknown queue answers 204")?;
    let d = s.delete(&q).await?;
    ensure!(d.existed, POP_8, "the pop created the queue's row")
}

async fn lease_expiry(s: &mut Session) -> CaseResult {
    // leaseSeconds wins over the queue's leaseTime...
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    s.pop_some(&q, &[("leaseSeconds", "1")]).await?;
    // ...and without it, the queue's leaseTime applies (1 s after configure).
    let r = s.name("r");
    s.configure(&r, json!({"leaseTime": 1})).await?;
    s.push1(&r, "p", "n").await?;
    s.pop_some(&r, &[]).await?;
    sleep_ms(1300).await;
    let again = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&again) == ["m"],
        POP_9,
        "a 1 s lease expired after 1.3 s"
    )?;
    let again = s.pop_q(&r, &[]).await?;
    ensure!(
        txns(&again) == ["n"],
        POP_9,
        "leaseTime 1 expired after 1.3 s"
    )?;
    // A long lease is still live.
    let t = s.name("t");
    s.push1(&t, "p", "o").await?;
    s.pop_some(&t, &[("leaseSeconds", "30")]).await?;
    let held = s.pop_q(&t, &[]).await?;
    ensure!(held.is_none(), [POP_9, ACK_4], "a 30 s lease is still live")
}

async fn discovery_scope(s: &mut Session) -> CaseResult {
    for q in [
        &[][..],
        &[("namespace", "")][..],
        &[("task", ""), ("batch", "5")][..],
    ] {
        let r = s.get("/api/v1/pop", q).await?;
        ensure!(r.status == 400, POP_10, "discovery without scope is 400")?;
    }
    Ok(())
}

async fn discovery_routes(s: &mut Session) -> CaseResult {
    let ns = s.namespace();
    let (a, b) = (format!("{ns}.alpha"), format!("{ns}.beta"));
    s.push1(&a, "p", "x").await?;
    s.push1(&b, "p", "y").await?;
    let other = s.name("custom");
    s.post(
        "/api/v1/configure",
        json!({"queue": other, "namespace": ns, "task": "gamma", "options": {}}),
    )
    .await?;
    s.push1(&other, "p", "z").await?;
    let by_task = s
        .pop(
            PopRoute::Discovery {
                namespace: Some(ns.clone()),
                task: Some("beta".into()),
            },
            &[],
        )
        .await?;
    ensure!(
        txns(&by_task) == ["y"],
        POP_10,
        "namespace+task scopes to one queue"
    )?;
    ensure!(
        by_task.as_ref().is_some_and(|p| p.queue.is_empty()),
        POP_5,
        "queue is \"\" on discovery"
    )?;
    let mut seen = Vec::new();
    while let Some(p) = s
        .pop(
            PopRoute::Discovery {
                namespace: Some(ns.clone()),
                task: None,
            },
            &[("consumerGroup", "g"), ("partitions", "0")],
        )
        .await?
    {
        seen.extend(p.messages.iter().map(|m| m.transaction_id.clone()));
        s.ack_batch(Some("g"), acks_for(&p, "completed")).await?;
    }
    seen.sort();
    ensure!(
        seen == ["x", "y", "z"],
        POP_10,
        "the namespace holds x, y, z; discovery saw {seen:?}"
    )
}

async fn wakes(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.pop_q(&q, &[]).await?; // the queue exists; nothing to deliver
    let parked = s.start(HttpRequest::get(
        PopRoute::Queue(q.clone()).path(),
        &[("wait", "true"), ("timeout", "10000")],
    ));
    sleep_ms(300).await;
    s.push1(&q, "p", "m").await?;
    let pushed = now_ms();
    let (r, at) = s.finish(parked).await?;
    ensure!(r.status == 200, POP_11, "the parked pop delivered the push")?;
    ensure_timely!(
        at - pushed < 500,
        POP_11,
        "the parked pop answered {} ms after the push (at most 500)",
        at - pushed
    )
}

/// CLUSTER-2: the pop parks on the first broker, the push goes to the second (with one
/// broker, both go to it).
async fn wakes_across(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.pin_broker(Some(0));
    s.pop_q(&q, &[]).await?; // the queue exists; nothing to deliver
    let parked = s.start(HttpRequest::get(
        PopRoute::Queue(q.clone()).path(),
        &[("wait", "true"), ("timeout", "10000")],
    ));
    sleep_ms(300).await;
    s.pin_broker(Some(1));
    s.push1(&q, "p", "m").await?;
    let pushed = now_ms();
    let (r, at) = s.finish(parked).await?;
    let across = if s.brokers() > 1 {
        "another broker's"
    } else {
        "the"
    };
    ensure!(
        r.status == 200,
        CLUSTER_2,
        "the parked pop delivered {across} push"
    )?;
    ensure_timely!(
        at - pushed < 500,
        CLUSTER_2,
        "the parked pop answered {} ms after {across} push (at most 500)",
        at - pushed
    )
}

async fn wait_timeout(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let t0 = now_ms();
    let r = s
        .get(
            &PopRoute::Queue(q.clone()).path(),
            &[("wait", "true"), ("timeout", "1000")],
        )
        .await?;
    let took = now_ms() - t0;
    ensure!(r.status == 204, POP_11, "nothing arrived: 204")?;
    ensure_timely!(
        (900..3000).contains(&took),
        POP_11,
        "a 1000 ms long poll answered after {took} ms"
    )?;
    // timeout=0 with wait answers at once.
    let t0 = now_ms();
    s.get(
        &PopRoute::Queue(q.clone()).path(),
        &[("wait", "true"), ("timeout", "0")],
    )
    .await?;
    let took = now_ms() - t0;
    ensure_timely!(took < 900, POP_11, "timeout=0 took {took} ms")
}

async fn wakes_discovery(s: &mut Session) -> CaseResult {
    let ns = s.namespace();
    let q = format!("{ns}.jobs");
    s.pop_q(&q, &[]).await?; // creates the queue in the namespace
    let parked = s.start(HttpRequest::get(
        "/api/v1/pop",
        &[
            ("namespace", ns.as_str()),
            ("wait", "true"),
            ("timeout", "10000"),
        ],
    ));
    sleep_ms(300).await;
    s.push1(&q, "p", "m").await?;
    let pushed = now_ms();
    let (r, at) = s.finish(parked).await?;
    ensure!(
        r.status == 200,
        POP_11,
        "the parked discovery pop delivered"
    )?;
    ensure_timely!(
        at - pushed < 500,
        POP_11,
        "woken {} ms after the push (at most 500)",
        at - pushed
    )
}

async fn created_at(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    sleep_ms(20).await;
    s.push_many(&q, "p", &["c"]).await?;
    let p = s.pop_some(&q, &[("batch", "10")]).await?;
    let ts: Vec<&str> = p.messages.iter().map(|m| m.created_at.as_str()).collect();
    ensure!(
        ts.len() == 3 && ts[0] == ts[1],
        POP_12,
        "messages of one push call share createdAt"
    )?;
    ensure!(
        ts.iter().all(|t| t.ends_with('Z')),
        POP_12,
        "createdAt ends in Z"
    )
}

async fn sub_new(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["old1", "old2"]).await?;
    let p = s
        .pop_q(&q, &[("consumerGroup", "g"), ("subscriptionMode", "new")])
        .await?;
    ensure!(p.is_none(), POP_13, "mode new skips the backlog")?;
    s.push1(&q, "p", "fresh").await?;
    let p = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(txns(&p) == ["fresh"], POP_13, "then new messages arrive")?;
    let all = s.pop_q(&q, &[("consumerGroup", "h")]).await?;
    ensure!(
        txns(&all) == ["old1", "old2", "fresh"],
        POP_13,
        "mode all (default) starts at the oldest"
    )
}

async fn sub_from(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "before").await?;
    sleep_ms(60).await;
    let t = format_iso(now_ms());
    sleep_ms(60).await;
    s.push1(&q, "p", "after").await?;
    let p = s
        .pop_q(&q, &[("consumerGroup", "g"), ("subscriptionFrom", &t)])
        .await?;
    ensure!(
        txns(&p) == ["after"],
        POP_13,
        "subscriptionFrom={t} starts at the first message written at or after it"
    )
}

async fn sub_misc(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let now = s
        .pop_q(&q, &[("consumerGroup", "g1"), ("subscriptionFrom", "now")])
        .await?;
    ensure!(
        now.is_none(),
        POP_13,
        "subscriptionFrom=now skips the backlog"
    )?;
    let odd = s
        .pop_q(
            &q,
            &[("consumerGroup", "g2"), ("subscriptionMode", "sideways")],
        )
        .await?;
    ensure!(txns(&odd) == ["a"], POP_13, "an unknown mode acts as all")?;
    let bad = s
        .pop_q(
            &q,
            &[("consumerGroup", "g3"), ("subscriptionFrom", "not a time")],
        )
        .await?;
    ensure!(
        txns(&bad) == ["a"],
        POP_13,
        "an unparseable time is ignored"
    )
}

async fn sub_queue_mode(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_q(&q, &[("subscriptionMode", "new")]).await?;
    ensure!(txns(&p) == ["a"], POP_13, "queue mode is never seeded")
}

async fn sub_recorded(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p1", "old").await?;
    let p = s
        .pop_q(&q, &[("consumerGroup", "g"), ("subscriptionMode", "new")])
        .await?;
    ensure!(p.is_none(), POP_13, "mode new: 204")?;
    // Partitions created after the first pop start at their beginning.
    s.push1(&q, "p2", "later-partition").await?;
    s.push1(&q, "p1", "later-p1").await?;
    let mut got = Vec::new();
    while let Some(p) = s
        .pop_q(&q, &[("consumerGroup", "g"), ("partitions", "0")])
        .await?
    {
        got.extend(p.messages.iter().map(|m| m.transaction_id.clone()));
        s.ack_batch(Some("g"), acks_for(&p, "completed")).await?;
    }
    got.sort();
    ensure!(
        got == ["later-p1", "later-partition"],
        POP_13,
        "delivered {got:?}"
    )
}

/// POP-13, POP-10: seeding is per group. Another group's subscription to every queue of
/// a scope says nothing about this group's, so this group's first discovery pop there
/// still applies its own `subscriptionMode`.
async fn sub_discovery(s: &mut Session) -> CaseResult {
    let ns = s.namespace();
    let q = format!("{ns}.alpha");
    s.push1(&q, "p", "old").await?;
    let scope = || PopRoute::Discovery {
        namespace: Some(ns.clone()),
        task: None,
    };
    let first = s.pop(scope(), &[("consumerGroup", "g1")]).await?;
    ensure!(
        txns(&first) == ["old"],
        POP_13,
        "mode all (default) starts at the oldest, delivered {:?}",
        txns(&first)
    )?;
    if let Some(p) = &first {
        s.ack_batch(Some("g1"), acks_for(p, "completed")).await?;
    }
    let second = s
        .pop(
            scope(),
            &[("consumerGroup", "g2"), ("subscriptionMode", "new")],
        )
        .await?;
    ensure!(
        second.is_none(),
        POP_13,
        "a second group's first discovery pop with mode new skips the backlog, delivered {:?}",
        txns(&second)
    )?;
    s.push1(&q, "p", "fresh").await?;
    let then = s.pop(scope(), &[("consumerGroup", "g2")]).await?;
    ensure!(
        txns(&then) == ["fresh"],
        POP_13,
        "then new messages arrive, delivered {:?}",
        txns(&then)
    )
}

async fn delayed(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"delayedProcessing": 1})).await?;
    s.push1(&q, "p", "m").await?;
    // 204 unless the machine stalled a second (the model knows which); another group
    // makes the final check independent of it.
    s.pop_q(&q, &[("consumerGroup", "early")]).await?;
    // The queue-mode group needs no subscription: a broker may answer its pops by a
    // shorter path than a new group's first pop (ours claims in the same statement).
    s.pop_q(&q, &[]).await?;
    sleep_ms(1300).await;
    let p = s.pop_q(&q, &[("consumerGroup", "late")]).await?;
    // Groups that are set up already: each gets the message now, unless it got it early.
    s.pop_q(&q, &[("consumerGroup", "early")]).await?;
    s.pop_q(&q, &[]).await?;
    ensure!(txns(&p) == ["m"], POP_14, "delivered once 1 s old")
}

/// POP-14, POP-3, POP-2: a partition whose every message is younger than
/// `delayedProcessing` has nothing to deliver, so a pop capped at one partition that
/// passes it takes the next one with a message old enough instead of answering 204.
async fn delayed_cap(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"delayedProcessing": 1})).await?;
    s.push1(&q, "b", "old").await?;
    sleep_ms(1300).await;
    // Before `b` in name order, where a walk by name starts.
    s.push1(&q, "a", "young").await?;
    let p = s.pop_q(&q, &[("partitions", "1")]).await?;
    ensure!(
        p.is_some(),
        [POP_2, POP_3],
        "a pop capped at one partition answered 204 while `b` held a message old enough"
    )
}

async fn window(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"windowBuffer": 1})).await?;
    s.push1(&q, "p", "a").await?;
    s.pop_q(&q, &[("consumerGroup", "early")]).await?;
    sleep_ms(600).await;
    s.push1(&q, "p", "b").await?;
    s.pop_q(&q, &[("consumerGroup", "early2")]).await?;
    // As in `delayed`: the queue-mode group, which needs no subscription.
    s.pop_q(&q, &[]).await?;
    sleep_ms(1300).await;
    let p = s.pop_q(&q, &[("consumerGroup", "late")]).await?;
    s.pop_q(&q, &[("autoAck", "true")]).await?;
    ensure!(
        txns(&p) == ["a", "b"],
        POP_14,
        "delivered after 1 s of write silence"
    )?;
    // A partition consumed before is held back again by a new write: the model judges
    // this pop by the times it was sent and answered.
    s.push1(&q, "p", "c").await?;
    s.pop_q(&q, &[]).await?;
    Ok(())
}

/// POP-14, POP-10: a partition inside its window is held back from a discovery pop as
/// from a queue pop, and delivered to one once the window has passed.
async fn window_discovery(s: &mut Session) -> CaseResult {
    // The namespace is given, not derived (CFG-3 is a PROJECT point).
    let ns = s.namespace();
    let q = format!("{ns}.window");
    s.post(
        "/api/v1/configure",
        json!({"queue": q, "namespace": ns, "task": "window", "options": {"windowBuffer": 1}}),
    )
    .await?;
    let pushed = now_ms();
    s.push1(&q, "p", "a").await?;
    let route = PopRoute::Discovery {
        namespace: Some(ns),
        task: None,
    };
    let early = s.pop(route.clone(), &[]).await?;
    // Only a pop sent well inside the window must come back empty; the model judges
    // any pop by the times it was sent and answered.
    ensure!(
        early.is_none() || now_ms() - pushed > 900,
        POP_14,
        "a discovery pop inside the window delivered {:?}",
        txns(&early)
    )?;
    sleep_ms(1300).await;
    let late = s.pop(route, &[]).await?;
    ensure!(
        early.is_some() || txns(&late) == ["a"],
        POP_14,
        "after 1 s of write silence a discovery pop delivered {:?}",
        txns(&late)
    )
}

async fn min_wait(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"minPopWaitTime": 4000})).await?;
    s.push_many(&q, "p", &["a", "b"]).await?;
    // Never held back with wait=false, batch=1, or a full batch.
    let ms = timed(s, &q, &[("consumerGroup", "g1"), ("batch", "10")]).await?;
    ensure_timely!(ms < 2000, POP_15, "wait=false was held {ms} ms")?;
    let query = [("consumerGroup", "g2"), ("wait", "true"), ("batch", "1")];
    let ms = timed(s, &q, &query).await?;
    ensure_timely!(ms < 2000, POP_15, "batch=1 was held {ms} ms")?;
    let query = [("consumerGroup", "g3"), ("wait", "true"), ("batch", "2")];
    let ms = timed(s, &q, &query).await?;
    ensure_timely!(ms < 2000, POP_15, "a full batch was held {ms} ms")?;
    // Never past the timeout.
    let query = [
        ("consumerGroup", "g4"),
        ("wait", "true"),
        ("batch", "10"),
        ("timeout", "1000"),
    ];
    let ms = timed(s, &q, &query).await?;
    ensure_timely!(ms < 2500, POP_15, "held {ms} ms past a 1000 ms timeout")?;
    // Never for an empty result (beyond the long poll itself).
    let e = s.name("empty");
    s.configure(&e, json!({"minPopWaitTime": 4000})).await?;
    let ms = timed(s, &e, &[]).await?;
    ensure_timely!(ms < 2000, POP_15, "an empty result was held {ms} ms")
}

/// A queue-route pop and how long it took, in ms.
async fn timed(
    s: &mut Session,
    q: &str,
    query: &[(&str, &str)],
) -> Result<i64, crate::case::Failure> {
    let t0 = now_ms();
    s.get(&PopRoute::Queue(q.into()).path(), query).await?;
    Ok(now_ms() - t0)
}
