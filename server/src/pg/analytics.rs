//! The analytics series (PROTOCOL.md MGMT-13) from the times the tables already hold.
//!
//! No table keeps a series: a bucket counts the retained messages whose `created_at`
//! falls in it and the dead letters whose `failed_at` does, grouped in one pass over the
//! window's rows. The window and its buckets are the wire's ([`buckets`]), decided once
//! for both engines; the window's default end is the same clock pushes stamp messages
//! with.

use super::db::Db;
use crate::clock::now_ms;
use chrono::{DateTime, Utc};
use queen_reference::time::Millis;
use queen_reference::wire::*;
use std::collections::HashMap;

fn at(t: Millis) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t).unwrap_or_default()
}

/// SQL: counts per bucket start (ms) of the window `[$1, $2)` in buckets of `$3` ms: the
/// retained messages, then the dead letters. A message row is retained while it exists:
/// the retention sweep deletes rows in the transaction that moves a partition's floor.
/// Rows are counted per bucket first (`date_bin`, plain timestamp arithmetic) and only
/// then, when a filter names queues, per partition and joined to the queues it keeps,
/// so the pass over the window's rows does no join.
fn counts_sql(filtered: bool) -> String {
    let side = |table: &str, column: &str| {
        let bin = format!("date_bin(make_interval(secs => $3::float8 / 1000), {column}, 'epoch')");
        let window = format!("{column} >= $1 AND {column} < $2");
        if filtered {
            format!(
                "SELECT x.b, sum(x.n)::bigint AS n FROM (
                    SELECT partition_id, {bin} AS b, count(*) AS n FROM {table}
                    WHERE {window} GROUP BY 1, 2) x
                 JOIN queen_partitions p ON p.id = x.partition_id
                 JOIN queen_queues q ON q.id = p.queue_id
                 WHERE ($4::text IS NULL OR q.name = $4) AND ($5::text IS NULL OR q.namespace = $5)
                   AND ($6::text IS NULL OR q.task = $6)
                 GROUP BY 1"
            )
        } else {
            format!("SELECT {bin} AS b, count(*) AS n FROM {table} WHERE {window} GROUP BY 1")
        }
    };
    format!(
        "SELECT false, (extract(epoch FROM b) * 1000)::bigint, n FROM ({}) m
         UNION ALL
         SELECT true, (extract(epoch FROM b) * 1000)::bigint, n FROM ({}) d",
        side("queen_messages", "created_at"),
        side("queen_dead_letters", "failed_at")
    )
}

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
    let filtered = q.queue.is_some() || q.namespace.is_some() || q.task.is_some();
    let sql = counts_sql(filtered);
    let mut query = sqlx::query_as(&sql)
        .bind(at(window.0))
        .bind(at(window.1))
        .bind(q.interval.millis());
    if filtered {
        query = query.bind(&q.queue).bind(&q.namespace).bind(&q.task);
    }
    let rows: Vec<(bool, i64, i64)> = query.fetch_all(&mut *pool.acquire().await?).await?;
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
