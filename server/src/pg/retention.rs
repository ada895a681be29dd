//! The retention job (PROTOCOL.md section 16): removes what retention allows, on a timer.
//!
//! Which messages go, and what that does to cursors, leases and dead letters, is written
//! once in the SQL function `queen_retention_sweep` (`server/sql/06_retention.sql`); this
//! task only calls it every `RETENTION_INTERVAL_MS`, so a removable message is gone
//! within about one interval (RET-3). Each call removes at most `RETENTION_BATCH`
//! messages per partition, so one round never holds its locks for long; a partition
//! with more to remove is continued on the next round. Every broker process runs the
//! job; two rounds at once simply find less to do (a partition row's update serialises
//! them).

use super::db::Db;
use super::Inner;
use std::sync::Weak;
use std::time::Duration;

/// How often and how much (from the configuration).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    pub interval: Duration,
    pub batch: i64,
}

/// Runs until the broker is gone.
pub(crate) async fn run(broker: Weak<Inner>, schedule: Schedule) {
    let mut tick = tokio::time::interval(schedule.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = broker.upgrade() else {
            return;
        };
        match sweep(&inner.pool, schedule.batch).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("retention removed {n} messages"),
            Err(e) => tracing::warn!("the retention round failed, will retry: {e}"),
        }
    }
}

/// One round: the number of messages removed.
pub(crate) async fn sweep(pool: &Db, batch: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT queen_retention_sweep($1)")
        .bind(batch)
        .fetch_one(&mut *pool.acquire().await?)
        .await
}
