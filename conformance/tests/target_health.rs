//! A target that is not a Queen broker, and a broker that stops answering mid-run, are
//! recognised as such: exit status 2 ("this does not look like a Queen broker") before
//! any case runs, and exit status 3 naming the case and the last request the broker
//! received, with the rest of the run cut short rather than failed one transport error
//! at a time.

mod common;

use axum::http::StatusCode;
use common::deviant::{self, Deviation};
use queen_conformance::cli::{self, Cli, RunArgs};
use queen_conformance::report::Verdict;

/// A plain static file server: 404 to everything.
async fn not_a_broker() -> String {
    let app = axum::Router::new()
        .fallback(|| async { (StatusCode::NOT_FOUND, "<html>Not Found</html>") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn against(url: &str) -> RunArgs {
    let mut a = RunArgs::defaults();
    a.broker.target = Some(url.to_string());
    a.terminal.no_progress = true;
    a.lockstep.cases = 4;
    a.lockstep.steps = 10;
    a.lockstep.failures_dir =
        std::env::temp_dir().join(format!("queen-health-{}", std::process::id()));
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_is_no_queen_broker_exits_2_before_any_case() {
    let url = not_a_broker().await;
    let err = cli::run(&against(&url))
        .await
        .err()
        .expect("the suite does not run");
    assert!(
        err.contains("this does not look like a Queen broker"),
        "{err}"
    );
    assert!(err.contains("POST /api/v1/push answered 404"), "{err}");
    let code = cli::main_with(<Cli as clap::Parser>::parse_from([
        "queen-conformance",
        "run",
        "--target",
        &url,
    ]))
    .await;
    assert_eq!(code, 2);
    // Nothing answers at all: 2 as well.
    let closed = "http://127.0.0.1:9"; // the discard port: nothing listens there
    let err = cli::run(&against(closed)).await.err().unwrap();
    assert!(err.contains("cannot reach"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_crashes_mid_run_ends_the_run_with_exit_3() {
    let broker = deviant::start(Deviation::CrashOnNonUtf8).await;
    let t0 = std::time::Instant::now();
    let report = cli::run(&against(&broker.url))
        .await
        .expect("the run starts");
    let text = queen_conformance::report::terminal::render(&report, false);
    assert_eq!(report.exit_code(), 3, "{text}");
    let why = report.target_down.clone().unwrap();
    // The request that killed it (its connection dropped without an answer) is named
    // in the headline, or, with several dropped at once, among them, listed before the
    // requests merely in flight, as a curl line.
    assert!(why.contains("likely killer"), "{why}");
    let lines: Vec<&str> = why.lines().skip(1).collect();
    let dropped: Vec<&&str> = lines
        .iter()
        .take_while(|l| l.contains("(dropped without an answer)"))
        .collect();
    assert!(
        dropped
            .iter()
            .any(|l| l.contains("[bad-input/") && l.contains("printf '")),
        "{why}"
    );
    assert!(
        lines[dropped.len()..]
            .iter()
            .all(|l| !l.contains("(dropped without an answer)")),
        "{why}"
    );
    assert!(text.contains("THE BROKER STOPPED ANSWERING"), "{text}");
    // The rest is cut short, not failed transport error by transport error, and the
    // lockstep run does not start against a broker that is gone (so it shrinks no
    // "connection refused" into a counterexample).
    let transport = report
        .entries
        .iter()
        .filter(|e| e.failure.as_ref().is_some_and(|f| f.kind() == "transport"))
        .count();
    assert!(transport <= 2, "{transport} transport failures:\n{text}");
    assert!(report.lockstep.is_none(), "{text}");
    assert!(report.entries.iter().any(|e| e.verdict == Verdict::Failed
        && e.failure
            .as_ref()
            .is_some_and(|f| f.kind() == "target-down")));
    assert!(
        t0.elapsed().as_secs() < 40,
        "ended at once: {:?}",
        t0.elapsed()
    );
    broker.stop().await;
}
