//! The one-statement write for pushes that need no dedup lookup.
//!
//! Every push locks the rows of the partitions it writes, because a partition's offsets
//! must follow commit order (PUSH-6): a pop must never see offset 7 committed while 6 is
//! still on its way. Pushes that share a partition therefore write one after the other,
//! and what bounds throughput is how long each holds those locks. The general path
//! ([`super::push::write_at`]) holds them across several round trips (lock, dedup lookup,
//! insert, commit). When the broker minted every item's `transactionId` (PUSH-4) no item
//! can be a duplicate (PUSH-5), so nothing has to be read between locking and writing:
//! lock, number, insert, bump the partitions' last offsets and notify other processes all
//! happen in one auto-committed statement, and the locks are held only while PostgreSQL
//! executes it. If a queue or partition does not exist yet, or push maintenance is on,
//! the statement writes nothing and says so; the caller takes the general path.

use super::push::Prepared;
use sqlx::{PgPool, Row};
use std::collections::BTreeMap;
use uuid::Uuid;

/// What the statement did.
pub(crate) enum Minted {
    /// Written (every item `queued`, in request order).
    Written,
    /// Push maintenance is on: nothing written, spool instead (PUSH-7).
    Maintenance,
    /// A queue or partition is missing: nothing written, create it on the general path.
    Missing,
}

/// Whether [`write`] can take these items: the broker minted every transactionId.
pub(crate) fn applies<'a>(mut items: impl Iterator<Item = &'a Prepared>) -> bool {
    items.all(|i| i.minted)
}

/// Locks, writes and notifies in one statement. `items` must satisfy [`applies`].
pub(crate) async fn write(pool: &PgPool, items: &[&Prepared]) -> Result<Minted, sqlx::Error> {
    // The distinct (queue, partition) keys; each item points at its key by position.
    // The rows are locked in the general path's canonical order (queue id, partition
    // name), so the two paths never wait on each other in a cycle.
    let mut keys: BTreeMap<(&str, &str), i32> = BTreeMap::new();
    for i in items {
        keys.insert((&i.queue, &i.partition), 0);
    }
    for (n, v) in keys.values_mut().enumerate() {
        *v = n as i32;
    }
    let (kq, kp): (Vec<&str>, Vec<&str>) = keys.keys().copied().unzip();
    let mut queues: Vec<&str> = kq.clone();
    queues.dedup();
    let mut ki = Vec::with_capacity(items.len());
    let mut ids = Vec::with_capacity(items.len());
    let mut txns = Vec::with_capacity(items.len());
    let mut traces: Vec<Option<Uuid>> = Vec::with_capacity(items.len());
    let mut data = Vec::with_capacity(items.len());
    for i in items {
        ki.push(keys[&(i.queue.as_str(), i.partition.as_str())]);
        ids.push(i.message_id);
        txns.push(i.transaction_id.as_str());
        traces.push(i.trace_id);
        data.push(i.data.to_string());
    }
    // `lk` locks the partitions in canonical order (FOR UPDATE returns the newest
    // committed last_offset after any wait); `go` is false when a key is missing or
    // maintenance is on, and then no row is numbered, inserted, bumped or notified.
    let row = sqlx::query(
        "WITH k AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(qn, pn, n)),
         lk AS (SELECT p.id, p.last_offset, (k.n - 1)::int AS ki FROM queen_partitions p
                JOIN queen_queues q ON q.id = p.queue_id JOIN k ON q.name = k.qn AND p.name = k.pn
                ORDER BY p.queue_id, p.name FOR UPDATE OF p),
         sw AS (SELECT coalesce((SELECT enabled FROM queen_switches WHERE name = 'push_maintenance'), false) AS on),
         ok AS (SELECT (SELECT count(*) FROM lk) = cardinality($1::text[]) AND NOT (SELECT sw.on FROM sw) AS go),
         x AS (SELECT * FROM unnest($3::int[], $4::uuid[], $5::text[], $6::uuid[], $7::text[]) WITH ORDINALITY AS x(ki, i, t, tr, d, ord)),
         num AS (SELECT lk.id AS pid, lk.last_offset + row_number() OVER (PARTITION BY x.ki ORDER BY x.ord) AS o, x.*
                 FROM x JOIN lk ON lk.ki = x.ki WHERE (SELECT go FROM ok)),
         ins AS (INSERT INTO queen_messages (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at)
                 SELECT pid, o, i, t, tr, d::json, now() FROM num),
         upd AS (UPDATE queen_partitions p SET last_offset = n.o, last_write_at = now()
                 FROM (SELECT pid, max(o) AS o FROM num GROUP BY pid) n WHERE p.id = n.pid),
         nt AS (SELECT pg_notify('queen_push', q) FROM unnest($8::text[]) AS q WHERE (SELECT go FROM ok))
         SELECT (SELECT go FROM ok), (SELECT sw.on FROM sw), (SELECT count(*) FROM nt)",
    )
    .bind(&kq)
    .bind(&kp)
    .bind(&ki)
    .bind(&ids)
    .bind(&txns)
    .bind(&traces)
    .bind(&data)
    .bind(&queues)
    .fetch_one(pool)
    .await?;
    let (go, maintenance): (bool, bool) = (row.get(0), row.get(1));
    Ok(if go {
        Minted::Written
    } else if maintenance {
        Minted::Maintenance
    } else {
        Minted::Missing
    })
}
