//! wake-latency: a long poll parked on an empty queue, then a push; the time from the
//! push's start to the pop's return, over K rounds, for a given parking time.
//!
//! The queue exists before the first round, and the parked pops take their message with
//! `autoAck`, so every round parks on the same, empty, existing queue: what is measured
//! is the push and the wake-up, not the creation of a queue. A warm-up of
//! [`WARM_UP`] push-and-pop cycles creates the queue and lets the broker settle (ours:
//! PostgreSQL plans a prepared statement afresh on its first five runs on each pooled
//! connection, before it keeps a generic plan), so the rounds see a broker in its steady
//! state. The push's own round trip is reported too, so the wake-up's share can be told
//! apart.
//!
//! When the bench knows the target's database it also measures the **floor** of a
//! wake-up on this machine, in rounds alternating with the broker's so that both see the
//! same conditions: after the same parking time, one `SELECT 1` on each of two idle
//! connections, one after the other. That is the least database work any broker on
//! PostgreSQL does between a push's start and a woken pop's answer (the push's write,
//! then the pop's claim, on two backends that slept through the parking time), without
//! HTTP and without any SQL worth the name. A p99 is the slowest round or two of the run,
//! so on a shared machine it is often decided by waking sleeping processes; the floor's
//! p99 and the CPU time the host withheld from this machine (`steal`, from `/proc/stat`)
//! during the rounds say how much of a broker's figure is the machine's.

use crate::client::Client;
use crate::machine;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::json;
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

/// Push-and-pop cycles before the measured rounds.
const WARM_UP: usize = 100;

/// The broker's outcome, then the floor's when `floor_db` (the target's database URL) is given.
pub async fn run(
    client: &Client,
    floor_db: Option<&str>,
    queue_prefix: &str,
    park: Duration,
    rounds: usize,
) -> Result<Vec<Outcome>, String> {
    let queue = format!("{queue_prefix}-{}", park.as_millis());
    let pop_path = format!(
        "/api/v1/pop/queue/{queue}?wait=true&autoAck=true&timeout={}",
        park.as_millis() + 10_000
    );
    // Warm-up: creates the queue and its partition, and leaves it empty.
    for _ in 0..WARM_UP {
        push(client, &queue, -1).await?;
        pop(client, &pop_path).await?;
    }

    let mut floor = match floor_db {
        Some(url) => Some(Floor::open(url).await?),
        None => None,
    };
    let mut floor_lat = Latencies::default();
    let cpu_before = machine::cpu_times();

    let mut lat = Latencies::default();
    let mut push_lat = Latencies::default();
    // From the push's answer to the pop's: the wake-up itself, without the push.
    let mut after_push = Latencies::default();
    let mut worst = (Duration::ZERO, 0usize);
    // With several brokers the push goes to another broker than the parked pop's, so
    // the wake-up crosses processes (LISTEN/NOTIFY).
    let pusher = client.on(1);
    for round in 0..rounds {
        let c = client.on(0);
        let path = pop_path.clone();
        let parked = tokio::spawn(async move {
            let r = pop(&c, &path).await;
            (r, Instant::now())
        });
        tokio::time::sleep(park).await;
        let pushed = Instant::now();
        push(&pusher, &queue, round as i64).await?;
        let answered = Instant::now();
        push_lat.record(answered - pushed);
        let (r, at) = parked.await.map_err(|e| e.to_string())?;
        let payload = r?;
        if payload != json!(round) {
            return Err(format!(
                "round {round}: the parked pop returned {payload}, not the pushed message"
            ));
        }
        let took = at.saturating_duration_since(pushed);
        lat.record(took);
        after_push.record(at.saturating_duration_since(answered));
        if took > worst.0 {
            worst = (took, round);
        }
        if let Some(f) = floor.as_mut() {
            tokio::time::sleep(park).await;
            floor_lat.record(f.round().await?);
        }
    }
    let cpu = machine::since(cpu_before);
    let mut out = vec![Outcome {
        workload: format!("wake-latency-{}ms", park.as_millis()),
        value: lat.percentile_ms(99.0),
        unit: "ms p99".into(),
        details: json!({"rounds": rounds, "warm_up": WARM_UP, "park_ms": park.as_millis() as u64,
                        "p50_ms": lat.percentile_ms(50.0), "p99_ms": lat.percentile_ms(99.0),
                        "push_p50_ms": push_lat.percentile_ms(50.0),
                        "push_p99_ms": push_lat.percentile_ms(99.0),
                        "after_push_p50_ms": after_push.percentile_ms(50.0),
                        "after_push_p99_ms": after_push.percentile_ms(99.0),
                        "worst_round": worst.1, "brokers": client.brokers(),
                        "machine_cpu": cpu.clone()}),
    }];
    if floor.is_some() {
        out.push(Outcome {
            workload: format!("wake-floor-{}ms", park.as_millis()),
            value: floor_lat.percentile_ms(99.0),
            unit: "ms p99".into(),
            details: json!({"rounds": rounds, "park_ms": park.as_millis() as u64,
                            "what": "SELECT 1 on each of two connections idle for the parking time, one after the other; rounds alternate with the broker's",
                            "p50_ms": floor_lat.percentile_ms(50.0), "p99_ms": floor_lat.percentile_ms(99.0),
                            "max_ms": floor_lat.percentile_ms(100.0), "machine_cpu": cpu}),
        });
    }
    Ok(out)
}

/// Two connections of their own, so that each floor round finds both idle for the
/// parking time, like the backends a broker's push and woken pop use.
struct Floor {
    conns: [PgConnection; 2],
}

impl Floor {
    async fn open(url: &str) -> Result<Floor, String> {
        let mut conns = Vec::new();
        for _ in 0..2 {
            let mut c = PgConnection::connect(url)
                .await
                .map_err(|e| format!("the floor's connection: {e}"))?;
            // Past PostgreSQL's five custom plans per connection, so that every round
            // runs a kept plan, as a warmed-up broker's statements do.
            for _ in 0..6 {
                one(&mut c).await?;
            }
            conns.push(c);
        }
        let conns = conns.try_into().map_err(|_| "two connections")?;
        Ok(Floor { conns })
    }

    async fn round(&mut self) -> Result<Duration, String> {
        let started = Instant::now();
        for c in self.conns.iter_mut() {
            one(c).await?;
        }
        Ok(started.elapsed())
    }
}

async fn one(c: &mut PgConnection) -> Result<(), String> {
    let v: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(c)
        .await
        .map_err(|e| e.to_string())?;
    if v != 1 {
        return Err(format!("SELECT 1 answered {v}"));
    }
    Ok(())
}

async fn push(client: &Client, queue: &str, payload: i64) -> Result<(), String> {
    let (s, _) = client
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": queue, "payload": payload}]}),
        )
        .await
        .map_err(|e| e.to_string())?;
    if s != 201 {
        return Err(format!("push answered {s}"));
    }
    Ok(())
}

/// One pop; the payload of its single message.
async fn pop(client: &Client, path: &str) -> Result<serde_json::Value, String> {
    let (s, body) = client.get(path).await.map_err(|e| e.to_string())?;
    if s != 200 {
        return Err(format!("a parked pop answered {s}, not the pushed message"));
    }
    let body = body.unwrap_or_default();
    match body["messages"].as_array().map(Vec::as_slice) {
        Some([m]) => Ok(m["data"].clone()),
        _ => Err(format!("a parked pop answered {body}, not one message")),
    }
}
