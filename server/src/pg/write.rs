//! The one write of pushed messages (PROTOCOL.md section 2), in the caller's
//! transaction: queue and partition creation (PUSH-2, PUSH-3), dedup (PUSH-5), offsets
//! in commit order (PUSH-6), `maxSize` (RET-5) and sealing (ENC-2). The push writers,
//! transactions and the spool's replay all write through here; only the minted
//! one-statement path (`minted.rs`) writes on its own, for the pushes it can take whole.

use super::db::Db;
use super::queues::{lock_partitions, Parts};
use super::rows::db_now;
use crate::prepared::Prepared;
use crate::seal::Sealer;
use chrono::{DateTime, Utc};
use queen_reference::model::push::duplicate_of;
use queen_reference::wire::{queue_full, PushResult, PushStatus, QueueOptions, WireError};
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

/// One answer per item, in request order, all with `status` (PUSH-1).
pub(crate) fn answers<'a>(
    items: impl Iterator<Item = &'a Prepared>,
    status: PushStatus,
) -> Vec<PushResult> {
    items
        .enumerate()
        .map(|(index, i)| PushResult {
            index,
            message_id: i.message_id.to_string(),
            transaction_id: i.transaction_id.clone(),
            queue_name: i.queue.clone(),
            status,
        })
        .collect()
}

/// Writes spooled items in order, subject to dedup, in one transaction, skipping those
/// already stored (a chunk replayed again after a crash: PUSH-10). Returns the queues
/// written to.
pub(crate) async fn replay(
    pool: &Db,
    items: &[Prepared],
    seal: Option<&Sealer>,
) -> Result<Vec<String>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let stored = already_stored(&mut tx, items).await?;
    let fresh: Vec<&Prepared> = items
        .iter()
        .filter(|i| !stored.contains(&i.message_id))
        .collect();
    if !fresh.is_empty() {
        // PUSH-7: these were acknowledged as `buffered`, so no maxSize refuses them.
        if let Err(e) = write(&mut tx, &fresh, seal, Capacity::Exempt).await? {
            return Err(sqlx::Error::Protocol(e.message));
        }
    }
    tx.commit().await?;
    let mut queues: Vec<String> = fresh.into_iter().map(|i| i.queue.clone()).collect();
    queues.sort();
    queues.dedup();
    Ok(queues)
}

/// The message ids of `items` already in the table (found through the transactionId
/// index: a message id is decided with its item, so it names one stored message).
async fn already_stored(
    conn: &mut PgConnection,
    items: &[Prepared],
) -> Result<std::collections::HashSet<Uuid>, sqlx::Error> {
    let (mut q, mut p, mut t, mut i) = (vec![], vec![], vec![], vec![]);
    for it in items {
        q.push(it.queue.as_str());
        p.push(it.partition.as_str());
        t.push(it.transaction_id.as_str());
        i.push(it.message_id);
    }
    sqlx::query_scalar(
        "WITH k AS MATERIALIZED (
            SELECT q.id AS qid, k.p, k.t, k.i
            FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS k(q, p, t, i)
            JOIN queen_queues q ON q.name = k.q)
         SELECT m.id FROM k
         JOIN queen_partitions p ON p.queue_id = k.qid AND p.name = k.p
         JOIN queen_messages m ON m.partition_id = p.id AND m.transaction_id = k.t AND m.id = k.i",
    )
    .bind(&q)
    .bind(&p)
    .bind(&t)
    .bind(&i)
    .fetch_all(&mut *conn)
    .await
    .map(|ids| ids.into_iter().collect())
}

/// Whether a write is held to its queues' `maxSize` (RET-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Capacity {
    Enforced,
    /// A spool replay: its items were already acknowledged (PUSH-7).
    Exempt,
}

/// What a write answers: its results, or RET-5's refusal (nothing written; the caller
/// rolls back).
pub(crate) type Written = Result<Vec<PushResult>, WireError>;

/// Writes `items` atomically in the caller's transaction and answers them (PUSH-1).
pub(crate) async fn write(
    conn: &mut PgConnection,
    items: &[&Prepared],
    seal: Option<&Sealer>,
    capacity: Capacity,
) -> Result<Written, sqlx::Error> {
    let now = db_now(conn).await?;
    write_at(conn, items, now, seal, capacity).await
}

