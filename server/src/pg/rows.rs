//! The small conversions every operation of the engine shares: PostgreSQL's answers to
//! wire values (times, options), "now", and which errors mean the
//! database cannot be reached.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use sqlx::PgConnection;

/// Whether an error means the database cannot be reached (PUSH-7: then pushes spool).
pub fn unreachable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed
    ) || matches!(e, sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("57P") || c.starts_with("08")))
}

/// ISO-8601 UTC with a literal `Z` (POP-12), microseconds as PostgreSQL keeps them.
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The database's "now" for this transaction.
pub(crate) async fn db_now(conn: &mut PgConnection) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT now()").fetch_one(conn).await
}

/// Options of a queue row, as stored.
pub(crate) fn options_of(v: Value) -> queen_reference::wire::QueueOptions {
    serde_json::from_value(v).unwrap_or_else(|e| {
        tracing::error!("a queue's stored options do not parse ({e}); using the defaults");
        Default::default()
    })
}

/// A long poll's side question failed: logged, and answered with `fallback`, which
/// keeps the poll going (its next attempt asks again).
pub(crate) fn logged<T>(e: sqlx::Error, what: &str, fallback: T) -> T {
    tracing::warn!("{what} failed: {e}");
    fallback
}
