//! consume: pre-fill M messages over P partitions, then C consumers loop
//! pop(batch B) + batch ack until everything is acknowledged. Exactly-once is verified:
//! every message delivered once (no duplicates) and none missing.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct ConsumeParams<'a> {
    pub messages: usize,
    pub partitions: usize,
    pub consumers: usize,
    pub batch: usize,
    pub queue: String,
    /// The brokers, whose CPU time is read around the drain alone.
    pub brokers: &'a crate::target::Target,
}

pub async fn run(client: &Client, p: &ConsumeParams<'_>) -> Result<Outcome, String> {
    // Pre-fill with batches of 100 (not timed).
    let mut pushed = 0;
    while pushed < p.messages {
        let n = (p.messages - pushed).min(100);
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"queue": p.queue, "partition": format!("p{}", (pushed + i) % p.partitions), "transactionId": format!("m{}", pushed + i), "payload": {"i": pushed + i}}))
            .collect();
        let (s, _) = client
            .post("/api/v1/push", &json!({ "items": items }))
            .await
            .map_err(|e| e.to_string())?;
        if s != 201 {
            return Err(format!("pre-fill push answered {s}"));
        }
        pushed += n;
    }
    // A marker for profilers (scripts/profile.sh starts recording here).
    eprintln!("consume: pre-filled {pushed} messages, draining");
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    let dups = Arc::new(Mutex::new(0u64));
    let (pops, acks): (Arc<Mutex<Latencies>>, Arc<Mutex<Latencies>>) = Default::default();
    let server_before = p.brokers.cpu_s();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut tasks = Vec::new();
    for i in 0..p.consumers {
        let (client, seen, dups) = (client.on(i), seen.clone(), dups.clone());
        let (pops, acks) = (pops.clone(), acks.clone());
        let path = format!(
            "/api/v1/pop/queue/{}?batch={}&partitions=1",
            p.queue, p.batch
        );
        let total = p.messages;
        tasks.push(tokio::spawn(async move {
            loop {
                if seen.lock().unwrap().len() >= total || Instant::now() > deadline {
                    return Ok::<_, String>(());
                }
                let Some(cycle) = crate::cycle::pop_and_ack(&client, &path, None).await? else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                pops.lock().unwrap().record(cycle.pop);
                acks.lock().unwrap().record(cycle.ack);
                let mut seen = seen.lock().unwrap();
                for t in cycle.delivered {
                    if !seen.insert(t) {
                        *dups.lock().unwrap() += 1;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let secs = started.elapsed().as_secs_f64();
    let server_cpu = server_before.zip(p.brokers.cpu_s()).map(|(a, b)| b - a);
    let delivered = seen.lock().unwrap().len();
    let duplicates = *dups.lock().unwrap();
    let missing = p.messages - delivered;
    if missing > 0 || duplicates > 0 {
        return Err(format!(
            "not exactly once: {missing} missing, {duplicates} duplicates"
        ));
    }
    Ok(Outcome {
        workload: "consume".into(),
        value: p.messages as f64 / secs,
        unit: "msgs/s".into(),
        details: json!({"messages": p.messages, "seconds": secs, "consumers": p.consumers, "batch": p.batch,
                        "partitions": p.partitions, "duplicates": duplicates, "missing": missing,
                        "pop_p50_ms": pops.lock().unwrap().percentile_ms(50.0),
                        "pop_p99_ms": pops.lock().unwrap().percentile_ms(99.0),
                        "ack_p50_ms": acks.lock().unwrap().percentile_ms(50.0),
                        "ack_p99_ms": acks.lock().unwrap().percentile_ms(99.0),
                        "server_cpu_s": server_cpu}),
    })
}
