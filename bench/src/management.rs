//! management-scale: what the management routes (PROTOCOL.md section 17) cost on a large
//! queue. It pushes `--scale-messages` messages over `--scale-partitions` partitions of
//! one queue, lets `--scale-groups` consumer groups read a little of it (so they have
//! cursors on every partition), then times each listing and count. The median of three
//! calls per route is the figure; the routes' cost should not follow the message count.
//! Then it deletes one message in each of a hundred partitions (MGMT-11), timing each
//! delete, and times the reads again. Last it seeks each group to its own moment of the
//! fill (MGMT-8), so that no two groups read from the same offset of a partition, and
//! times the group listings once more: the worst case for them, a lagging cursor whose
//! first unread message no other cursor shares.

use crate::client::Client;
use crate::report::Outcome;
use serde_json::{json, Value};
use std::time::Instant;

pub struct ScaleParams {
    pub messages: usize,
    pub partitions: usize,
    pub groups: usize,
    pub queue: String,
}

/// Items per push request while filling (under the broker's item limit).
const FILL_BATCH: usize = 5000;

pub async fn run(client: &Client, p: &ScaleParams) -> Result<Vec<Outcome>, String> {
    let filled = Instant::now();
    let fill_start = std::time::SystemTime::now();
    fill(client, p).await?;
    let fill_end = std::time::SystemTime::now();
    let fill_secs = filled.elapsed().as_secs_f64();
    for g in 0..p.groups {
        let path = format!(
            "/api/v1/pop/queue/{}?consumerGroup=g{g}&batch=10&wait=false&autoAck=true",
            p.queue
        );
        expect_ok(client.get(&path).await.map_err(|e| e.to_string())?.0, &path)?;
    }
    let (q, last) = (&p.queue, p.partitions - 1);
    let pid = partition_id(client, q).await?;
    let routes: Vec<(&str, String)> = vec![
        ("overview", "/api/v1/resources/overview".into()),
        ("status", "/api/v1/status".into()),
        ("queues", "/api/v1/resources/queues".into()),
        ("queue", format!("/api/v1/resources/queues/{q}")),
        ("depth", format!("/api/v1/resources/queues/{q}/depth")),
        (
            "depth-group",
            format!("/api/v1/resources/queues/{q}/depth?group=g0"),
        ),
        (
            "partitions",
            format!("/api/v1/resources/partitions?queue={q}&limit=1000"),
        ),
        (
            "partitions-last-page",
            format!(
                "/api/v1/resources/partitions?queue={q}&limit=1000&offset={}",
                p.partitions.saturating_sub(1000)
            ),
        ),
        ("status-queue", format!("/api/v1/status/queues/{q}")),
        ("groups", "/api/v1/consumer-groups".into()),
        ("group", "/api/v1/consumer-groups/g0".into()),
        (
            "lagging",
            "/api/v1/consumer-groups/lagging?minLagSeconds=0".into(),
        ),
        (
            "peek",
            format!("/api/v1/messages?queue={q}&consumerGroup=g0"),
        ),
        (
            "peek-one-partition",
            format!("/api/v1/messages?queue={q}&partition=p{last}&consumerGroup=g0"),
        ),
        (
            "peek-deep-page",
            format!(
                "/api/v1/messages?queue={q}&consumerGroup=g0&offset={}",
                p.messages / 2
            ),
        ),
        (
            "peek-by-status",
            format!("/api/v1/messages?queue={q}&consumerGroup=g0&status=completed"),
        ),
        ("message", format!("/api/v1/messages/{pid}/t0")),
        // MGMT-13: the last day by the hour (every message), then by the minute.
        ("analytics", format!("/api/v1/status/analytics?queue={q}")),
        (
            "analytics-minutes",
            format!("/api/v1/status/analytics?queue={q}&interval=minute"),
        ),
        ("analytics-all-queues", "/api/v1/status/analytics".into()),
    ];
    let details = json!({"messages": p.messages, "partitions": p.partitions,
                         "groups": p.groups, "fill_secs": fill_secs});
    let mut out = time_reads(client, &routes, "", &details).await?;
    out.push(delete_spread(client, p, &details).await?);
    // The same reads once some partitions hold deleted offsets (MGMT-11), which the
    // figures count apart.
    out.extend(time_reads(client, &routes, "-with-deletes", &details).await?);
    spread(client, p, fill_start, fill_end).await?;
    let group_routes: Vec<(&str, String)> = routes
        .into_iter()
        .filter(|(name, _)| matches!(*name, "groups" | "group" | "lagging"))
        .collect();
    out.extend(time_reads(client, &group_routes, "-spread", &details).await?);
    Ok(out)
}

