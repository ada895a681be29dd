//! The local-binary mechanics shared by [`LocalCluster`](crate::LocalCluster) (throwaway, for
//! tests) and [`PersistentCluster`](crate::PersistentCluster) (kept, for the embedded server):
//! `initdb`, starting `postgres` on a loopback port, waiting until it answers, stopping it.
//!
//! Why `postgres` directly and not `pg_ctl start`: pg_ctl daemonises the postmaster, so a test
//! binary that is killed leaves it running. Our `postgres` is a child tied to this process (see
//! [`crate::tied`]) and we do what pg_ctl would: wait for connections, then SIGINT to stop.
//!
//! Port races: when no port is fixed we ask the kernel for a free one, start, and if `postgres`
//! exits because someone took the port meanwhile, try again with another. Readiness is a real
//! connection that must land on *our* server (`SHOW data_directory`), not on another cluster that
//! won the port.

use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::bins::Bins;
use crate::error::{Error, Result};
use crate::user::RunAs;
use crate::{sql, tied, urls};

/// Settings for clusters whose data may be lost: no fsync, plenty of connections for parallel
/// tests.
pub(crate) const THROWAWAY: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "300"),
];

/// Settings for a throwaway cluster that still keeps what it commits: PostgreSQL's own
/// durability defaults (every commit flushed to disk), with the same connection room as
/// [`THROWAWAY`], so a benchmark measures what a production database pays.
pub(crate) const DURABLE: &[(&str, &str)] = &[
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
    ("max_connections", "300"),
];

/// How long `postgres` may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Attempts with a fresh port when another process takes ours first.
const PORT_ATTEMPTS: usize = 10;

/// Runs `initdb` for `data` (superuser `postgres`, trust auth, UTF8, C locale).
pub(crate) async fn initdb(
    bins: &Bins,
    who: Option<&RunAs>,
    data: &Path,
    sync: bool,
) -> Result<()> {
    let mut cmd = Command::new(bins.initdb());
    cmd.arg("-D")
        .arg(data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
        .current_dir(data.parent().unwrap_or(Path::new("/")))
        .stdin(Stdio::null());
    if !sync {
        cmd.arg("--no-sync");
    }
    if let Some(who) = who {
        who.apply(&mut cmd);
    }
    let out = tokio::process::Command::from(cmd)
        .output()
        .await
        .map_err(|e| Error::local(data.display(), format!("cannot run initdb: {e}")))?;
    if !out.status.success() {
        return Err(Error::local(
            data.display(),
            format!(
                "initdb failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    Ok(())
}

/// A running `postgres` that we started.
#[derive(Debug)]
pub(crate) struct Postmaster {
    child: Child,
    port: u16,
}

impl Postmaster {
    /// Starts `postgres` for `data` on `port` (0: any free port), appending its output to `log`,
    /// and returns once it accepts connections.
    pub(crate) async fn start(
        bins: &Bins,
        who: Option<&RunAs>,
        data: &Path,
        log: &Path,
        port: u16,
        settings: &[(&str, &str)],
    ) -> Result<Postmaster> {
        let attempts = if port == 0 { PORT_ATTEMPTS } else { 1 };
        let mut last = String::new();
        for _ in 0..attempts {
            let port = if port == 0 { free_port(data)? } else { port };
            match try_start(bins, who, data, log, port, settings).await {
                Ok(pm) => return Ok(pm),
                Err(Attempt::PortTaken(why)) => last = why,
                Err(Attempt::Failed(e)) => return Err(e),
            }
        }
        let reason = if port == 0 {
            format!("no free port after {attempts} attempts: {last}")
        } else {
            format!("port {port} is taken: {last}")
        };
        Err(Error::local(data.display(), reason))
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Fast shutdown (SIGINT), escalating to immediate (SIGQUIT) and SIGKILL if it hangs.
    pub(crate) fn stop(&mut self) -> std::io::Result<()> {
        for (signal, wait) in [
            (libc::SIGINT, Duration::from_secs(30)),
            (libc::SIGQUIT, Duration::from_secs(5)),
        ] {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
            let deadline = Instant::now() + wait;
            while Instant::now() < deadline {
                if self.child.try_wait()?.is_some() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.child.kill()?;
        self.child.wait().map(drop)
    }
}

impl Drop for Postmaster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

enum Attempt {
    PortTaken(String),
    Failed(Error),
}

fn free_port(data: &Path) -> Result<u16> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::local(data.display(), format!("cannot find a free port: {e}")))
}

async fn try_start(
    bins: &Bins,
    who: Option<&RunAs>,
    data: &Path,
    log: &Path,
    port: u16,
    settings: &[(&str, &str)],
) -> std::result::Result<Postmaster, Attempt> {
    let fail = |reason: String| Attempt::Failed(Error::local(data.display(), reason));
    let mut log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| fail(format!("cannot open log {}: {e}", log.display())))?;
    let log_start = log_file.seek(SeekFrom::End(0)).unwrap_or(0);

    let mut cmd = Command::new(bins.postgres());
    cmd.arg("-D")
        .arg(data)
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args(["-c", &format!("port={port}")])
        // TCP only: no socket files with path-length limits or permission trouble.
        .args(["-c", "unix_socket_directories="]);
    for (key, value) in settings {
        cmd.args(["-c", &format!("{key}={value}")]);
    }
    cmd.current_dir(data)
        .stdin(Stdio::null())
        .stdout(
            log_file
                .try_clone()
                .map_err(|e| fail(format!("log: {e}")))?,
        )
        .stderr(log_file);
    if let Some(who) = who {
        who.apply(&mut cmd);
    }
    let child = tied::spawn(cmd)
        .map_err(|e| fail(format!("cannot run {}: {e}", bins.postgres().display())))?;
    let mut pm = Postmaster { child, port };

    let url = urls::loopback(port);
    let ours = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_path_buf());
    let deadline = Instant::now() + START_LIMIT;
    loop {
        if let Ok(Some(status)) = pm.child.try_wait() {
            let text = log_since(log, log_start);
            let reason =
                format!("postgres exited ({status}) before accepting connections:\n{text}");
            return Err(if text.contains("Address already in use") {
                Attempt::PortTaken(reason)
            } else {
                fail(reason)
            });
        }
        if let Ok(mut conn) = sql::connect(&url).await {
            let dir: Option<(String,)> = sqlx::query_as("SHOW data_directory")
                .fetch_optional(&mut conn)
                .await
                .ok()
                .flatten();
            let _ = conn.close().await;
            if dir.is_some_and(|(d,)| Path::new(&d) == ours || Path::new(&d) == data) {
                return Ok(pm);
            }
            // Someone else's server holds the port; ours will exit with "Address already in use".
        }
        if Instant::now() >= deadline {
            let _ = pm.stop();
            return Err(fail(format!(
                "postgres did not accept connections on port {port} within {START_LIMIT:?}:\n{}",
                log_since(log, log_start)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The last lines the server wrote to `log` since `offset`.
fn log_since(log: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.seek(SeekFrom::Start(offset));
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
