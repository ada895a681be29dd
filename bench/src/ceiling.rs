//! The raw PostgreSQL ceiling on the same cluster, in the same run: C connections
//! writing rows of the same shape as the broker's messages, as 100-row multi-row
//! INSERTs and as COPY, so every broker figure is also a ratio to the database's limit.

use crate::report::Outcome;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use std::time::{Duration, Instant};

/// The same columns, key and index as the broker's `queen_messages` (whose `data` is
/// `json` since migration 0002, so that payloads come back as written).
const SETUP: &str = "DROP TABLE IF EXISTS bench_ceiling;
CREATE TABLE bench_ceiling (
    partition_id uuid NOT NULL, \"offset\" bigint NOT NULL, id uuid NOT NULL, transaction_id text NOT NULL,
    trace_id uuid, data json NOT NULL, created_at timestamptz NOT NULL,
    PRIMARY KEY (partition_id, \"offset\"));
CREATE INDEX ON bench_ceiling (partition_id, transaction_id, \"offset\" DESC);";

pub async fn run(
    database_url: &str,
    connections: usize,
    duration: Duration,
) -> Result<Vec<Outcome>, String> {
    let pool = PgPoolOptions::new()
        .max_connections(connections as u32)
        .connect(database_url)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql(SETUP)
        .execute(&pool)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for mode in ["insert-100", "copy-100"] {
        let deadline = Instant::now() + duration;
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..connections {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                let part = uuid::Uuid::now_v7();
                let mut off: i64 = 0;
                let mut rows = 0u64;
                while Instant::now() < deadline {
                    let base = off;
                    off += 100;
                    if mode == "insert-100" {
                        let mut q = String::from("INSERT INTO bench_ceiling (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at) VALUES ");
                        for i in 0..100 {
                            if i > 0 {
                                q.push(',');
                            }
                            q.push_str(&format!(
                                "('{part}', {}, '{}', 'w{w}-{}', NULL, '{{\"worker\": {w}, \"n\": {}, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}', now())",
                                base + i,
                                uuid::Uuid::now_v7(),
                                base + i,
                                base + i
                            ));
                        }
                        sqlx::raw_sql(&q).execute(&pool).await.map_err(|e| e.to_string())?;
                    } else {
                        let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
                        let mut copy = conn
                            .copy_in_raw("COPY bench_ceiling (partition_id, \"offset\", id, transaction_id, trace_id, data, created_at) FROM STDIN")
                            .await
                            .map_err(|e| e.to_string())?;
                        let mut buf = String::new();
                        for i in 0..100 {
                            buf.push_str(&format!(
                                "{part}\t{}\t{}\tw{w}-{}\t\\N\t{{\"worker\": {w}, \"n\": {}, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\t2026-01-01 00:00:00+00\n",
                                base + i,
                                uuid::Uuid::now_v7(),
                                base + i,
                                base + i
                            ));
                        }
                        copy.send(buf.as_bytes()).await.map_err(|e| e.to_string())?;
                        copy.finish().await.map_err(|e| e.to_string())?;
                    }
                    rows += 100;
                }
                Ok::<_, String>(rows)
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.map_err(|e| e.to_string())??;
        }
        let secs = started.elapsed().as_secs_f64();
        out.push(Outcome {
            workload: format!("pg-ceiling-{mode}"),
            value: total as f64 / secs,
            unit: "rows/s".into(),
            details: json!({"rows": total, "seconds": secs, "connections": connections}),
        });
    }
    sqlx::raw_sql("DROP TABLE IF EXISTS bench_ceiling")
        .execute(&pool)
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}
