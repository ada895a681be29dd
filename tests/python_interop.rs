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
//! The virtualenv is built once per client version under cargo's target tmp dir and
//! reused (a fresh clone builds it on the first run). `python3` (or `$QUEEN_PYTHON`)
//! and PyPI are required: without them the test fails with an explanation, unless
//! `QUEEN_SKIP_PYTHON_INTEROP=1` is set, in which case it prints "skipped" and passes.

use queen_tests::{memory_server, pg_server, TestServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The pinned client release the script is written against.
const CLIENT_VERSION: &str = "2.6.0";
/// Bound on one script run (the script itself bounds every loop and the whole run).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);
const SKIP_VAR: &str = "QUEEN_SKIP_PYTHON_INTEROP";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/interop.py")
}

fn skipped() -> bool {
    std::env::var(SKIP_VAR).is_ok_and(|v| v == "1")
}

/// The last `n` bytes of a command's output, for error messages.
fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(n);
    let start = (start..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

fn describe(what: &str, out: &Output) -> String {
    format!(
        "{what} failed ({}):\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
        out.status,
        tail(&out.stdout, 4000),
        tail(&out.stderr, 4000)
    )
}

fn run(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(describe(what, &out))
    }
}

/// Whether the virtualenv at `dir` has a working interpreter with the pinned client.
fn venv_ok(dir: &Path) -> bool {
    let python = dir.join("bin/python");
    python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import queen, sys; sys.exit(queen.__version__ != sys.argv[1])",
            ])
            .arg(CLIENT_VERSION)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Builds the virtualenv in a scratch directory and moves it into place, so a run that
/// dies halfway never leaves a half-built cache behind.
fn build_venv(dir: &Path) -> Result<(), String> {
    let python = std::env::var("QUEEN_PYTHON").unwrap_or_else(|_| "python3".into());
    let scratch = dir.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.parent().expect("has a parent")).map_err(|e| e.to_string())?;
    let result = (|| {
        run(
            Command::new(&python).args(["-m", "venv"]).arg(&scratch),
            &format!("`{python} -m venv` (is Python 3 with the venv module installed?)"),
        )?;
        // Quiet: pip's progress output stays out of the test log (shown only on failure).
        run(
            Command::new(scratch.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-input",
                    "--timeout",
                    "30",
                ])
                .arg(format!("queen-mq=={CLIENT_VERSION}"))
                .env("PIP_NO_COLOR", "1"),
            &format!("`pip install queen-mq=={CLIENT_VERSION}` (is PyPI reachable?)"),
        )?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&scratch);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::rename(&scratch, dir).is_err() {
        // Another process won the race; use its venv if it works.
        let _ = std::fs::remove_dir_all(&scratch);
    }
    if venv_ok(dir) {
        Ok(())
    } else {
        Err(format!(
            "the virtualenv at {} does not import queen {CLIENT_VERSION}",
            dir.display()
        ))
    }
}

/// The virtualenv's interpreter, built on first use (once per process).
fn venv_python() -> &'static Result<PathBuf, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("python-interop")
            .join(format!("venv-queen-mq-{CLIENT_VERSION}"));
        if !venv_ok(&dir) {
            let t = Instant::now();
            build_venv(&dir)?;
            eprintln!(
                "built {} in {:.1}s",
                dir.display(),
                t.elapsed().as_secs_f64()
            );
        }
        Ok(dir.join("bin/python"))
    })
}

/// The interpreter to run the script with, or `None` when the test is skipped.
fn python_or_skip() -> Option<PathBuf> {
    if skipped() {
        eprintln!("skipped: {SKIP_VAR}=1");
        return None;
    }
    match venv_python() {
        Ok(p) => Some(p.clone()),
        Err(e) => panic!(
            "the Python interop test needs python3 (with venv) and PyPI to install \
             queen-mq=={CLIENT_VERSION}; set {SKIP_VAR}=1 to skip it.\n{e}"
        ),
    }
}

/// Runs the script against `server` and fails the test, with its output, unless it passes.
async fn run_script(python: &Path, server: &TestServer, engine: &str) {
    let started = Instant::now();
    let child = tokio::process::Command::new(python)
        .arg(script())
        .arg(server.url())
        // The script checks the client's default wire shape (autopilot on) and its
        // pinned version; keep the caller's environment from changing either.
        .env_remove("QUEEN_SDK_POP_AUTOPILOT")
        .env_remove("PYTHONPATH")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
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
