//! A dead letter's retry (PROTOCOL.md MGMT-12) on the tables: the message, or the dead
//! letter's copy once retention removed it, is pushed again through the ordinary push
//! path (so dedup, `maxSize`, encryption and wake-ups apply as to any push), written at
//! once or not at all (never spooled), and only then are its dead letters deleted: a
//! failure in between leaves the dead letter to be retried again, never a message lost.

use super::PgBroker;
use crate::seal::{open_stored, Unreadable};
use queen_reference::model::redrive::RETRY_UNDER_MAINTENANCE;
use queen_reference::wire::WireId;
use queen_reference::wire::*;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct Retried {
    offset: i64,
    queue: String,
    partition: String,
    data: super::rows::JsonText,
    sealed: bool,
    trace_id: Option<Uuid>,
    producer_sub: Option<String>,
}

/// Why a retry waits while this broker's spool holds pushes (PUSH-7): the retry may not
/// pass them, and may not join them, or its dead letter would outlive its push.
const SPOOL_FIRST: &str =
    "earlier pushes wait in this broker's spool; retry the dead letter once they are written";

pub(crate) async fn retry(
    b: &PgBroker,
    partition_id: &WireId,
    txn: &str,
) -> Result<Answer, sqlx::Error> {
    let pool = &b.inner.pool;
    let pid = partition_id.uuid();
    let found: Option<Retried> = sqlx::query_as(
        "SELECT d.\"offset\", q.name AS queue, p.name AS partition,
                COALESCE(m.data, d.data) AS data, COALESCE(m.sealed, d.sealed, false) AS sealed,
                m.trace_id, m.producer_sub
         FROM queen_dead_letters d
         JOIN queen_partitions p ON p.id = d.partition_id JOIN queen_queues q ON q.id = p.queue_id
         LEFT JOIN queen_messages m ON m.partition_id = d.partition_id AND m.\"offset\" = d.\"offset\"
         WHERE d.partition_id = $1 AND COALESCE(m.transaction_id, d.transaction_id) = $2
         ORDER BY d.\"offset\" DESC LIMIT 1",
    )
    .bind(pid)
    .bind(txn)
    .fetch_optional(&mut *pool.acquire().await?)
    .await?;
    let Some(r) = found else {
        let e = no_dead_letter(partition_id, txn);
        return Ok(Answer::error(e.status, e.message));
    };
    if super::admin::switch(pool, super::admin::Switch::PushMaintenance).await? {
        return Ok(Answer::error(503, RETRY_UNDER_MAINTENANCE));
    }
    // A payload no consumer could read stays a dead letter (POP-16): going back would
    // only set it aside again.
    let data = match open_stored(b.seal(), r.sealed, r.data.0) {
        Ok(d) => d,
        Err(why @ Unreadable::Unsealable) => return Ok(Answer::error(500, why)),
        Err(why) => return Ok(Answer::error(400, format!("{why}; it stays a dead letter"))),
    };
    let item = PushItem {
        queue: r.queue,
        partition: r.partition,
        payload: Payload::Given(data),
        transaction_id: None,
        trace_id: r.trace_id.map(|t| t.to_string()),
        producer_sub: r.producer_sub,
    };
    let pushed =
        match super::push::push_now(b, PushRequest { items: vec![item] }, SPOOL_FIRST).await {
            Answer::Pushed(items) => items.into_iter().next().expect("one item"),
            refused => return Ok(refused),
        };
    let retried =
        sqlx::query("DELETE FROM queen_dead_letters WHERE partition_id = $1 AND \"offset\" = $2")
            .bind(pid)
            .bind(r.offset)
            .execute(&mut *pool.acquire().await?)
            .await?
            .rows_affected();
    Ok(Answer::View(View::Retry(RetryResponse {
        success: true,
        transaction_id: pushed.transaction_id,
        message_id: pushed.message_id,
        retried,
    })))
}