/// [`write`] with the transaction's "now" already read.
pub(crate) async fn write_at(
    conn: &mut PgConnection,
    items: &[&Prepared],
    now: DateTime<Utc>,
    seal: Option<&Sealer>,
    capacity: Capacity,
) -> Result<Written, sqlx::Error> {
    let (queue_ids, mut parts) = lock_partitions(conn, items).await?;
    let mut newest = newest_by_id(conn, items, &parts).await?;
    let mut results = Vec::with_capacity(items.len());
    let mut rows = NewRows::default();
    for (index, it) in items.iter().enumerate() {
        let key = (it.queue.clone(), it.partition.clone());
        let options = &queue_ids[&it.queue].1;
        let window_ms = options.dedup_window_ms();
        let (pid, last) = parts[&key];
        let found = newest.get(&(pid, it.transaction_id.clone())).copied();
        let dup = duplicate_of(it.minted, window_ms, found, |created, ms| {
            now < created + chrono::Duration::milliseconds(ms)
        });
        let (message_id, status) = match dup {
            Some(orig) => (orig, PushStatus::Duplicate),
            None => {
                // PUSH-6: the next offset of the locked partition.
                parts.get_mut(&key).expect("locked above").1 = last + 1;
                rows.add(pid, last + 1, it, sealer_for(options, seal, &it.queue)?);
                // A later item of this request with the same id is a duplicate of this one.
                newest.insert((pid, it.transaction_id.clone()), (it.message_id, now));
                (it.message_id, PushStatus::Queued)
            }
        };
        results.push(PushResult {
            index,
            message_id: message_id.to_string(),
            transaction_id: it.transaction_id.clone(),
            queue_name: it.queue.clone(),
            status,
        });
    }
    if rows.part.is_empty() {
        return Ok(Ok(results));
    }
    if capacity == Capacity::Enforced {
        if let Some(full) = over_capacity(conn, &queue_ids, &results).await? {
            return Ok(Err(full));
        }
    }
    insert(conn, &rows, &parts, now).await?;
    Ok(Ok(results))
}

/// RET-5: the refusal of the first capped queue these results would take past its
/// `maxSize`, counted under a lock on the queue's row, so concurrent pushes to it take
/// turns and cannot both fit in its last places. The partitions are already locked, in
/// their canonical order; the queue rows are locked in id order after them, and
/// `FOR NO KEY UPDATE` does not wait for a push creating a partition under the queue.
async fn over_capacity(
    conn: &mut PgConnection,
    queues: &HashMap<String, (i64, QueueOptions)>,
    results: &[PushResult],
) -> Result<Option<WireError>, sqlx::Error> {
    let mut added: std::collections::BTreeMap<i64, (&str, u64, u64)> = Default::default();
    for r in results.iter().filter(|r| r.status == PushStatus::Queued) {
        let (id, options) = &queues[&r.queue_name];
        if options.max_size > 0 {
            added
                .entry(*id)
                .or_insert((&r.queue_name, options.max_size, 0))
                .2 += 1;
        }
    }
    if added.is_empty() {
        return Ok(None);
    }
    let ids: Vec<i64> = added.keys().copied().collect();
    sqlx::query("SELECT 1 FROM queen_queues WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE")
        .bind(&ids)
        .execute(&mut *conn)
        .await?;
    let held: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT f.queue_id, COALESCE(sum(f.unconsumed), 0)::bigint
         FROM queen_partition_figures() f WHERE f.queue_id = ANY($1) GROUP BY f.queue_id",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let held: HashMap<i64, u64> = held
        .into_iter()
        .map(|(q, n)| (q, n.max(0) as u64))
        .collect();
    Ok(added.iter().find_map(|(id, (queue, max, n))| {
        let now = held.get(id).copied().unwrap_or(0);
        (now + n > *max).then(|| queue_full(queue, *max, now, *n))
    }))
}

/// The newest message of a partition with a transactionId: its id and creation time.
type Newest = HashMap<(Uuid, String), (Uuid, DateTime<Utc>)>;

