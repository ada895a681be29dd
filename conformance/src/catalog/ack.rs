//! Acknowledgement cases (PROTOCOL.md section 4: ACK-0..8 and the evaluation steps).

use super::cases;
use crate::case::{Case, CaseResult};
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::{json, Value};

pub fn cases() -> Vec<Case> {
    cases![
        well_formed_200: "ack-0/well-formed-call-is-200-read-success", [ACK_0, ACK_3], Seed, Core;
        single_route: "ack-0/single-ack-route-and-boolean-status", [ACK_0, ACK_6], Seed, Core, needs [Configure];
        cumulative: "ack-1/acking-offset-n-completes-everything-below", [ACK_1], Seed, Core;
        clamp: "ack-2/failure-clamps-later-success", [ACK_2, ACK_1, ACK_6], Seed, Core, needs [Configure];
        precedence: "ack-2/dlq-beats-failed-beats-retry-at-one-offset", [ACK_2, ACK_6, DLQ_2], Seed, DeadLetter;
        no_faked: "ack-3/no-faked-acks-below-the-cursor", [ACK_3], Seed, Core;
        unresolvable: "ack-3/unknown-transaction-is-unresolvable", [ACK_3], Seed, Core;
        one_batch: "ack-4/one-leased-batch-per-partition-and-group", [ACK_4, POP_2], Seed, Core;
        wrong_lease: "ack-5/another-lease-id-is-refused", [ACK_5], Seed, Core;
        expired_lease: "ack-5/expired-lease-is-refused", [ACK_5, ACK_7], Seed, Core;
        no_lease: "ack-5/ack-without-lease-is-not-lease-checked", [ACK_5], Seed, Core;
        outside_span: "ack-10/live-lease-outside-its-span-is-refused", [ACK_10], Project, Core;
        statuses: "ack-6/completed-failed-retry-dlq", [ACK_6, DLQ_2], Seed, Core, needs [Configure, DeadLetter];
        expiry_free: "ack-7/lease-expiry-never-spends-retry-budget", [ACK_7, DLQ_1], Seed, DeadLetter, needs [Configure];
        retry_free: "ack-6/retry-spends-no-retry-budget", [ACK_6, DLQ_1], Seed, DeadLetter, needs [Configure];
        retry_free_after_spent: "ack-6/retry-after-a-spent-retry-is-still-free", [ACK_6, DLQ_1], Seed, DeadLetter, needs [Configure];
        newest: "ack-8/resolves-the-newest-message-with-that-transaction-id", [ACK_8, PUSH_5], Project, Core, needs [Configure, Dedup];
        // Section 4's evaluation steps 3 and 5 are [PROJECT]: these two cases check them.
        one_retry_per_call: "ack-6/at-most-one-retry-charged-per-call", [ACK_6, DLQ_1], Project, DeadLetter, needs [Configure];
        partial_keeps_lease: "ack-1/partial-ack-keeps-the-lease-on-the-rest", [ACK_1, ACK_4], Project, Core;
        no_cursor_group: "ack-5/open-no-lease-ack-for-a-group-without-cursor", [ACK_5, ACK_3], Open, Core;
    ]
}

fn ack_item(m: &PopMessage, status: &str, with_lease: bool) -> Value {
    let mut v =
        json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status});
    if with_lease {
        v["leaseId"] = json!(m.lease_id);
    }
    v
}

async fn well_formed_200(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let ghost = uuid::Uuid::new_v4().to_string();
    let r = s
        .ack_batch(
            None,
            vec![
                json!({"transactionId": "nope", "partitionId": ghost}),
                json!({"transactionId": "nope", "partitionId": p.partition_id}),
            ],
        )
        .await?;
    ensure(r.len() == 2 && r.iter().all(|x| !x.success), || {
        (
            "unresolvable acks still answer 200 with success:false".into(),
            vec![ACK_0],
        )
    })?;
    let empty = s.ack_batch(None, vec![]).await?;
    ensure(empty.is_empty(), || {
        ("an empty batch answers []".into(), vec![ACK_0])
    })
}

