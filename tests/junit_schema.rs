//! The JUnit file `queen-conformance run --junit` writes is valid against the schema CI
//! systems validate JUnit files with (`tests/fixtures/junit-10.xsd`), in every shape a
//! run produces: passes, skips, a failure that fails the run, an expected failure, a
//! difference that does not fail it, and the findings suite. The validator is Python's
//! `xmlschema`, in the virtualenv of `queen_tests::python`; a file the schema rejects is
//! shown to fail, so a validator that accepts anything cannot pass the test.

use queen_conformance::report::{junit, Report};
use queen_conformance::runner::{self, RunOptions};
use queen_conformance::select::Selection;
use queen_conformance::session::{CheckSettings, Target};
use queen_tests::memory_server;
use queen_tests::python::python_or_skip;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit-10.xsd")
}

/// The schema's complaints about `xml` (empty: valid).
fn errors(python: &Path, name: &str, xml: &str) -> Vec<String> {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("junit-{name}-{}.xml", std::process::id()));
    std::fs::write(&file, xml).unwrap();
    let out = Command::new(python)
        .args([
            "-c",
            "import sys, xmlschema\n\
             s = xmlschema.XMLSchema(sys.argv[1])\n\
             for e in s.iter_errors(sys.argv[2]):\n\
             \x20   print(e.reason, 'at', e.path)",
        ])
        .arg(schema())
        .arg(&file)
        .output()
        .expect("the virtualenv's python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(file);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shape_of_junit_report_is_valid_against_junit_10_xsd() {
    let Some(python) = python_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR"))) else {
        return;
    };
    // A suite expecting a smaller body limit than our server's: the oversized push is
    // accepted, so that case fails and leaves findings; maintenance cases are skipped.
    let server = memory_server().await;
    let settings = CheckSettings {
        body_limit: 1024 * 1024,
        strict_project: false,
        ..CheckSettings::default()
    };
    let only: Vec<String> = ["health-1", "bad-input", "maint-*"]
        .map(String::from)
        .to_vec();
    let opts = RunOptions {
        target: Target::new(&server.url(), settings),
        target_label: server.url(),
        without: ["maintenance"]
            .iter()
            .map(|c| queen_conformance::case::Capability::parse(c).unwrap())
            .collect(),
        selection: Selection::for_run(&only, &[]).unwrap(),
        jobs: 4,
        case_timeout_s: 60,
        lockstep: None,
        concurrent: None,
        progress: false,
    };
    let results = runner::run(&opts).await;
    let failing = "bad-input/oversized-body-is-413".to_string();
    let shapes = [
        (
            "strict",
            Report::build(results.clone(), true, &BTreeSet::new()),
        ),
        (
            "lax",
            Report::build(results.clone(), false, &BTreeSet::new()),
        ),
        (
            "expected",
            Report::build(results, true, &BTreeSet::from([failing])),
        ),
    ];
    let mut seen = BTreeSet::new();
    for (name, report) in &shapes {
        let xml = junit::render(report);
        for tag in [
            "<failure",
            "<skipped",
            "<system-out",
            "name=\"findings\"",
            "<testcase",
        ] {
            if xml.contains(tag) {
                seen.insert(tag);
            }
        }
        let errs = errors(&python, name, &xml);
        assert!(errs.is_empty(), "{name}: {}\n{xml}", errs.join("\n"));
    }
    assert_eq!(
        seen.len(),
        5,
        "every element a report can have was checked: {seen:?}"
    );

    // The validator rejects what the schema forbids.
    let bad = "<?xml version=\"1.0\"?><testsuites skipped=\"1\"><testsuite name=\"a\" tests=\"1\" \
               failures=\"0\" errors=\"0\"><testcase name=\"x\"><properties/></testcase></testsuite></testsuites>";
    assert!(errors(&python, "bad", bad).len() >= 2);
    let _ = server.server.stop().await;
}
