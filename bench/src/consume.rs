//! consume: pre-fill M messages over P partitions, then C consumers loop
//! pop(batch B) + batch ack until everything is acknowledged. Exactly-once is verified:
//! every message delivered once (no duplicates) and none missing.

use crate::client::Client;
use crate::report::Outcome;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct ConsumeParams {
    pub messages: usize,
    pub partitions: usize,
    pub consumers: usize,
    pub batch: usize,
    pub queue: String,
    /// The broker's process, when known: its CPU time is read around the drain alone.
    pub server_pid: Option<u32>,
}

pub async fn run(client: &Client, p: &ConsumeParams) -> Result<Outcome, String> {
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
    let server_before = p.server_pid.and_then(crate::machine::process_cpu);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut tasks = Vec::new();
    for _ in 0..p.consumers {
        let (client, seen, dups) = (client.clone(), seen.clone(), dups.clone());
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
                let (s, body) = client.get(&path).await.map_err(|e| e.to_string())?;
                if s == 204 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                let body = body.ok_or("200 without body")?;
                let msgs = body["messages"].as_array().cloned().unwrap_or_default();
                let acks: Vec<Value> = msgs
                    .iter()
                    .map(|m| json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"}))
                    .collect();
                let (s, r) = client.post("/api/v1/ack/batch", &json!({ "acknowledgments": acks })).await.map_err(|e| e.to_string())?;
                let ok = r.as_ref().and_then(Value::as_array).is_some_and(|a| a.iter().all(|x| x["success"] == true));
                if s != 200 || !ok {
                    return Err(format!("batch ack answered {s}: {r:?}"));
                }
                let mut seen = seen.lock().unwrap();
                for m in &msgs {
                    if !seen.insert(m["transactionId"].as_str().unwrap_or("").to_string()) {
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
    let server_cpu = server_before
        .zip(p.server_pid.and_then(crate::machine::process_cpu))
        .map(|(a, b)| b - a);
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
                        "server_cpu_s": server_cpu}),
    })
}