/// PUSH-5's lookup: the newest message with each client-given transactionId of `items`,
/// per partition (read under the partition locks, so it sees every earlier commit).
async fn newest_by_id(
    conn: &mut PgConnection,
    items: &[&Prepared],
    parts: &Parts,
) -> Result<Newest, sqlx::Error> {
    let (lp, lt): (Vec<Uuid>, Vec<&str>) = items
        .iter()
        .filter(|i| !i.minted)
        .map(|i| {
            (
                parts[&(i.queue.clone(), i.partition.clone())].0,
                i.transaction_id.as_str(),
            )
        })
        .unzip();
    if lp.is_empty() {
        return Ok(Newest::new());
    }
    let rows: Vec<(Uuid, String, Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT DISTINCT ON (m.partition_id, m.transaction_id) m.partition_id, m.transaction_id, m.id, m.created_at
         FROM queen_messages m JOIN unnest($1::uuid[], $2::text[]) AS k(p, t) ON m.partition_id = k.p AND m.transaction_id = k.t
         ORDER BY m.partition_id, m.transaction_id, m.\"offset\" DESC",
    )
    .bind(&lp)
    .bind(&lt)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(p, t, id, at)| ((p, t), (id, at)))
        .collect())
}

/// The messages a write adds, column by column, as the insert binds them.
#[derive(Default)]
struct NewRows {
    part: Vec<Uuid>,
    offset: Vec<i64>,
    id: Vec<Uuid>,
    txn: Vec<String>,
    trace: Vec<Option<Uuid>>,
    data: Vec<String>,
    sub: Vec<Option<String>>,
    sealed: Vec<bool>,
}

/// ENC-2: the sealer for a message of a queue with these options: `None` for a queue in
/// clear; an error, never plaintext, for an encrypted queue on a broker without a key.
fn sealer_for<'a>(
    options: &queen_reference::wire::QueueOptions,
    seal: Option<&'a Sealer>,
    queue: &str,
) -> Result<Option<&'a Sealer>, sqlx::Error> {
    match (options.encryption_enabled, seal) {
        (false, _) => Ok(None),
        (true, Some(s)) => Ok(Some(s)),
        (true, None) => Err(sqlx::Error::Protocol(format!(
            "queue {queue} keeps its payloads encrypted and this broker has no QUEEN_ENCRYPTION_KEY"
        ))),
    }
}

impl NewRows {
    fn add(&mut self, partition: Uuid, offset: i64, it: &Prepared, seal: Option<&Sealer>) {
        self.part.push(partition);
        self.offset.push(offset);
        self.id.push(it.message_id);
        self.txn.push(it.transaction_id.clone());
        self.trace.push(it.trace_id);
        let text = it.data.get();
        self.data.push(match seal {
            Some(s) => s.seal(text),
            None => text.to_string(),
        });
        self.sealed.push(seal.is_some());
        self.sub.push(it.producer_sub.clone());
    }
}

/// The messages and the partitions' last offsets, in one statement (the queues are rung,
/// here and for other processes, once the write has committed).
async fn insert(
    conn: &mut PgConnection,
    rows: &NewRows,
    parts: &Parts,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let (ids, lasts): (Vec<Uuid>, Vec<i64>) = parts.values().copied().unzip();
    sqlx::query(
        "WITH ins AS (
            INSERT INTO queen_messages (partition_id, \"offset\", id, transaction_id, trace_id, data, producer_sub, sealed, created_at)
            SELECT p, o, i, t, tr, d::json, s, e, $7
            FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::uuid[], $6::text[], $10::text[], $11::boolean[]) AS x(p, o, i, t, tr, d, s, e))
         UPDATE queen_partitions p SET last_offset = x.o, last_write_at = $7
         FROM unnest($8::uuid[], $9::bigint[]) AS x(i, o) WHERE p.id = x.i AND p.last_offset < x.o",
    )
    .bind(&rows.part)
    .bind(&rows.offset)
    .bind(&rows.id)
    .bind(&rows.txn)
    .bind(&rows.trace)
    .bind(&rows.data)
    .bind(now)
    .bind(&ids)
    .bind(&lasts)
    .bind(&rows.sub)
    .bind(&rows.sealed)
    .execute(&mut *conn)
    .await
    .map(|_| ())
}
