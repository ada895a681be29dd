//! The delete of one message by its address (PROTOCOL.md MGMT-11) on the tables.
//!
//! The row goes and its offset is recorded in `queen_deleted_offsets`, so offsets are
//! never reused and the figures can leave it out. A dead letter of the message takes
//! its own copy first (as retention does), and what pointed at the offset moves: its
//! retries are forgotten, a lease span that ended at it ends at its last remaining
//! message or is released. The cursors are changed under their pairs' locks, taken
//! before any row is touched, so a delete never runs beside a pop or an ack there.

use super::db::Db;
use super::pair;
use crate::wakes::Wakes;
use queen_reference::wire::WireId;
use queen_reference::wire::*;
use uuid::Uuid;

pub(crate) async fn delete_message(
    pool: &Db,
    wakes: &Wakes,
    partition_id: &WireId,
    txn: &str,
) -> Result<Answer, sqlx::Error> {
    let missing = || {
        let e = no_such_message(partition_id, txn);
        Answer::error(e.status, e.message)
    };
    let pid = partition_id.uuid();
    let mut tx = pool.begin().await?;
    let Some(queue) = queue_of(&mut tx, pid).await? else {
        return Ok(missing());
    };
    lock_pairs(&mut tx, pid).await?;
    let offset: Option<i64> = sqlx::query_scalar(
        "SELECT \"offset\" FROM queen_messages WHERE partition_id = $1 AND transaction_id = $2
         ORDER BY \"offset\" DESC LIMIT 1",
    )
    .bind(pid)
    .bind(txn)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(message_id) = remove(&mut tx, pid, offset).await? else {
        return Ok(missing());
    };
    tx.commit().await?;
    // A released lease may leave messages after it to deliver: parked pops look again.
    wakes.ring(&queue);
    Ok(Answer::View(View::MessageDeleted(MessageDeleted {
        success: true,
        partition_id: partition_id.to_string(),
        transaction_id: txn.to_string(),
        message_id: message_id.to_string(),
    })))
}

/// POP-16: a stored message no consumer could read is set aside: filed as `group`'s dead
/// letter with `why` (its copy of the row kept there for the operator), then removed
/// from its partition as MGMT-11 removes a message, so every group goes on past it.
pub(crate) async fn set_aside(
    b: &super::PgBroker,
    pid: Uuid,
    offset: i64,
    group: &str,
    why: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = b.inner.pool.begin().await?;
    let Some(queue) = queue_of(&mut tx, pid).await? else {
        return Ok(());
    };
    lock_pairs(&mut tx, pid).await?;
    sqlx::query(
        "INSERT INTO queen_dead_letters (partition_id, \"offset\", consumer_group, error_message,
                                         retry_count, failed_at)
         SELECT $1, $2, $3, $4, 0, now() FROM queen_messages
         WHERE partition_id = $1 AND \"offset\" = $2
         ON CONFLICT DO NOTHING",
    )
    .bind(pid)
    .bind(offset)
    .bind(group)
    .bind(why)
    .execute(&mut *tx)
    .await?;
    remove(&mut tx, pid, Some(offset)).await?;
    tx.commit().await?;
    b.inner.wakes.ring(&queue);
    Ok(())
}

/// The name of the queue that holds partition `pid`, if it still exists.
async fn queue_of(tx: &mut sqlx::PgConnection, pid: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT q.name FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id WHERE p.id = $1",
    )
    .bind(pid)
    .fetch_optional(&mut *tx)
    .await
}

/// Removes the message at `offset` of `pid` (none: nothing to remove) under the pair
/// locks the caller holds: its dead letters take their copy, the offset is recorded as
/// deleted, and what pointed at it moves. Returns the removed message's id.
async fn remove(
    tx: &mut sqlx::PgConnection,
    pid: Uuid,
    offset: Option<i64>,
) -> Result<Option<Uuid>, sqlx::Error> {
    let Some(offset) = offset else {
        return Ok(None);
    };
    let gone: Option<Uuid> = sqlx::query_scalar(
        "WITH gone AS (
             DELETE FROM queen_messages m WHERE m.partition_id = $1 AND m.\"offset\" = $2
             RETURNING m.\"offset\", m.id, m.transaction_id, m.data, m.sealed, m.created_at),
         copied AS (
             UPDATE queen_dead_letters d
             SET message_id = g.id, transaction_id = g.transaction_id, data = g.data,
                 sealed = g.sealed, created_at = g.created_at
             FROM gone g
             WHERE d.partition_id = $1 AND d.\"offset\" = g.\"offset\" AND d.message_id IS NULL)
         SELECT id FROM gone",
    )
    .bind(pid)
    .bind(offset)
    .fetch_optional(&mut *tx)
    .await?;
    if gone.is_none() {
        return Ok(None);
    }
    sqlx::query(
        "WITH mark AS (INSERT INTO queen_deleted_offsets (partition_id, \"offset\") VALUES ($1, $2))
         UPDATE queen_partitions SET deleted = deleted + 1 WHERE id = $1",
    )
    .bind(pid)
    .bind(offset)
    .execute(&mut *tx)
    .await?;
    release_pointers(tx, pid, offset).await?;
    Ok(gone)
}

/// Takes the lock of every `(partition, group)` pair with a cursor there, by group; a
/// group whose first pop made its cursor meanwhile is locked on the next pass.
async fn lock_pairs(tx: &mut sqlx::PgConnection, pid: Uuid) -> Result<(), sqlx::Error> {
    let mut locked: Vec<String> = Vec::new();
    loop {
        let groups: Vec<String> = sqlx::query_scalar(
            "SELECT consumer_group FROM queen_cursors WHERE partition_id = $1
             ORDER BY consumer_group COLLATE \"C\"",
        )
        .bind(pid)
        .fetch_all(&mut *tx)
        .await?;
        let new: Vec<&String> = groups.iter().filter(|g| !locked.contains(g)).collect();
        if new.is_empty() {
            return Ok(());
        }
        for g in new {
            pair::lock(tx, pid, g).await?;
            locked.push(g.clone());
        }
    }
}

/// RET-4 for one offset: its retries forgotten, a span ending at it shortened to its
/// last remaining message, or released when none is left.
async fn release_pointers(
    tx: &mut sqlx::PgConnection,
    pid: Uuid,
    offset: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE queen_cursors c
         SET retries = c.retries - $2::text,
             lease_end = CASE WHEN c.lease_end = $2 THEN (
                 SELECT max(m.\"offset\") FROM queen_messages m
                 WHERE m.partition_id = $1 AND m.\"offset\" > c.committed AND m.\"offset\" < $2)
                 ELSE c.lease_end END
         WHERE c.partition_id = $1 AND (c.retries ? $2::text OR c.lease_end = $2)",
    )
    .bind(pid)
    .bind(offset)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE queen_cursors SET lease_id = NULL, lease_deadline = NULL, lease_duration_ms = NULL
         WHERE partition_id = $1 AND lease_id IS NOT NULL AND lease_end IS NULL",
    )
    .bind(pid)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
