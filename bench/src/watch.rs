//! watch: what `queen-conformance watch` costs, with the watcher in this process in
//! front of the target.
//!
//! * `watch-latency-p50` / `watch-latency-p99`: milliseconds the proxy adds to a request,
//!   from one client's push-pop-ack cycles sent alternately straight to the broker and
//!   through the watcher (so both see the same broker load and the same drift).
//! * `watch-throughput`: exchanges per second through the watcher with 8 clients in
//!   cycles over 8 queues, every one judged online as it completes.
//! * `watch-check-rate`: exchanges per second `check` judges from the recorded history
//!   of the throughput run (the checker alone, no network).
//! * `watch-rss`: this process's resident memory after `--watch-exchanges` exchanges
//!   through the watcher, with its samples along the way. The queues keep every message
//!   (no retention), so the model's state grows with them as the broker's does; the
//!   history itself is not kept.

use crate::client::Client;
use crate::report::Outcome;
use crate::stats::Latencies;
use queen_conformance::session::CheckSettings;
use queen_conformance::watch::{self, WatchOptions};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A watcher running in this process: its URL, and how to end it.
struct Running {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<watch::WatchReport, String>>,
}

async fn start(target: &str, record: Option<PathBuf>) -> Result<Running, String> {
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;
    let opts = WatchOptions {
        listen,
        target: target.to_string(),
        settings: CheckSettings {
            strict_project: false,
            keep_going: true,
            ..CheckSettings::default()
        },
        record,
        findings: None,
        admin: None,
        live: false,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(watch::watch(opts, async {
        let _ = stopped.await;
    }));
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            return Ok(Running {
                url: format!("http://{listen}"),
                stop,
                task,
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the watcher did not start listening".into())
}

impl Running {
    async fn finish(self) -> Result<watch::WatchReport, String> {
        let _ = self.stop.send(());
        self.task.await.map_err(|e| e.to_string())?
    }
}

/// A watcher in front of `target`, eight queues named `{prefix}-{i}` and a client of the
/// watcher with a connection for each.
async fn eight_clients(
    target: &str,
    record: Option<PathBuf>,
    prefix: &str,
) -> Result<(Running, Vec<String>, Client), String> {
    let w = start(target, record).await?;
    let queues = (0..8).map(|i| format!("{prefix}-{i}")).collect();
    let client = Client::new(std::slice::from_ref(&w.url), 8);
    Ok((w, queues, client))
}

/// One push-pop-ack cycle on `queue`: each request's latency goes to `lat`.
async fn cycle(c: &Client, queue: &str, n: u64, lat: &mut Latencies) -> Result<(), String> {
    let err = |e: reqwest::Error| e.to_string();
    let t = Instant::now();
    let item = json!({"items": [{"queue": queue, "payload": {"n": n}}]});
    let (s, body) = c.post("/api/v1/push", &item).await.map_err(err)?;
    lat.record(t.elapsed());
    if s != 201 {
        return Err(format!("push answered {s}: {body:?}"));
    }
    let t = Instant::now();
    let (s, body) = c
        .get(&format!("/api/v1/pop/queue/{queue}?batch=1"))
        .await
        .map_err(err)?;
    lat.record(t.elapsed());
    let Some(m) = body.as_ref().and_then(|b| b["messages"].get(0)).cloned() else {
        return Err(format!("pop answered {s} without a message"));
    };
    let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"});
    let t = Instant::now();
    let (s, body) = c.post("/api/v1/ack", &ack).await.map_err(err)?;
    lat.record(t.elapsed());
    if s != 200 {
        return Err(format!("ack answered {s}: {body:?}"));
    }
    Ok(())
}

/// The latency the proxy adds: `cycles` cycles each way, alternating.
pub async fn latency(target: &str, run_id: &str, cycles: usize) -> Result<Vec<Outcome>, String> {
    let w = start(target, None).await?;
    let (direct, watched) = (
        Client::new(&[target.to_string()], 1),
        Client::new(std::slice::from_ref(&w.url), 1),
    );
    // A queue each: the watcher sees every call on its own.
    let (dq, wq) = (
        format!("bench-watch-lat-{run_id}"),
        format!("bench-watched-lat-{run_id}"),
    );
    let (mut d, mut v) = (Latencies::default(), Latencies::default());
    for n in 0..cycles as u64 {
        cycle(&direct, &dq, n, &mut d).await?;
        cycle(&watched, &wq, n, &mut v).await?;
    }
    let report = w.finish().await?;
    let figure = |p: f64| {
        let added = v.percentile_ms(p) - d.percentile_ms(p);
        Outcome {
            workload: format!("watch-latency-p{p}"),
            value: added,
            unit: "ms".into(),
            details: json!({"direct_ms": d.percentile_ms(p), "watched_ms": v.percentile_ms(p),
                            "requests": v.len(), "findings": report.findings.len(),
                            "checked": report.counts.checked}),
        }
    };
    Ok(vec![figure(50.0), figure(99.0)])
}

/// Exchanges per second through the watcher, 8 clients over 8 queues, and the rate at
/// which `check` judges the recorded history.
pub async fn throughput(
    target: &str,
    run_id: &str,
    duration: Duration,
) -> Result<Vec<Outcome>, String> {
    let record = std::env::temp_dir().join(format!("queen-bench-watch-{run_id}.jsonl"));
    let (w, queues, client) = eight_clients(
        target,
        Some(record.clone()),
        &format!("bench-watch-{run_id}"),
    )
    .await?;
    let done = drive(
        &client,
        &queues,
        Deadline::Time(Instant::now() + duration),
        |_| {},
    )
    .await?;
    let secs = duration.as_secs_f64();
    let report = w.finish().await?;
    let live = Outcome {
        workload: "watch-throughput".into(),
        value: done as f64 / secs,
        unit: "exchanges/s".into(),
        details: json!({"exchanges": report.counts.exchanges, "checked": report.counts.checked,
                        "findings": report.findings.len(), "clients": 8, "queues": 8}),
    };
    let t = Instant::now();
    let offline = watch::check(
        &record,
        CheckSettings {
            strict_project: false,
            keep_going: true,
            ..CheckSettings::default()
        },
        target,
    )?;
    let took = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&record);
    let rate = Outcome {
        workload: "watch-check-rate".into(),
        value: offline.counts.exchanges as f64 / took,
        unit: "exchanges/s".into(),
        details: json!({"exchanges": offline.counts.exchanges, "checked": offline.counts.checked,
                        "seconds": took, "findings": offline.findings.len()}),
    };
    Ok(vec![live, rate])
}

/// Resident memory after `exchanges` exchanges through the watcher, sampled along the way.
pub async fn rss(target: &str, run_id: &str, exchanges: u64) -> Result<Outcome, String> {
    let (w, queues, client) =
        eight_clients(target, None, &format!("bench-watch-rss-{run_id}")).await?;
    let started = rss_mib();
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let step = (exchanges / 10).max(1);
    let s = samples.clone();
    let t = Instant::now();
    drive(&client, &queues, Deadline::Count(exchanges), move |n| {
        if n % step < 3 {
            s.lock().expect("samples").push((n, rss_mib()));
        }
    })
    .await?;
    let secs = t.elapsed().as_secs_f64();
    let report = w.finish().await?;
    let samples = samples.lock().expect("samples").clone();
    Ok(Outcome {
        workload: "watch-rss".into(),
        value: rss_mib(),
        unit: "MiB".into(),
        details: json!({"exchanges": report.counts.exchanges, "checked": report.counts.checked,
                        "findings": report.findings.len(), "rss_at_start_mib": started,
                        "samples_exchanges_mib": samples, "seconds": secs}),
    })
}

/// A soak of queue-churning traffic (each client's queue deleted after 20 cycles) for
/// `duration`: the process's resident memory, sampled every tenth of it.
pub async fn soak(target: &str, run_id: &str, duration: Duration) -> Result<Outcome, String> {
    let (w, queues, client) =
        eight_clients(target, None, &format!("bench-watch-soak-{run_id}")).await?;
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sampler = {
        let samples = samples.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(duration / 10).await;
                samples.lock().expect("samples").push(rss_mib());
            }
        })
    };
    let until = Deadline::Time(Instant::now() + duration);
    let done = drive_churning(&client, &queues, until, Some(20), |_| {}).await?;
    let _ = sampler.await;
    let report = w.finish().await?;
    let samples = samples.lock().expect("samples").clone();
    Ok(Outcome {
        workload: "watch-soak".into(),
        value: rss_mib(),
        unit: "MiB".into(),
        details: json!({"exchanges": done, "checked": report.counts.checked,
                        "findings": report.findings.len(), "queues_retired": report.counts.retired,
                        "rss_every_tenth_mib": samples, "seconds": duration.as_secs()}),
    })
}

