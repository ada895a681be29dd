//! The one-statement write for pushes that need no dedup lookup.
//!
//! Every push locks the rows of the partitions it writes, because a partition's offsets
//! must follow commit order (PUSH-6): a pop must never see offset 7 committed while 6 is
//! still on its way. Pushes that share a partition therefore write one after the other,
//! and what bounds throughput is how long each holds those locks. The general path
//! ([`super::write::write_at`]) holds them across several round trips (lock, dedup lookup,
//! insert, commit). When the broker minted every item's `transactionId` (PUSH-4) no item
//! can be a duplicate (PUSH-5), so nothing has to be read between locking and writing:
//! lock, number, insert and bump the partitions' last offsets all happen in one auto-committed call of the PL/pgSQL function `queen_push_minted`
//! (migration 0005, which says why it is a function), and the locks are held only while
//! PostgreSQL executes it. If a queue or partition does not exist yet, or push
//! maintenance is on, the function writes nothing and says so; the caller takes the
//! general path.

use crate::prepared::Prepared;
use sqlx::{PgConnection, Row};
use std::collections::BTreeMap;
use uuid::Uuid;

/// What the function did.
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

/// Locks and writes in one round trip. `items` must satisfy [`applies`].
pub(crate) async fn write(
    conn: &mut PgConnection,
    items: &[&Prepared],
) -> Result<Minted, sqlx::Error> {
    // The distinct (queue, partition) keys with how many items each gets; each item
    // points at its key by position and knows its rank among the key's items (1, 2, ...),
    // so the function numbers the messages `last_offset + rank` without sorting them.
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
    let mut ranks = vec![0i64; keys.len()];
    let mut ki = Vec::with_capacity(items.len());
    let mut rank = Vec::with_capacity(items.len());
    let mut ids = Vec::with_capacity(items.len());
    let mut txns = Vec::with_capacity(items.len());
    let mut traces: Vec<Option<Uuid>> = Vec::with_capacity(items.len());
    let mut data: Vec<&str> = Vec::with_capacity(items.len());
    let mut subs: Vec<Option<&str>> = Vec::with_capacity(items.len());
    for i in items {
        let k = keys[&(i.queue.as_str(), i.partition.as_str())].0;
        ranks[k as usize] += 1;
        ki.push(k);
        rank.push(ranks[k as usize]);
        ids.push(i.message_id);
        txns.push(i.transaction_id.as_str());
        traces.push(i.trace_id);
        data.push(i.data.get());
        subs.push(i.producer_sub.as_deref());
    }
    // Locks the partitions in canonical order, then writes; `go` is false when a key is
    // missing or maintenance is on, and then nothing is inserted or bumped.
    let row = sqlx::query(
        "SELECT go, maintenance FROM queen_push_minted($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
    .bind(&subs)
    .fetch_one(conn)
    .await?;
    let (go, maintenance): (bool, bool) = (row.get("go"), row.get("maintenance"));
    Ok(if go {
        Minted::Written
    } else if maintenance {
        Minted::Maintenance
    } else {
        Minted::Missing
    })
}
