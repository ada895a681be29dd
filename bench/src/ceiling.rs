//! The raw PostgreSQL ceiling on the same cluster, in the same run, so every broker
//! figure is also a ratio to what the database itself can do:
//!
//! * `pg-ceiling-insert-100`: C sessions, each committing 100-row multi-row INSERTs;
//! * `pg-ceiling-insert-1`: C sessions, each committing single-row INSERTs (what a
//!   broker that commits every message on its own would reach);
//! * `pg-ceiling-copy-1s` and `pg-ceiling-copy-4s`: 1 and 4 sessions committing 100-row
//!   COPYs, the bulk-load limit;
//! * `pg-flush`: one session committing transactions that write nothing but their
//!   commit record (`pg_current_xact_id()` makes the transaction take an id, so its
//!   commit is a WAL flush): the flush rate, `pg_test_fsync`'s question asked of the
//!   database. On a durable cluster this bounds anything that answers after its commit.
//!
//! The rows have the shape of the broker's messages (`queen_messages`: the same columns,
//! key and index), so a broker figure and the ceiling write the same bytes.

use crate::report::Outcome;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// The same columns, key and index as the broker's `queen_messages` (whose `data` is
/// `json`, so that payloads come back as written).
const SETUP: &str = "DROP TABLE IF EXISTS bench_ceiling;
CREATE TABLE bench_ceiling (
    partition_id uuid NOT NULL, \"offset\" bigint NOT NULL, id uuid NOT NULL, transaction_id text NOT NULL,
    trace_id uuid, data json NOT NULL, created_at timestamptz NOT NULL,
    PRIMARY KEY (partition_id, \"offset\"));
CREATE INDEX ON bench_ceiling (partition_id, transaction_id, \"offset\" DESC);";

const COLUMNS: &str = "partition_id, \"offset\", id, transaction_id, trace_id, data, created_at";

/// One way of writing: what a session commits at a time.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `rows`-row INSERT statements.
    Insert { rows: usize },
    /// 100-row COPYs.
    Copy,
    /// Empty transactions that still flush their commit record.
    Flush,
}

/// Every ceiling workload: its name, how it writes, and how many sessions do it.
fn plan(connections: usize) -> [(&'static str, Mode, usize); 5] {
    [
        (
            "pg-ceiling-insert-100",
            Mode::Insert { rows: 100 },
            connections,
        ),
        ("pg-ceiling-insert-1", Mode::Insert { rows: 1 }, connections),
        ("pg-ceiling-copy-1s", Mode::Copy, 1),
        ("pg-ceiling-copy-4s", Mode::Copy, 4),
        ("pg-flush", Mode::Flush, 1),
    ]
}

/// Runs every ceiling workload for `duration` each.
pub async fn run(
    database_url: &str,
    connections: usize,
    duration: Duration,
) -> Result<Vec<Outcome>, String> {
    let pool = PgPoolOptions::new()
        .max_connections(connections.max(4) as u32)
        .connect(database_url)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql(SETUP)
        .execute(&pool)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, mode, sessions) in plan(connections) {
        let started = Instant::now();
        let deadline = started + duration;
        let tasks: Vec<_> = (0..sessions)
            .map(|w| tokio::spawn(session(pool.clone(), mode, w, deadline)))
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.map_err(|e| e.to_string())??;
        }
        let secs = started.elapsed().as_secs_f64();
        let unit = if matches!(mode, Mode::Flush) {
            "commits/s"
        } else {
            "rows/s"
        };
        out.push(Outcome {
            workload: name.into(),
            value: total as f64 / secs,
            unit: unit.into(),
            details: json!({"count": total, "seconds": secs, "sessions": sessions}),
        });
        // Leave the next workload a table of the same size as the first found.
        sqlx::raw_sql("TRUNCATE bench_ceiling")
            .execute(&pool)
            .await
            .map_err(|e| e.to_string())?;
    }
    sqlx::raw_sql("DROP TABLE IF EXISTS bench_ceiling")
        .execute(&pool)
        .await
        .map_err(|e| e.to_string())?;
    pool.close().await;
    Ok(out)
}

/// One session writing its own partition until `deadline`; the rows (or commits) done.
async fn session(
    pool: PgPool,
    mode: Mode,
    worker: usize,
    deadline: Instant,
) -> Result<u64, String> {
    let part = uuid::Uuid::now_v7();
    let mut done = 0u64;
    while Instant::now() < deadline {
        let base = done as i64;
        match mode {
            Mode::Insert { rows } => {
                let mut q = format!("INSERT INTO bench_ceiling ({COLUMNS}) VALUES ");
                for i in 0..rows as i64 {
                    let sep = if i > 0 { "," } else { "" };
                    let _ = write!(
                        q,
                        "{sep}('{part}', {o}, '{id}', 'w{worker}-{o}', NULL, '{data}', now())",
                        o = base + i,
                        id = uuid::Uuid::now_v7(),
                        data = payload(worker, base + i),
                    );
                }
                sqlx::raw_sql(&q)
                    .execute(&pool)
                    .await
                    .map_err(|e| e.to_string())?;
                done += rows as u64;
            }
            Mode::Copy => {
                let mut buf = String::with_capacity(100 * 160);
                for i in 0..100 {
                    let _ = writeln!(
                        buf,
                        "{part}\t{o}\t{id}\tw{worker}-{o}\t\\N\t{data}\t2026-01-01 00:00:00+00",
                        o = base + i,
                        id = uuid::Uuid::now_v7(),
                        data = payload(worker, base + i),
                    );
                }
                let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
                let mut copy = conn
                    .copy_in_raw(&format!("COPY bench_ceiling ({COLUMNS}) FROM STDIN"))
                    .await
                    .map_err(|e| e.to_string())?;
                copy.send(buf.as_bytes()).await.map_err(|e| e.to_string())?;
                copy.finish().await.map_err(|e| e.to_string())?;
                done += 100;
            }
            Mode::Flush => {
                sqlx::raw_sql("SELECT pg_current_xact_id()")
                    .execute(&pool)
                    .await
                    .map_err(|e| e.to_string())?;
                done += 1;
            }
        }
    }
    Ok(done)
}

/// The payload every ceiling row carries: the size of a bench push's.
fn payload(worker: usize, n: i64) -> String {
    format!("{{\"worker\": {worker}, \"n\": {n}, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}")
}
