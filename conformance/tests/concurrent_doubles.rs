//! The concurrent scenario against deviant doubles decides: at 4 clients × 30 calls the
//! search ends `unknown` (its budget spent) in few seeds, and a violation names the
//! variant under which the history is linearizable, when one is.
//!
//! `QUEEN_CONCURRENT_SEEDS=20 [QUEEN_DEVIANT=name] cargo test -p queen-conformance --test
//! concurrent_doubles -- --nocapture` prints the figures per double; the default runs one
//! seed of each.

mod common;

use common::deviant::{self, Deviation};
use queen_conformance::concurrent::linearize::{Verdict, DEFAULT_BUDGET};
use queen_conformance::concurrent::{run_scenario, Workload};
use queen_conformance::session::{CheckSettings, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrent_scenario_decides_against_doubles() {
    let seeds: u64 = std::env::var("QUEEN_CONCURRENT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let only = std::env::var("QUEEN_DEVIANT").ok();
    let mut lines = Vec::new();
    let mut unknown_total = 0;
    let mut runs = 0;
    for d in [
        Deviation::CapitalisedErrors,
        Deviation::FlagsLie,
        Deviation::LeaseSecondsIgnored,
        Deviation::PushCreatedLease300,
    ] {
        if only.as_ref().is_some_and(|o| o != d.name()) {
            continue;
        }
        let broker = deviant::start(d).await;
        let settings = CheckSettings {
            strict_project: false,
            keep_going: true,
            ..CheckSettings::default()
        };
        let target = Target::new(&broker.url, settings);
        let (mut lin, mut viol, mut unknown, mut causes) = (0, 0, 0, Vec::new());
        for seed in 1..=seeds {
            let s = run_scenario(&target, &Workload::new(4, 30, 2, seed), DEFAULT_BUDGET).await;
            runs += 1;
            for k in &s.outcome.keys {
                match &k.verdict {
                    Verdict::Linearizable(_) => lin += 1,
                    Verdict::Violation(v) => {
                        viol += 1;
                        if let Some(c) = v.cause {
                            causes.push(c.to_string());
                        }
                    }
                    Verdict::Unknown(why) => {
                        unknown += 1;
                        println!("{} seed {seed} {}: unknown: {why}", d.name(), k.key);
                    }
                }
            }
            if s.outcome
                .keys
                .iter()
                .any(|k| matches!(k.verdict, Verdict::Unknown(_)))
            {
                unknown_total += 1;
            }
        }
        broker.stop().await;
        causes.sort();
        causes.dedup();
        lines.push(format!(
            "{:<24} {seeds} seeds: queues linearizable {lin}, violation {viol} (causes named: {causes:?}), unknown {unknown}",
            d.name()
        ));
    }
    println!("{}", lines.join("\n"));
    // At most one run in twenty ends undecided on some queue; a violation names its cause.
    assert!(
        unknown_total * 20 <= runs.max(20),
        "{unknown_total} of {runs} runs undecided:\n{}",
        lines.join("\n")
    );
}
