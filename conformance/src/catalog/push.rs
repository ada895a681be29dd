//! Push cases (PROTOCOL.md section 2: PUSH-1..6, PUSH-9). Spooling (PUSH-7) is with
//! the maintenance cases, bad input (PUSH-8) with the bad-input cases.

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::json;

pub fn cases() -> Vec<Case> {
    cases![
        one_result_per_item: "push-1/one-result-per-item-in-order", [PUSH_1], Seed, Core;
        implicit_lease_time: "push-2/unknown-queue-created-with-lease-time-60", [PUSH_2, POP_9], Seed, Core, needs [LeaseExtend];
        default_partition: "push-3/missing-partition-means-default", [PUSH_3], Project, Core;
        atomic: "push-3/request-is-atomic", [PUSH_3, PUSH_8], Project, Core, needs [BadInput];
        minted_txn: "push-4/missing-transaction-id-is-minted", [PUSH_4, PUSH_3], Seed, Core;
        dedup_window: "push-5/duplicate-within-window", [PUSH_5], Seed, Dedup;
        duplicate_id: "push-5/duplicate-carries-the-original-message-id", [PUSH_5], Project, Dedup;
        dedup_other_partition: "push-5/same-id-in-another-partition-is-new", [PUSH_5], Seed, Dedup;
        dedup_one_request: "push-5/same-id-twice-in-one-request", [PUSH_5, PUSH_13], Seed, Dedup;
        dedup_expires: "push-5/window-expires", [PUSH_5, CFG_1], Seed, Dedup, needs [Configure];
        request_order: "push-6/offsets-follow-request-then-commit-order", [PUSH_6, POP_1], Seed, Core;
        absent_payload: "push-9/absent-payload-and-plain-push-trace", [PUSH_9], Open, Core;
    ]
}

async fn one_result_per_item(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s
        .push(json!([
            {"queue": q, "partition": "a", "transactionId": "t1", "payload": 1},
            {"queue": q, "partition": "b", "payload": {"x": [1, 2]}},
            {"queue": q, "partition": "a", "transactionId": "t3", "payload": "three"},
        ]))
        .await?;
    ensure!(r.len() == 3, PUSH_1, "3 items, 3 results")?;
    for (i, item) in r.iter().enumerate() {
        ensure!(
            item.index == i && item.status == PushStatus::Queued,
            PUSH_1,
            "result {i} is {item:?}"
        )?;
    }
    s.pop_some(&q, &[("partitions", "0")]).await?;
    Ok(())
}

async fn implicit_lease_time(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "Default", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    // An extend without seconds renews by the lease's own duration: the queue's
    // leaseTime, 60 s for a push-created queue; the model checks expiresAt.
    let e = s.extend(&p.lease_id, None).await?;
    ensure!(
        e.success && e.renewed == 1,
        LEASE_1,
        "extend of a live lease: {e:?}"
    )
}

async fn default_partition(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push(json!([{"queue": q, "transactionId": "m", "payload": 1}]))
        .await?;
    let p = s
        .pop(PopRoute::Partition(q.clone(), "Default".into()), &[])
        .await?;
    ensure!(
        txns(&p) == ["m"],
        PUSH_3,
        "the item without partition is in Default"
    )
}

async fn atomic(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.rejected(
        HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": q, "transactionId": "ok"}, {"queue": q, "partition": 7}]}),
        ),
        400,
    )
    .await?;
    // Nothing was written: the valid first item is not there either.
    let p = s.pop_q(&q, &[]).await?;
    ensure!(p.is_none(), PUSH_3, "a rejected push wrote its valid item")
}

