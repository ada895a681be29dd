//! Fault scenarios (cargo feature `embedded`): the concurrent workload runs against a
//! deployment the harness owns ([`deployment`]: a PostgreSQL cluster and one or two
//! `queen-server` processes) while a fault is injected into it:
//!
//! * `pg-pause` — every PostgreSQL process SIGSTOPped for a while, then SIGCONTed;
//! * `pg-kill` — every PostgreSQL process SIGKILLed, restarted on the same data
//!   directory after a while (crash recovery; pushes meanwhile answer `buffered`);
//! * `server-kill` — two server processes, clients spread over them; one is SIGKILLed
//!   and restarted on the same port and spool directory, once plainly and once while
//!   PostgreSQL is down and its spool holds pushes (the restarted process adopts and
//!   replays them, PUSH-7);
//! * `two-servers` — two processes on one database, clients spread, no fault;
//! * `client-timeouts` — client timeouts shorter than the server's work, so many
//!   answers are unknown (the server still finishes, or cancels, the work).
//!
//! The workload runs in rounds (each on queues of its own, 1 s leases) until the fault
//! phase is over, then one more round on the recovered deployment. Afterwards every
//! server must be healthy with its spool replayed; each round's history must be
//! linearizable (within the budget: undecided is not a pass), with `buffered` answers
//! handed to the search as unknown ([`audit::for_search`]); and then, as after
//! `run --concurrency`, every queue of every round is drained with every group the
//! clients used plus a fresh one ([`crate::concurrent::drain`]) and the invariants are
//! checked over all rounds and the drain together ([`crate::concurrent::invariants`]:
//! nothing answered 201 `queued` or `buffered` lost, PUSH-7; no delivery past a
//! committed cursor; partition order; one live lease per `(partition, group)`, ACK-4;
//! every duplicate explained), counted by kind, bad and allowed. A violation or a bad
//! anomaly fails the scenario, and so does a fault that did not visibly happen.

pub mod audit;
pub mod deployment;
pub mod serve;
pub mod stress;

use crate::concurrent::invariants::{self, facts::Facts, InvariantReport};
use crate::concurrent::linearize::check_until;
use crate::concurrent::{drain, History, Outcome, Workload};
use crate::session::{CheckSettings, Target};
use deployment::{Deployment, ServerProgram};
use std::time::{Duration, Instant};

/// One fault scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    PgPause,
    PgKill,
    ServerKill,
    TwoServers,
    ClientTimeouts,
    /// Stress (see [`stress`]): a full spool, a killed replay.
    SpoolCapacity,
    /// Stress: stalled connections past the cap.
    SlowClient,
    /// Stress: SIGTERM under push load with parked pops.
    ShutdownUnderLoad,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::PgPause,
        Fault::PgKill,
        Fault::ServerKill,
        Fault::TwoServers,
        Fault::ClientTimeouts,
        Fault::SpoolCapacity,
        Fault::SlowClient,
        Fault::ShutdownUnderLoad,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::PgPause => "pg-pause",
            Fault::PgKill => "pg-kill",
            Fault::ServerKill => "server-kill",
            Fault::TwoServers => "two-servers",
            Fault::ClientTimeouts => "client-timeouts",
            Fault::SpoolCapacity => "spool-capacity",
            Fault::SlowClient => "slow-client",
            Fault::ShutdownUnderLoad => "shutdown-under-load",
        }
    }

    /// A stress scenario (see [`stress`]) rather than the workload under a fault.
    pub fn is_stress(self) -> bool {
        matches!(
            self,
            Fault::SpoolCapacity | Fault::SlowClient | Fault::ShutdownUnderLoad
        )
    }

    fn servers(self) -> usize {
        match self {
            Fault::ServerKill | Fault::TwoServers => 2,
            _ => 1,
        }
    }
}

