//! `queen-bench`: bounded, reproducible workloads against a Queen-compatible broker on
//! loopback, printed as tables and one JSON line per workload and round.
//!
//! Without `--target` it starts a PostgreSQL cluster with PostgreSQL's durability
//! defaults (every commit flushed; `--throwaway-db` turns that off for quick iteration,
//! and every report says which) and our `queen-server` (built next to this binary) on
//! it, so the database's own limits (multi-row and single-row INSERT, COPY, the flush
//! rate) are measured on the same cluster in the same run. The workloads run
//! `--repeat` times, the ceiling first in every round, and each figure is reported as
//! the median with its range and as a ratio to those limits; the targets a release is
//! held to get a verdict each.
//!
//! ```text
//! cargo build --release -p queen-server -p queen-bench
//! target/release/queen-bench                      # every workload, 3 rounds, durable
//! target/release/queen-bench --workloads push-batch,pg-ceiling --repeat 1 --throwaway-db
//! target/release/queen-bench --target http://127.0.0.1:6632 --workloads consume
//! ```

/// The allocator of the `queen-conformance` binary, so that the live checker this
/// process hosts (`watch`, `watch-rss`, `watch-soak`) is measured as users run it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod ceiling;
mod client;
mod consume;
mod consume_ceiling;
mod cycle;
mod discovery;
mod drain;
mod machine;
mod management;
mod parked;
mod plot;
mod push;
mod report;
mod scale;
mod scaling;
mod stats;
mod suite;
mod summary;
mod target;
mod wake;
mod watch;

use clap::Parser;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "queen-bench",
    about = "Benchmark a Queen-compatible broker on loopback"
)]
struct Args {
    /// The broker to drive (loopback only; several brokers of one deployment as a
    /// comma-separated list); default: our server on a cluster of its own.
    #[arg(long)]
    target: Option<String>,
    /// The target's database, for the raw ceiling and connection counts (with --target).
    #[arg(long)]
    database_url: Option<String>,
    /// Comma-separated: pg-ceiling (every raw-SQL limit, the consume ceiling included), pg-ceiling-consume (that one alone), push-batch, push-batch-spread, push-single, consume, drain, wake-latency, parked-polls, request-scaling, management-scale, scale, discovery, suite, watch (the live checker's latency, throughput and check rate), watch-rss (its memory over --watch-exchanges), watch-soak (its memory over --watch-soak-secs of traffic that makes and deletes queues).
    #[arg(
        long,
        default_value = "pg-ceiling,push-batch,push-batch-spread,push-single,consume,drain,wake-latency,parked-polls"
    )]
    workloads: String,
    /// Rounds of the whole workload list; figures are medians over them.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Start our server on a cluster with fsync, synchronous commit and full-page writes
    /// off (fast, and not what any deployment runs); the default keeps them on.
    #[arg(long)]
    throwaway_db: bool,
    /// Concurrent connections for the push workloads and the ceiling.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Items per push request in push-batch.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Partitions written by the push workloads and the consume pre-fill.
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// Seconds each timed workload runs.
    #[arg(long, default_value_t = 5)]
    duration_secs: u64,
    /// Messages pre-filled and drained by consume.
    #[arg(long, default_value_t = 50_000)]
    messages: usize,
    /// Consumers in consume.
    #[arg(long, default_value_t = 4)]
    consumers: usize,
    /// Pop batch in consume.
    #[arg(long, default_value_t = 100)]
    consume_batch: usize,
    /// Messages in drain (one per partition, then all in one partition).
    #[arg(long, default_value_t = 5_000)]
    drain_messages: usize,
    /// Rounds per parking time in wake-latency.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Long polls held at once in parked-polls.
    #[arg(long, default_value_t = 10_000)]
    polls: usize,
    /// Messages management-scale fills its queue with.
    #[arg(long, default_value_t = 1_000_000)]
    scale_messages: usize,
    /// Partitions of that queue.
    #[arg(long, default_value_t = 10_000)]
    scale_partitions: usize,
    /// Consumer groups reading it (each has a cursor on every partition).
    #[arg(long, default_value_t = 100)]
    scale_groups: usize,
    /// Where scale writes its plot (SVG).
    #[arg(long, default_value = "queen-bench-scale.svg")]
    plot: std::path::PathBuf,
    /// Queues of the namespace a discovery pop scans.
    #[arg(long, default_value_t = 1000)]
    discovery_queues: usize,
    /// How many of our servers to start on the one database; the workloads' clients
    /// spread over them (a push on one broker wakes a pop parked on another).
    #[arg(long, default_value_t = 1)]
    brokers: usize,
    /// Push-pop-ack cycles each way (straight and through the watcher) in watch.
    #[arg(long, default_value_t = 1000)]
    watch_cycles: usize,
    /// Seconds of queue-churning traffic through the watcher in watch-soak.
    #[arg(long, default_value_t = 600)]
    watch_soak_secs: u64,
    /// Exchanges driven through the watcher in watch-rss.
    #[arg(long, default_value_t = 1_000_000)]
    watch_exchanges: u64,
    /// Database connections of each server we start.
    #[arg(long, default_value_t = 10)]
    pool_size: u32,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("queen-bench: {e}");
        std::process::exit(1);
    }
}

