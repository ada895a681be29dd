#![cfg(feature = "embedded")]
//! The whole suite against our server in-process on the memory engine, through the CLI
//! entry point, with the concurrent scenario (`run --concurrency 4`): it passes, within
//! the time budget, and writes JUnit and JSON reports that parse (anomaly counts in the
//! JSON). Expected-failure files: stale entries fail the run, `--fix` rewrites.

mod common;

use queen_conformance::cli::{self, RunArgs};
use queen_conformance::embedded::Engine;
use queen_conformance::report::Problem;
use queen_conformance::rules::RULES;
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "queen-conformance-test-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn args(dir: &std::path::Path) -> RunArgs {
    let mut a = RunArgs::defaults();
    a.broker.engine = Some(Engine::Memory);
    a.terminal.no_progress = true;
    a.lockstep.failures_dir = dir.join("failures");
    a.lockstep.seed = Some(20_260_101);
    // Our own server is held to every PROJECT decision.
    a.verdict.strict = true;
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_suite_passes_on_the_memory_engine_with_reports() {
    let dir = temp("full");
    let mut a = args(&dir);
    a.reports.junit = Some(dir.join("report.xml"));
    a.reports.json = Some(dir.join("report.json"));
    a.concurrent.concurrency = 4;
    a.concurrent.ops = 20;
    a.concurrent.timeline = Some(dir.join("timeline.html"));
    // Authentication on (section 14): the embedded server checks the suite's minted
    // tokens, so the auth cases run and every other case and run carries a token.
    a.auth.jwt_secret = Some("suite-test-secret-of-32-bytes-or-more".into());
    // How long the suite takes is a figure of `queen-bench --workloads suite`.
    let report = cli::run(&a).await.expect("the suite runs");
    let text = queen_conformance::report::terminal::render(&report, true);
    println!("{text}");
    assert!(report.passed(), "{text}");

    // JSON: every case is there with a verdict; every rule id is covered by some case.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["passed"], true);
    common::assert_valid_report(&json);
    // Asked for, the timeline is written for a passing scenario too: a time axis, each
    // bar labelled with its operation and outcome, labels clipped to their bars.
    let timeline = std::fs::read_to_string(dir.join("timeline.html")).unwrap();
    for part in [
        "viewBox=",
        "0 ms</text>",
        ">push 201</text>",
        "clip-path=",
        "Refused calls",
    ] {
        assert!(timeline.contains(part), "{part} missing from the timeline");
    }
    // The schema is strict enough to refuse a wrong type or an unknown finding member.
    let mut bad = json.clone();
    bad["exitCode"] = serde_json::json!("zero");
    bad["cases"][0]["verdict"] = serde_json::json!("fine");
    assert_eq!(
        common::report_errors(&bad).len(),
        2,
        "{:?}",
        common::report_errors(&bad)
    );
    // What it was checked against, for a CI job to quote.
    use queen_conformance::version;
    assert_eq!(json["specVersion"], version::SPEC);
    assert_eq!(json["suiteVersion"], version::SUITE);
    assert_eq!(json["gitRevision"], version::GIT_REVISION);
    assert!(text.contains(&format!("spec {}", version::SPEC)), "{text}");
    let xml = std::fs::read_to_string(dir.join("report.xml")).unwrap();
    assert!(xml.contains(&format!(
        "name=\"spec-version\" value=\"{}\"",
        version::SPEC
    )));
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() > 80);
    // Every case passes (the auth cases included) but those needing database-control,
    // which the memory engine (no PostgreSQL cluster to stop) cannot offer: skipped.
    for c in cases {
        let db = c["capability"] == "database-control";
        let want = if db { "skipped" } else { "passed" };
        assert_eq!(c["verdict"], want, "{}", c["id"]);
    }
    for r in RULES
        .iter()
        .filter(|r| !r.id.as_str().starts_with("ACK-STEP-"))
        .filter(|r| !queen_conformance::rules::OPERATIONAL.contains(&r.id))
        .filter(|r| !queen_conformance::rules::UNTYPED.contains(&r.id))
        .filter(|r| !queen_conformance::rules::UNJUDGED.contains(&r.id))
    {
        assert!(
            cases.iter().any(|c| c["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == r.id.as_str())),
            "no case for {}",
            r.id
        );
    }
    let conc = &json["concurrent"];
    assert_eq!(conc["clients"], 4);
    assert_eq!(conc["linearizability"]["verdict"], "linearizable", "{conc}");
    assert_eq!(conc["drain"]["complete"], true);
    for kind in ["lost", "order", "past-cursor", "double-lease", "duplicate"] {
        assert_eq!(conc["invariants"]["counts"][kind]["bad"], 0, "{conc}");
    }
    assert!(cases
        .iter()
        .any(|c| c["id"] == "concurrent/linearizable-and-drained" && c["verdict"] == "passed"));
    assert!(
        text.contains("Concurrent: seed 20260101, 4 clients x 20 calls"),
        "{text}"
    );
    let lock = &json["lockstep"];
    assert!(lock["sequences"].as_u64().unwrap() > 0);
    assert!(lock["coverage"]["operations"]["push"].as_u64().unwrap() > 0);
    // A default run reaches every interesting outcome, a `retry` ack of a message whose
    // retry budget is spent among them (ACK-6: it still comes back).
    assert_eq!(lock["neverReached"], serde_json::json!([]), "{lock}");

    // JUnit: well-formed, one testcase per case, no failures.
    let xml = std::fs::read_to_string(dir.join("report.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("failures"), Some("0"));
    let testcases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .count();
    assert_eq!(testcases, cases.len());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_failures_stale_entries_fail_and_fix_rewrites() {
    let dir = temp("expect");
    let file = dir.join("expected.txt");
    // The pop-6 line is for a case this run leaves out: `--fix` must keep it.
    std::fs::write(
        &file,
        "# known\nhealth-1/healthy-and-connected\npop-6/nothing-delivered-is-a-bare-204\n",
    )
    .unwrap();
    let mut a = args(&dir);
    a.select.only = vec!["health-1".into()];
    a.lockstep.cases = 0;
    a.verdict.expect_failures = Some(file.clone());
    let report = cli::run(&a).await.unwrap();
    assert!(!report.passed(), "a listed case that passes is stale");
    assert!(report
        .problems
        .iter()
        .any(|p| matches!(p, Problem::StalePass { .. })));
    a.verdict.fix = true;
    let report = cli::run(&a).await.unwrap();
    assert!(report.passed(), "{:?}", report.problems);
    let listed = queen_conformance::expect::load(&file).unwrap();
    assert_eq!(
        listed.cases.iter().collect::<Vec<_>>(),
        ["pop-6/nothing-delivered-is-a-bare-204"],
        "--fix removed the stale entry and kept the one it did not run"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_executes_nothing_fails_and_without_lists_skips() {
    let dir = temp("none");
    let mut a = args(&dir);
    a.select.only = vec!["health-1".into()];
    a.broker.without = vec!["core".into()];
    a.lockstep.cases = 0;
    let report = cli::run(&a).await.unwrap();
    assert!(!report.passed());
    assert!(report.problems.contains(&Problem::NothingRan));

    let mut a = args(&dir);
    a.select.only = vec!["maint-*".into(), "del-1/".into()];
    a.broker.without = vec!["maintenance".into(), "delete".into()];
    a.lockstep.cases = 0;
    let report = cli::run(&a).await.unwrap();
    let text = queen_conformance::report::terminal::render(&report, false);
    assert!(
        text.contains("maint-2/pop-maintenance-answers-a-bare-204 (--without maintenance)"),
        "{text}"
    );
    assert!(text.contains("(--without delete)"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_selects_nothing_is_refused_before_any_request() {
    let dir = temp("nothing");
    for (only, skip, rule) in [
        ("no-such-case", "", ""),
        ("pop-1/", "pop-99", ""),
        ("", "", "NOPE-1"),
    ] {
        let mut a = args(&dir);
        a.select.only = [only]
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        a.select.skip = [skip]
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        a.select.rule = [rule]
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        // An unreachable target: a selection error must come before any request.
        a.broker.target = Some("http://127.0.0.1:9".into());
        let e = cli::run(&a).await.err().expect("refused");
        assert!(e.contains("nothing") || e.contains("no rule"), "{e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_left_out_by_the_selection_are_not_reported_at_all() {
    let dir = temp("selection");
    let mut a = args(&dir);
    a.select.only = vec!["pop-6".into()];
    a.select.rule = vec!["ACK-6".into()];
    a.select.skip = vec!["ack-6/retry-*".into()];
    a.lockstep.cases = 0;
    a.reports.junit = Some(dir.join("report.xml"));
    a.reports.json = Some(dir.join("report.json"));
    let report = cli::run(&a).await.expect("runs");
    let text = queen_conformance::report::terminal::render(&report, false);
    assert!(report.passed(), "{text}");
    let catalog = queen_conformance::catalog::all();
    let want: Vec<&str> = catalog
        .iter()
        .filter(|c| {
            c.id.starts_with("pop-6/") || c.rules.contains(&queen_conformance::rules::ACK_6)
        })
        .filter(|c| !c.id.starts_with("ack-6/retry-"))
        .map(|c| c.id)
        .collect();
    let got: Vec<&str> = report.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(got, want);
    assert_eq!(report.left_out, catalog.len() - want.len());
    assert!(
        text.contains(&format!("{} left out by the selection", report.left_out)),
        "{text}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    common::assert_valid_report(&json);
    assert_eq!(json["summary"]["skipped"], 0);
    assert_eq!(json["summary"]["leftOut"], report.left_out);
    assert_eq!(json["cases"].as_array().unwrap().len(), want.len());
    let xml = std::fs::read_to_string(dir.join("report.xml")).unwrap();
    assert_eq!(
        xml.matches("<testcase ").count() - findings_cases(&xml),
        want.len(),
        "{xml}"
    );
    assert!(!xml.contains("<skipped"), "{xml}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Test cases of the JUnit file's `findings` suite (one per finding, none on a pass).
fn findings_cases(xml: &str) -> usize {
    xml.split("<testsuite name=\"findings\"")
        .nth(1)
        .map_or(0, |s| {
            s.split("</testsuite>")
                .next()
                .unwrap_or("")
                .matches("<testcase ")
                .count()
        })
}
