//! The raw PostgreSQL ceiling for consuming, measured on the same cluster in the same
//! round as the broker's `consume`, so that figure is also a ratio to what the database
//! can do for it.
//!
//! Consuming a batch durably needs, at the least, two commits: a claim that leases a
//! partition's cursor and reads up to a batch of messages past it, and an ack that moves
//! the cursor and drops the lease. Here each is one statement, sent by C sessions (the
//! bench's consumers) over the same pre-filled table shape as the broker's messages, with
//! each session walking partitions of its own, so nothing but the database is paid for:
//!
//! * `pg-ceiling-consume`: both commits flushed, as a broker that keeps leases durable;
//! * `pg-ceiling-consume-soft-lease`: the claim committed without waiting for its flush
//!   (`synchronous_commit = off`), the ack flushed: what a broker that treats a lease as
//!   soft state (lost in a crash, so an early expiry) could reach.

use crate::report::Outcome;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use std::fmt::Write;
use std::str::FromStr;
use std::time::Instant;

/// The messages, with the broker's key and columns, and one cursor per partition.
const SETUP: &str = "DROP TABLE IF EXISTS bench_consume_messages, bench_consume_cursors;
CREATE TABLE bench_consume_messages (
    partition_id uuid NOT NULL, \"offset\" bigint NOT NULL, id uuid NOT NULL, transaction_id text NOT NULL,
    trace_id uuid, data json NOT NULL, created_at timestamptz NOT NULL,
    PRIMARY KEY (partition_id, \"offset\"));
CREATE TABLE bench_consume_cursors (
    partition_id uuid PRIMARY KEY, committed bigint NOT NULL DEFAULT 0,
    lease_id uuid, lease_deadline timestamptz);";

const TEARDOWN: &str = "DROP TABLE IF EXISTS bench_consume_messages, bench_consume_cursors";

/// Leases a free cursor and reads the batch past it, in one statement (one commit).
const CLAIM: &str = "WITH c AS (
    UPDATE bench_consume_cursors SET lease_id = $2, lease_deadline = now() + interval '30 seconds'
    WHERE partition_id = $1 AND (lease_deadline IS NULL OR lease_deadline < now())
    RETURNING committed)
SELECT m.\"offset\", m.id, m.transaction_id, m.data::text AS data
FROM bench_consume_messages m, c
WHERE m.partition_id = $1 AND m.\"offset\" > c.committed
ORDER BY m.\"offset\" LIMIT $3";

/// Moves the cursor past the batch and drops the lease it holds, in one statement.
const ACK: &str =
    "UPDATE bench_consume_cursors SET committed = $2, lease_id = NULL, lease_deadline = NULL
WHERE partition_id = $1 AND lease_id = $3";

/// The consume workload's shape, which the ceiling copies.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub messages: usize,
    pub partitions: usize,
    pub consumers: usize,
    pub batch: usize,
}