async fn single_route(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryDelay": 0})).await?;
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let mut body = ack_item(&p.messages[0], "x", true);
    body["status"] = json!(false); // false means failed
    body["consumerGroup"] = json!("g");
    let r = s.ack(body.clone()).await?;
    ensure(r.success && r.lease_released, || {
        ("status false is a failure".into(), vec![ACK_0, ACK_6])
    })?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let mut body = ack_item(&p.messages[0], "x", true);
    body["status"] = json!(true);
    body["consumerGroup"] = json!("g");
    let r = s.ack(body).await?;
    ensure(r.success && !r.noop, || {
        ("status true completes".into(), vec![ACK_0])
    })
}

async fn cumulative(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[2], "completed", true)])
        .await?;
    ensure(r[0].success && r[0].lease_released, || {
        ("acking the last releases the lease".into(), vec![ACK_1])
    })?;
    let next = s.pop_q(&q, &[]).await?;
    ensure(next.is_none(), || {
        ("a and b were completed with c".into(), vec![ACK_1])
    })
}

async fn clamp(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryDelay": 0})).await?;
    s.push_many(&q, "p", &["m1", "m2", "m3"]).await?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    s.ack_batch(
        Some("g"),
        vec![
            ack_item(&p.messages[0], "failed", true),
            ack_item(&p.messages[2], "completed", true),
        ],
    )
    .await?;
    let again = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure(txns(&again) == ["m1", "m2", "m3"], || {
        (
            format!(
                "after failing m1 and completing m3, {:?} came back",
                txns(&again)
            ),
            vec![ACK_2],
        )
    })
}

async fn precedence(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["m"]).await?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let m = &p.messages[0];
    let mut dlq = ack_item(m, "dlq", true);
    dlq["error"] = json!("poison");
    let r = s
        .ack_batch(
            Some("g"),
            vec![ack_item(m, "retry", true), ack_item(m, "failed", true), dlq],
        )
        .await?;
    ensure(r.iter().all(|x| x.success), || {
        ("all three accepted".into(), vec![ACK_2])
    })?;
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure(
        d.total == 1 && d.messages[0].error_message.as_deref() == Some("poison"),
        || {
            (
                "dlq won: the message is a dead letter with its error".into(),
                vec![ACK_2, ACK_6],
            )
        },
    )?;
    let next = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure(next.is_none(), || {
        ("a dead letter is terminal".into(), vec![ACK_6])
    })
}

async fn no_faked(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    let r = s
        .ack_batch(
            None,
            vec![
                ack_item(&p.messages[0], "completed", false),
                ack_item(&p.messages[1], "failed", false),
            ],
        )
        .await?;
    ensure(r[0].success && r[0].noop, || {
        (
            "a completion below the cursor is a noop".into(),
            vec![ACK_3],
        )
    })?;
    ensure(
        !r[1].success && r[1].error.as_deref() == Some(ERR_ALREADY_COMMITTED),
        || {
            (
                "a failure below the cursor is 'already committed'".into(),
                vec![ACK_3],
            )
        },
    )
}

async fn unresolvable(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![json!({"transactionId": "never-pushed", "partitionId": p.partition_id, "leaseId": p.lease_id})])
        .await?;
    ensure(
        !r[0].success && r[0].error.as_deref() == Some(ERR_UNRESOLVABLE),
        || {
            (
                "an unknown transactionId is unresolvable".into(),
                vec![ACK_3],
            )
        },
    )?;
    let held = s.pop_q(&q, &[]).await?;
    ensure(held.is_none(), || {
        ("the lease is untouched".into(), vec![ACK_3])
    })
}

async fn one_batch(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let second = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure(second.is_none(), || {
        ("a second consumer of g gets nothing".into(), vec![ACK_4])
    })?;
    s.push1(&q, "p", "n").await?;
    let still = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure(still.is_none(), || {
        ("not even a later message".into(), vec![ACK_4])
    })?;
    let other = s.pop_q(&q, &[("consumerGroup", "h")]).await?;
    ensure(txns(&other) == ["m", "n"], || {
        ("another group is not blocked".into(), vec![ACK_4])
    })
}