/// How a scenario runs.
#[derive(Clone, Debug)]
pub struct Options {
    pub program: ServerProgram,
    /// Length of the fault phase: faults repeat (at least once) until it is over.
    pub duration: Duration,
    pub clients: usize,
    /// Calls per client in one round.
    pub ops_per_round: usize,
    pub queues: usize,
    pub seed: u64,
    /// Client timeout of one call; half the clients of `client-timeouts` use
    /// `short_timeout_ms` instead.
    pub op_timeout_ms: u64,
    pub short_timeout_ms: u64,
    /// Model steps of the search per queue.
    pub budget: u64,
    /// How long PostgreSQL stays paused or down, or a server down, per fault.
    pub outage: Duration,
    /// Wall-clock limit of the search per round (past it: undecided, not a pass).
    pub search_limit: Duration,
    /// `leaseSeconds` of the workload's pops: the drain waits the longest lease out.
    pub lease_seconds: u32,
    /// Where the timeline and history (JSON) of a round that fails the search go, and
    /// the whole history (all rounds and the drain) when an invariant fails.
    pub failures_dir: Option<std::path::PathBuf>,
    /// Progress lines on stderr.
    pub verbose: bool,
    /// How large the stress scenarios are.
    pub stress: stress::StressSizes,
}

impl Options {
    /// The bounded form CI runs (a few seconds of faults per scenario).
    pub fn bounded(program: ServerProgram, seed: u64) -> Options {
        Options {
            program,
            duration: Duration::from_secs(3),
            clients: 4,
            ops_per_round: 15,
            // Fewer calls per queue keep the search small when faults leave many
            // answers unknown (each unknown pop keeps many model states possible).
            queues: 4,
            seed,
            op_timeout_ms: 1000,
            short_timeout_ms: 12,
            budget: 200_000,
            outage: Duration::from_millis(1500),
            search_limit: Duration::from_secs(60),
            lease_seconds: 1,
            failures_dir: None,
            verbose: false,
            stress: stress::StressSizes::bounded(),
        }
    }
}

/// What a scenario did and found.
#[derive(Debug)]
pub struct Report {
    pub fault: Fault,
    /// What was injected, when (ms from the start).
    pub events: Vec<String>,
    pub rounds: usize,
    pub calls: usize,
    pub unknown: usize,
    /// The rounds' verdicts, in order ("linearizable", "violation", "unknown").
    pub verdicts: Vec<&'static str>,
    /// Text of the rounds that did not pass the search.
    pub failures: Vec<String>,
    /// Pushed items by answer.
    pub pushes: audit::PushTally,
    /// The invariants over every round and the final drain.
    pub invariants: InvariantReport,
    /// The drain's calls and how long it took.
    pub drain_calls: usize,
    pub drain_ms: f64,
    /// Starts of each server process (1 + restarts).
    pub starts: Vec<u32>,
    /// Spooled pushes adopted from dead processes, per the servers' logs.
    pub adopted_logs: usize,
    /// Bad anomalies and failures to run (empty: passed).
    pub problems: Vec<String>,
    /// Rounds whose linearizability search ran out of budget or time ("unknown").
    pub undecided: Vec<String>,
    pub elapsed: Duration,
    /// Every round's calls and the drain's, as the invariants read them (ids as in
    /// their anomalies).
    pub merged: History,
}

impl Report {
    /// A report of `fault` with nothing in it yet.
    pub fn empty(fault: Fault) -> Report {
        Report {
            fault,
            events: vec![],
            rounds: 0,
            calls: 0,
            unknown: 0,
            verdicts: vec![],
            failures: vec![],
            pushes: audit::PushTally::default(),
            invariants: InvariantReport::default(),
            drain_calls: 0,
            drain_ms: 0.0,
            merged: History::default(),
            starts: vec![],
            adopted_logs: 0,
            problems: vec![],
            undecided: vec![],
            elapsed: Duration::ZERO,
        }
    }

    /// Every round shown linearizable and no bad anomaly: an undecided round is not a
    /// pass.
    pub fn passed(&self) -> bool {
        self.problems.is_empty() && self.undecided.is_empty()
    }