async fn run(a: Args) -> Result<(), String> {
    let durability = if a.throwaway_db {
        queen_pg::Durability::Off
    } else {
        queen_pg::Durability::On
    };
    let target = match &a.target {
        Some(url) => target::Target::external(url, a.database_url.clone())?,
        None => target::Target::ours(a.pool_size, durability, a.brokers).await?,
    };
    let database = target.database().await;
    eprintln!("database: {database}");
    let mut rounds = Vec::new();
    for round in 0..a.repeat.max(1) {
        rounds.push(run_round(&a, &target, round).await?);
    }
    let (figures, verdicts) = summary::summarize(&rounds);
    report::print(&database, target.urls.len(), &figures, &verdicts);
    Ok(())
}

/// One round of every workload asked for, in order.
async fn run_round(
    a: &Args,
    target: &target::Target,
    round: usize,
) -> Result<Vec<report::Outcome>, String> {
    let client = client::Client::new(&target.urls, a.connections.max(a.consumers));
    // Every round works on queues of its own.
    let run_id = format!("{}-{round}", std::process::id());
    let duration = Duration::from_secs(a.duration_secs);
    let mut outcomes = Vec::new();
    for w in a
        .workloads
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        eprintln!("round {round}: running {w} ...");
        let cpu_before = machine::cpu_times();
        let server_before = target.cpu_s();
        let first = outcomes.len();
        match w {
            "pg-ceiling" | "pg-ceiling-consume" => match &target.database_url {
                Some(url) => {
                    if w == "pg-ceiling" {
                        outcomes.extend(ceiling::run(url, a.connections, duration).await?);
                    }
                    let shape = consume_ceiling::Shape {
                        messages: a.messages,
                        partitions: a.partitions,
                        consumers: a.consumers,
                        batch: a.consume_batch,
                    };
                    outcomes.extend(consume_ceiling::run(url, shape).await?);
                }
                None => eprintln!("{w} skipped: no --database-url for this target"),
            },
            "push-batch" | "push-batch-spread" | "push-single" => {
                let batch = if w == "push-single" { 1 } else { a.batch };
                let p = push::PushParams {
                    connections: a.connections,
                    batch,
                    partitions: a.partitions,
                    duration,
                    queue: format!("bench-{w}-{run_id}"),
                    spread: w == "push-batch-spread",
                };
                outcomes.push(push::run(&client, &p, w).await?);
            }
            "consume" => {
                let p = consume::ConsumeParams {
                    messages: a.messages,
                    partitions: a.partitions,
                    consumers: a.consumers,
                    batch: a.consume_batch,
                    queue: format!("bench-consume-{run_id}"),
                    brokers: target,
                };
                outcomes.push(consume::run(&client, &p).await?);
            }
            "drain" => {
                for spread in [true, false] {
                    let p = drain::DrainParams {
                        messages: a.drain_messages,
                        spread,
                        queue: format!("bench-drain-{spread}-{run_id}"),
                        brokers: target,
                    };
                    outcomes.push(drain::run(&client, &p).await?);
                }
            }
            "wake-latency" => {
                let floor_db = target.database_url.as_deref();
                if floor_db.is_none() {
                    eprintln!("wake-floor skipped: no --database-url for this target");
                }
                for park in [200, 2000] {
                    outcomes.extend(
                        wake::run(
                            &client,
                            floor_db,
                            &format!("bench-wake-{run_id}"),
                            Duration::from_millis(park),
                            a.rounds,
                        )
                        .await?,
                    );
                }
            }
            "parked-polls" => {
                let c = client::Client::new(&target.urls, a.polls);
                outcomes.push(
                    parked::run(&c, target, &format!("bench-parked-{run_id}"), a.polls).await?,
                );
            }
            "request-scaling" => outcomes.extend(scaling::run(&client, &run_id).await?),
            "management-scale" => {
                let p = management::ScaleParams {
                    messages: a.scale_messages,
                    partitions: a.scale_partitions.max(1),
                    groups: a.scale_groups,
                    queue: format!("bench-mgmt-{run_id}"),
                };
                outcomes.extend(management::run(&client, &p).await?);
            }
            "scale" => {
                let p = scale::ScaleParams {
                    messages: a.scale_messages,
                    partitions: a.scale_partitions.max(1),
                    groups: a.scale_groups,
                    connections: a.connections,
                    consumers: a.consumers,
                    queue: format!("bench-scale-{run_id}"),
                };
                let (figures, steps) = scale::run(&client, &p).await?;
                report::scale_table(&steps);
                let title = format!(
                    "one queue, {} partitions, {} groups: cost per message (round {round})",
                    p.partitions, p.groups
                );
                plot::scale_svg(&a.plot, &steps, &title)?;
                eprintln!("scale: plot written to {}", a.plot.display());
                outcomes.extend(figures);
            }
            "discovery" => {
                let p = discovery::DiscoveryParams {
                    queues: a.discovery_queues.max(1),
                    per_queue: 5,
                    namespace: format!("benchdisc{}", run_id.replace('-', "x")),
                };
                outcomes.push(discovery::run(&client, &p).await?);
            }
            "suite" => outcomes.push(suite::run(&target.urls[0], &run_id).await?),
            "watch" => {
                let url = &target.urls[0];
                outcomes.extend(watch::latency(url, &run_id, a.watch_cycles).await?);
                outcomes.extend(watch::throughput(url, &run_id, duration).await?);
            }
            "watch-soak" => {
                let secs = Duration::from_secs(a.watch_soak_secs);
                outcomes.push(watch::soak(&target.urls[0], &run_id, secs).await?)
            }
            "watch-rss" => {
                outcomes.push(watch::rss(&target.urls[0], &run_id, a.watch_exchanges).await?)
            }
            other => return Err(format!("unknown workload {other}")),
        }
        // The whole workload's, unless it measured its own (wake-latency, per parking time).
        let cpu = machine::since(cpu_before);
        let server_cpu = match (server_before, target.cpu_s()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        for o in &mut outcomes[first..] {
            if let Some(d) = o.details.as_object_mut() {
                d.entry("machine_cpu").or_insert_with(|| cpu.clone());
                if let Some(s) = server_cpu {
                    d.entry("server_cpu_s").or_insert(s.into());
                }
                // The broker's own CPU per 1,000 messages moved (throughput workloads).
                let per = |k: &str| d.get(k).and_then(|m| m.as_f64());
                if let (Some(s), Some(n)) = (per("server_cpu_s"), per("messages")) {
                    d.insert("server_cpu_ms_per_1000".into(), (s * 1e6 / n).into());
                }
                d.insert("round".into(), round.into());
            }
        }
        // As each workload ends, so a long run shows its progress and a killed one
        // keeps what it measured.
        report::lines(&outcomes[first..]);
    }
    Ok(outcomes)
}
