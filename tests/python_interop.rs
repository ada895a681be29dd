//! Interop: the official Python client (`queen-mq` from PyPI, unchanged) against our
//! server, both engines (issue 4: "official clients must work against it unchanged").
//!
//! The test creates a virtualenv, installs the pinned client into it, starts our server
//! and runs `tests/python/interop.py` against it: push (with and without transactionId,
//! to named partitions), pop with a consumer group, lease extend, acks (completed, failed,
//! batch, queue mode), a consume loop whose handler fails for one message (redelivered
//! after retryDelay, then dead-lettered), and transactions (commit and abort). The script
//! asserts every outcome and also checks what the client puts on the wire (an extend with
//! no body, `autopilot=true` on pops, `null` for absent ack fields).
//!
//! The virtualenv with the pinned client is `queen_tests::python`'s (built once, reused;
//! `QUEEN_SKIP_PYTHON_INTEROP=1` skips).

use queen_tests::{memory_server, pg_server, pg_server_with, TestServer};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bound on one script run (the script itself bounds every loop and the whole run).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

fn python_or_skip() -> Option<PathBuf> {
    queen_tests::python::python_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// Runs the script against `server` and fails the test, with its output, unless it passes.
async fn run_script(python: &Path, server: &TestServer, engine: &str) {
    run_script_with(python, &server.url(), engine, &[]).await
}

/// [`run_script`] with extra environment variables for the script.
async fn run_script_with(python: &Path, url: &str, engine: &str, env: &[(&str, &str)]) {
    let started = Instant::now();
    let child = queen_tests::python::interop_command(python, url)
        .envs(env.iter().copied())
        .spawn()
        .expect("the virtualenv's python starts");
    let out = match tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => out.expect("the script's output is readable"),
        Err(_) => panic!(
            "interop.py against the {engine} engine did not finish within {SCRIPT_TIMEOUT:?} (killed)"
        ),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client failed against our server ({engine} engine, {}):\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    eprintln!(
        "python interop ({engine} engine) passed in {:.1}s:\n{stdout}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_against_the_memory_engine() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let server = memory_server().await;
    run_script(&python, &server, "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_against_the_pg_engine() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let server = pg_server().await;
    run_script(&python, &server, "pg").await;
}

/// AUTH-2 with the official client: every call carries a token (the client's
/// `bearer_token`), every popped message carries the token's `sub`, and a push without
/// the token is refused 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_with_a_token_against_the_pg_engine() {
    let Some(python) = python_or_skip() else {
        return;
    };
    const SECRET: &str = "python-interop-secret-of-32-bytes-or-more";
    let server = pg_server_with(|c| {
        c.auth.jwt_enabled = true;
        c.auth.jwt_secret = Some(SECRET.into());
    })
    .await;
    let tokens = queen_conformance::auth::Tokens::minted(SECRET, None, None);
    let env = [
        ("QUEEN_TOKEN", tokens.admin.as_str()),
        ("QUEEN_TOKEN_SUB", queen_conformance::auth::SUB_ADMIN),
    ];
    run_script_with(&python, &server.url(), "pg, JWT on", &env).await;
}

/// The official client's usage through `queen-conformance watch`: every exchange is
/// forwarded unchanged (the script's own checks pass) and the model finds nothing in the
/// traffic it can judge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_through_the_watcher_has_no_findings() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let server = pg_server().await;
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let settings = queen_conformance::session::CheckSettings {
        strict_project: false,
        keep_going: true,
        ..Default::default()
    };
    let opts = queen_conformance::watch::WatchOptions {
        listen,
        target: server.url(),
        settings,
        record: None,
        findings: None,
        admin: None,
        live: false,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watch = tokio::spawn(queen_conformance::watch::watch(opts, async {
        let _ = stopped.await;
    }));
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(listen).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run_script_with(&python, &format!("http://{listen}"), "pg, watched", &[]).await;
    let _ = stop.send(());
    let report = watch
        .await
        .expect("the watch ends")
        .expect("the watcher runs");
    let text = serde_json::to_string_pretty(&report).unwrap();
    assert!(report.findings.is_empty(), "{text}");
    assert!(report.counts.checked >= 50, "{text}");
    eprintln!("{}", serde_json::to_string(&report.counts).unwrap());
}
