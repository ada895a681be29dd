//! The two management writes on cursors: seek and group delete (PROTOCOL.md MGMT-8,
//! MGMT-9). Each takes the `(partition, group)` locks acks take, in the same order
//! (by partition id), so it never runs beside a pop or an ack of the same cursor.

use super::db::Db;
use super::pair;
use crate::wakes::Wakes;
use queen_reference::wire::*;
use uuid::Uuid;

/// MGMT-8: every partition's cursor (or the named one's) to its end or to the last
/// message created before the time, its lease released, its retries and retry wait
/// forgotten.
pub(crate) async fn seek(
    pool: &Db,
    wakes: &Wakes,
    group: &str,
    queue: &str,
    partition: Option<&str>,
    to: SeekTo,
) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let id: Option<i64> = sqlx::query_scalar("SELECT id FROM queen_queues WHERE name = $1")
        .bind(queue)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(id) = id else {
        return Ok(refusal(no_such_queue(queue)));
    };
    let parts: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM queen_partitions WHERE queue_id = $1 AND ($2::text IS NULL OR name = $2)",
    )
    .bind(id)
    .bind(partition)
    .fetch_all(&mut *tx)
    .await?;
    if let (Some(name), true) = (partition, parts.is_empty()) {
        return Ok(refusal(no_such_partition(queue, name)));
    }
    let time = match to {
        SeekTo::End => None,
        SeekTo::Time(ms) => chrono::DateTime::from_timestamp_millis(ms),
    };
    set_cursors(&mut tx, &parts, group, time).await?;
    tx.commit().await?;
    // A seek back leaves something to deliver: parked pops look again.
    wakes.ring(queue);
    Ok(Answer::View(View::Seek(SeekResponse {
        success: true,
        group: group.to_string(),
        queue: queue.to_string(),
        partitions: parts.len() as u64,
    })))
}

/// MGMT-8: the seek to `at` on every queue the group reads or subscribed to, whose
/// subscriptions then start at `at`; one transaction, every pair locked first.
pub(crate) async fn subscription(
    pool: &Db,
    wakes: &Wakes,
    group: &str,
    at: i64,
) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let queues: Vec<(i64, String)> = sqlx::query_as(
        "SELECT q.id, q.name FROM queen_queues q
         WHERE EXISTS (SELECT 1 FROM queen_subscriptions s WHERE s.queue_id = q.id AND s.consumer_group = $1)
            OR EXISTS (SELECT 1 FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
                       WHERE p.queue_id = q.id AND c.consumer_group = $1)",
    )
    .bind(group)
    .fetch_all(&mut *tx)
    .await?;
    let ids: Vec<i64> = queues.iter().map(|(id, _)| *id).collect();
    let parts: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM queen_partitions WHERE queue_id = ANY($1)")
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
    let time = chrono::DateTime::from_timestamp_millis(at);
    set_cursors(&mut tx, &parts, group, time).await?;
    sqlx::query(
        "UPDATE queen_subscriptions SET from_value = $3 WHERE queue_id = ANY($1) AND consumer_group = $2",
    )
    .bind(&ids)
    .bind(group)
    .bind(queen_reference::time::format_iso(at))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    for (_, q) in &queues {
        wakes.ring(q);
    }
    Ok(Answer::View(View::Subscription(SubscriptionResponse {
        success: true,
        group: group.to_string(),
        queues: queues.len() as u64,
        partitions: parts.len() as u64,
    })))
}

/// Sets the group's cursor on each partition (creating it), at the partition's end or,
/// with a time, before the first message created at or after it (the model's
/// `last_before`), never below what retention removed; the pairs are locked first, in
/// partition-id order.
async fn set_cursors(
    tx: &mut sqlx::PgConnection,
    parts: &[Uuid],
    group: &str,
    time: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(), sqlx::Error> {
    let mut sorted = parts.to_vec();
    sorted.sort();
    for p in &sorted {
        pair::lock(tx, *p, group).await?;
    }
    sqlx::query(
        "INSERT INTO queen_cursors (partition_id, consumer_group, queue_id, committed)
         SELECT p.id, $2, p.queue_id, GREATEST(p.removed_through, CASE WHEN $3::timestamptz IS NULL THEN p.last_offset
             ELSE COALESCE((SELECT min(m.\"offset\") - 1 FROM queen_messages m
                  WHERE m.partition_id = p.id AND m.\"offset\" > p.removed_through AND m.created_at >= $3),
                  p.last_offset) END)
         FROM queen_partitions p WHERE p.id = ANY($1)
         ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed,
             lease_id = NULL, lease_end = NULL, lease_deadline = NULL, lease_duration_ms = NULL,
             not_before = NULL, retries = '{}'",
    )
    .bind(&sorted)
    .bind(group)
    .bind(time)
    .execute(tx)
    .await?;
    Ok(())
}

fn refusal(e: WireError) -> Answer {
    Answer::error(e.status, e.message)
}

/// MGMT-9: the group's cursors on the queue (or every queue), and with `metadata` its
/// subscriptions there.
pub(crate) async fn delete_group(
    pool: &Db,
    wakes: &Wakes,
    group: &str,
    queue: Option<&str>,
    metadata: bool,
) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let parts: Vec<Uuid> = sqlx::query_scalar(
        "SELECT c.partition_id FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
         JOIN queen_queues q ON q.id = p.queue_id
         WHERE c.consumer_group = $1 AND ($2::text IS NULL OR q.name = $2)
         ORDER BY c.partition_id",
    )
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
        sqlx::query(
            "DELETE FROM queen_subscriptions s USING queen_queues q
             WHERE q.id = s.queue_id AND s.consumer_group = $1 AND ($2::text IS NULL OR q.name = $2)",
        )
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
    Ok(Answer::View(View::GroupDeleted(GroupDeleted {
        success: true,
        group: group.to_string(),
        queue: queue.map(str::to_string),
        deleted,
    })))
}