enum Deadline {
    Time(Instant),
    Count(u64),
}

/// 8 clients in push-pop-ack cycles, one queue each, until the deadline: the
/// exchanges completed. `each` is told the running count after every cycle.
async fn drive(
    client: &Client,
    queues: &[String],
    until: Deadline,
    each: impl Fn(u64) + Send + Sync + 'static,
) -> Result<u64, String> {
    drive_churning(client, queues, until, None, each).await
}

/// [`drive`], and with `churn: Some(k)` each client deletes its queue after every `k`
/// cycles and goes on with a new one (a test suite's traffic: queues made and dropped).
async fn drive_churning(
    client: &Client,
    queues: &[String],
    until: Deadline,
    churn: Option<u64>,
    each: impl Fn(u64) + Send + Sync + 'static,
) -> Result<u64, String> {
    let count = Arc::new(AtomicU64::new(0));
    let each = Arc::new(each);
    let until = Arc::new(until);
    let mut tasks = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        let (c, q, count, each, until) = (
            client.on(i),
            q.clone(),
            count.clone(),
            each.clone(),
            until.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            let base = q.clone();
            let mut q = q.clone();
            for n in 0.. {
                let over = match *until {
                    Deadline::Time(t) => Instant::now() >= t,
                    Deadline::Count(c) => count.load(Ordering::Relaxed) >= c,
                };
                if over {
                    break;
                }
                cycle(&c, &q, n, &mut lat).await?;
                lat.clear();
                let mut done = 3;
                if churn.is_some_and(|k| (n + 1) % k == 0) {
                    let path = format!("/api/v1/resources/queues/{q}");
                    let (s, _) = c.delete(&path).await.map_err(|e| e.to_string())?;
                    if s != 200 {
                        return Err(format!("delete answered {s}"));
                    }
                    q = format!("{base}-g{n}");
                    done += 1;
                }
                each(count.fetch_add(done, Ordering::Relaxed) + done);
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(count.load(Ordering::Relaxed))
}

/// This process's resident memory in MiB (0 where /proc is absent).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
