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
    let sql = if filtered {
        include_str!("../../sql/manage/analytics_filtered.sql")
    } else {
        include_str!("../../sql/manage/analytics.sql")
    };
    let mut query = sqlx::query_as(sql)
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
