//! One fault scenario, step by step: start the deployment, run the workload in rounds
//! while the fault is injected, then search each round, drain every queue and read the
//! servers' logs. Each step records what it finds in the [`Report`] and the run goes
//! on, so one failing step does not hide what the later ones find.

use super::deployment::Deployment;
use super::{audit, stress, Fault, Options, Report};
use crate::concurrent::invariants::{self, facts::Facts};
use crate::concurrent::{drain, History, Outcome, Workload};
use crate::target::{CheckSettings, Target};
use std::time::{Duration, Instant};

/// Runs one scenario from a fresh deployment to its verdict.
pub async fn run(fault: Fault, opts: &Options) -> Report {
    if fault.is_stress() {
        return stress::run(fault, opts).await;
    }
    let t0 = Instant::now();
    let mut report = Report::empty(fault);
    let d = match Deployment::start_layout(opts.program.clone(), fault.layout()).await {
        Ok(d) => d,
        Err(e) => {
            report
                .problems
                .push(format!("cannot start the deployment: {e}"));
            return report;
        }
    };
    let settings = CheckSettings::default();
    let (targets, _slow) = match client_targets(&d, fault, opts, &settings).await {
        Ok(t) => t,
        Err(e) => {
            report.problems.push(e);
            return report;
        }
    };
    // The last server: `spool-orphan` kills the first for good.
    let drain_target = Target::new(&d.url(d.servers() - 1), settings.clone());
    let injector = tokio::spawn(inject(d, fault, opts.clone(), Instant::now()));
    let histories = rounds(&injector, &targets, fault, opts, t0).await;
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
    search_rounds(&mut report, &histories, &settings, fault, opts).await;
    drain_and_check(
        &mut report,
        histories,
        &drain_target,
        &settings,
        fault,
        opts,
    )
    .await;
    read_server_logs(&mut report, &d);
    d.stop().await;
    report.elapsed = t0.elapsed();
    report
}

/// The targets the workload's clients call: one per server, and for `client-timeouts`
/// enough patient clients on server 0 plus one impatient one, which reaches it through
/// a forwarder that holds every other answer back past the client's timeout (kept alive
/// by the second value).
async fn client_targets(
    d: &Deployment,
    fault: Fault,
    opts: &Options,
    settings: &CheckSettings,
) -> Result<(Vec<Target>, Option<super::proxy::Proxy>), String> {
    let mut targets: Vec<Target> = d
        .urls()
        .iter()
        .map(|u| Target::new(u, settings.clone()))
        .collect();
    if fault != Fault::ClientTimeouts {
        return Ok((targets, None));
    }
    // The last client gives up after `short_timeout_ms`: half its calls are unknown
    // while the others' answers pin down what happened. (Each unknown pop keeps many
    // model states possible: more impatient clients make the search run out of time
    // rather than find more.)
    while targets.len() + 1 < opts.clients.max(2) {
        targets.push(targets[0].clone());
    }
    let timeout = Duration::from_millis(opts.short_timeout_ms);
    let slow = super::proxy::Slow {
        delay: timeout * 4,
        every: 2,
    };
    let proxy = super::proxy::Proxy::start_slow(d.port(0), slow).await?;
    let mut impatient = Target::new(
        &format!("http://127.0.0.1:{}", proxy.port()),
        settings.clone(),
    );
    impatient.client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("an HTTP client builds");
    targets.push(impatient);
    Ok((targets, Some(proxy)))
}

