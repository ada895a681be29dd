//! Concurrent histories checked for linearizability against the reference model: N
//! clients issue generated calls at once ([`workload`]), every call is recorded with its
//! invocation and completion times and its answer ([`history`]), and a search looks for
//! an order of the calls the model accepts ([`linearize`]), per queue. Then a final
//! [`drain`] empties every queue with every group, and [`invariants`] checks the history
//! and the drain together (nothing answered 201 lost, no delivery past a committed
//! cursor, partition order, one live lease per (partition, group), every duplicate
//! explained), counting anomalies by kind. A history with too many unanswered calls is
//! "inconclusive", never "linearizable" ([`linearize::unanswered`]); answers that differ
//! from PROTOCOL.md in form only are read leniently by the drain and the invariants
//! ([`answers`]).

pub mod answers;
pub mod drain;
pub mod history;
pub mod invariants;
pub mod linearize;
#[cfg(test)]
mod tests;
pub mod timeline;
pub mod workload;

pub use drain::{Drain, DrainOptions};
pub use history::{Answer, History, Op};
pub use invariants::InvariantReport;
pub use linearize::{check, Outcome, Verdict, UNANSWERED_MAX_SHARE};
pub use workload::{run_workload, Workload};

use crate::target::{CheckSettings, Target};
use std::time::Duration;

/// The id under which the concurrent scenario is reported (and selected by `--only`).
pub const CONCURRENT_ID: &str = "concurrent/linearizable-and-drained";

/// Stack of the search thread (reserved, committed only as used): room for histories
/// of hundreds of thousands of calls per queue.
const SEARCH_STACK: usize = 512 << 20;

/// How long the search of `run --concurrency` may take before its verdict is
/// "unknown": a step budget alone does not bound the time (`--search-limit-s`).
pub const DEFAULT_SEARCH_LIMIT: Duration = Duration::from_secs(120);

/// [`check`] on a thread of its own with a deep stack: the search recurses once per
/// placed call. Blocks until the verdict, or until `limit` has passed (unknown).
pub fn check_deep(
    history: &History,
    settings: &CheckSettings,
    budget: u64,
    limit: Duration,
) -> Outcome {
    let (h, settings) = (history.clone(), settings.clone());
    let deadline = Some(std::time::Instant::now() + limit);
    std::thread::Builder::new()
        .name("linearize".into())
        .stack_size(SEARCH_STACK)
        .spawn(move || linearize::check_until(&h, &settings, budget, deadline))
        .expect("a search thread starts")
        .join()
        .expect("the checker does not panic")
}

/// Runs `workload` against `target` and checks the history with `budget` model steps
/// per key; the outcome is inconclusive when too many calls went unanswered.
async fn run_and_check(
    target: &Target,
    workload: &Workload,
    budget: u64,
    limit: Duration,
) -> (History, Outcome) {
    // Each client keeps to one broker, the clients spread over every broker named.
    let history = workload::run_workload_spread(&target.each(), workload).await;
    let (settings, h) = (target.settings.clone(), history.clone());
    let outcome = tokio::task::spawn_blocking(move || check_deep(&h, &settings, budget, limit))
        .await
        .expect("the checker does not panic");
    let outcome = outcome.judge_unanswered(&history);
    (history, outcome)
}

/// What `run --concurrency N` asks of the concurrent scenario.
#[derive(Clone, Debug)]
pub struct ScenarioOptions {
    /// The clients, calls and queues of the workload.
    pub workload: Workload,
    /// Model steps of the linearizability search per queue.
    pub budget: u64,
    /// Wall-clock limit of the search (past it: unknown).
    pub(crate) search_limit: Duration,
}

/// A whole concurrent run: the workload's history, its linearizability outcome, the
/// final drain and the invariants checked on both.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The workload that ran.
    pub workload: Workload,
    /// Every call of the workload and its answer.
    pub history: History,
    /// The linearizability check of the history.
    pub outcome: Outcome,
    /// The final drain's calls and what it emptied.
    pub drain: Drain,
    /// The invariants checked on the history and the drain.
    pub invariants: InvariantReport,
    /// The whole scenario: workload, search, drain and checks.
    pub duration_ms: u64,
}

impl Scenario {
    /// Passed: linearizable (not a violation, not undecided, not inconclusive) and no
    /// bad anomaly.
    pub fn passed(&self) -> bool {
        self.outcome.passed() && self.invariants.passed()
    }

