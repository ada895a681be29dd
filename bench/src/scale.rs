//! scale: what push, pop and ack cost per message as a queue grows, and a discovery pop
//! across many queues.
//!
//! One queue of `--scale-partitions` partitions fills, step by step, from one message per
//! partition (the smallest queue of that shape, the base every figure is compared with)
//! through ten times more at each step, up to `--scale-messages` retained messages, which
//! `--scale-groups` consumer groups keep (each has a cursor on every partition and reads
//! nothing past its first message), so nothing is ever removed. At each step the same
//! timed round runs: producers push [`MEASURED`] messages in batches of 100 spread over
//! every partition, then a fresh group, subscribed with `subscriptionMode=new` just
//! before, drains exactly those messages (pops of 100 over as many partitions as it
//! takes, each acknowledged), exactly once. Each request's time over its messages is the
//! cost per message; a broker whose costs follow the data rather than the work shows it
//! here as a rising line.
//!
//! A second case measures the bound of a sparse backlog: the same drain when only 16 of
//! the queue's partitions were written.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fmt::Write;
use std::time::{Duration, Instant};

pub struct ScaleParams {
    pub messages: usize,
    pub partitions: usize,
    pub groups: usize,
    pub connections: usize,
    pub consumers: usize,
    pub queue: String,
}

/// Items per untimed fill request.
const FILL_BATCH: usize = 5000;

/// Messages each step pushes and drains, timed (and 1/10 of it for the sparse case).
const MEASURED: usize = 32_000;

/// One measured round: push, pop and ack cost per message (µs) and rates.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Step {
    pub retained: usize,
    pub push_us: f64,
    pub pop_us: f64,
    pub ack_us: f64,
    pub push_rate: f64,
    pub drain_rate: f64,
    pub sparse_pop_us: f64,
}

/// Every step's figures, then one outcome per cost with its growth from the empty queue.
pub async fn run(client: &Client, p: &ScaleParams) -> Result<(Vec<Outcome>, Vec<Step>), String> {
    let mut steps = Vec::new();
    let mut retained = 0;
    for (round, target) in sizes(p.partitions, p.messages).into_iter().enumerate() {
        if target > retained {
            fill(client, p, retained, target - retained).await?;
            retained = target;
        }
        if round == 0 {
            subscribe_keepers(client, p).await?;
        }
        eprintln!("scale: {retained} retained messages, measuring");
        let (step, added) = measure(client, p, retained, round).await?;
        // The measured messages stay too.
        retained += added;
        steps.push(step);
    }
    let base = steps[0].clone();
    let mut out = Vec::new();
    for (name, f) in [
        ("scale-push", (|s: &Step| s.push_us) as fn(&Step) -> f64),
        ("scale-pop", |s: &Step| s.pop_us),
        ("scale-ack", |s: &Step| s.ack_us),
        ("scale-pop-sparse", |s: &Step| s.sparse_pop_us),
    ] {
        let last = steps.last().expect("a step");
        let by_size: serde_json::Map<String, Value> = steps
            .iter()
            .map(|s| (s.retained.to_string(), json!(f(s))))
            .collect();
        out.push(Outcome {
            workload: name.into(),
            value: f(last) / f(&base),
            unit: "× empty".into(),
            details: json!({"us_per_message_by_retained": by_size, "partitions": p.partitions,
                            "groups": p.groups, "empty_us": f(&base), "largest_us": f(last)}),
        });
    }
    Ok((out, steps))
}

/// One message per partition, then ten times more at each step up to `max` (and `max`
/// itself).
fn sizes(partitions: usize, max: usize) -> Vec<usize> {
    let mut v = vec![partitions];
    let mut s = partitions.saturating_mul(10);
    while s < max {
        v.push(s);
        s = s.saturating_mul(10);
    }
    if max > partitions {
        v.push(max);
    }
    v
}

