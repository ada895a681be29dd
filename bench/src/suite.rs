//! suite: how long the conformance suite takes against the target, the whole catalog
//! and a strict lockstep run (24 sequences of 40 steps), as a broker author's CI runs
//! it. The suite's speed is a figure with a target here, not an assertion inside a
//! correctness test, where a slow machine would fail a passing broker. A round whose
//! suite does not pass still reports its time, with `passed: false` in its details.

use crate::report::Outcome;
use queen_conformance::lockstep::LockstepOptions;
use queen_conformance::report::Report;
use queen_conformance::runner::{self, RunOptions};
use queen_conformance::session::{CheckSettings, Target};
use serde_json::json;
use std::collections::BTreeSet;

/// Runs the suite once against `url` and reports its wall time in seconds.
pub async fn run(url: &str, run_id: &str) -> Result<Outcome, String> {
    let failures = std::env::temp_dir().join(format!("queen-bench-suite-{run_id}"));
    let opts = RunOptions::whole(
        Target::new(url, CheckSettings::default()),
        &format!("{url} (queen-bench)"),
        Some(LockstepOptions::sized(4_242, 24, 40, failures.clone())),
    );
    let report = Report::build(runner::run(&opts).await, true, &BTreeSet::new());
    let _ = std::fs::remove_dir_all(failures);
    let count = |passed: bool| {
        report
            .entries
            .iter()
            .filter(|e| (e.verdict == queen_conformance::report::Verdict::Passed) == passed)
            .count()
    };
    Ok(Outcome {
        workload: "suite".into(),
        value: report.duration_ms as f64 / 1000.0,
        unit: "s".into(),
        details: json!({
            "passed": report.passed(),
            "entries_passed": count(true),
            "entries_other": count(false),
            "lockstep": "24 sequences x 40 steps, strict",
        }),
    })
}
