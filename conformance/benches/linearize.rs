//! The linearizability checker's figures: histories of increasing size are recorded from
//! our server's memory engine (in-process, loopback) with the workload of
//! `run --concurrency N` on one queue, and each is checked with the default budget. For
//! each size: calls, model steps, search time, calls checked per second, verdict. Each
//! series (one client count) stops at its first "unknown" (budget exhausted): the last
//! decided size and that first undecided one are what the checker handles.
//!
//! `cargo bench -p queen-conformance --bench linearize` (release). `QUEEN_BENCH_MAX_CALLS`
//! caps the history size (default 12,800); `QUEEN_BENCH_SAVE=DIR` writes each series'
//! first undecided history to `DIR/linearize-CLIENTSxCALLS.json`, for `queen-conformance
//! recheck`.

use queen_conformance::concurrent::linearize::DEFAULT_BUDGET;
use queen_conformance::concurrent::{check_deep, run_workload, Workload};
use queen_conformance::session::{CheckSettings, Target};
use queen_server::app::spawn;
use queen_server::config::Config;
use queen_server::memory::MemoryBroker;
use std::sync::Arc;

/// With `QUEEN_BENCH_SAVE=DIR`, writes `history` there, named by its shape.
fn save_undecided(history: &queen_conformance::concurrent::History, clients: usize) {
    let Ok(dir) = std::env::var("QUEEN_BENCH_SAVE") else {
        return;
    };
    let name = format!("linearize-{clients}x{}.json", history.ops.len());
    let path = std::path::Path::new(&dir).join(name);
    std::fs::create_dir_all(&dir).expect("the save directory can be made");
    let text = serde_json::to_string_pretty(&history.to_json()).expect("JSON serializes");
    std::fs::write(&path, text).expect("the history can be written");
    println!("saved {}", path.display());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let max_calls: usize = std::env::var("QUEEN_BENCH_MAX_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12_800);
    let config = Config::defaults();
    let broker = MemoryBroker::new(config.pop_timeout_ms(), config.body_limit);
    let server = spawn(Arc::new(broker), &config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("binds");
    let settings = CheckSettings {
        body_limit: config.body_limit,
        default_timeout_ms: config.pop_timeout_ms(),
        ..CheckSettings::default()
    };
    let target = Target::new(&server.url(), settings.clone());
    println!(
        "linearizability checker, budget {DEFAULT_BUDGET} model steps per queue, one queue, memory engine"
    );
    println!(
        "{:>7} {:>6} {:>7} {:>9} {:>10} {:>10}  verdict",
        "clients", "calls", "record", "steps", "search ms", "calls/s"
    );
    let mut best: Option<(usize, usize, f64)> = None; // (calls, clients, calls/s)
    let mut firsts = Vec::new();
    let mut peak = 0f64;
    for clients in [2usize, 4, 8, 16] {
        let mut per_client = 25;
        loop {
            let calls = clients * per_client;
            if calls > max_calls {
                break;
            }
            let w = Workload::new(clients, per_client, 1, 0x5eed + calls as u64);
            let t0 = std::time::Instant::now();
            let history = run_workload(&target, &w).await;
            let record_s = t0.elapsed().as_secs_f64();
            let (h, s) = (history.clone(), settings.clone());
            let out = tokio::task::spawn_blocking(move || {
                check_deep(
                    &h,
                    &s,
                    DEFAULT_BUDGET,
                    queen_conformance::concurrent::DEFAULT_SEARCH_LIMIT,
                )
            })
            .await
            .expect("checker");
            let verdict = out.verdict_name();
            println!(
                "{:>7} {:>6} {:>6.1}s {:>9} {:>10.1} {:>10.0}  {verdict}",
                clients,
                history.ops.len(),
                record_s,
                out.steps(),
                out.elapsed_ms,
                out.ops_per_sec()
            );
            if verdict == "linearizable" {
                peak = peak.max(out.ops_per_sec());
                if best.is_none_or(|(c, _, _)| history.ops.len() > c) {
                    best = Some((history.ops.len(), clients, out.ops_per_sec()));
                }
            } else {
                save_undecided(&history, clients);
                firsts.push((clients, history.ops.len(), verdict));
                break;
            }
            per_client *= 2;
        }
    }
    println!();
    println!("peak: {peak:.0} calls/s checked (release build)");
    if let Some((calls, clients, rate)) = best {
        println!(
            "largest history decided within the budget: {calls} calls ({clients} clients, {rate:.0} calls/s)"
        );
    }
    for (clients, calls, verdict) in &firsts {
        println!("{clients} clients: first {verdict} at {calls} calls");
    }
    let _ = server.stop().await;
}
