//! discovery: a discovery pop (`GET /api/v1/pop?namespace=`) across many queues. N queues
//! of one namespace hold K messages each; one consumer of a named group pops one
//! message at a time from the namespace and acknowledges it until all are
//! acknowledged, exactly once. The figure is pops per second, to read beside
//! `drain-one-partition` (the same loop on one partition of one queue): a broker whose
//! discovery pop looks at every queue in scope falls behind as N grows.

use crate::client::Client;
use crate::report::Outcome;
use serde_json::json;
use std::collections::HashSet;
use std::fmt::Write;
use std::time::Instant;

pub struct DiscoveryParams {
    pub queues: usize,
    pub per_queue: usize,
    /// The namespace: every queue is `{namespace}.q{i}`.
    pub namespace: String,
}

const GROUP: &str = "bench-discovery";

pub async fn run(client: &Client, p: &DiscoveryParams) -> Result<Outcome, String> {
    let total = p.queues * p.per_queue;
    // Untimed: the queues and their messages, a few queues per request.
    let per_request = (1000 / p.per_queue.max(1)).max(1);
    for first in (0..p.queues).step_by(per_request) {
        let mut body = String::from("{\"items\":[");
        let mut sep = "";
        for q in first..(first + per_request).min(p.queues) {
            for k in 0..p.per_queue {
                let _ = write!(
                    body,
                    "{sep}{{\"queue\":\"{}.q{q}\",\"payload\":{k}}}",
                    p.namespace
                );
                sep = ",";
            }
        }
        body.push_str("]}");
        let (s, _) = client
            .post_raw("/api/v1/push", body)
            .await
            .map_err(|e| e.to_string())?;
        if s != 201 {
            return Err(format!("discovery fill answered {s}"));
        }
    }
    let path = format!(
        "/api/v1/pop?namespace={}&batch=1&consumerGroup={GROUP}",
        p.namespace
    );
    // The first pop subscribes the group to every queue of the namespace (POP-13).
    let subscribed = Instant::now();
    let mut seen = HashSet::with_capacity(total);
    let first = crate::cycle::pop_and_ack(client, &path, Some(GROUP)).await?;
    let subscribe_ms = subscribed.elapsed().as_secs_f64() * 1e3;
    seen.extend(first.map(|c| c.delivered).unwrap_or_default());
    let started = Instant::now();
    let mut pops = 0;
    while seen.len() < total {
        let Some(c) = crate::cycle::pop_and_ack(client, &path, Some(GROUP)).await? else {
            return Err(format!(
                "a discovery pop found nothing with {} of {total} left",
                total - seen.len()
            ));
        };
        pops += 1;
        for t in c.delivered {
            // transactionIds are minted per message: a repeat is a second delivery.
            if !seen.insert(t) {
                return Err("a message was delivered twice".into());
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(Outcome {
        workload: "discovery-pop".into(),
        value: pops as f64 / secs,
        unit: "pops/s".into(),
        details: json!({"queues": p.queues, "messages_per_queue": p.per_queue, "messages": total,
                        "seconds": secs, "first_pop_ms": subscribe_ms}),
    })
}
