//! Push (PROTOCOL.md section 2): queue and partition creation in the same transaction
//! (PUSH-2, PUSH-3), dedup (PUSH-5), offsets in commit order (PUSH-6), and the spool
//! when maintenance is on or the database cannot be reached (PUSH-7).

use super::group::WriteError;
use super::{db_now, PgBroker};
use crate::broker::{error_answer, json_answer};
use crate::spool::AppendError;
use chrono::{DateTime, Utc};
use queen_reference::wire::{
    derive_namespace_task, HttpResponse, Payload, PushRequest, PushResult, PushStatus, QueueOptions,
};
use serde_json::Value;
use sqlx::{PgConnection, PgPool, Row};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// One item ready to be written: every id decided. The spool stores these as they are.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Prepared {
    pub queue: String,
    pub partition: String,
    pub data: Value,
    pub transaction_id: String,
    /// The broker minted `transaction_id`: it cannot be a duplicate.
    pub minted: bool,
    pub trace_id: Option<Uuid>,
    pub message_id: Uuid,
}

impl Prepared {
    /// Decides the ids of a request item. `keep_trace`: a transaction keeps `traceId`; a
    /// plain push drops it (PUSH-9, as the seed `pop-routes.md` describes).
    pub fn from_item(item: queen_reference::wire::PushItem, keep_trace: bool) -> Prepared {
        let (transaction_id, minted) = match item.transaction_id {
            Some(t) => (t, false),
            None => (Uuid::now_v7().to_string(), true),
        };
        Prepared {
            queue: item.queue,
            partition: item.partition,
            // PUSH-9 [OPEN]: an absent payload is stored as null.
            data: match item.payload {
                Payload::Absent => Value::Null,
                Payload::Given(v) => std::sync::Arc::unwrap_or_clone(v),
            },
            transaction_id,
            minted,
            trace_id: if keep_trace {
                item.trace_id
                    .as_deref()
                    .and_then(|t| Uuid::parse_str(t).ok())
            } else {
                None
            },
            message_id: Uuid::now_v7(),
        }
    }
}

/// The push route: write, or spool under maintenance or when the database is away.
pub(crate) async fn push_route(broker: &PgBroker, req: PushRequest) -> HttpResponse {
    if req.items.is_empty() {
        return json_answer(201, Value::Array(vec![]));
    }
    let items: Arc<Vec<Prepared>> = Arc::new(
        req.items
            .into_iter()
            .map(|i| Prepared::from_item(i, false))
            .collect(),
    );
    if broker.spool_first() {
        return spool(broker, &items).await;
    }
    // Written by the group-commit writers (see `group.rs`); a deadlock is retried.
    let mut result = broker.inner.group.write(items.clone()).await;
    for _ in 0..3 {
        match result {
            Err(WriteError::Deadlock) => result = broker.inner.group.write(items.clone()).await,
            _ => break,
        }
    }
    match result {
        Ok(Some(out)) => json_answer(201, serde_json::to_value(out).expect("serializes")),
        Ok(None) => spool(broker, &items).await,
        Err(WriteError::Unreachable(e)) => {
            broker.mark_down();
            tracing::warn!("database unreachable during a push, spooling it: {e}");
            spool(broker, &items).await
        }
        Err(e) => {
            tracing::error!("push failed: {e}");
            error_answer(500, format!("push failed: {e}"))
        }
    }
}

