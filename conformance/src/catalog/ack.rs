//! Acknowledgement cases (PROTOCOL.md section 4: ACK-0..8 and the evaluation steps).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
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
        spent_failure_releases: "ack-6/a-failure-that-dead-letters-still-releases-the-lease", [ACK_6, DLQ_1], Seed, DeadLetter, needs [Configure];
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
    ensure!(
        r.len() == 2 && r.iter().all(|x| !x.success),
        ACK_0,
        "unresolvable acks still answer 200 with success:false"
    )?;
    let empty = s.ack_batch(None, vec![]).await?;
    ensure!(empty.is_empty(), ACK_0, "an empty batch answers []")
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
    ensure!(
        r.success && r.lease_released,
        [ACK_0, ACK_6],
        "status false is a failure"
    )?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let mut body = ack_item(&p.messages[0], "x", true);
    body["status"] = json!(true);
    body["consumerGroup"] = json!("g");
    let r = s.ack(body).await?;
    ensure!(r.success && !r.noop, ACK_0, "status true completes")
}

async fn cumulative(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[2], "completed", true)])
        .await?;
    ensure!(
        r[0].success && r[0].lease_released,
        ACK_1,
        "acking the last releases the lease"
    )?;
    let next = s.pop_q(&q, &[]).await?;
    ensure!(next.is_none(), ACK_1, "a and b were completed with c")
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
    ensure!(
        txns(&again) == ["m1", "m2", "m3"],
        ACK_2,
        "after failing m1 and completing m3, {:?} came back",
        txns(&again)
    )
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
    ensure!(r.iter().all(|x| x.success), ACK_2, "all three accepted")?;
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        d.total == 1 && d.messages[0].error_message.as_deref() == Some("poison"),
        [ACK_2, ACK_6],
        "dlq won: the message is a dead letter with its error"
    )?;
    let next = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(next.is_none(), ACK_6, "a dead letter is terminal")
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
    ensure!(
        r[0].success && r[0].noop,
        ACK_3,
        "a completion below the cursor is a noop"
    )?;
    ensure!(
        !r[1].success && r[1].error.as_deref() == Some(ERR_ALREADY_COMMITTED),
        ACK_3,
        "a failure below the cursor is 'already committed'"
    )
}

async fn unresolvable(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![json!({"transactionId": "never-pushed", "partitionId": p.partition_id, "leaseId": p.lease_id})])
        .await?;
    ensure!(
        !r[0].success && r[0].error.as_deref() == Some(ERR_UNRESOLVABLE),
        ACK_3,
        "an unknown transactionId is unresolvable"
    )?;
    let held = s.pop_q(&q, &[]).await?;
    ensure!(held.is_none(), ACK_3, "the lease is untouched")
}

async fn one_batch(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let second = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(
        second.is_none(),
        ACK_4,
        "a second consumer of g gets nothing"
    )?;
    s.push1(&q, "p", "n").await?;
    let still = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(still.is_none(), ACK_4, "not even a later message")?;
    let other = s.pop_q(&q, &[("consumerGroup", "h")]).await?;
    ensure!(
        txns(&other) == ["m", "n"],
        ACK_4,
        "another group is not blocked"
    )
}

async fn wrong_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let mut bad = ack_item(&p.messages[0], "completed", false);
    bad["leaseId"] = json!(uuid::Uuid::new_v4().to_string());
    let r = s.ack_batch(None, vec![bad]).await?;
    ensure!(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        ACK_5,
        "another lease id is refused"
    )?;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(r[0].success, ACK_5, "the live lease is accepted")
}

async fn expired_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[("leaseSeconds", "1")]).await?;
    sleep_ms(1300).await;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        ACK_5,
        "an expired lease is refused"
    )?;
    let again = s.pop_q(&q, &[]).await?;
    ensure!(txns(&again) == ["m"], ACK_7, "the span is claimable again")
}

