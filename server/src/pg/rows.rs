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

/// PUSH-12: whether the database refused a write for a reason retrying cannot fix: a
/// data exception (SQLSTATE class 22), an integrity violation (23) or a program limit
/// such as a value nested too deep (54). A lost connection, a timeout, a conflict, a
/// missing table or a missing encryption key is not: the operator or time may mend it.
pub(crate) fn refused_for_good(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d
        .code()
        .is_some_and(|c| ["22", "23", "54"].iter().any(|class| c.starts_with(class))))
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

/// A `json` (or `jsonb`) column read as its text, never parsed on the way: a stored
/// payload is checked by `seal::open_stored` before it goes out, so one that a parser
/// would refuse is set aside (POP-16) instead of failing every row read with it.
#[derive(Clone, Debug)]
pub(crate) struct JsonText(pub String);

impl sqlx::Type<sqlx::Postgres> for JsonText {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        sqlx::postgres::PgTypeInfo::with_name("json")
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        use sqlx::TypeInfo;
        matches!(ty.name(), "JSON" | "JSONB")
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for JsonText {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        use sqlx::{TypeInfo, ValueRef};
        let binary_jsonb = value.format() == sqlx::postgres::PgValueFormat::Binary
            && value.type_info().name() == "JSONB";
        let mut bytes = value.as_bytes()?;
        if binary_jsonb {
            // jsonb's binary form is a version byte, then the text.
            bytes = bytes.get(1..).unwrap_or_default();
        }
        Ok(JsonText(std::str::from_utf8(bytes)?.to_string()))
    }
}