/// Seeks group `g{k}` to the moment (k+1)/(groups+1) of the fill on every partition, so
/// the groups' cursors sit at different offsets, all with messages left to read.
async fn spread(
    client: &Client,
    p: &ScaleParams,
    start: std::time::SystemTime,
    end: std::time::SystemTime,
) -> Result<(), String> {
    let span = end.duration_since(start).unwrap_or_default();
    for k in 0..p.groups {
        let at = start + span.mul_f64((k + 1) as f64 / (p.groups + 1) as f64);
        let iso = chrono::DateTime::<chrono::Utc>::from(at)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let path = format!("/api/v1/consumer-groups/g{k}/queues/{}/seek", p.queue);
        let (status, _) = client
            .post(&path, &json!({"timestamp": iso}))
            .await
            .map_err(|e| e.to_string())?;
        expect_ok(status, &path)?;
    }
    Ok(())
}

/// The median of three calls of each route.
async fn time_reads(
    client: &Client,
    routes: &[(&str, String)],
    suffix: &str,
    details: &Value,
) -> Result<Vec<Outcome>, String> {
    let mut out = Vec::new();
    for (name, path) in routes {
        let mut ms = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let (status, _) = client.get(path).await.map_err(|e| e.to_string())?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            expect_ok(status, path)?;
        }
        ms.sort_by(f64::total_cmp);
        let mut d = details.clone();
        d["min_ms"] = json!(ms[0]);
        d["max_ms"] = json!(ms[2]);
        d["path"] = json!(path);
        out.push(Outcome {
            workload: format!("mgmt-{name}{suffix}"),
            value: ms[1],
            unit: "ms".into(),
            details: d,
        });
    }
    Ok(out)
}

/// How many partitions get one message deleted.
const DELETED_PARTITIONS: usize = 100;

/// Deletes one message (the fifth written there) in each of the first partitions; the
/// figure is the median delete.
async fn delete_spread(
    client: &Client,
    p: &ScaleParams,
    details: &Value,
) -> Result<Outcome, String> {
    let ids = partition_ids(client, &p.queue).await?;
    let mut ms = Vec::new();
    for k in 0..DELETED_PARTITIONS.min(p.partitions) {
        let name = format!("p{k}");
        let pid = ids
            .get(&name)
            .ok_or_else(|| format!("no partition {name} listed"))?;
        let path = format!("/api/v1/messages/{pid}/t{}", k + 4 * p.partitions);
        let t = Instant::now();
        let (status, _) = client.delete(&path).await.map_err(|e| e.to_string())?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        expect_ok(status, &path)?;
    }
    ms.sort_by(f64::total_cmp);
    let mut d = details.clone();
    d["min_ms"] = json!(ms[0]);
    d["max_ms"] = json!(ms[ms.len() - 1]);
    d["deleted"] = json!(ms.len());
    Ok(Outcome {
        workload: "mgmt-delete-message".into(),
        value: ms[ms.len() / 2],
        unit: "ms".into(),
        details: d,
    })
}

/// Partition name to id, for every partition of the queue.
async fn partition_ids(
    client: &Client,
    queue: &str,
) -> Result<std::collections::HashMap<String, String>, String> {
    let mut ids = std::collections::HashMap::new();
    let mut offset = 0;
    loop {
        let path = format!("/api/v1/resources/partitions?queue={queue}&limit=1000&offset={offset}");
        let (_, body) = client.get(&path).await.map_err(|e| e.to_string())?;
        let rows = body
            .and_then(|b| b["partitions"].as_array().cloned())
            .unwrap_or_default();
        if rows.is_empty() {
            break;
        }
        for r in &rows {
            if let (Some(n), Some(i)) = (r["name"].as_str(), r["id"].as_str()) {
                ids.insert(n.to_string(), i.to_string());
            }
        }
        offset += rows.len();
    }
    Ok(ids)
}

/// Pushes the messages round-robin over the partitions, `t{i}` as transactionIds.
async fn fill(client: &Client, p: &ScaleParams) -> Result<(), String> {
    let mut i = 0;
    while i < p.messages {
        let n = FILL_BATCH.min(p.messages - i);
        let items: Vec<Value> = (i..i + n)
            .map(|k| {
                json!({"queue": p.queue, "partition": format!("p{}", k % p.partitions),
                            "transactionId": format!("t{k}"), "payload": {"k": k}})
            })
            .collect();
        let (status, _) = client
            .post("/api/v1/push", &json!({"items": items}))
            .await
            .map_err(|e| e.to_string())?;
        expect_ok(status, "/api/v1/push")?;
        i += n;
    }
    Ok(())
}

/// The id of the partition holding `t0` (the first partition).
async fn partition_id(client: &Client, queue: &str) -> Result<String, String> {
    let path = format!("/api/v1/resources/partitions?queue={queue}&limit=1");
    let (_, body) = client.get(&path).await.map_err(|e| e.to_string())?;
    body.and_then(|b| b["partitions"][0]["id"].as_str().map(str::to_string))
        .ok_or_else(|| format!("{path} listed no partition"))
}

fn expect_ok(status: u16, path: &str) -> Result<(), String> {
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("{path} answered {status}"))
    }
}
