//! wake-latency: a long poll parked on an empty queue, then a push; the time from the
//! push's start to the pop's return, over K rounds, for a given parking time.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::json;
use std::time::{Duration, Instant};

pub async fn run(
    client: &Client,
    queue_prefix: &str,
    park: Duration,
    rounds: usize,
) -> Result<Outcome, String> {
    let mut lat = Latencies::default();
    for round in 0..rounds {
        let queue = format!("{queue_prefix}-{}-{round}", park.as_millis());
        let c = client.clone();
        let path = format!(
            "/api/v1/pop/queue/{queue}?wait=true&timeout={}",
            park.as_millis() + 10_000
        );
        let pop = tokio::spawn(async move {
            let r = c.get(&path).await;
            (r, Instant::now())
        });
        tokio::time::sleep(park).await;
        let pushed = Instant::now();
        let (s, _) = client
            .post(
                "/api/v1/push",
                &json!({"items": [{"queue": queue, "payload": round}]}),
            )
            .await
            .map_err(|e| e.to_string())?;
        if s != 201 {
            return Err(format!("push answered {s}"));
        }
        let (r, at) = pop.await.map_err(|e| e.to_string())?;
        let (s, _) = r.map_err(|e| e.to_string())?;
        if s != 200 {
            return Err(format!(
                "the parked pop answered {s}, not the pushed message"
            ));
        }
        lat.record(at.saturating_duration_since(pushed));
    }
    Ok(Outcome {
        workload: format!("wake-latency-{}ms", park.as_millis()),
        value: lat.percentile_ms(99.0),
        unit: "ms p99".into(),
        details: json!({"rounds": rounds, "park_ms": park.as_millis() as u64, "p50_ms": lat.percentile_ms(50.0), "p99_ms": lat.percentile_ms(99.0)}),
    })
}
