//! Starting `queen-server` processes and waiting for them to serve: the one launcher the
//! fault scenarios' deployments and the benchmark's own target share, so both start a
//! server the same way (loopback, the same environment, gone with the process that
//! started it) and read its memory the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to start one server process: a program and its leading arguments.
#[derive(Clone, Debug)]
pub struct ServerProgram {
    /// The executable.
    pub program: PathBuf,
    /// Arguments put before the server's own.
    pub args: Vec<String>,
}

impl ServerProgram {
    /// `QUEEN_SERVER_BIN`, else `exe serve` (`exe`: a `queen-conformance` binary).
    pub fn locate(exe: &Path) -> ServerProgram {
        match std::env::var_os("QUEEN_SERVER_BIN") {
            Some(p) if !p.is_empty() => ServerProgram::binary(PathBuf::from(p)),
            _ => ServerProgram {
                program: exe.to_path_buf(),
                args: vec!["serve".into()],
            },
        }
    }

    /// A `queen-server` binary, run as it is.
    pub fn binary(program: PathBuf) -> ServerProgram {
        ServerProgram {
            program,
            args: vec![],
        }
    }

    /// For the command line: relative to the running `queen-conformance`.
    pub(crate) fn for_this_executable() -> Result<ServerProgram, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        Ok(ServerProgram::locate(&exe))
    }

    /// The command line, as printed in a scenario's summary.
    pub fn describe(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }

    /// Starts one server as `launch` says. It dies with this process, so a test that
    /// panics or a benchmark that is interrupted leaves no server behind.
    pub fn spawn(&self, launch: &Launch) -> Result<Child, String> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env("HOST", "127.0.0.1")
            .env("PORT", launch.port.to_string())
            .env("DATABASE_URL", &launch.database_url)
            .env("SPOOL_DIR", &launch.spool_dir)
            .env("DB_POOL_SIZE", launch.pool_size.to_string())
            .env("RUST_LOG", &launch.rust_log)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        if let Some(dir) = &launch.dir {
            cmd.current_dir(dir);
        }
        match &launch.log {
            Some(path) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("server log {}: {e}", path.display()))?;
                cmd.stdout(log.try_clone().map_err(|e| e.to_string())?)
                    .stderr(log);
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
            }
        }
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        cmd.spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.describe()))
    }
}

/// What one server process is started with.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Its loopback port.
    pub port: u16,
    /// Its `DATABASE_URL`.
    pub database_url: String,
    /// Its spool directory (`SPOOL_DIR`).
    pub spool_dir: PathBuf,
    /// Its database connections (`DB_POOL_SIZE`).
    pub pool_size: u32,
    /// Its `RUST_LOG`.
    pub rust_log: String,
    /// More environment (a scenario's limits).
    pub env: Vec<(String, String)>,
    /// Where its output goes: appended to this file, or (none) its errors to ours.
    pub log: Option<PathBuf>,
    /// Its working directory; none: ours.
    pub dir: Option<PathBuf>,
}

/// The URL of a server on loopback port `port`.
pub fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// A free loopback port.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Waits until the server at `url` answers `/health` with 200 (its database reachable),
/// for at most `within`; fails early when `child`, the server's process, exits.
pub async fn wait_healthy(
    http: &reqwest::Client,
    url: &str,
    mut child: Option<&mut Child>,
    within: Duration,
) -> Result<(), String> {
    let until = Instant::now() + within;
    let health = format!("{url}/health");
    loop {
        if let Ok(r) = http.get(&health).send().await {
            if r.status().as_u16() == 200 {
                return Ok(());
            }
        }
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!("the server at {url} exited ({status})"));
            }
        }
        if Instant::now() >= until {
            return Err(format!(
                "the server at {url} did not become healthy within {within:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Resident memory of process `pid` in MiB (from /proc), while it runs.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}
