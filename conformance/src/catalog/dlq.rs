//! Retry budget and dead-letter cases (PROTOCOL.md section 6: DLQ-1..2).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
use crate::rules::*;
use crate::session::*;
use serde_json::json;

pub fn cases() -> Vec<Case> {
    cases![
        limit_n: "dlq-1/retry-limit-n-allows-n-redeliveries", [DLQ_1, ACK_6], Seed, DeadLetter, needs [Configure];
        limit_zero: "dlq-1/retry-limit-zero-first-failure-is-final", [DLQ_1], Seed, DeadLetter, needs [Configure];
        per_group: "dlq-2/dead-letters-per-message-and-group-and-listing", [DLQ_2], Project, DeadLetter;
    ]
}

async fn limit_n(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 2, "retryDelay": 0}))
        .await?;
    s.push1(&q, "p", "m").await?;
    for round in 0..3 {
        let p = s.pop_some(&q, &[]).await?;
        let r = s.ack_batch(None, acks_for(&p, "failed")).await?;
        ensure!(
            r[0].dlq == (round == 2),
            DLQ_1,
            "failure {} of retryLimit 2: dlq={}",
            round + 1,
            r[0].dlq
        )?;
    }
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        d.total == 1 && d.messages[0].retry_count == 2,
        [DLQ_1, DLQ_2],
        "one dead letter, 2 retries"
    )?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        DLQ_1,
        "nothing comes back"
    )
}

async fn limit_zero(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 0})).await?;
    s.push_many(&q, "p", &["m", "n"]).await?;
    let p = s.pop_some(&q, &[]).await?;
    let r = s
        .ack_batch(None, vec![
            json!({"transactionId": "m", "partitionId": p.partition_id, "leaseId": p.lease_id, "status": "failed", "error": "boom"}),
        ])
        .await?;
    ensure!(r[0].dlq, DLQ_1, "retryLimit 0: the first failure is final")?;
    let next = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&next).is_empty() || txns(&next) == ["n"],
        DLQ_1,
        "n remains"
    )
}

async fn per_group(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "a", &["m1", "m2"]).await?;
    s.push1(&q, "b", "m3").await?;
    for g in ["g1", "g2"] {
        loop {
            let Some(p) = s
                .pop_q(&q, &[("consumerGroup", g), ("partitions", "0")])
                .await?
            else {
                break;
            };
            s.ack_batch(Some(g), acks_for(&p, "dlq")).await?;
        }
    }
    let all = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        all.total == 6,
        DLQ_2,
        "3 messages x 2 groups = 6 dead letters, got {}",
        all.total
    )?;
    let g1 = s.dlq(&[("queue", &q), ("consumerGroup", "g1")]).await?;
    ensure!(g1.total == 3, DLQ_2, "3 for g1")?;
    let b = s.dlq(&[("queue", &q), ("partition", "b")]).await?;
    ensure!(b.total == 2, DLQ_2, "2 in partition b")?;
    let page = s
        .dlq(&[("queue", &q), ("limit", "2"), ("offset", "3")])
        .await?;
    ensure!(
        page.messages.len() == 2 && page.total == 6,
        DLQ_2,
        "a page of 2 at offset 3"
    )?;
    // A group name unique to this case scopes the broker-wide listing.
    let g = s.name("solo");
    s.push1(&q, "c", "m4").await?;
    let p = s
        .pop_some(
            &q,
            &[("consumerGroup", &g), ("partitions", "0"), ("batch", "1")],
        )
        .await?;
    s.ack_batch(Some(&g), acks_for(&p, "dlq")).await?;
    let mine = s.dlq(&[("consumerGroup", &g)]).await?;
    ensure!(mine.total == 1, DLQ_2, "listing by group across queues")
}
