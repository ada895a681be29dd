//! Shared by the suite's own tests: our server in-process on the memory engine, or on
//! a deliberately broken engine (a test double wrapping it), and a quick way to run
//! the suite against it.
#![allow(dead_code)]

pub mod deviant;

use queen_conformance::lockstep::LockstepOptions;
use queen_conformance::report::Report;
use queen_conformance::runner::{self, RunOptions};
use queen_conformance::select::Selection;
use queen_conformance::session::{CheckSettings, Target};
use queen_conformance::watch::{self, WatchOptions, WatchReport};
use queen_server::app::{spawn, Running};
use queen_server::broker::Broker;
use queen_server::config::Config;
use queen_server::memory::MemoryBroker;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::oneshot;

pub fn memory() -> MemoryBroker {
    let c = Config::defaults();
    MemoryBroker::new(c.pop_timeout_ms(), c.body_limit)
}

pub async fn serve(broker: Arc<dyn Broker>) -> Running {
    spawn(broker, &Config::defaults(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("binds")
}

/// Options for a run against `url`: `only` selects (as `run --only`), `lockstep` is (seed, cases, steps).
/// The model is lax on PROJECT points, as the CLI without `--strict`.
pub fn options(url: &str, only: &[&str], lockstep: Option<(u64, u32, u32)>) -> RunOptions {
    let settings = CheckSettings {
        strict_project: false,
        ..CheckSettings::default()
    };
    RunOptions {
        target: Target::new(url, settings),
        target_label: url.to_string(),
        without: BTreeSet::new(),
        selection: Selection::for_run(&only.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &[])
            .expect("the selectors select something"),
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

/// Runs and judges as the CLI without `--strict`.
pub async fn run(opts: &RunOptions) -> Report {
    Report::build(runner::run(opts).await, false, &BTreeSet::new())
}

/// Runs and judges as the CLI with `--strict`: the model holds the broker to every
/// PROJECT decision and PROJECT differences fail the run.
pub async fn run_strict(opts: &RunOptions) -> Report {
    let mut opts = opts.clone();
    opts.target.settings.strict_project = true;
    Report::build(runner::run(&opts).await, true, &BTreeSet::new())
}

/// What `spec/report.schema.json` finds wrong with `report` (a `run --json` document).
pub fn report_errors(report: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../spec/report.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(report)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect()
}

/// Fails unless `report` is valid against the checked-in schema.
pub fn assert_valid_report(report: &serde_json::Value) {
    let errors = report_errors(report);
    assert!(
        errors.is_empty(),
        "the JSON report breaks its schema:\n{}",
        errors.join("\n")
    );
}

/// The watcher's verdict settings in the tests: lax on PROJECT points and kept going,
/// as against any broker.
pub fn lax() -> CheckSettings {
    CheckSettings {
        strict_project: false,
        keep_going: true,
        ..CheckSettings::default()
    }
}

/// A watcher in front of `target`, ending the watch and giving its report.
pub type Watcher = (
    String,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<WatchReport>,
);

/// A watcher in front of `target`, recording to `record`, with [`lax`] settings: its
/// URL, and the handle that ends the watch and gives its report.
pub async fn watcher(target: &str, record: Option<std::path::PathBuf>) -> Watcher {
    watcher_with(target, record, lax()).await
}

/// [`watcher`] with the given verdict settings.
pub async fn watcher_with(
    target: &str,
    record: Option<std::path::PathBuf>,
    settings: CheckSettings,
) -> Watcher {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let opts = WatchOptions {
        listen,
        target: target.to_string(),
        settings,
        record,
        findings: None,
        admin: None,
        live: false,
    };
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        watch::watch(opts, async {
            let _ = rx.await;
        })
        .await
        .expect("the watcher runs")
    });
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    (format!("http://{listen}"), tx, task)
}
