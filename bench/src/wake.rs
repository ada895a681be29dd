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

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::json;
use std::time::{Duration, Instant};

/// Push-and-pop cycles before the measured rounds.
const WARM_UP: usize = 100;

pub async fn run(
    client: &Client,
    queue_prefix: &str,
    park: Duration,
    rounds: usize,
) -> Result<Outcome, String> {
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

    let mut lat = Latencies::default();
    let mut push_lat = Latencies::default();
    // From the push's answer to the pop's: the wake-up itself, without the push.
    let mut after_push = Latencies::default();
    let mut worst = (Duration::ZERO, 0usize);
    for round in 0..rounds {
        let c = client.clone();
        let path = pop_path.clone();
        let parked = tokio::spawn(async move {
            let r = pop(&c, &path).await;
            (r, Instant::now())
        });
        tokio::time::sleep(park).await;
        let pushed = Instant::now();
        push(client, &queue, round as i64).await?;
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
    }
    Ok(Outcome {
        workload: format!("wake-latency-{}ms", park.as_millis()),
        value: lat.percentile_ms(99.0),
        unit: "ms p99".into(),
        details: json!({"rounds": rounds, "warm_up": WARM_UP, "park_ms": park.as_millis() as u64,
                        "p50_ms": lat.percentile_ms(50.0), "p99_ms": lat.percentile_ms(99.0),
                        "push_p50_ms": push_lat.percentile_ms(50.0),
                        "push_p99_ms": push_lat.percentile_ms(99.0),
                        "after_push_p50_ms": after_push.percentile_ms(50.0),
                        "after_push_p99_ms": after_push.percentile_ms(99.0),
                        "worst_round": worst.1}),
    })
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
