//! request-scaling: what one large request costs per item, and what it does to small
//! pushes to other queues while it runs (LIMIT-1 and the writer lanes).
//!
//! For each size N (10 to 10,000) it times, one request at a time: a plain push of N
//! items, a transaction of N push operations (one item each) and a transaction of N ack
//! operations (each completing one message of a batch popped beforehand). Per-item cost
//! should stay flat as N grows. Meanwhile probes push one message at a time to queues
//! of their own; their worst latency during the largest requests shows whether a large
//! request holds up writers other queues share.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SIZES: [usize; 4] = [10, 100, 1000, 10_000];

pub async fn run(client: &Client, run_id: &str) -> Result<Vec<Outcome>, String> {
    let mut out = Vec::new();
    for kind in ["push", "txn-push", "txn-ack"] {
        let mut per_item = serde_json::Map::new();
        let mut probe_worst = serde_json::Map::new();
        for n in SIZES {
            let queue = format!("bench-scale-{kind}-{n}-{run_id}");
            let body = request(client, kind, &queue, n).await?;
            let (elapsed, probes) = timed_with_probes(client, &body, kind, run_id).await?;
            per_item.insert(n.to_string(), json!(elapsed.as_secs_f64() * 1e6 / n as f64));
            probe_worst.insert(n.to_string(), json!(probes.percentile_ms(100.0)));
        }
        let flat =
            per_item["10000"].as_f64().unwrap_or(0.0) / per_item["100"].as_f64().unwrap_or(1.0);
        out.push(Outcome {
            workload: format!("scaling-{kind}"),
            value: per_item["10000"].as_f64().unwrap_or(f64::NAN),
            unit: "µs/item".into(),
            details: json!({"us_per_item_by_size": per_item, "ratio_10000_to_100": flat,
                            "probe_push_worst_ms_by_size": probe_worst}),
        });
    }
    Ok(out)
}

/// The request of `kind` with `n` items, with whatever it needs set up first (for
/// acks: `n` messages pushed and popped in one batch).
async fn request(
    client: &Client,
    kind: &str,
    queue: &str,
    n: usize,
) -> Result<(String, Value), String> {
    let item = |i: usize| json!({"queue": queue, "partition": format!("p{}", i % 16), "payload": {"i": i}});
    Ok(match kind {
        "push" => (
            "/api/v1/push".into(),
            json!({"items": (0..n).map(item).collect::<Vec<_>>()}),
        ),
        "txn-push" => (
            "/api/v1/transaction".into(),
            json!({"operations": (0..n).map(|i| json!({"type": "push", "items": [item(i)]})).collect::<Vec<_>>()}),
        ),
        _ => {
            for start in (0..n).step_by(1000) {
                let items: Vec<Value> = (start..(start + 1000).min(n))
                    .map(
                        |i| json!({"queue": queue, "transactionId": format!("m{i}"), "payload": i}),
                    )
                    .collect();
                expect(
                    client
                        .post("/api/v1/push", &json!({ "items": items }))
                        .await,
                    201,
                    "pre-fill",
                )?;
            }
            let (s, b) = client
                .get(&format!("/api/v1/pop/queue/{queue}?batch={n}"))
                .await
                .map_err(|e| e.to_string())?;
            let msgs = b
                .filter(|_| s == 200)
                .map(|b| b["messages"].clone())
                .ok_or("pop for acks failed")?;
            let ops: Vec<Value> = msgs
                .as_array()
                .ok_or("no messages")?
                .iter()
                .map(|m| json!({"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"}))
                .collect();
            if ops.len() != n {
                return Err(format!(
                    "popped {} of {n} for the ack transaction",
                    ops.len()
                ));
            }
            ("/api/v1/transaction".into(), json!({ "operations": ops }))
        }
    })
}

fn expect(
    r: Result<(u16, Option<Value>), reqwest::Error>,
    status: u16,
    what: &str,
) -> Result<Option<Value>, String> {
    match r {
        Ok((s, b)) if s == status => Ok(b),
        Ok((s, b)) => Err(format!("{what} answered {s}: {b:?}")),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// Sends `body` once, timed, while four probes push single messages to queues of
/// their own: the request's time and the probes' latencies while it ran.
async fn timed_with_probes(
    client: &Client,
    (path, body): &(String, Value),
    kind: &str,
    run_id: &str,
) -> Result<(Duration, Latencies), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let lat = Arc::new(Mutex::new(Latencies::default()));
    let probes: Vec<_> = (0..4)
        .map(|k| {
            let (client, stop, lat) = (client.clone(), stop.clone(), lat.clone());
            let body =
                json!({"items": [{"queue": format!("bench-probe-{k}-{run_id}"), "payload": k}]});
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let t = Instant::now();
                    if client.post("/api/v1/push", &body).await.is_ok() {
                        lat.lock().unwrap().record(t.elapsed());
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    lat.lock().unwrap().clear();
    let t = Instant::now();
    let r = client.post(path, body).await;
    let elapsed = t.elapsed();
    stop.store(true, Ordering::SeqCst);
    for p in probes {
        let _ = p.await;
    }
    let status = if kind == "push" { 201 } else { 200 };
    let answer = expect(r, status, kind)?;
    if kind != "push" && answer.as_ref().is_none_or(|a| a["success"] != true) {
        return Err(format!("{kind} transaction failed: {answer:?}"));
    }
    let lat = lat.lock().unwrap().clone();
    Ok((elapsed, lat))
}
