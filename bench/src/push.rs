//! push-batch and push-single: C producers, batches of B, over P partitions, for a
//! fixed duration. Every answer is checked to be a 201 with one `queued` per item.
//!
//! Producer `w` writes partition `w mod P`, one partition per request, as each of the
//! raw ceiling's connections writes its own partition: the same shape as the database
//! figure it is compared with. `push-batch-spread` instead spreads every request's items
//! over all P partitions, so that every request touches every partition: the worst case
//! for a broker whose offsets follow commit order (PUSH-6), as writes to one partition
//! must then wait for each other.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::json;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// The one field of a push answer's item the workload checks; the others are skipped
/// unparsed.
#[derive(serde::Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    status: std::borrow::Cow<'a, str>,
}

pub struct PushParams {
    pub connections: usize,
    pub batch: usize,
    pub partitions: usize,
    pub duration: Duration,
    pub queue: String,
    /// Every request's items over all partitions (`push-batch-spread`), instead of one
    /// partition per producer.
    pub spread: bool,
}

pub async fn run(client: &Client, p: &PushParams, name: &str) -> Result<Outcome, String> {
    let deadline = Instant::now() + p.duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..p.connections {
        let client = client.on(worker);
        let (queue, batch, partitions, spread) = (p.queue.clone(), p.batch, p.partitions, p.spread);
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            let mut sent = 0u64;
            let mut n = 0u64;
            while Instant::now() < deadline {
                let mut body = String::with_capacity(batch * 140);
                body.push_str("{\"items\":[");
                for i in 0..batch {
                    let part = if spread { worker + i + n as usize } else { worker } % partitions;
                    if i > 0 {
                        body.push(',');
                    }
                    // Queue names are the bench's own ([a-z0-9-]), so they need no escaping.
                    let _ = write!(
                        body,
                        "{{\"queue\":\"{queue}\",\"partition\":\"p{part}\",\"payload\":{{\"worker\":{worker},\"n\":{n},\"i\":{i},\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}}}"
                    );
                }
                body.push_str("]}");
                n += 1;
                let t = Instant::now();
                let (status, answer) = client.post_raw("/api/v1/push", body).await.map_err(|e| e.to_string())?;
                lat.record(t.elapsed());
                let queued = serde_json::from_slice::<Vec<Answer>>(&answer).map_or(0, |a| a.iter().filter(|x| x.status == "queued").count());
                if status != 201 || queued != batch {
                    return Err(format!("push answered {status} with {queued}/{batch} queued"));
                }
                sent += batch as u64;
            }
            Ok::<_, String>((sent, lat))
        }));
    }
    let mut total = 0;
    let mut lat = Latencies::default();
    for t in tasks {
        let (n, l) = t.await.map_err(|e| e.to_string())??;
        total += n;
        lat.merge(l);
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(Outcome {
        workload: name.to_string(),
        value: total as f64 / secs,
        unit: "msgs/s".into(),
        details: json!({
            "messages": total, "seconds": secs, "connections": p.connections, "batch": p.batch, "partitions": p.partitions,
            "spread": p.spread, "requests": lat.len(), "p50_ms": lat.percentile_ms(50.0), "p99_ms": lat.percentile_ms(99.0),
        }),
    })
}