/// The keeping groups: one pop each (autoAck, one message) subscribes them, seeding a
/// cursor on every partition that exists, and leaves the rest of the queue unread.
async fn subscribe_keepers(client: &Client, p: &ScaleParams) -> Result<(), String> {
    for g in 0..p.groups {
        let path = format!(
            "/api/v1/pop/queue/{}?consumerGroup=keep{g}&batch=1&autoAck=true",
            p.queue
        );
        let (s, _) = client.get(&path).await.map_err(|e| e.to_string())?;
        if s != 200 && s != 204 {
            return Err(format!("{path} answered {s}"));
        }
    }
    Ok(())
}

/// Pushes `n` messages round robin over every partition, starting at message `from`
/// (not timed).
async fn fill(client: &Client, p: &ScaleParams, from: usize, n: usize) -> Result<(), String> {
    let t = Instant::now();
    let mut i = from;
    while i < from + n {
        let k = FILL_BATCH.min(from + n - i);
        let body = items(&p.queue, (i..i + k).map(|m| m % p.partitions), i);
        let (s, _) = client
            .post_raw("/api/v1/push", body)
            .await
            .map_err(|e| e.to_string())?;
        if s != 201 {
            return Err(format!("fill push answered {s}"));
        }
        i += k;
    }
    eprintln!(
        "scale: filled {n} messages in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A push body of one item per partition index, transactionIds minted by the broker.
fn items(queue: &str, partitions: impl Iterator<Item = usize>, first: usize) -> String {
    let mut body = String::from("{\"items\":[");
    for (j, part) in partitions.enumerate() {
        let sep = if j > 0 { "," } else { "" };
        let _ = write!(
            body,
            "{sep}{{\"queue\":\"{queue}\",\"partition\":\"p{part}\",\"payload\":{{\"n\":{},\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}}}",
            first + j
        );
    }
    body.push_str("]}");
    body
}

/// One step: timed pushes spread over every partition, then a fresh group drains them;
/// then the sparse case. Returns the figures and how many messages the step added.
async fn measure(
    client: &Client,
    p: &ScaleParams,
    retained: usize,
    round: usize,
) -> Result<(Step, usize), String> {
    let group = format!("drain{round}");
    subscribe_new(client, &p.queue, &group).await?;
    let (pushed, push_lat, push_secs) =
        push_spread(client, p, MEASURED, p.partitions, round).await?;
    let (pop_us, ack_us, drain_secs) = drain(client, p, &group, pushed).await?;
    // Sparse: 16 partitions written, a fresh group drains them.
    let sparse = format!("sparse{round}");
    subscribe_new(client, &p.queue, &sparse).await?;
    let (sparse_n, _, _) =
        push_spread(client, p, MEASURED / 10, 16.min(p.partitions), round + 1000).await?;
    let (sparse_pop_us, _, _) = drain(client, p, &sparse, sparse_n).await?;
    Ok((
        Step {
            retained,
            push_us: push_lat,
            pop_us,
            ack_us,
            push_rate: pushed as f64 / push_secs,
            drain_rate: pushed as f64 / drain_secs,
            sparse_pop_us,
        },
        pushed + sparse_n,
    ))
}

/// Subscribes `group` at the end of the queue: the drain reads only what comes next.
async fn subscribe_new(client: &Client, queue: &str, group: &str) -> Result<(), String> {
    let path = format!(
        "/api/v1/pop/queue/{queue}?consumerGroup={group}&subscriptionMode=new&batch=1&autoAck=true"
    );
    match client.get(&path).await.map_err(|e| e.to_string())?.0 {
        204 => Ok(()),
        s => Err(format!(
            "{path} answered {s}, not 204 (the group starts at the end)"
        )),
    }
}

/// Producers push `count` messages (rounded up to whole batches) in batches of 100,
/// request `r` of producer `w` over partitions `(w·100 + r·C·100 + i) mod spread`: the
/// messages pushed, the mean request time per message (µs) and the seconds taken.
async fn push_spread(
    client: &Client,
    p: &ScaleParams,
    count: usize,
    spread: usize,
    salt: usize,
) -> Result<(usize, f64, f64), String> {
    let started = Instant::now();
    let requests = count.div_ceil(100 * p.connections);
    let tasks: Vec<_> = (0..p.connections)
        .map(|w| {
            let (client, queue, width) = (client.on(w), p.queue.clone(), p.connections * 100);
            tokio::spawn(async move {
                let (mut n, mut lat) = (0usize, Latencies::default());
                for r in 0..requests {
                    let start = w * 100 + r * width + salt;
                    let body = items(&queue, (start..start + 100).map(|k| k % spread), start);
                    let t = Instant::now();
                    let (s, _) = client
                        .post_raw("/api/v1/push", body)
                        .await
                        .map_err(|e| e.to_string())?;
                    lat.record(t.elapsed());
                    if s != 201 {
                        return Err(format!("push answered {s}"));
                    }
                    n += 100;
                }
                Ok::<_, String>((n, lat))
            })
        })
        .collect();
    let (mut total, mut lat) = (0, Latencies::default());
    for t in tasks {
        let (n, l) = t.await.map_err(|e| e.to_string())??;
        total += n;
        lat.merge(l);
    }
    Ok((
        total,
        lat.mean_ms() * 1000.0 / 100.0,
        started.elapsed().as_secs_f64(),
    ))
}

/// Consumers of `group` pop (100, any number of partitions) and acknowledge until
/// `expected` messages came, exactly once: mean pop and ack time per message (µs), and
/// the seconds taken.
async fn drain(
    client: &Client,
    p: &ScaleParams,
    group: &str,
    expected: usize,
) -> Result<(f64, f64, f64), String> {
    let started = Instant::now();
    let path = format!(
        "/api/v1/pop/queue/{}?consumerGroup={group}&batch=100&partitions=0",
        p.queue
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(HashSet::with_capacity(expected)));
    let tasks: Vec<_> = (0..p.consumers)
        .map(|i| {
            let (client, path, seen, group) =
                (client.on(i), path.clone(), seen.clone(), group.to_string());
            tokio::spawn(async move {
                let (mut pop_ms, mut ack_ms, mut n) = (0.0, 0.0, 0usize);
                let give_up = Instant::now() + Duration::from_secs(600);
                loop {
                    if seen.lock().unwrap().len() >= expected || Instant::now() > give_up {
                        return Ok::<_, String>((pop_ms, ack_ms, n));
                    }
                    let Some(c) = crate::cycle::pop_and_ack(&client, &path, Some(&group)).await?
                    else {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        continue;
                    };
                    pop_ms += c.pop.as_secs_f64() * 1e3;
                    ack_ms += c.ack.as_secs_f64() * 1e3;
                    n += c.delivered.len();
                    let mut seen = seen.lock().unwrap();
                    for id in c.delivered {
                        if !seen.insert(id) {
                            return Err(format!("a message was delivered twice to {group}"));
                        }
                    }
                }
            })
        })
        .collect();
    let (mut pop_ms, mut ack_ms, mut n) = (0.0, 0.0, 0);
    for t in tasks {
        let (a, b, c) = t.await.map_err(|e| e.to_string())??;
        pop_ms += a;
        ack_ms += b;
        n += c;
    }
    let got = seen.lock().unwrap().len();
    if got != expected {
        return Err(format!("{group} drained {got} of {expected} messages"));
    }
    let per = |ms: f64| ms * 1000.0 / n.max(1) as f64;
    Ok((per(pop_ms), per(ack_ms), started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_grow_by_ten_from_the_empty_queue_to_the_largest() {
        assert_eq!(sizes(10_000, 1_000_000), vec![10_000, 100_000, 1_000_000]);
        assert_eq!(sizes(10_000, 250_000), vec![10_000, 100_000, 250_000]);
        assert_eq!(sizes(100, 100), vec![100]);
    }

    #[test]
    fn a_fill_body_names_each_partition_once() {
        let b = items("q", [0, 1, 2].into_iter(), 7);
        let v: Value = serde_json::from_str(&b).unwrap();
        let parts: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["partition"].as_str().unwrap())
            .collect();
        assert_eq!(parts, ["p0", "p1", "p2"]);
        assert_eq!(v["items"][2]["payload"]["n"], 9);
    }
}