    /// No evidence against the broker: no violation, nothing lost, duplicated or
    /// phantom, no panic (undecided rounds allowed).
    pub fn no_bad_anomalies(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn summary(&self) -> String {
        if self.fault.is_stress() {
            return self.stress_summary();
        }
        let mut s = format!(
            "fault scenario {}: {} in {:.1} s\n  {} rounds, {} calls ({} unknown), verdicts {:?}; server starts {:?}, spool adoptions logged {}\n  {}\n  drain: {} calls in {:.1} s\n  {}",
            self.fault.name(),
            if self.passed() { "passed" } else { "FAILED" },
            self.elapsed.as_secs_f64(),
            self.rounds,
            self.calls,
            self.unknown,
            self.verdicts,
            self.starts,
            self.adopted_logs,
            self.pushes.summary(),
            self.drain_calls,
            self.drain_ms / 1000.0,
            self.invariant_lines()
        );
        for e in &self.events {
            s.push_str(&format!("  event: {e}\n"));
        }
        for p in &self.problems {
            s.push_str(&format!("  BAD: {p}\n"));
        }
        for u in &self.undecided {
            s.push_str(&format!("  UNDECIDED: {u}\n"));
        }
        for f in &self.failures {
            s.push_str(&format!("  {}\n", f.replace('\n', "\n  ")));
        }
        s
    }

    /// A stress scenario's verdict, figures and problems.
    fn stress_summary(&self) -> String {
        let mut s = format!(
            "stress scenario {}: {} in {:.1} s\n",
            self.fault.name(),
            if self.passed() { "passed" } else { "FAILED" },
            self.elapsed.as_secs_f64()
        );
        for e in &self.events {
            s.push_str(&format!("  {e}\n"));
        }
        for p in &self.problems {
            s.push_str(&format!("  BAD: {p}\n"));
        }
        s
    }

    /// The invariants' counts (and first bad anomalies), indented.
    fn invariant_lines(&self) -> String {
        let text = self.invariants.summary(&self.merged, 10);
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&format!("  {line}\n"));
        }
        out.trim_start().to_string()
    }

    /// For `faults --json`: what ran, the verdicts, the drain and the anomaly counts.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "scenario": self.fault.name(),
            "passed": self.passed(),
            "noBadAnomalies": self.no_bad_anomalies(),
            "elapsedMs": self.elapsed.as_millis() as u64,
            "events": self.events,
            "rounds": self.rounds,
            "calls": self.calls,
            "unknownCalls": self.unknown,
            "verdicts": self.verdicts,
            "undecided": self.undecided,
            "problems": self.problems,
            "serverStarts": self.starts,
            "spoolAdoptionsLogged": self.adopted_logs,
            "pushes": {
                "acknowledged": self.pushes.acknowledged,
                "buffered": self.pushes.buffered,
                "duplicate": self.pushes.duplicate,
                "unknown": self.pushes.unknown,
            },
            "drain": {"calls": self.drain_calls, "ms": self.drain_ms},
            "invariants": self.invariants.to_json(),
        })
    }
}

/// Injects `fault` repeatedly for `opts.duration`; returns the deployment and a log.
async fn inject(
    mut d: Deployment,
    fault: Fault,
    opts: Options,
    t0: Instant,
) -> (Deployment, Vec<String>, Result<(), String>) {
    let mut log = Vec::new();
    let ms = |t0: Instant| t0.elapsed().as_millis();
    let r: Result<(), String> = async {
        // Let the clients get going first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut cycle = 0;
        loop {
            match fault {
                Fault::PgPause => {
                    let pids = d.pause_pg()?;
                    log.push(format!(
                        "{} ms: PostgreSQL paused ({} processes SIGSTOPped)",
                        ms(t0),
                        pids.len()
                    ));
                    tokio::time::sleep(opts.outage).await;
                    d.resume_pg(&pids);
                    log.push(format!("{} ms: PostgreSQL resumed (SIGCONT)", ms(t0)));
                }
                Fault::PgKill => {
                    let n = d.kill_pg().await?;
                    log.push(format!(
                        "{} ms: PostgreSQL killed ({n} processes SIGKILLed)",
                        ms(t0)
                    ));
                    tokio::time::sleep(opts.outage).await;
                    d.restart_pg().await?;
                    log.push(format!(
                        "{} ms: PostgreSQL restarted (crash recovery)",
                        ms(t0)
                    ));
                }
                Fault::ServerKill if cycle % 2 == 0 => {
                    d.kill_server(0)?;
                    log.push(format!("{} ms: server 0 SIGKILLed", ms(t0)));
                    tokio::time::sleep(opts.outage / 2).await;
                    d.restart_server(0).await?;
                    log.push(format!("{} ms: server 0 restarted and healthy", ms(t0)));
                }
                Fault::ServerKill => {
                    // Pushes spool while PostgreSQL is down; server 0 dies holding them.
                    let n = d.kill_pg().await?;
                    log.push(format!("{} ms: PostgreSQL killed ({n} processes)", ms(t0)));
                    // Past the pool's 3 s acquire timeout, pushes spool at once.
                    tokio::time::sleep(opts.outage.max(Duration::from_secs(4))).await;
                    d.kill_server(0)?;
                    log.push(format!(
                        "{} ms: server 0 SIGKILLed while PostgreSQL is down",
                        ms(t0)
                    ));
                    d.restart_pg().await?;
                    log.push(format!("{} ms: PostgreSQL restarted", ms(t0)));
                    d.restart_server(0).await?;
                    log.push(format!("{} ms: server 0 restarted and healthy", ms(t0)));
                }
                Fault::TwoServers | Fault::ClientTimeouts => {
                    tokio::time::sleep(opts.duration).await;
                }
                Fault::SpoolCapacity | Fault::SlowClient | Fault::ShutdownUnderLoad => {
                    unreachable!("stress scenarios inject nothing into the workload")
                }
            }
            cycle += 1;
            // server-kill runs both of its forms at least once.
            let min_cycles = if fault == Fault::ServerKill { 2 } else { 1 };
            if cycle >= min_cycles && t0.elapsed() >= opts.duration {
                return Ok(());
            }
            tokio::time::sleep(opts.outage / 2).await;
        }
    }
    .await;
    (d, log, r)
}

