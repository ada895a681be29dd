//! The analytics series (PROTOCOL.md MGMT-13) from the times the tables already hold.
//!
//! No table keeps a series: a bucket counts the retained messages whose `created_at`
//! falls in it and the dead letters whose `failed_at` does, grouped in one pass over the
//! window. The window and its buckets are the wire's ([`buckets`]), decided once for both
//! engines; the window's default end is the same clock pushes stamp messages with.

use super::db::Db;
use crate::clock::now_ms;
use chrono::{DateTime, Utc};
use queen_reference::time::Millis;
use queen_reference::wire::*;
use std::collections::HashMap;

fn at(t: Millis) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t).unwrap_or_default()
}

/// Counts per bucket start: the window's retained messages, then its dead letters, of
/// the queues the filters keep. Both sides read a retained message's partition row, so
/// what retention removed but has not deleted yet is not counted.
const COUNTS: &str = "WITH q AS (
        SELECT id FROM queen_queues
        WHERE ($1::text IS NULL OR name = $1) AND ($2::text IS NULL OR namespace = $2)
          AND ($3::text IS NULL OR task = $3))
    SELECT false AS dead, (floor(extract(epoch FROM m.created_at) * 1000)::bigint / $6) * $6 AS b,
           count(*) AS n
    FROM queen_messages m JOIN queen_partitions p ON p.id = m.partition_id
    WHERE p.queue_id IN (SELECT id FROM q) AND m.\"offset\" > p.removed_through
      AND m.created_at >= $4 AND m.created_at < $5
    GROUP BY b
    UNION ALL
    SELECT true, (floor(extract(epoch FROM d.failed_at) * 1000)::bigint / $6) * $6, count(*)
    FROM queen_dead_letters d JOIN queen_partitions p ON p.id = d.partition_id
    WHERE p.queue_id IN (SELECT id FROM q) AND d.failed_at >= $4 AND d.failed_at < $5
    GROUP BY 2";

/// MGMT-13's answer, or its 400.
pub(crate) async fn analytics(
    pool: &Db,
    q: &AnalyticsQuery,
) -> Result<Result<Analytics, WireError>, sqlx::Error> {
    let window = q.window(now_ms());
    let starts = match buckets(window.0, window.1, q.interval) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let rows: Vec<(bool, i64, i64)> = sqlx::query_as(COUNTS)
        .bind(&q.queue)
        .bind(&q.namespace)
        .bind(&q.task)
        .bind(at(window.0))
        .bind(at(window.1))
        .bind(q.interval.millis())
        .fetch_all(&mut *pool.acquire().await?)
        .await?;
    let mut counts: HashMap<Millis, (u64, u64)> = HashMap::new();
    for (dead, b, n) in rows {
        let e = counts.entry(b).or_default();
        let n = u64::try_from(n).unwrap_or(0);
        if dead {
            e.1 = n;
        } else {
            e.0 = n;
        }
    }
    Ok(Ok(Analytics::of(window, q.interval, &starts, |b| {
        counts.get(&b).copied().unwrap_or_default()
    })))
}