/// Injects `fault` repeatedly for `opts.duration`; returns the deployment and a log.
async fn inject(
    mut d: Deployment,
    fault: Fault,
    opts: Options,
    t0: Instant,
) -> (Deployment, Vec<String>, Result<(), String>) {
    let mut log = Vec::new();
    let r: Result<(), String> = async {
        // Let the clients get going first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut cycle = 0;
        loop {
            inject_once(&mut d, fault, cycle, &opts, t0, &mut log).await?;
            cycle += 1;
            if fault.once() {
                tokio::time::sleep(opts.duration.saturating_sub(t0.elapsed())).await;
                return Ok(());
            }
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

/// One injection of `fault` (`cycle` counts the ones before it), logged with its time
/// from `t0`.
async fn inject_once(
    d: &mut Deployment,
    fault: Fault,
    cycle: i32,
    opts: &Options,
    t0: Instant,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let ms = |t0: Instant| t0.elapsed().as_millis();
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
        Fault::ServerKill => kill_server_holding_spool(d, opts, t0, log).await?,
        Fault::Failover | Fault::FailoverAsync => failover(d, opts, t0, log).await?,
        Fault::BrokerPartition => {
            let n = d.cut(0)?;
            log.push(format!(
                "{} ms: server 0 cut off the database ({n} connections reset)",
                ms(t0)
            ));
            tokio::time::sleep(opts.outage).await;
            d.heal(0);
            log.push(format!(
                "{} ms: server 0 reaches the database again",
                ms(t0)
            ));
        }
        Fault::SpoolOrphan => orphan_spool(d, t0, log).await?,
        Fault::TwoServers | Fault::ClientTimeouts => {
            tokio::time::sleep(opts.duration).await;
        }
        Fault::SpoolCapacity | Fault::SlowClient | Fault::ShutdownUnderLoad => {
            unreachable!("stress scenarios inject nothing into the workload")
        }
    }
    Ok(())
}

/// The second form of `server-kill`: server 0 is SIGKILLed while PostgreSQL is down and
/// its spool holds pushes, so the restarted process must adopt and replay them.
async fn kill_server_holding_spool(
    d: &mut Deployment,
    opts: &Options,
    t0: Instant,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let ms = |t0: Instant| t0.elapsed().as_millis();
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
    Ok(())
}

/// `failover`: the standby falls behind (its stream cut), the primary is SIGKILLed,
/// the standby is promoted; logs how long the servers took to answer again.
async fn failover(
    d: &mut Deployment,
    opts: &Options,
    t0: Instant,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let ms = |t0: Instant| t0.elapsed().as_millis();
    let links = d.cut_replication()?;
    log.push(format!(
        "{} ms: replication cut ({links} connections reset): the standby falls behind",
        ms(t0)
    ));
    // Long enough for the workload to push and ack through the lagging primary.
    tokio::time::sleep(opts.outage.max(Duration::from_secs(2))).await;
    let n = d.kill_pg().await?;
    let killed = Instant::now();
    log.push(format!("{} ms: primary killed ({n} processes)", ms(t0)));
    d.promote_standby().await?;
    log.push(format!(
        "{} ms: standby promoted ({} ms after the kill)",
        ms(t0),
        killed.elapsed().as_millis()
    ));
    for i in 0..d.servers() {
        d.wait_healthy(i, Duration::from_secs(30)).await?;
    }
    log.push(format!(
        "{} ms: every server healthy on the new primary ({} ms after the kill)",
        ms(t0),
        killed.elapsed().as_millis()
    ));
    Ok(())
}

/// `spool-orphan`: server 0 is cut off until its spool holds pushes, then SIGKILLed
/// for good; server 1 must adopt the spool.
async fn orphan_spool(
    d: &mut Deployment,
    t0: Instant,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let ms = |t0: Instant| t0.elapsed().as_millis();
    let n = d.cut(0)?;
    log.push(format!(
        "{} ms: server 0 cut off the database ({n} connections reset)",
        ms(t0)
    ));
    let until = Instant::now() + Duration::from_secs(15);
    let held = loop {
        match d.spooled(0).await {
            Some(k) if k > 0 => break k,
            _ if Instant::now() >= until => {
                d.heal(0);
                return Err("server 0 spooled nothing in 15 s: the fault did not happen".into());
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    d.kill_server(0)?;
    d.heal(0);
    let killed = Instant::now();
    log.push(format!(
        "{} ms: server 0 SIGKILLed for good, its spool holding at least {held} items",
        ms(t0)
    ));
    while d.server_log_count("of a stopped broker adopted") == 0 {
        if killed.elapsed() > Duration::from_secs(15) {
            return Err("no server adopted the dead server's spool within 15 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    log.push(format!(
        "{} ms: server 1 adopted the orphaned spool ({} ms after the kill)",
        ms(t0),
        killed.elapsed().as_millis()
    ));
    Ok(())
}

/// Runs workload rounds while the injector is busy, then one more on the recovered
/// deployment; returns each round's history.
async fn rounds<T>(
    injector: &tokio::task::JoinHandle<T>,
    targets: &[Target],
    fault: Fault,
    opts: &Options,
    t0: Instant,
) -> Vec<History> {
    let op_timeout_ms = opts.op_timeout_ms;
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
            burst_every: crate::concurrent::workload::BURST_EVERY,
            prefix: format!(
                "f{}r{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8],
                histories.len()
            ),
        };
        let h = crate::concurrent::workload::run_workload_spread(targets, &w).await;
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
    histories
}

/// Searches each round's history for a linearization and records its verdict.
async fn search_rounds(
    report: &mut Report,
    histories: &[History],
    settings: &CheckSettings,
    fault: Fault,
    opts: &Options,
) {
    report.rounds = histories.len();
    for (i, h) in histories.iter().enumerate() {
        report.calls += h.ops.len();
        report.unknown += h.unknown();
        let searched = audit::for_search(h);
        let outcome = search(&searched, settings, opts.budget, opts.search_limit).await;
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
            round_failed(report, i, h, &searched, &outcome, fault, opts);
        }
    }
}

/// Records round `i`, which the search did not show linearizable, and writes its
/// timeline and history when a failures directory is set.
fn round_failed(
    report: &mut Report,
    i: usize,
    h: &History,
    searched: &History,
    outcome: &Outcome,
    fault: Fault,
    opts: &Options,
) {
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
        crate::concurrent::summary(searched, outcome)
    ));
    if let Some(dir) = &opts.failures_dir {
        let base = dir.join(format!("{}-round{i}", fault.name()));
        let _ = std::fs::create_dir_all(dir);
        let page = crate::concurrent::timeline::html(searched, outcome);
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

/// The linearizability search, off the async runtime.
async fn search(
    history: &History,
    settings: &CheckSettings,
    budget: u64,
    limit: Duration,
) -> Outcome {
    let (h, s) = (history.clone(), settings.clone());
    tokio::task::spawn_blocking(move || crate::concurrent::check_deep(&h, &s, budget, limit))
        .await
        .expect("the checker does not panic")
}

/// Drains every queue of every round and checks the invariants over the rounds and the
/// drain together.
async fn drain_and_check(
    report: &mut Report,
    histories: Vec<History>,
    drain_target: &Target,
    settings: &CheckSettings,
    fault: Fault,
    opts: &Options,
) {
    // Every round's calls that reached a broker, then the drain of every queue with
    // every group (and a fresh one) through server 0, and the invariants over it all.
    let all = audit::reached(&History::new(
        histories.into_iter().flat_map(|h| h.ops).collect(),
    ));
    report.store_gap_ms = audit::longest_store_gap(&all);
    let mut dopts = drain::DrainOptions::after_leases(i64::from(opts.lease_seconds) * 1000);
    dopts.fresh_group = Some(format!(
        "audit{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    let drained = drain::drain(drain_target, &all, &dopts).await;
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
}

/// Reads what the servers logged: how often each started, the spool adoptions, and
/// any panic as a problem with the end of every server's log.
fn read_server_logs(report: &mut Report, d: &Deployment) {
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
}
