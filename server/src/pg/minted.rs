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
    // The distinct (queue, partition) keys with how many items each gets; each item
    // points at its key by position and knows its rank among the key's items (1, 2, ...),
    // so the statement numbers the messages `last_offset + rank` without sorting them.
    // The rows are locked in the general path's canonical order (queue id, partition
    // name), so the two paths never wait on each other in a cycle.
    let mut keys: BTreeMap<(&str, &str), (i32, i64)> = BTreeMap::new();
    for i in items {
        keys.entry((&i.queue, &i.partition)).or_default().1 += 1;
    }
    for (n, v) in keys.values_mut().enumerate() {
        v.0 = n as i32;
    }
    let (kq, kp): (Vec<&str>, Vec<&str>) = keys.keys().copied().unzip();
    let counts: Vec<i64> = keys.values().map(|v| v.1).collect();
    let mut queues: Vec<&str> = kq.clone();
    queues.dedup();
    let mut ranks = vec![0i64; keys.len()];
    let mut ki = Vec::with_capacity(items.len());
    let mut rank = Vec::with_capacity(items.len());
    let mut ids = Vec::with_capacity(items.len());
    let mut txns = Vec::with_capacity(items.len());
    let mut traces: Vec<Option<Uuid>> = Vec::with_capacity(items.len());
    let mut data = Vec::with_capacity(items.len());
    for i in items {
        let k = keys[&(i.queue.as_str(), i.partition.as_str())].0;
        ranks[k as usize] += 1;
        ki.push(k);
        rank.push(ranks[k as usize]);
        ids.push(i.message_id);
        txns.push(i.transaction_id.as_str());
        traces.push(i.trace_id);
        data.push(i.data.to_string());
    }
    // `lk` locks the partitions in canonical order (FOR UPDATE returns the newest
    // committed last_offset after any wait); `go` is false when a key is missing or
    // maintenance is on, and then no row is inserted, bumped or notified.
    let row = sqlx::query(
        "WITH k AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS k(qn, pn, cnt, n)),
         lk AS (SELECT p.id, p.last_offset, k.cnt, (k.n - 1)::int AS ki FROM queen_partitions p
                JOIN queen_queues q ON q.id = p.queue_id JOIN k ON q.name = k.qn AND p.name = k.pn
                ORDER BY p.queue_id, p.name FOR UPDATE OF p),
         sw AS (SELECT coalesce((SELECT enabled FROM queen_switches WHERE name = 'push_maintenance'), false) AS on),
         ok AS (SELECT (SELECT count(*) FROM lk) = cardinality($1::text[]) AND NOT (SELECT sw.on FROM sw) AS go),
         ins AS (INSERT INTO queen_messages (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at)
                 SELECT lk.id, lk.last_offset + x.r, x.i, x.t, x.tr, x.d::json, now()
                 FROM unnest($4::int[], $5::bigint[], $6::uuid[], $7::text[], $8::uuid[], $9::text[]) AS x(ki, r, i, t, tr, d)
                 JOIN lk ON lk.ki = x.ki WHERE (SELECT go FROM ok)),
         upd AS (UPDATE queen_partitions p SET last_offset = lk.last_offset + lk.cnt, last_write_at = now()
                 FROM lk WHERE p.id = lk.id AND (SELECT go FROM ok)),
         nt AS (SELECT pg_notify('queen_push', q) FROM unnest($10::text[]) AS q WHERE (SELECT go FROM ok))
         SELECT (SELECT go FROM ok), (SELECT sw.on FROM sw), (SELECT count(*) FROM nt)",
    )
    .bind(&kq)
    .bind(&kp)
    .bind(&counts)
    .bind(&ki)
    .bind(&rank)
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