async fn no_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    // Someone else, without the lease id, completes the batch the first worker holds.
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[0], "completed", false)])
        .await?;
    ensure!(
        r[0].success,
        ACK_5,
        "an ack without leaseId is not lease-checked"
    )?;
    let late = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(
        late[0].success && late[0].noop,
        ACK_3,
        "the holder's ack is now a noop"
    )
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
    ensure!(
        !r[0].success && r[0].error.as_deref() == Some(ERR_INVALID_LEASE),
        ACK_10,
        "a live lease does not cover a later offset"
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
    ensure!(r[0].dlq, ACK_6, "dlq:true on the filed item")?;
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        d.messages.first().and_then(|m| m.error_message.as_deref()) == Some("bad payload"),
        ACK_6,
        "the error is the dead letter's errorMessage"
    )?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        ACK_6,
        "nothing comes back after dlq"
    )?;
    // completed: commits.
    s.push1(&q, "p", "n").await?;
    let p = s.pop_some(&q, &[]).await?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        ACK_6,
        "completed commits"
    )
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
    ensure!(
        !r[0].dlq,
        ACK_7,
        "the first failure is a retry, not a dead letter"
    )?;
    // ...and the second one exhausts the budget of 1.
    let p = s.pop_some(&q, &[]).await?;
    let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure!(r[0].dlq, DLQ_1, "the second failure is a dead letter")
}

/// Acks the message `status` `times` times in a row, popping it again before each; each
/// ack must leave it to come back, not dead-letter it.
async fn comes_back_after(s: &mut Session, q: &str, status: &str, times: usize) -> CaseResult {
    for n in 1..=times {
        let p = s.pop_some(q, &[]).await?;
        let r = s.ack_batch(None, acks_for(&p, status)).await?;
        ensure!(
            r[0].success && !r[0].dlq,
            ACK_6,
            "`{status}` ack {n} of {times} is not a dead letter"
        )?;
    }
    Ok(())
}

/// A `failed` ack of the message: a dead letter exactly when `dead` (DLQ-1's budget).
async fn fail_once(s: &mut Session, q: &str, dead: bool, why: &str) -> CaseResult {
    let p = s.pop_some(q, &[]).await?;
    let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure!(r[0].dlq == dead, [DLQ_1, ACK_6], "{why}")
}

/// ACK-6: `failed` releases the lease, also when the budget is spent and the message
/// becomes a dead letter, so the rest of the batch comes back at once (a client that
/// stops a batch at its first failure relies on it).
async fn spent_failure_releases(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(
        &q,
        json!({"retryLimit": 0, "retryDelay": 0, "leaseTime": 300}),
    )
    .await?;
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let p = s.pop_some(&q, &[("batch", "3")]).await?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[0], "failed", true)])
        .await?;
    ensure!(
        r[0].success && r[0].dlq,
        [ACK_6, DLQ_1],
        "a failure with no retries left is a dead letter"
    )?;
    ensure!(
        r[0].lease_released,
        ACK_6,
        "`failed` releases the lease, also when the message became a dead letter"
    )?;
    let Some(next) = p.messages.get(1) else {
        return Ok(());
    };
    let again = s.pop_q(&q, &[("batch", "3")]).await?;
    let first = again.as_ref().and_then(|a| a.messages.first());
    ensure!(
        first.is_some_and(|m| m.transaction_id == next.transaction_id),
        ACK_6,
        "the rest of the batch comes back at once, not when the released lease would have ended"
    )
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
    ensure!(
        again.status == PushStatus::Queued,
        PUSH_5,
        "outside the window: a new message"
    )?;
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
    ensure!(r[0].success, ACK_8, "the ack resolves")?;
    ensure!(
        s.pop_q(&q, &[("consumerGroup", "g")]).await?.is_none(),
        [ACK_8, ACK_1],
        "the cursor passed the newest t"
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
    ensure!(
        r[0].dlq && !r[1].dlq,
        [DLQ_1, ACK_6],
        "m1 exhausted becomes a dead letter; m2 is charged and comes back"
    )?;
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    ensure!(
        p.messages.first().is_some_and(|m| m.transaction_id == "m2"),
        ACK_6,
        "m2 comes back"
    )
}

async fn partial_keeps_lease(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[0], "completed", true)])
        .await?;
    ensure!(
        r[0].success && !r[0].lease_released,
        ACK_1,
        "a partial ack keeps the lease"
    )?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        ACK_4,
        "the rest is still leased"
    )?;
    let r = s
        .ack_batch(None, vec![ack_item(&p.messages[2], "completed", true)])
        .await?;
    ensure!(r[0].lease_released, ACK_1, "acking the end releases it")
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
