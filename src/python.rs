//! A virtualenv with the pinned Python packages some tests drive: the official client
//! `queen-mq` (interop), `xmlschema` (the JUnit report checked against the schema CI
//! systems use) and `openapi-spec-validator` (the OpenAPI document checked against the
//! OpenAPI 3.1 specification). It is built once per set of pins under cargo's target tmp dir and
//! reused (a fresh clone builds it on the first run). `python3` (or `$QUEEN_PYTHON`) and
//! PyPI are required: without them a test fails with an explanation, unless
//! `QUEEN_SKIP_PYTHON_INTEROP=1` is set, in which case it prints "skipped" and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

/// The pinned client release the interop script is written against.
pub const CLIENT_VERSION: &str = "2.6.0";
/// Every package the virtualenv holds, pinned.
const PINS: [&str; 4] = [
    "queen-mq==2.6.0",
    "xmlschema==4.3.2",
    "elementpath==5.1.4",
    "openapi-spec-validator==0.9.0",
];
/// Set to 1 to skip the tests that need Python and PyPI.
pub const SKIP_VAR: &str = "QUEEN_SKIP_PYTHON_INTEROP";

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

/// Whether the virtualenv at `dir` has a working interpreter with the pinned packages.
fn venv_ok(dir: &Path) -> bool {
    let python = dir.join("bin/python");
    python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import queen, xmlschema, openapi_spec_validator, sys; \
                 sys.exit(queen.__version__ != sys.argv[1])",
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
                .args(PINS)
                .env("PIP_NO_COLOR", "1"),
            &format!("`pip install {}` (is PyPI reachable?)", PINS.join(" ")),
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
            "the virtualenv at {} does not import the pinned packages",
            dir.display()
        ))
    }
}

/// The virtualenv's interpreter, built under `tmp` (a test's `CARGO_TARGET_TMPDIR`) on
/// first use, once per process.
fn venv_python(tmp: &Path) -> &'static Result<PathBuf, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(|| {
        let dir = tmp
            .join("python-interop")
            .join(format!("venv-{}", PINS.join("-").replace("==", "-")));
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

/// The interpreter to run a script with, or `None` when these tests are skipped.
pub fn python_or_skip(tmp: &Path) -> Option<PathBuf> {
    if skipped() {
        eprintln!("skipped: {SKIP_VAR}=1");
        return None;
    }
    match venv_python(tmp) {
        Ok(p) => Some(p.clone()),
        Err(e) => panic!(
            "this test needs python3 (with venv) and PyPI to install {}; set {SKIP_VAR}=1 \
             to skip it.\n{e}",
            PINS.join(" ")
        ),
    }
}

/// The interop script (`tests/python/interop.py`) run by `python` against `url`, its
/// output piped: the client's default wire shape (autopilot on) and its pinned version,
/// whatever the caller's environment says.
pub fn interop_command(python: &Path, url: &str) -> tokio::process::Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/interop.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script)
        .arg(url)
        .env_remove("QUEEN_SDK_POP_AUTOPILOT")
        .env_remove("PYTHONPATH")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}