/// PUSH-7: appends to the disk spool (fsynced) and answers `buffered`; PUSH-10: a full
/// spool answers 503 (the route adds `Retry-After`).
async fn spool(broker: &PgBroker, items: &[Prepared]) -> HttpResponse {
    match broker.inner.spool.append(items).await {
        Ok(()) => {}
        Err(e @ AppendError::Full { .. }) => {
            tracing::warn!("refusing a push: {e}");
            return error_answer(503, format!("the push spool is full, try again later: {e}"));
        }
        Err(e) => return error_answer(500, e),
    }
    let out = answers(items.iter(), PushStatus::Buffered);
    json_answer(201, serde_json::to_value(out).expect("serializes"))
}

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
pub(crate) async fn replay(pool: &PgPool, items: &[Prepared]) -> Result<Vec<String>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let stored = already_stored(&mut tx, items).await?;
    let fresh: Vec<&Prepared> = items
        .iter()
        .filter(|i| !stored.contains(&i.message_id))
        .collect();
    if !fresh.is_empty() {
        write(&mut tx, &fresh).await?;
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
        "SELECT m.id FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS k(q, p, t, i)
         JOIN queen_queues q ON q.name = k.q
         JOIN queen_partitions p ON p.queue_id = q.id AND p.name = k.p
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

/// Writes `items` atomically in the caller's transaction and answers them (PUSH-1).
pub(crate) async fn write(
    conn: &mut PgConnection,
    items: &[&Prepared],
) -> Result<Vec<PushResult>, sqlx::Error> {
    let now = db_now(conn).await?;
    write_at(conn, items, now).await
}

/// [`write`] with the transaction's "now" already read.
pub(crate) async fn write_at(
    conn: &mut PgConnection,
    items: &[&Prepared],
    now: DateTime<Utc>,
) -> Result<Vec<PushResult>, sqlx::Error> {
    let (queue_ids, mut parts) = lock_partitions(conn, items).await?;
    // PUSH-5: the newest message with each given transactionId, per partition.
    let (lp, lt): (Vec<Uuid>, Vec<String>) = items
        .iter()
        .filter(|i| !i.minted)
        .map(|i| {
            (
                parts[&(i.queue.clone(), i.partition.clone())].0,
                i.transaction_id.clone(),
            )
        })
        .unzip();
    let mut newest: HashMap<(Uuid, String), (Uuid, chrono::DateTime<chrono::Utc>)> = HashMap::new();
    if !lp.is_empty() {
        let rows = sqlx::query(
            "SELECT DISTINCT ON (m.partition_id, m.transaction_id) m.partition_id, m.transaction_id, m.id, m.created_at
             FROM queen_messages m JOIN unnest($1::uuid[], $2::text[]) AS k(p, t) ON m.partition_id = k.p AND m.transaction_id = k.t
             ORDER BY m.partition_id, m.transaction_id, m.\"offset\" DESC",
        )
        .bind(&lp)
        .bind(&lt)
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            newest.insert((r.get(0), r.get(1)), (r.get(2), r.get(3)));
        }
    }
    let mut results = Vec::with_capacity(items.len());
    let (mut m_part, mut m_off, mut m_id, mut m_txn, mut m_trace, mut m_data) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (index, it) in items.iter().enumerate() {
        let key = (it.queue.clone(), it.partition.clone());
        let window = queue_ids[&it.queue].1.dedup_window_seconds as i64;
        let (pid, last) = parts[&key];
        let dup = if it.minted || window == 0 {
            None
        } else {
            newest
                .get(&(pid, it.transaction_id.clone()))
                .filter(|(_, created)| *created + chrono::Duration::seconds(window) > now)
                .map(|(id, _)| *id)
        };
        let (message_id, status) = match dup {
            Some(orig) => (orig, PushStatus::Duplicate),
            None => {
                let off = last + 1;
                parts.get_mut(&key).expect("locked above").1 = off;
                m_part.push(pid);
                m_off.push(off);
                m_id.push(it.message_id);
                m_txn.push(it.transaction_id.clone());
                m_trace.push(it.trace_id);
                m_data.push(it.data.to_string());
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
    if !m_part.is_empty() {
        let written: Vec<(Uuid, i64)> = parts.values().copied().collect();
        let (ids, lasts): (Vec<Uuid>, Vec<i64>) = written.into_iter().unzip();
        let mut queues: Vec<&str> = items.iter().map(|i| i.queue.as_str()).collect();
        queues.sort();
        queues.dedup();
        // Messages, the partitions' last offsets, and a notification for pops parked on
        // other processes (this one rings its own bells), in one statement.
        sqlx::query(
            "WITH ins AS (
                INSERT INTO queen_messages (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at)
                SELECT p, o, i, t, tr, d::json, $7
                FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::uuid[], $6::text[]) AS x(p, o, i, t, tr, d)),
             upd AS (
                UPDATE queen_partitions p SET last_offset = x.o, last_write_at = $7
                FROM unnest($8::uuid[], $9::bigint[]) AS x(i, o) WHERE p.id = x.i AND p.last_offset < x.o)
             SELECT pg_notify('queen_push', q) FROM unnest($10::text[]) AS q",
        )
        .bind(&m_part)
        .bind(&m_off)
        .bind(&m_id)
        .bind(&m_txn)
        .bind(&m_trace)
        .bind(&m_data)
        .bind(now)
        .bind(&ids)
        .bind(&lasts)
        .bind(&queues)
        .execute(&mut *conn)
        .await?;
    }
    Ok(results)
}

/// Queue ids and options by name.
type Queues = HashMap<String, (i64, QueueOptions)>;
/// (queue, partition) -> (partition id, last offset), locked.
type Parts = BTreeMap<(String, String), (Uuid, i64)>;

/// PUSH-2, PUSH-3, PUSH-6: the queues and partitions of `items`, partition rows locked in
/// a canonical order (queue id, name) so two pushes never wait on each other in a cycle.
/// When they all exist (the usual case) this is one statement.
async fn lock_partitions(
    conn: &mut PgConnection,
    items: &[&Prepared],
) -> Result<(Queues, Parts), sqlx::Error> {
    let mut keys: Vec<(String, String)> = items
        .iter()
        .map(|i| (i.queue.clone(), i.partition.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let (kq, kp): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
    let rows = sqlx::query(
        "SELECT q.name, q.id, q.options, p.name, p.id, p.last_offset
         FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
         JOIN unnest($1::text[], $2::text[]) AS k(qn, pn) ON q.name = k.qn AND p.name = k.pn
         ORDER BY p.queue_id, p.name FOR UPDATE OF p",
    )
    .bind(&kq)
    .bind(&kp)
    .fetch_all(&mut *conn)
    .await?;
    if rows.len() < keys.len() {
        // Something is new: create what is missing, then lock (this transaction may
        // already hold some of the rows; locking them again is free).
        return create_and_lock(conn, items).await;
    }
    let mut queues: Queues = HashMap::new();
    let mut parts: Parts = BTreeMap::new();
    for r in rows {
        let (qname, pname): (String, String) = (r.get(0), r.get(3));
        queues
            .entry(qname.clone())
            .or_insert_with(|| (r.get(1), super::options_of(r.get(2))));
        parts.insert((qname, pname), (r.get(4), r.get(5)));
    }
    Ok((queues, parts))
}

/// The slow path of [`lock_partitions`]: queues and partitions created if missing.
async fn create_and_lock(
    conn: &mut PgConnection,
    items: &[&Prepared],
) -> Result<(Queues, Parts), sqlx::Error> {
    // PUSH-2: queues first (implicit ones with leaseTime 60).
    let mut names: Vec<String> = items.iter().map(|i| i.queue.clone()).collect();
    names.sort();
    names.dedup();
    let mut queue_ids: Queues =
        sqlx::query("SELECT name, id, options FROM queen_queues WHERE name = ANY($1)")
            .bind(&names)
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|r| (r.get(0), (r.get(1), super::options_of(r.get(2)))))
            .collect();
    for name in &names {
        if !queue_ids.contains_key(name) {
            let q = ensure_queue(conn, name, QueueOptions::implicit()).await?;
            queue_ids.insert(name.clone(), q);
        }
    }
    // PUSH-3, PUSH-6: partitions created if missing, then locked in a canonical order
    // (queue id, name), so two pushes never wait on each other in a cycle.
    let mut keys: Vec<(i64, String)> = items
        .iter()
        .map(|i| (queue_ids[&i.queue].0, i.partition.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let (kq, kn): (Vec<i64>, Vec<String>) = keys.iter().cloned().unzip();
    const LOCK: &str = "SELECT p.queue_id, p.name, p.id, p.last_offset FROM queen_partitions p
        JOIN unnest($1::bigint[], $2::text[]) AS k(q, n) ON p.queue_id = k.q AND p.name = k.n
        ORDER BY p.queue_id, p.name FOR UPDATE OF p";
    let mut rows = sqlx::query(LOCK)
        .bind(&kq)
        .bind(&kn)
        .fetch_all(&mut *conn)
        .await?;
    if rows.len() < keys.len() {
        let ids: Vec<Uuid> = keys.iter().map(|_| Uuid::now_v7()).collect();
        sqlx::query(
            "INSERT INTO queen_partitions (id, queue_id, name)
             SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) ON CONFLICT (queue_id, name) DO NOTHING",
        )
        .bind(&ids)
        .bind(&kq)
        .bind(&kn)
        .execute(&mut *conn)
        .await?;
        rows = sqlx::query(LOCK)
            .bind(&kq)
            .bind(&kn)
            .fetch_all(&mut *conn)
            .await?;
    }
    let by_key: HashMap<(i64, String), (Uuid, i64)> = rows
        .into_iter()
        .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3))))
        .collect();
    let mut parts: Parts = BTreeMap::new();
    for it in items {
        let k = (queue_ids[&it.queue].0, it.partition.clone());
        parts.insert((it.queue.clone(), it.partition.clone()), by_key[&k]);
    }
    Ok((queue_ids, parts))
}

/// The queue row, created with `options` (and a derived namespace/task) when missing.
pub(crate) async fn ensure_queue(
    conn: &mut PgConnection,
    name: &str,
    options: QueueOptions,
) -> Result<(i64, QueueOptions), sqlx::Error> {
    if let Some(r) = sqlx::query("SELECT id, options FROM queen_queues WHERE name = $1")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?
    {
        return Ok((r.get(0), super::options_of(r.get(1))));
    }
    let (ns, task) = derive_namespace_task(name);
    sqlx::query("INSERT INTO queen_queues (name, namespace, task, options) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING")
        .bind(name)
        .bind(ns)
        .bind(task)
        .bind(serde_json::to_value(options).expect("serializes"))
        .execute(&mut *conn)
        .await?;
    let r = sqlx::query("SELECT id, options FROM queen_queues WHERE name = $1")
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
    Ok((r.get(0), super::options_of(r.get(1))))
}