/// Runs both consume ceilings, each over a freshly filled table.
pub async fn run(database_url: &str, shape: Shape) -> Result<Vec<Outcome>, String> {
    let durable = pool(database_url, shape.consumers, false).await?;
    let soft = pool(database_url, shape.consumers, true).await?;
    let mut out = Vec::new();
    for (name, claims) in [
        ("pg-ceiling-consume", &durable),
        ("pg-ceiling-consume-soft-lease", &soft),
    ] {
        let partitions = fill(&durable, shape).await?;
        let started = Instant::now();
        let tasks: Vec<_> = (0..shape.consumers)
            .map(|w| {
                let mine: Vec<uuid::Uuid> = partitions
                    .iter()
                    .skip(w)
                    .step_by(shape.consumers)
                    .copied()
                    .collect();
                tokio::spawn(session(claims.clone(), durable.clone(), mine, shape.batch))
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.map_err(|e| e.to_string())??;
        }
        let secs = started.elapsed().as_secs_f64();
        if total != shape.messages as u64 {
            return Err(format!(
                "{name}: consumed {total} of {} messages",
                shape.messages
            ));
        }
        out.push(Outcome {
            workload: name.into(),
            value: total as f64 / secs,
            unit: "rows/s".into(),
            details: json!({"count": total, "seconds": secs, "sessions": shape.consumers,
                            "batch": shape.batch, "partitions": shape.partitions}),
        });
    }
    sqlx::raw_sql(TEARDOWN)
        .execute(&durable)
        .await
        .map_err(err)?;
    durable.close().await;
    soft.close().await;
    Ok(out)
}

/// A pool of `sessions` connections; `soft` ones commit without waiting for the flush.
async fn pool(database_url: &str, sessions: usize, soft: bool) -> Result<PgPool, String> {
    let mut options = PgConnectOptions::from_str(database_url).map_err(err)?;
    if soft {
        options = options.options([("synchronous_commit", "off")]);
    }
    PgPoolOptions::new()
        .max_connections(sessions.max(1) as u32)
        .connect_with(options)
        .await
        .map_err(err)
}

/// Creates the tables afresh and COPYs the messages in, round robin over the partitions;
/// the partitions' ids.
async fn fill(pool: &PgPool, shape: Shape) -> Result<Vec<uuid::Uuid>, String> {
    sqlx::raw_sql(SETUP).execute(pool).await.map_err(err)?;
    let partitions: Vec<uuid::Uuid> = (0..shape.partitions.max(1))
        .map(|_| uuid::Uuid::now_v7())
        .collect();
    let mut rows = String::with_capacity(shape.messages * 160);
    for n in 0..shape.messages {
        let (part, offset) = (partitions[n % partitions.len()], n / partitions.len() + 1);
        let _ = writeln!(
            rows,
            "{part}\t{offset}\t{id}\tm{n}\t\\N\t{{\"i\": {n}, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\t2026-01-01 00:00:00+00",
            id = uuid::Uuid::now_v7(),
        );
    }
    let mut conn = pool.acquire().await.map_err(err)?;
    let mut copy = conn
        .copy_in_raw(
            "COPY bench_consume_messages (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at) FROM STDIN",
        )
        .await
        .map_err(err)?;
    copy.send(rows.as_bytes()).await.map_err(err)?;
    copy.finish().await.map_err(err)?;
    let mut cursors = String::from("INSERT INTO bench_consume_cursors (partition_id) VALUES ");
    for (i, p) in partitions.iter().enumerate() {
        let _ = write!(cursors, "{}('{p}')", if i > 0 { "," } else { "" });
    }
    sqlx::raw_sql(&cursors)
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    sqlx::raw_sql("ANALYZE bench_consume_messages, bench_consume_cursors")
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    Ok(partitions)
}

/// One consumer: claims and acks its partitions in turn until each is empty; the messages
/// it consumed. The payloads are read as text, as a broker answering JSON would.
async fn session(
    claims: PgPool,
    acks: PgPool,
    mut partitions: Vec<uuid::Uuid>,
    batch: usize,
) -> Result<u64, String> {
    let mut consumed = 0u64;
    let mut turn = 0;
    while !partitions.is_empty() {
        turn = (turn + 1) % partitions.len();
        let part = partitions[turn];
        let lease = uuid::Uuid::now_v7();
        let rows = sqlx::query(CLAIM)
            .bind(part)
            .bind(lease)
            .bind(batch as i64)
            .fetch_all(&claims)
            .await
            .map_err(err)?;
        let Some(last) = rows.last() else {
            partitions.swap_remove(turn);
            continue;
        };
        let mut bytes = 0;
        for row in &rows {
            bytes += row.try_get::<&str, _>("data").map_err(err)?.len();
        }
        std::hint::black_box(bytes);
        let through: i64 = last.try_get("offset").map_err(err)?;
        let moved = sqlx::query(ACK)
            .bind(part)
            .bind(through)
            .bind(lease)
            .execute(&acks)
            .await
            .map_err(err)?;
        if moved.rows_affected() != 1 {
            return Err(format!("the ack of partition {part} moved no cursor"));
        }
        consumed += rows.len() as u64;
    }
    Ok(consumed)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
