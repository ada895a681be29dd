//! Transaction cases (PROTOCOL.md section 7: TXN-1..6).

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
        all_or_nothing: "txn-1/all-operations-commit-together-or-none", [TXN_1, TXN_2], Seed, Transactions;
        follow_rules: "txn-2/acks-follow-section-4-and-pushes-dedup", [TXN_2, ACK_6, PUSH_5], Project, Transactions, needs [Configure];
        shape: "txn-3/answer-shape-and-empty-operations-is-400", [TXN_3], Project, Transactions;
        kv_gate: "txn-5/a-required-kv-gate-is-refused-not-ignored", [TXN_5, TXN_1], Project, Transactions;
        required_leases: "txn-6/every-required-lease-must-be-live", [TXN_6, TXN_1], Project, Transactions;
    ]
}

async fn all_or_nothing(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let out = s.name("out");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let m = &p.messages[0];
    let bad_lease = uuid::Uuid::new_v4().to_string();
    let t = s
        .transaction(json!({"operations": [
            {"type": "push", "items": [{"queue": out, "transactionId": "x", "payload": 1}]},
            {"type": "ack", "transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": bad_lease},
        ]}))
        .await?;
    if t.success {
        // TXN-2 [PROJECT] decided otherwise (the model accepted it and recorded the
        // difference): the refused ack did not abort, so both operations committed
        // together, which is all TXN-1 asks.
        return ensure!(
            txns(&s.pop_q(&out, &[]).await?) == ["x"],
            TXN_1,
            "the transaction committed, so its push is there"
        );
    }
    ensure!(
        s.pop_q(&out, &[]).await?.is_none(),
        TXN_1,
        "the push of an aborted transaction is not there"
    )?;
    let t = s
        .transaction(json!({"operations": [
            {"type": "push", "items": [{"queue": out, "transactionId": "x", "payload": 1}]},
            {"type": "ack", "transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id},
        ]}))
        .await?;
    ensure!(
        t.success && t.results.len() == 2,
        [TXN_1, TXN_3],
        "push and ack commit together"
    )?;
    ensure!(
        txns(&s.pop_q(&out, &[]).await?) == ["x"],
        TXN_1,
        "the pushed message is there"
    )?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        TXN_1,
        "the ack committed"
    )
}

async fn follow_rules(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryDelay": 0})).await?;
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let m = &p.messages[0];
    let t = s
        .transaction(json!({"operations": [
            {"type": "ack", "transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": "failed"},
            {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "m"}, {"queue": q, "partition": "p", "transactionId": "n"}]},
        ]}))
        .await?;
    ensure!(
        t.success,
        TXN_2,
        "a failed ack inside a transaction is accepted"
    )?;
    let statuses: Vec<_> = t
        .results
        .iter()
        .filter_map(|r| match r {
            TxnResult::Push(p) => Some(p.status),
            _ => None,
        })
        .collect();
    ensure!(
        statuses == [PushStatus::Duplicate, PushStatus::Queued],
        [TXN_2, PUSH_5],
        "pushes inside dedup: {statuses:?}"
    )?;
    let again = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&again) == ["m", "n"],
        [TXN_2, ACK_6],
        "the failed message came back"
    )
}

async fn shape(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let t = s
        .transaction(json!({"operations": [{"type": "push", "items": [{"queue": q}, {"queue": q, "partition": "b"}]}]}))
        .await?;
    ensure!(
        is_uuid(&t.transaction_id) && t.success && t.results.len() == 2,
        TXN_3,
        "transactionId, success and one result per pushed item"
    )?;
    s.rejected(
        HttpRequest::post("/api/v1/transaction", &json!({"operations": []})),
        400,
    )
    .await?;
    ensure!(
        s.pop_some(&q, &[("partitions", "0")]).await?.messages.len() == 2,
        TXN_3,
        "only the committed transaction wrote"
    )
}

/// TXN-5: the same push behind the same required key-value gate, sent twice (what a
/// client that deduplicates with a gate does). Refused both times, nothing is pushed; a
/// broker that ignored the gate would push twice.
async fn kv_gate(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let gated = json!({
        "operations": [{"type": "push", "items": [{"queue": q, "payload": {"n": 1}}]}],
        "requiredLeases": [],
        "kv": [{"op": "putIfAbsent", "ns": s.name("ns"), "key": "gate:1", "value": true,
                "ttlSeconds": 300, "required": true}],
    });
    for _ in 0..2 {
        s.rejected(HttpRequest::post("/api/v1/transaction", &gated), 400)
            .await?;
    }
    ensure!(
        s.pop_q(&q, &[("batch", "10")]).await?.is_none(),
        TXN_5,
        "a refused transaction pushed nothing"
    )
}

/// TXN-6: a transaction that requires a lease commits while the lease is live. Once an
/// ack released the lease, the same transaction is refused whole: its push is not there.
async fn required_leases(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let out = s.name("out");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let lease = p.messages[0].lease_id.clone();
    let gated = |txn: &str| {
        json!({
            "operations": [{"type": "push", "items": [{"queue": out, "transactionId": txn, "payload": 1}]}],
            "requiredLeases": [lease],
        })
    };
    let t = s.transaction(gated("held")).await?;
    ensure!(
        t.success,
        TXN_6,
        "a transaction whose required lease is live commits: {t:?}"
    )?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    let t = s.transaction(gated("released")).await?;
    ensure!(
        !t.success && t.error.is_some(),
        TXN_6,
        "a transaction whose required lease an ack released is refused: {t:?}"
    )?;
    ensure!(
        txns(&s.pop_q(&out, &[("batch", "10")]).await?) == ["held"],
        [TXN_6, TXN_1],
        "only the transaction whose lease was live pushed"
    )
}
