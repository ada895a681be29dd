//! The official Python client's usage (`tests/python/interop.py`) through the live
//! watcher in front of brokers that are not ours: three of the conformance tests'
//! deviant doubles, each our broker behind a proxy that changes one realistic behaviour.
//! The client may fail its own checks against a double; what matters is that the
//! watcher names the rule each double breaks, from the client's own traffic, and no SEED
//! rule it keeps.

#[path = "../conformance/tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use common::deviant::{self, Deviation};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bound on one script run (the script bounds its own loops; a double may slow it).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Doubles whose departure the client's traffic shows: an answer it reads on every pop,
/// a push answer's keys, and the pop answer's claimed count.
const DOUBLES: [Deviation; 3] = [
    Deviation::CreatedAtWithoutZ,
    Deviation::PushAnswerCamelCase,
    Deviation::PartitionsClaimedMissing,
];

fn python_or_skip() -> Option<PathBuf> {
    queen_tests::python::python_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// Runs the script against `url`; its exit status is not judged here.
async fn run_script(python: &Path, url: &str) -> String {
    let child = queen_tests::python::interop_command(python, url)
        .spawn()
        .expect("the virtualenv's python starts");
    match tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => {
            let out = out.expect("the script's output is readable");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            format!("{}: {}", out.status, text.lines().last().unwrap_or(""))
        }
        Err(_) => format!("killed after {SCRIPT_TIMEOUT:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_through_the_watcher_names_each_doubles_rule() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let mut wrong = Vec::new();
    for d in DOUBLES {
        let broker = deviant::start(d).await;
        let (url, stop, watch) = common::watcher(&broker.url, None).await;
        let script = run_script(&python, &url).await;
        let _ = stop.send(());
        let report = watch.await.expect("the watch ends");
        broker.stop().await;
        let named: BTreeSet<&str> = report
            .findings
            .iter()
            .flat_map(|f| f.rules.iter().map(|r| r.as_str()))
            .collect();
        let declared: BTreeSet<&str> = d.rules().iter().copied().collect();
        println!(
            "{}: the client {script}; watched {} exchanges, {} judged, {} findings, rules {named:?}",
            d.name(),
            report.counts.exchanges,
            report.counts.checked,
            report.findings.len()
        );
        for f in report.findings.iter().take(3) {
            println!("  [{}] {:?} {}", f.level, f.rules, f.summary);
        }
        if declared.is_disjoint(&named) {
            wrong.push(format!(
                "{}: named {named:?}, breaks {declared:?}",
                d.name()
            ));
        }
        let foreign_seed: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.level == queen_reference::rules::Level::Seed)
            .filter(|f| f.rules.iter().all(|r| !declared.contains(r.as_str())))
            .map(|f| format!("{:?} {}", f.rules, f.summary))
            .collect();
        if !foreign_seed.is_empty() {
            wrong.push(format!(
                "{}: SEED findings it does not make: {foreign_seed:#?}",
                d.name()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
