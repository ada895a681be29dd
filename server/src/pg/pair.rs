//! The `(partition, group)` advisory lock, through which pops, acks and extends of one
//! cursor take turns.
//!
//! Pops *try* it (in the head's walk) and skip the pair when it is held (POP-2: leased
//! partitions are skipped, not waited on); acks, extends and a pop's second pass wait
//! for it. The key is the SQL
//! function `queen_pair_key` (`server/sql/01_rules.sql`), the one definition both the
//! server's statements and the pop head's function use: two definitions that drifted
//! apart would let a pop and an ack of one cursor run at once (ACK-4).

use sqlx::PgConnection;
use uuid::Uuid;

/// Waits for the pair's lock, held until the transaction ends.
pub(crate) async fn lock(
    conn: &mut PgConnection,
    partition: Uuid,
    group: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(queen_pair_key($1, $2))")
        .bind(partition)
        .bind(group)
        .execute(conn)
        .await
        .map(|_| ())
}
