//! Shared by the suite's own tests: our server in-process on the memory engine, or on
//! a deliberately broken engine (a test double wrapping it), and a quick way to run
//! the suite against it.
#![allow(dead_code)]

use queen_conformance::lockstep::LockstepOptions;
use queen_conformance::report::Report;
use queen_conformance::runner::{self, RunOptions};
use queen_conformance::session::{CheckSettings, Target};
use queen_server::app::{spawn, Running};
use queen_server::broker::Broker;
use queen_server::config::Config;
use queen_server::memory::MemoryBroker;
use std::collections::BTreeSet;
use std::sync::Arc;

pub fn memory() -> MemoryBroker {
    let c = Config::defaults();
    MemoryBroker::new(c.pop_timeout_ms(), c.body_limit)
}

pub async fn serve(broker: Arc<dyn Broker>) -> Running {
    spawn(broker, &Config::defaults(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("binds")
}

/// Options for a run against `url`: `only` filters cases, `lockstep` is (seed, cases, steps).
pub fn options(url: &str, only: &[&str], lockstep: Option<(u64, u32, u32)>) -> RunOptions {
    RunOptions {
        target: Target::new(url, CheckSettings::default()),
        target_label: url.to_string(),
        without: BTreeSet::new(),
        only: only.iter().map(|s| s.to_string()).collect(),
        jobs: 12,
        concurrent: None,
        case_timeout_s: 60,
        lockstep: lockstep.map(|(seed, cases, steps)| LockstepOptions {
            seed,
            cases,
            steps,
            workers: 2,
            without: BTreeSet::new(),
            failures_dir: None,
            max_shrink_secs: 60,
        }),
        progress: false,
    }
}

pub async fn run(opts: &RunOptions) -> Report {
    Report::build(runner::run(opts).await, false, &BTreeSet::new())
}
