//! Stress scenarios: what hostile load does to a deployment, with figures.
//!
//! Unlike the fault scenarios these do not run the linearizability workload; each
//! drives one kind of pressure and checks what the operational rules promise:
//!
//! * `spool-capacity` (PUSH-10, HEALTH-2) — under push maintenance, large pushes
//!   until the spool refuses them (503 with `Retry-After`); the server is SIGKILLed
//!   mid-replay and restarted; every push answered `buffered` must then be delivered
//!   exactly once, and the server must stay within a memory bound while replaying.
//! * `slow-client` (CONN-1) — many connections that send half a request head and
//!   stop, past the connection cap: those over the cap are refused, the rest closed by
//!   the head timeout, and a well-behaved client keeps being served meanwhile.
//! * `shutdown-under-load` (STOP-1) — producers pushing, pops parked for an hour and
//!   half-sent heads open when the server gets SIGTERM: it must exit within its grace
//!   period, answer every parked pop 204, and lose nothing it acknowledged.

use super::deployment::Deployment;
use super::{Fault, Options, Report};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How large each stress scenario is.
#[derive(Clone, Debug)]
pub struct StressSizes {
    /// spool-capacity: the spool's capacity, and the payload bytes of one push.
    pub(crate) spool_capacity: u64,
    /// spool-capacity: the payload bytes of one push.
    pub(crate) push_bytes: usize,
    /// slow-client: the connection cap, and how many stalled connections to open.
    pub max_connections: usize,
    /// slow-client: how many stalled connections to open.
    pub stalled: usize,
    /// shutdown-under-load: parked pops and producers.
    pub parked: usize,
    /// shutdown-under-load: producers pushing while the server shuts down.
    pub producers: usize,
}

impl StressSizes {
    /// The form CI runs: seconds each.
    pub fn bounded() -> StressSizes {
        StressSizes {
            spool_capacity: 24 << 20,
            push_bytes: 1 << 20,
            max_connections: 300,
            stalled: 400,
            parked: 200,
            producers: 8,
        }
    }

    /// The size the defects were found at: about a gigabyte spooled in 15 MiB pushes,
    /// 3,000 stalled connections, 500 parked pops.
    pub fn full() -> StressSizes {
        StressSizes {
            spool_capacity: 1 << 30,
            push_bytes: 15 << 20,
            max_connections: 2000,
            stalled: 3000,
            parked: 500,
            producers: 16,
        }
    }
}

fn http(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("an HTTP client builds")
}

async fn post(
    c: &reqwest::Client,
    url: &str,
    body: &Value,
) -> Result<(u16, Value, Option<String>), String> {
    let r = c
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = r.json().await.unwrap_or(Value::Null);
    Ok((status, body, retry))
}

/// Every transactionId of `queue`, by draining it with autoAck (duplicates kept).
async fn drain(c: &reqwest::Client, base: &str, queue: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    loop {
        let r = c
            .get(format!(
                "{base}/api/v1/pop/queue/{queue}?batch=100&autoAck=true&consumerGroup=audit"
            ))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status().as_u16() == 204 {
            return Ok(out);
        }
        let b: Value = r.json().await.map_err(|e| e.to_string())?;
        for m in b["messages"].as_array().into_iter().flatten() {
            out.push(m["transactionId"].as_str().unwrap_or("").to_string());
        }
    }
}

/// Runs stress scenario `fault` on a deployment of its own, started with the limits
/// the scenario needs, and reports its figures and problems.
pub async fn run(fault: Fault, opts: &Options) -> Report {
    let t0 = Instant::now();
    let s = &opts.stress;
    let mut d = match Deployment::start_with(opts.program.clone(), 1, 6, env_of(fault, s)).await {
        Ok(d) => d,
        Err(e) => return report(fault, t0, vec![], vec![e]),
    };
    let (mut figures, mut problems) = (vec![], vec![]);
    let (f, p) = (&mut figures, &mut problems);
    let r = match fault {
        Fault::SpoolCapacity => spool_capacity(&mut d, s, f, p).await,
        Fault::SlowClient => slow_client(&d, s, f, p).await,
        Fault::ShutdownUnderLoad => shutdown_under_load(&mut d, s, f, p).await,
        other => Err(format!("{} is not a stress scenario", other.name())),
    };
    if let Err(e) = r {
        problems.push(e);
    }
    d.stop().await;
    report(fault, t0, figures, problems)
}