/// Runs one scenario from a fresh deployment to its verdict.
pub async fn run(fault: Fault, opts: &Options) -> Report {
    if fault.is_stress() {
        return stress::run(fault, opts).await;
    }
    let t0 = Instant::now();
    let mut report = Report::empty(fault);
    let d = match Deployment::start(opts.program.clone(), fault.servers(), 6).await {
        Ok(d) => d,
        Err(e) => {
            report
                .problems
                .push(format!("cannot start the deployment: {e}"));
            return report;
        }
    };
    let settings = CheckSettings::default();
    let mut targets: Vec<Target> = d
        .urls()
        .iter()
        .map(|u| Target::new(u, settings.clone()))
        .collect();
    if fault == Fault::ClientTimeouts {
        // The last client gives up after `short_timeout_ms`: its calls are mostly
        // unknown while the others' answers pin down what happened. (Each unknown pop
        // keeps many model states possible: more impatient clients make the search
        // run out of time rather than find more.)
        while targets.len() + 1 < opts.clients.max(2) {
            targets.push(targets[0].clone());
        }
        let mut impatient = Target::new(&d.url(0), settings.clone());
        impatient.client = reqwest::Client::builder()
            .timeout(Duration::from_millis(opts.short_timeout_ms))
            .build()
            .expect("an HTTP client builds");
        targets.push(impatient);
    }
    let drain_target = Target::new(&d.url(0), settings.clone());
    let op_timeout_ms = opts.op_timeout_ms;
    let injector = tokio::spawn(inject(d, fault, opts.clone(), Instant::now()));
    let mut histories: Vec<History> = Vec::new();
    let mut after = 0;
    // Rounds while the fault phase lasts, then one on the recovered deployment.
    while after < 1 {
        if injector.is_finished() {
            after += 1;
        }
        let w = Workload {
            clients: opts.clients,
            ops_per_client: opts.ops_per_round,
            queues: opts.queues,
            seed: opts.seed.wrapping_add(histories.len() as u64),
            op_timeout_ms,
            // Short leases: the final drain waits the longest one out.
            lease_seconds: Some(opts.lease_seconds),
            prefix: format!(
                "f{}r{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8],
                histories.len()
            ),
        };
        let h = crate::concurrent::workload::run_workload_spread(&targets, &w).await;
        if opts.verbose {
            eprintln!(
                "{}: round {} at {} ms: {} calls, {} unknown",
                fault.name(),
                histories.len(),
                t0.elapsed().as_millis(),
                h.ops.len(),
                h.unknown()
            );
        }
        histories.push(h);
    }
    let (mut d, events, injected) = injector.await.expect("the injector does not panic");
    report.events = events;
    if let Err(e) = injected {
        report
            .problems
            .push(format!("the fault could not be injected: {e}"));
    }
    if let Err(e) = d.settle(Duration::from_secs(60)).await {
        report
            .problems
            .push(format!("the deployment did not recover: {e}"));
    }
    report.rounds = histories.len();
    for (i, h) in histories.iter().enumerate() {
        report.calls += h.ops.len();
        report.unknown += h.unknown();
        let searched = audit::for_search(h);
        let outcome = search(&searched, &settings, opts.budget, opts.search_limit).await;
        if opts.verbose {
            eprintln!(
                "{}: round {i} searched: {} ({} model steps, {:.0} ms)",
                fault.name(),
                outcome.verdict_name(),
                outcome.steps(),
                outcome.elapsed_ms
            );
        }
        report.verdicts.push(outcome.verdict_name());
        if !outcome.passed() {
            let line = format!(
                "round {i}: the history is {} (not shown linearizable)",
                outcome.verdict_name()
            );
            // A violation is a finding; a search cut short is undecided: not a pass
            // either, but no evidence against the broker.
            if outcome.verdict_name() == "violation" {
                report.problems.push(line);
            } else {
                report.undecided.push(line);
            }
            report.failures.push(format!(
                "round {i}: {}",
                crate::concurrent::summary(&searched, &outcome)
            ));
            if let Some(dir) = &opts.failures_dir {
                let base = dir.join(format!("{}-round{i}", fault.name()));
                let _ = std::fs::create_dir_all(dir);
                let page = crate::concurrent::timeline::html(&searched, &outcome);
                let json = serde_json::to_string_pretty(&h.to_json()).expect("serializes");
                if std::fs::write(base.with_extension("html"), page).is_ok()
                    && std::fs::write(base.with_extension("json"), json).is_ok()
                {
                    report.failures.push(format!(
                        "timeline and history: {}.{{html,json}}",
                        base.display()
                    ));
                }
            }
        }
    }
    // Every round's calls that reached a broker, then the drain of every queue with
    // every group (and a fresh one) through server 0, and the invariants over it all.
    let all = audit::reached(&History::new(
        histories.into_iter().flat_map(|h| h.ops).collect(),
    ));
    let mut dopts = drain::DrainOptions::after_leases(i64::from(opts.lease_seconds) * 1000);
    dopts.fresh_group = Some(format!(
        "audit{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    let drained = drain::drain(&drain_target, &all, &dopts).await;
    report.drain_calls = drained.ops.len();
    report.drain_ms = drained.elapsed_ms;
    report.invariants = invariants::check_with(
        &all,
        &drained,
        &invariants::Options {
            skew_ms: settings.skew_ms,
        },
    );
    report.merged = invariants::merged(&all, &drained);
    report.pushes = audit::PushTally::of(&Facts::read(&report.merged));
    if !report.invariants.passed() {
        report.problems.push(format!(
            "{} bad anomalies after the drain (see the counts)",
            report.invariants.bad()
        ));
        if let Some(dir) = &opts.failures_dir {
            let p = dir.join(format!("{}-history.json", fault.name()));
            let _ = std::fs::create_dir_all(dir);
            let json = serde_json::to_string_pretty(&report.merged.to_json()).expect("serializes");
            if std::fs::write(&p, json).is_ok() {
                report.failures.push(format!(
                    "history (all rounds and the drain): {}",
                    p.display()
                ));
            }
        }
    }
    report.starts = (0..d.servers()).map(|i| d.starts(i)).collect();
    report.adopted_logs = d.server_log_count("adopted");
    if d.server_log_count("panicked") > 0 {
        for i in 0..d.servers() {
            report.problems.push(format!(
                "a server panicked; server {i}'s log ends:\n{}",
                d.server_log_tail(i, 30)
            ));
        }
    }
    d.stop().await;
    report.elapsed = t0.elapsed();
    report
}

/// The linearizability search on a thread with a deep stack (it recurses per call).
async fn search(
    history: &History,
    settings: &CheckSettings,
    budget: u64,
    limit: Duration,
) -> Outcome {
    let (h, s) = (history.clone(), settings.clone());
    let deadline = Some(Instant::now() + limit);
    tokio::task::spawn_blocking(move || {
        std::thread::Builder::new()
            .name("linearize".into())
            .stack_size(512 << 20)
            .spawn(move || check_until(&h, &s, budget, deadline))
            .expect("a search thread starts")
            .join()
            .expect("the checker does not panic")
    })
    .await
    .expect("the checker does not panic")
}
