//! drain-many-partitions and drain-one-partition: what one pop costs when the backlog is
//! spread thin. A queue holds N messages, one in each of N partitions (or all N in one
//! partition); one consumer of a named group pops one message at a time and acknowledges
//! it, until all are acknowledged. The two figures are pops per second; a broker whose
//! pop scans every partition for candidates falls behind as N grows, one that finds the
//! next claimable partition directly drains both at the same rate.
//!
//! Exactly once is checked: every message delivered once and none missing.

use crate::client::Client;
use crate::report::Outcome;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

pub struct DrainParams<'a> {
    pub messages: usize,
    /// One partition per message (`drain-many-partitions`), or all in one.
    pub spread: bool,
    pub queue: String,
    /// The brokers, whose CPU time is read around the drain alone.
    pub brokers: &'a crate::target::Target,
}

/// The group that drains.
const GROUP: &str = "bench-drain";

/// Items per pre-fill request.
const FILL: usize = 1000;

pub async fn run(client: &Client, p: &DrainParams<'_>) -> Result<Outcome, String> {
    fill(client, p).await?;
    let path = format!(
        "/api/v1/pop/queue/{}?batch=1&partitions=1&consumerGroup={GROUP}",
        p.queue
    );
    let mut seen = HashSet::with_capacity(p.messages);
    let mut duplicates = 0u64;
    let server_before = p.brokers.cpu_s();
    let started = Instant::now();
    let give_up = started + Duration::from_secs(600);
    while seen.len() < p.messages && Instant::now() < give_up {
        let Some(cycle) = crate::cycle::pop_and_ack(client, &path, Some(GROUP)).await? else {
            return Err(format!(
                "a pop found nothing with {} of {} messages left",
                p.messages - seen.len(),
                p.messages
            ));
        };
        for t in cycle.delivered {
            if !seen.insert(t) {
                duplicates += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let server_cpu = server_before.zip(p.brokers.cpu_s()).map(|(a, b)| b - a);
    let missing = p.messages - seen.len();
    if missing > 0 || duplicates > 0 {
        return Err(format!(
            "not exactly once: {missing} missing, {duplicates} duplicates"
        ));
    }
    let name = if p.spread {
        "drain-many-partitions"
    } else {
        "drain-one-partition"
    };
    Ok(Outcome {
        workload: name.into(),
        value: p.messages as f64 / secs,
        unit: "pops/s".into(),
        details: json!({"messages": p.messages, "partitions": if p.spread { p.messages } else { 1 },
                        "seconds": secs, "consumers": 1, "batch": 1, "server_cpu_s": server_cpu}),
    })
}

/// Pushes the messages (not timed): message `i` to partition `p{i}`, or all to `p0`.
async fn fill(client: &Client, p: &DrainParams<'_>) -> Result<(), String> {
    for start in (0..p.messages).step_by(FILL) {
        let items: Vec<Value> = (start..(start + FILL).min(p.messages))
            .map(|i| {
                let part = if p.spread { i } else { 0 };
                json!({"queue": p.queue, "partition": format!("p{part}"), "transactionId": format!("m{i}"), "payload": {"i": i}})
            })
            .collect();
        let (s, _) = client
            .post("/api/v1/push", &json!({ "items": items }))
            .await
            .map_err(|e| e.to_string())?;
        if s != 201 {
            return Err(format!("pre-fill push answered {s}"));
        }
    }
    Ok(())
}
