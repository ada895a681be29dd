//! The two management writes on cursors: seek and group delete (PROTOCOL.md MGMT-8,
//! MGMT-9). Each takes the `(partition, group)` locks acks take, in the same order
//! (by partition id), so it never runs beside a pop or an ack of the same cursor.

use super::pair;
use crate::wakes::Wakes;
use queen_reference::wire::*;
use sqlx::PgPool;
use uuid::Uuid;

/// MGMT-8: every partition's cursor to its end or to the last message created before
/// the time, its lease released, its retries and retry wait forgotten.
pub(crate) async fn seek(
    pool: &PgPool,
    wakes: &Wakes,
    group: &str,
    queue: &str,
    to: SeekTo,
) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let id: Option<i64> = sqlx::query_scalar("SELECT id FROM queen_queues WHERE name = $1")
        .bind(queue)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(id) = id else {
        return Ok(Answer::error(404, no_such_queue(queue).message));
    };
    let parts: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM queen_partitions WHERE queue_id = $1 ORDER BY id")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
    for p in &parts {
        pair::lock(&mut tx, *p, group).await?;
    }
    let time = match to {
        SeekTo::End => None,
        SeekTo::Time(ms) => chrono::DateTime::from_timestamp_millis(ms),
    };
    // The first message at or after the time, minus one (the model's `last_before`).
    sqlx::query(
        "INSERT INTO queen_cursors (partition_id, consumer_group, committed)
         SELECT p.id, $2, GREATEST(p.removed_through, CASE WHEN $3::timestamptz IS NULL THEN p.last_offset
             ELSE COALESCE((SELECT min(m.\"offset\") - 1 FROM queen_messages m
                  WHERE m.partition_id = p.id AND m.\"offset\" > p.removed_through AND m.created_at >= $3),
                  p.last_offset) END)
         FROM queen_partitions p WHERE p.id = ANY($1)
         ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed,
             lease_id = NULL, lease_end = NULL, lease_deadline = NULL, lease_duration_ms = NULL,
             not_before = NULL, retries = '{}'",
    )
    .bind(&parts)
    .bind(group)
    .bind(time)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // A seek back leaves something to deliver: parked pops look again.
    wakes.ring(queue);
    Ok(Answer::View(
        serde_json::to_value(SeekResponse {
            success: true,
            group: group.to_string(),
            queue: queue.to_string(),
            partitions: parts.len() as u64,
        })
        .expect("serializes"),
    ))
}

/// MGMT-9: the group's cursors on the queue (or every queue), and with `metadata` its
/// subscriptions there.
pub(crate) async fn delete_group(
    pool: &PgPool,
    wakes: &Wakes,
    group: &str,
    queue: Option<&str>,
    metadata: bool,
) -> Result<Answer, sqlx::Error> {
    const QUEUES: &str = "($2::text IS NULL OR q.name = $2)";
    let mut tx = pool.begin().await?;
    let parts: Vec<Uuid> = sqlx::query_scalar(&format!(
        "SELECT c.partition_id FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
         JOIN queen_queues q ON q.id = p.queue_id WHERE c.consumer_group = $1 AND {QUEUES}
         ORDER BY c.partition_id"
    ))
    .bind(group)
    .bind(queue)
    .fetch_all(&mut *tx)
    .await?;
    for p in &parts {
        pair::lock(&mut tx, *p, group).await?;
    }
    let deleted = sqlx::query(
        "DELETE FROM queen_cursors WHERE consumer_group = $1 AND partition_id = ANY($2)",
    )
    .bind(group)
    .bind(&parts)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if metadata {
        sqlx::query(&format!(
            "DELETE FROM queen_subscriptions s USING queen_queues q
             WHERE q.id = s.queue_id AND s.consumer_group = $1 AND {QUEUES}"
        ))
        .bind(group)
        .bind(queue)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    match queue {
        Some(q) => wakes.ring(q),
        None => wakes.ring_all(),
    }
    Ok(Answer::View(
        serde_json::to_value(GroupDeleted {
            success: true,
            group: group.to_string(),
            queue: queue.map(str::to_string),
            deleted,
        })
        .expect("serializes"),
    ))
}