/// The server environment each scenario needs.
fn env_of(fault: Fault, s: &StressSizes) -> Vec<(String, String)> {
    let pairs: Vec<(&str, String)> = match fault {
        // Chunks of two pushes, so that the replay has many steps to be killed between.
        Fault::SpoolCapacity => vec![
            ("SPOOL_MAX_BYTES", s.spool_capacity.to_string()),
            ("SPOOL_CHUNK_BYTES", (2 * s.push_bytes + 4096).to_string()),
        ],
        Fault::SlowClient => vec![
            ("MAX_CONNECTIONS", s.max_connections.to_string()),
            ("HEADER_TIMEOUT_MS", "2000".to_string()),
        ],
        Fault::ShutdownUnderLoad => vec![("SHUTDOWN_GRACE_MS", "5000".to_string())],
        _ => vec![],
    };
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn report(fault: Fault, t0: Instant, figures: Vec<String>, problems: Vec<String>) -> Report {
    let mut r = Report::empty(fault);
    r.events = figures;
    r.problems = problems;
    r.elapsed = t0.elapsed();
    r
}

/// spool-capacity: see the module documentation.
async fn spool_capacity(
    d: &mut Deployment,
    s: &StressSizes,
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let c = http(Duration::from_secs(120));
    let base = d.url(0);
    let queue = "stress-spool";
    let accepted = fill_spool(&c, &base, queue, s, figures, problems).await?;
    let health: Value = c
        .get(format!("{base}/health"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .unwrap_or(Value::Null);
    figures.push(format!("health while full: {}", health["spool"]));
    // Replay, then a SIGKILL mid-way and a restart: the rest must follow, once.
    kill_mid_replay(d, &c, &base, accepted.len() as u64, figures, problems).await?;
    restart_and_replay(d, figures).await?;
    check_replayed(&c, &base, queue, &accepted, figures, problems).await
}

/// Pushes under maintenance until the spool refuses three times; the transaction ids
/// it accepted.
async fn fill_spool(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    s: &StressSizes,
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    post(
        c,
        &format!("{base}/api/v1/system/maintenance"),
        &json!({"enabled": true}),
    )
    .await?;
    let payload = "x".repeat(s.push_bytes);
    let (mut accepted, mut refused, mut retry_after) = (Vec::new(), 0, true);
    let t = Instant::now();
    for n in 0.. {
        let body = json!({"items": [{"queue": queue, "transactionId": format!("s{n}"), "payload": payload}]});
        let (status, answer, retry) = post(c, &format!("{base}/api/v1/push"), &body).await?;
        match status {
            201 if answer[0]["status"] == "buffered" => accepted.push(format!("s{n}")),
            503 => {
                refused += 1;
                retry_after &= retry.is_some();
                if refused >= 3 {
                    break;
                }
            }
            other => {
                return Err(format!(
                    "push {n} under maintenance answered {other}: {answer}"
                ))
            }
        }
    }
    figures.push(format!(
        "{} pushes of {} KiB spooled in {:.1} s, then {refused} refused with 503",
        accepted.len(),
        s.push_bytes >> 10,
        t.elapsed().as_secs_f64()
    ));
    if accepted.is_empty() || refused == 0 || !retry_after {
        problems.push(
            "the spool did not refuse with 503 and Retry-After at its capacity (PUSH-10)".into(),
        );
    }
    Ok(accepted)
}

/// Ends maintenance and SIGKILLs the server once part of the spool is replayed and
/// part is not.
async fn kill_mid_replay(
    d: &mut Deployment,
    c: &reqwest::Client,
    base: &str,
    total: u64,
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let t = Instant::now();
    let off = c
        .post(format!("{base}/api/v1/system/maintenance"))
        .json(&json!({"enabled": false}))
        .send();
    let off = tokio::spawn(off);
    let mut left = total;
    while t.elapsed() < Duration::from_secs(120) {
        left = d.buffered(0).await.unwrap_or(total);
        if left < total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rss = d.server_rss_mib(0);
    d.kill_server(0)?;
    off.abort();
    figures.push(format!(
        "server SIGKILLed {:.1} s into the replay with {left} of {total} pushes still spooled (RSS then {:.0} MiB)",
        t.elapsed().as_secs_f64(),
        rss.unwrap_or(f64::NAN)
    ));
    if left == 0 || left == total {
        problems.push(format!(
            "the kill did not land mid-replay ({left} of {total} left)"
        ));
    }
    Ok(())
}

/// Restarts the killed server and waits (ten minutes at most) for the rest of the
/// spool to be replayed, noting the server's memory peak.
async fn restart_and_replay(d: &mut Deployment, figures: &mut Vec<String>) -> Result<(), String> {
    let t = Instant::now();
    d.restart_server(0).await?;
    figures.push(format!(
        "restarted and serving in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let mut peak = 0.0f64;
    let until = Instant::now() + Duration::from_secs(600);
    loop {
        peak = peak.max(d.server_rss_mib(0).unwrap_or(0.0));
        if d.buffered(0).await == Some(0) || Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    figures.push(format!(
        "replay finished {:.1} s after the restart; server RSS peak {peak:.0} MiB",
        t.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Every accepted push is delivered exactly once after the replay, and the broker
/// takes pushes again.
async fn check_replayed(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    accepted: &[String],
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let got = drain(c, base, queue).await?;
    let unique: BTreeSet<&String> = got.iter().collect();
    let want: BTreeSet<&String> = accepted.iter().collect();
    figures.push(format!(
        "delivered {} messages ({} distinct) of {} buffered",
        got.len(),
        unique.len(),
        want.len()
    ));
    if unique != want {
        problems.push(format!(
            "buffered pushes lost or invented: {} delivered, {} buffered (PUSH-7)",
            unique.len(),
            want.len()
        ));
    }
    if got.len() != unique.len() {
        problems.push(format!(
            "{} messages delivered twice after the mid-replay kill (PUSH-10)",
            got.len() - unique.len()
        ));
    }
    let (status, _, _) = post(
        c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": queue}]}),
    )
    .await?;
    if status != 201 {
        problems.push(format!("a push after the replay answered {status}"));
    }
    Ok(())
}

/// What a stalled connection saw: whether the server closed it, after how long, and
/// the bytes it answered.
type Stalled = tokio::task::JoinHandle<(bool, Duration, Vec<u8>)>;

/// Opens `n` connections that send part of a request head and stall, each watched
/// (for 30 s of silence at most) until the server closes it.
async fn stall(addr: std::net::SocketAddr, n: usize) -> Vec<Stalled> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stalled = Vec::new();
    for _ in 0..n {
        let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await else {
            continue;
        };
        let _ = conn
            .write_all(b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-")
            .await;
        stalled.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut buf = vec![0u8; 512];
            let mut seen = Vec::new();
            loop {
                match tokio::time::timeout(Duration::from_secs(30), conn.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return (true, start.elapsed(), seen),
                    Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
                    Err(_) => return (false, start.elapsed(), seen),
                }
            }
        }));
    }
    stalled
}

/// slow-client: see the module documentation.
async fn slow_client(
    d: &Deployment,
    s: &StressSizes,
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let addr: std::net::SocketAddr = d
        .url(0)
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let t = Instant::now();
    let stalled = stall(addr, s.stalled).await;
    // A well-behaved client meanwhile (a fresh connection per call: the cap may refuse).
    let c = http(Duration::from_secs(10));
    let (mut served, mut tries, mut worst) = (0, 0, Duration::ZERO);
    while t.elapsed() < Duration::from_secs(3) {
        tries += 1;
        let started = Instant::now();
        let r = c
            .post(format!("{}/api/v1/push", d.url(0)))
            .header("connection", "close")
            .json(&json!({"items": [{"queue": "stress-polite"}]}))
            .send()
            .await;
        if r.is_ok_and(|r| r.status().as_u16() == 201) {
            served += 1;
            worst = worst.max(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut closed, mut refused, mut longest) = (0, 0, Duration::ZERO);
    for h in stalled {
        let (was_closed, after, seen) = h.await.map_err(|e| e.to_string())?;
        if was_closed {
            closed += 1;
            longest = longest.max(after);
        }
        if seen.starts_with(b"HTTP/1.1 503") {
            refused += 1;
        }
    }
    figures.push(format!(
        "{} stalled connections opened (cap {}): {refused} refused with 503, {closed} closed by the server, the last after {:.1} s",
        s.stalled, s.max_connections, longest.as_secs_f64()
    ));
    figures.push(format!(
        "a polite client meanwhile: {served} of {tries} pushes served, the slowest in {} ms",
        worst.as_millis()
    ));
    if closed < s.stalled {
        problems.push(format!(
            "{} stalled connections were never closed (CONN-1)",
            s.stalled - closed
        ));
    }
    if s.stalled > s.max_connections && refused == 0 {
        problems.push("no connection past the cap was refused (CONN-1)".into());
    }
    Ok(())
}

/// Long polls that wait (an hour) on queues nothing pushes to, each answering with its
/// status once the server lets it go.
fn park_pops(base: &str, n: usize) -> Vec<tokio::task::JoinHandle<reqwest::Result<u16>>> {
    let c = http(Duration::from_secs(3600));
    (0..n)
        .map(|k| {
            let (c, url) = (
                c.clone(),
                format!("{base}/api/v1/pop/queue/stress-parked-{k}?wait=true&timeout=3600000"),
            );
            tokio::spawn(async move { c.get(url).send().await.map(|r| r.status().as_u16()) })
        })
        .collect()
}

/// Fifty connections that sent half a request head and hold it, open until dropped.
async fn half_sent_heads(base: &str) -> Result<Vec<tokio::net::TcpStream>, String> {
    use tokio::io::AsyncWriteExt;
    let addr: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut heads = Vec::new();
    for _ in 0..50 {
        if let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await {
            let _ = conn
                .write_all(b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\n")
                .await;
            heads.push(conn);
        }
    }
    Ok(heads)
}

/// Producer `p`: pushes batches of ten until a push fails; the transaction ids the
/// broker acknowledged (queued or buffered).
fn produce(base: &str, p: usize) -> tokio::task::JoinHandle<Vec<String>> {
    let (c, base) = (http(Duration::from_secs(30)), base.to_string());
    tokio::spawn(async move {
        let mut acked = Vec::new();
        for n in 0.. {
            let items: Vec<Value> = (0..10)
                .map(|i| json!({"queue": "stress-load", "transactionId": format!("p{p}-{n}-{i}")}))
                .collect();
            match post(
                &c,
                &format!("{base}/api/v1/push"),
                &json!({ "items": items }),
            )
            .await
            {
                Ok((201, answer, _)) => acked.extend(
                    answer
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|r| r["status"] == "queued" || r["status"] == "buffered")
                        .map(|r| r["transaction_id"].as_str().unwrap_or("").to_string()),
                ),
                _ => break,
            }
        }
        acked
    })
}

/// shutdown-under-load: see the module documentation.
async fn shutdown_under_load(
    d: &mut Deployment,
    s: &StressSizes,
    figures: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let base = d.url(0);
    let parked = park_pops(&base, s.parked);
    let heads = half_sent_heads(&base).await?;
    let producers: Vec<_> = (0..s.producers).map(|p| produce(&base, p)).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let took = d.terminate_server(0, Duration::from_secs(60)).await;
    match took {
        Some(t) => figures.push(format!(
            "SIGTERM with {} parked pops, 50 half-sent heads and {} producers: exited in {:.2} s",
            s.parked,
            s.producers,
            t.as_secs_f64()
        )),
        None => problems.push("the server did not exit within 60 s of SIGTERM (STOP-1)".into()),
    }
    let mut answered = 0;
    for p in parked {
        if matches!(p.await, Ok(Ok(204))) {
            answered += 1;
        }
    }
    figures.push(format!(
        "{answered} of {} parked pops answered 204",
        s.parked
    ));
    if answered < s.parked {
        problems.push(format!(
            "{} parked pops were not answered 204 (STOP-1)",
            s.parked - answered
        ));
    }
    let mut acked = Vec::new();
    for p in producers {
        acked.extend(p.await.map_err(|e| e.to_string())?);
    }
    drop(heads);
    d.restart_server(0).await?;
    d.settle(Duration::from_secs(60)).await?;
    let got: BTreeSet<String> = drain(&http(Duration::from_secs(30)), &d.url(0), "stress-load")
        .await?
        .into_iter()
        .collect();
    let lost = acked.iter().filter(|t| !got.contains(*t)).count();
    figures.push(format!(
        "{} pushed items acknowledged before the shutdown; {lost} missing after a restart",
        acked.len()
    ));
    if lost > 0 || acked.is_empty() {
        problems.push(format!(
            "{lost} acknowledged items lost across the shutdown (STOP-1)"
        ));
    }
    Ok(())
}