async fn minted_txn(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s.push(json!([{"queue": q, "payload": 1}])).await?;
    ensure!(
        is_uuid(&r[0].transaction_id),
        PUSH_4,
        "a minted transactionId is a UUID"
    )?;
    let p = s.pop_some(&q, &[]).await?;
    ensure!(
        p.messages[0].transaction_id == r[0].transaction_id,
        PUSH_4,
        "pop shows the minted transactionId"
    )?;
    // A minted push to a new partition of that queue creates it and lands there, not
    // in the queue's one partition.
    let second = s
        .push(json!([{"queue": q, "partition": "second", "payload": 2}]))
        .await?;
    let there = s
        .pop(PopRoute::Partition(q.clone(), "second".into()), &[])
        .await?;
    ensure!(
        txns(&there) == [second[0].transaction_id.clone()],
        PUSH_3,
        "the partition a minted push created delivers {:?}",
        txns(&there)
    )
}

async fn dedup_window(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let first = s.push1(&q, "p", "t").await?;
    let again = s.push1(&q, "p", "t").await?;
    ensure!(
        again.status == PushStatus::Duplicate,
        PUSH_5,
        "the same transactionId within the window is a duplicate"
    )?;
    // Which message_id the duplicate carries is a PROJECT point: the next case.
    let p = s.pop_some(&q, &[]).await?;
    ensure!(p.messages.len() == 1, PUSH_5, "one message stored")?;
    ensure!(
        p.messages[0].id == first.message_id,
        PUSH_5,
        "the stored message is the first push's"
    )
}

/// PUSH-5 [PROJECT]: a `duplicate` item carries the original message's `message_id`.
async fn duplicate_id(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let first = s.push1(&q, "p", "t").await?;
    let again = s.push1(&q, "p", "t").await?;
    ensure!(
        again.message_id == first.message_id,
        PUSH_5,
        "a duplicate carries the original message_id"
    )
}

async fn dedup_other_partition(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p1", "t").await?;
    let other = s.push1(&q, "p2", "t").await?;
    ensure!(
        other.status == PushStatus::Queued,
        PUSH_5,
        "the same id in another partition is a new message"
    )?;
    let p = s.pop_some(&q, &[("partitions", "0")]).await?;
    ensure!(p.messages.len() == 2, PUSH_5, "both stored")
}

async fn dedup_one_request(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s.push_many(&q, "p", &["t", "t", "u", "t"]).await?;
    let st: Vec<_> = r.iter().map(|x| x.status).collect();
    use PushStatus::*;
    ensure!(
        st == [Queued, Duplicate, Queued, Duplicate],
        PUSH_5,
        "statuses {st:?}: the first queued, the later duplicate"
    )?;
    s.pop_some(&q, &[]).await?;
    Ok(())
}

/// PUSH-5 with CFG-1: the configured window counts in seconds, and ends.
async fn dedup_expires(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"dedupWindowSeconds": 3})).await?;
    s.push1(&q, "p", "t").await?;
    // Past a second, well inside three (room for slow answers): a window read in any
    // unit shorter than the second has already ended here.
    sleep_ms(1200).await;
    let within = s.push1(&q, "p", "t").await?;
    ensure!(
        within.status == PushStatus::Duplicate,
        PUSH_5,
        "1.2 s into a 3 s window the same id is a duplicate"
    )?;
    sleep_ms(2100).await;
    let again = s.push1(&q, "p", "t").await?;
    ensure!(
        again.status == PushStatus::Queued,
        PUSH_5,
        "after the window the same id is a new message"
    )?;
    let p = s.pop_some(&q, &[]).await?;
    ensure!(p.messages.len() == 2, PUSH_5, "two messages")
}

async fn request_order(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    s.push_many(&q, "p", &["d"]).await?;
    s.push_many(&q, "p", &["e", "f"]).await?;
    let p = s.pop_q(&q, &[("batch", "10")]).await?;
    ensure!(
        txns(&p) == ["a", "b", "c", "d", "e", "f"],
        PUSH_6,
        "order {:?}",
        txns(&p)
    )
}

async fn absent_payload(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push(json!([{"queue": q, "transactionId": "x", "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}]))
        .await?;
    // The model accepts data null or {}, and the traceId returned or dropped.
    s.pop_some(&q, &[]).await?;
    Ok(())
}
