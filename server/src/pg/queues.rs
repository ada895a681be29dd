//! Queue and partition rows: created when a push or a pop first names them (PUSH-2,
//! POP-8), and the partition rows a push locks before it numbers its messages (PUSH-6).

use crate::prepared::Prepared;
use queen_reference::wire::{derive_namespace_task, QueueOptions};
use sqlx::{PgConnection, Row};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// Queue ids and options by name.
pub(crate) type Queues = HashMap<String, (i64, QueueOptions)>;
/// (queue, partition) -> (partition id, last offset), locked.
pub(crate) type Parts = BTreeMap<(String, String), (Uuid, i64)>;

/// PUSH-2, PUSH-3, PUSH-6: the queues and partitions of `items`, partition rows locked in
/// a canonical order (queue id, name) so two pushes never wait on each other in a cycle.
/// When they all exist (the usual case) this is one statement.
pub(crate) async fn lock_partitions(
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
    // The keys are resolved to queue ids first (materialized), so that each partition is
    // found by its whole key: a plan made while the tables were small once found the
    // queue's partitions by queue id alone and filtered them by name, every key reading
    // every partition of the queue. FOR NO KEY UPDATE, as the push's own update needs:
    // it does not wait for transactions that insert cursors under a partition.
    let rows = sqlx::query(
        "WITH k AS MATERIALIZED (
            SELECT q.id AS qid, q.name AS qn, q.options, k.pn
            FROM unnest($1::text[], $2::text[]) AS k(qn, pn) JOIN queen_queues q ON q.name = k.qn)
         SELECT k.qn AS queue_name, k.qid AS queue_id, k.options,
                p.name AS partition_name, p.id AS partition_id, p.last_offset
         FROM k JOIN queen_partitions p ON p.queue_id = k.qid AND p.name = k.pn
         ORDER BY p.queue_id, p.name FOR NO KEY UPDATE OF p",
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
        let (qname, pname): (String, String) = (r.get("queue_name"), r.get("partition_name"));
        queues
            .entry(qname.clone())
            .or_insert_with(|| (r.get("queue_id"), super::rows::options_of(r.get("options"))));
        parts.insert(
            (qname, pname),
            (r.get("partition_id"), r.get("last_offset")),
        );
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
            .map(|r| {
                let options = super::rows::options_of(r.get("options"));
                (r.get("name"), (r.get("id"), options))
            })
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
        ORDER BY p.queue_id, p.name FOR NO KEY UPDATE OF p";
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
        .map(|r| {
            let key = (r.get("queue_id"), r.get("name"));
            (key, (r.get("id"), r.get("last_offset")))
        })
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
        return Ok((r.get("id"), super::rows::options_of(r.get("options"))));
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
    Ok((r.get("id"), super::rows::options_of(r.get("options"))))
}