async fn wrong_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let mut bad = ack_item(&p.messages[0], "completed", false);
    bad["leaseId"] = json!(uuid::Uuid::new_v4().to_string());
    let r = s.ack_batch(None, vec![bad]).await?;
    ensure(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        || ("another lease id is refused".into(), vec![ACK_5]),
    )?;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure(r[0].success, || {
        ("the live lease is accepted".into(), vec![ACK_5])
    })
}

async fn expired_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[("leaseSeconds", "1")]).await?;
    sleep_ms(1300).await;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        || ("an expired lease is refused".into(), vec![ACK_5]),
    )?;
    let again = s.pop_q(&q, &[]).await?;
    ensure(txns(&again) == ["m"], || {
        ("the span is claimable again".into(), vec![ACK_7])
    })
}

async fn no_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    // Someone else, without the lease id, completes the batch the first worker holds.
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[0], "completed", false)])
        .await?;
    ensure(r[0].success, || {
        (
            "an ack without leaseId is not lease-checked".into(),
            vec![ACK_5],
        )
    })?;
    let late = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure(late[0].success && late[0].noop, || {
        ("the holder's ack is now a noop".into(), vec![ACK_3])
    })
}

async fn outside_span(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[]).await?;
    s.push1(&q, "p", "b").await?;
    let r = s
        .ack_batch(
            None,
            vec![
                json!({"transactionId": "b", "partitionId": p.partition_id, "leaseId": p.lease_id}),
            ],
        )
        .await?;
    ensure(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        || {
            (
                "a live lease does not cover a later offset".into(),
                vec![ACK_10],
            )
        },
    )
}

async fn statuses(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryDelay": 500})).await?;
    s.push1(&q, "p", "m").await?;
    // failed: comes back after retryDelay.
    let p = s.pop_some(&q, &[]).await?;
    s.ack_batch(None, acks_for(&p, "failed")).await?;
    sleep_ms(800).await;
    let p = s.pop_some(&q, &[]).await?;
    // retry: comes back at once.
    s.ack_batch(None, acks_for(&p, "retry")).await?;
    let p = s.pop_some(&q, &[]).await?;
    // dlq: filed with its error, nothing comes back.
    let mut a = acks_for(&p, "dlq");
    a[0]["error"] = json!("bad payload");
    let r = s.ack_batch(None, a).await?;
    ensure(r[0].dlq, || {
        ("dlq:true on the filed item".into(), vec![ACK_6])
    })?;
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure(
        d.messages.first().and_then(|m| m.error_message.as_deref()) == Some("bad payload"),
        || {
            (
                "the error is the dead letter's errorMessage".into(),
                vec![ACK_6],
            )
        },
    )?;
    ensure(s.pop_q(&q, &[]).await?.is_none(), || {
        ("nothing comes back after dlq".into(), vec![ACK_6])
    })?;
    // completed: commits.
    s.push1(&q, "p", "n").await?;
    let p = s.pop_some(&q, &[]).await?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure(s.pop_q(&q, &[]).await?.is_none(), || {
        ("completed commits".into(), vec![ACK_6])
    })
}

async fn expiry_free(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 1, "retryDelay": 0}))
        .await?;
    s.push1(&q, "p", "m").await?;
    s.pop_some(&q, &[("leaseSeconds", "1")]).await?;
    sleep_ms(1300).await;
    // The expiry spent nothing: one failure still comes back...
    let p = s.pop_some(&q, &[]).await?;
    let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure(!r[0].dlq, || {
        (
            "the first failure is a retry, not a dead letter".into(),
            vec![ACK_7],
        )
    })?;
    // ...and the second one exhausts the budget of 1.
    let p = s.pop_some(&q, &[]).await?;
    let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure(r[0].dlq, || {
        ("the second failure is a dead letter".into(), vec![DLQ_1])
    })
}

/// Acks the message `status` `times` times in a row, popping it again before each; each
/// ack must leave it to come back, not dead-letter it.
async fn comes_back_after(s: &mut Session, q: &str, status: &str, times: usize) -> CaseResult {
    for n in 1..=times {
        let p = s.pop_some(q, &[]).await?;
        let r = s.ack_batch(None, acks_for(&p, status)).await?;
        ensure(r[0].success && !r[0].dlq, || {
            (
                format!("`{status}` ack {n} of {times} is not a dead letter"),
                vec![ACK_6],
            )
        })?;
    }
    Ok(())
}