    /// The linearizability verdict: `linearizable`, `violation`, `unknown` (the search
    /// could not decide) or `inconclusive` (too many calls went unanswered).
    pub fn verdict_name(&self) -> &'static str {
        self.outcome.verdict_name()
    }

    /// Why the scenario is inconclusive (how many calls went unanswered), when it is:
    /// more than [`UNANSWERED_MAX_SHARE`] of its calls, or every call of a client, were
    /// unknown. Such a scenario fails the run and is never called linearizable.
    pub(crate) fn inconclusive_reason(&self) -> Option<String> {
        self.outcome.unanswered.clone()
    }

    /// For `--json`: the workload, the search per queue, the drain and the anomaly counts.
    pub fn to_json(&self) -> serde_json::Value {
        let w = &self.workload;
        serde_json::json!({
            "passed": self.passed(),
            "seed": w.seed.to_string(),
            "clients": w.clients,
            "callsPerClient": w.ops_per_client,
            "queues": w.queues,
            "leaseSeconds": w.lease_seconds,
            "durationMs": self.duration_ms,
            "linearizability": {
                "verdict": self.outcome.verdict_name(),
                "inconclusive": self.inconclusive_reason(),
                "calls": self.outcome.ops,
                "unknownCalls": self.outcome.unknown_ops,
                "modelSteps": self.outcome.steps(),
                "searchMs": self.outcome.elapsed_ms,
                "callsPerSecond": self.outcome.ops_per_sec(),
                "queues": self.outcome.keys.iter().map(|k| serde_json::json!({
                    "queue": k.key, "calls": k.ops, "modelSteps": k.steps,
                    "verdict": k.verdict.name(),
                    "why": match &k.verdict { Verdict::Unknown(w) => Some(w.clone()), _ => None },
                })).collect::<Vec<_>>(),
            },
            "drain": {
                "calls": self.drain.ops.len(),
                "complete": self.drain.complete(),
                "unfinished": self.drain.unfinished(),
                "ms": self.drain.elapsed_ms,
            },
            "invariants": self.invariants.to_json(),
        })
    }

    /// The terminal summary: linearizability, then the invariants with their counts.
    pub fn summary(&self) -> String {
        let merged = invariants::merged(&self.history, &self.drain);
        let w = &self.workload;
        format!(
            "seed {}, {} clients x {} calls over {} queues, leases {} s, {:.1} s in all\n{}drain: {} calls in {:.1} s\n{}",
            w.seed,
            w.clients,
            w.ops_per_client,
            w.queues,
            w.lease_seconds.map_or("default".to_string(), |s| s.to_string()),
            self.duration_ms as f64 / 1000.0,
            summary(&self.history, &self.outcome),
            self.drain.ops.len(),
            self.drain.elapsed_ms / 1000.0,
            self.invariants.summary(&merged, 10)
        )
    }
}

/// Runs `workload` against `target`, checks linearizability with `budget` model steps
/// per queue, drains every queue and checks the invariants (`skew_ms` from the target).
pub async fn run_scenario(target: &Target, workload: &Workload, budget: u64) -> Scenario {
    run_scenario_within(target, workload, budget, DEFAULT_SEARCH_LIMIT).await
}

/// [`run_scenario`] whose search gives up (unknown) after `limit`.
pub(crate) async fn run_scenario_within(
    target: &Target,
    workload: &Workload,
    budget: u64,
    limit: Duration,
) -> Scenario {
    let t0 = std::time::Instant::now();
    let (history, outcome) = run_and_check(target, workload, budget, limit).await;
    let mut opts = DrainOptions::after_leases(workload.lease_ms());
    opts.op_timeout_ms = workload.op_timeout_ms;
    let drain = drain::drain(target, &history, &opts).await;
    let inv_opts = invariants::Options {
        skew_ms: target.settings.skew_ms,
    };
    let invariants = invariants::check_with(&history, &drain, &inv_opts);
    Scenario {
        workload: workload.clone(),
        history,
        outcome,
        drain,
        invariants,
        duration_ms: t0.elapsed().as_millis() as u64,
    }
}

/// A terminal summary of a checked history.
pub fn summary(history: &History, outcome: &Outcome) -> String {
    let mut s = format!(
        "concurrent history: {} calls ({} unknown) over {} queues: {}
",
        history.ops.len(),
        history.unknown(),
        outcome.keys.len(),
        outcome.verdict_name()
    );
    if let Some(why) = &outcome.unanswered {
        s.push_str(&format!("  inconclusive: {why}\n"));
    }
    for k in &outcome.keys {
        s.push_str(&format!(
            "  {}: {} calls, {} model steps, {:.1} ms: {}\n",
            k.key,
            k.ops,
            k.steps,
            k.elapsed_ms,
            k.verdict.name()
        ));
        match &k.verdict {
            Verdict::Violation(v) => {
                if let Some(c) = v.cause {
                    s.push_str(&format!(
                        "    cause: {} ({c}): {}; linearizable under it\n",
                        c.rule(),
                        c.def().what
                    ));
                }
                s.push_str(&format!(
                    "    linearizable prefix of {} calls; no call can come next:\n",
                    v.prefix.len()
                ));
                for (i, why) in &v.refused {
                    s.push_str(&format!("    {}\n", history.ops[*i].label()));
                    for line in why.lines() {
                        s.push_str(&format!("      {line}\n"));
                    }
                }
            }
            Verdict::Unknown(why) => s.push_str(&format!("    {why}\n")),
            Verdict::Linearizable(_) => {}
        }
    }
    s.push_str(&format!(
        "checker: {} calls in {:.1} ms ({:.0} calls/s, {} model steps)\n",
        outcome.ops,
        outcome.elapsed_ms,
        outcome.ops_per_sec(),
        outcome.steps()
    ));
    s
}