/// A `failed` ack of the message: a dead letter exactly when `dead` (DLQ-1's budget).
async fn fail_once(s: &mut Session, q: &str, dead: bool, why: &str) -> CaseResult {
    let p = s.pop_some(q, &[]).await?;
    let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure(r[0].dlq == dead, || (why.to_string(), vec![DLQ_1, ACK_6]))
}

async fn retry_free(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 1, "retryDelay": 0}))
        .await?;
    s.push1(&q, "p", "m").await?;
    // More `retry` acks than the budget: each comes back, none is charged...
    comes_back_after(s, &q, "retry", 3).await?;
    // ...so the budget of 1 is whole: one failure comes back, the next is a dead letter.
    fail_once(
        s,
        &q,
        false,
        "after retries, the first failure still comes back",
    )
    .await?;
    fail_once(s, &q, true, "the second failure spends the budget of 1").await
}

async fn retry_free_after_spent(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 2, "retryDelay": 0}))
        .await?;
    s.push1(&q, "p", "m").await?;
    fail_once(s, &q, false, "the first failure of 2 comes back").await?;
    // One retry spent, one left: `retry` acks still cost nothing.
    comes_back_after(s, &q, "retry", 3).await?;
    fail_once(s, &q, false, "the second failure of 2 comes back").await?;
    // The budget is spent now, and `retry` is still free: the message comes back.
    comes_back_after(s, &q, "retry", 2).await?;
    fail_once(s, &q, true, "the third failure is a dead letter").await
}

async fn newest(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"dedupWindowSeconds": 1})).await?;
    s.push1(&q, "p", "t").await?;
    sleep_ms(1300).await;
    let again = s.push1(&q, "p", "t").await?;
    ensure(again.status == PushStatus::Queued, || {
        ("outside the window: a new message".into(), vec![PUSH_5])
    })?;
    let p = s
        .pop_some(&q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    // Acking "t" resolves the newest one (offset 2): both are completed.
    let r = s
        .ack_batch(
            Some("g"),
            vec![ack_item(&p.messages[0], "completed", false)],
        )
        .await?;
    ensure(r[0].success, || ("the ack resolves".into(), vec![ACK_8]))?;
    ensure(
        s.pop_q(&q, &[("consumerGroup", "g")]).await?.is_none(),
        || ("the cursor passed the newest t".into(), vec![ACK_8, ACK_1]),
    )
}

async fn one_retry_per_call(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 1, "retryDelay": 0}))
        .await?;
    s.push_many(&q, "p", &["m1", "m2", "m3"]).await?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    s.ack_batch(Some("g"), acks_for(&p, "failed")).await?;
    // m1 was charged; m2 and m3 came back uncharged.
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let r = s.ack_batch(Some("g"), acks_for(&p, "failed")).await?;
    ensure(r[0].dlq && !r[1].dlq, || {
        (
            "m1 exhausted becomes a dead letter; m2 is charged and comes back".into(),
            vec![DLQ_1, ACK_6],
        )
    })?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    ensure(
        p.messages.first().is_some_and(|m| m.transaction_id == "m2"),
        || ("m2 comes back".into(), vec![ACK_6]),
    )
}

async fn partial_keeps_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[0], "completed", true)])
        .await?;
    ensure(r[0].success && !r[0].lease_released, || {
        ("a partial ack keeps the lease".into(), vec![ACK_1])
    })?;
    ensure(s.pop_q(&q, &[]).await?.is_none(), || {
        ("the rest is still leased".into(), vec![ACK_4])
    })?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[2], "completed", true)])
        .await?;
    ensure(r[0].lease_released, || {
        ("acking the end releases it".into(), vec![ACK_1])
    })
}

async fn no_cursor_group(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    // A group that never popped: unresolvable (our server) or a commit; both allowed.
    s.ack_batch(
        Some("stranger"),
        vec![ack_item(&p.messages[0], "completed", false)],
    )
    .await?;
    s.pop_q(&q, &[("consumerGroup", "stranger")]).await?;
    Ok(())
}
