//! A deployment the harness owns, so faults can be injected into it: a PostgreSQL
//! cluster in a temporary directory ([`queen_pg::PersistentCluster`], local binaries)
//! and one or more `queen-server` processes on it, all on loopback ports, sharing one
//! spool directory (each process owns one spool file and adopts the files of dead
//! processes at start, PUSH-7).
//!
//! Faults are plain signals: SIGSTOP/SIGCONT on every process of the cluster (the
//! postmaster first, so it forks no new backend meanwhile), SIGKILL on all of them and a
//! restart on the same data directory and port (crash recovery), SIGKILL on a server
//! process and a restart on the same port and spool directory.
//!
//! The server program is `QUEEN_SERVER_BIN` when set (any build of `queen-server`),
//! else this executable's hidden `serve` subcommand, which runs the same library code
//! as `queen-server` (see [`crate::faults::serve`]); tests pass
//! `env!("CARGO_BIN_EXE_queen-conformance")`, which cargo builds fresh for them.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use super::proxy::Proxy;

pub use crate::launch::ServerProgram;
use crate::launch::{free_port, Launch};

/// One `queen-server` process of the deployment.
struct Server {
    port: u16,
    child: Option<Child>,
    /// Times this process was started (1 + restarts).
    starts: u32,
}

/// What a deployment holds besides its servers' program.
#[derive(Clone, Debug)]
pub struct Layout {
    /// queen-server processes on the one database.
    pub servers: usize,
    /// `DB_POOL_SIZE` of each server.
    pub pool_size: u32,
    /// Extra environment of every server process (a scenario's limits).
    pub env: Vec<(String, String)>,
    /// A streaming standby beside the primary, and whether commits wait for it; the
    /// servers then get both hosts in one `DATABASE_URL` (`target_session_attrs=
    /// read-write`) and must follow a promotion.
    pub standby: Option<queen_pg::Replication>,
    /// Each server reaches PostgreSQL through a [`Proxy`] of its own, which
    /// [`Deployment::cut`] cuts.
    pub(crate) proxies: bool,
}

impl Layout {
    /// `servers` servers on one plain cluster.
    pub fn plain(servers: usize, pool_size: u32) -> Layout {
        Layout {
            servers,
            pool_size,
            env: vec![],
            standby: None,
            proxies: false,
        }
    }
}

/// The cluster, the server processes, and their directory (removed on drop).
pub struct Deployment {
    dir: PathBuf,
    pg_port: u16,
    cluster: Option<queen_pg::PersistentCluster>,
    /// The streaming standby, until it is promoted (it then becomes `cluster`).
    standby: Option<queen_pg::PersistentCluster>,
    /// The standby's stream from the primary, through a proxy that can be cut.
    replication: Option<Proxy>,
    /// The ports the servers' `DATABASE_URL` names, in order (primary, standby).
    db_ports: Vec<u16>,
    /// One per server when the layout asks for proxies.
    proxies: Vec<Proxy>,
    servers: Vec<Server>,
    program: ServerProgram,
    pool_size: u32,
    /// Extra environment of every server process (a scenario's limits).
    env: Vec<(String, String)>,
    http: reqwest::Client,
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, sig) };
}

/// Processes whose parent is `pid` (from /proc).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // "pid (comm) state ppid ...": comm may hold spaces; skip past ')'.
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// The postmaster's pid, from its data directory.
fn postmaster_pid(dir: &Path) -> Result<i32, String> {
    let text = std::fs::read_to_string(dir.join("postmaster.pid"))
        .map_err(|e| format!("postmaster.pid: {e}"))?;
    text.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| "postmaster.pid has no pid".to_string())
}

/// SIGSTOPs postmaster `pm`, then every process it started; returns them all.
fn pause_tree(pm: i32) -> Result<Vec<i32>, String> {
    signal(pm, libc::SIGSTOP);
    let mut all = vec![pm];
    // Stopped, the postmaster forks nothing more; a second pass catches a fork that
    // was under way.
    for _ in 0..2 {
        for c in children_of(pm) {
            if !all.contains(&c) {
                signal(c, libc::SIGSTOP);
                all.push(c);
            }
        }
    }
    Ok(all)
}

/// Whether `pid` is gone or a zombie.
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st == "Z"))
            .unwrap_or(true),
    }
}

impl Deployment {
    /// Starts a fresh cluster and `servers` server processes on it; returns once every
    /// process answers `/health` with 200.
    pub async fn start(
        program: ServerProgram,
        servers: usize,
        pool_size: u32,
    ) -> Result<Deployment, String> {
        Deployment::start_with(program, servers, pool_size, vec![]).await
    }

    /// [`Deployment::start`] with `env` added to every server process's environment.
    pub async fn start_with(
        program: ServerProgram,
        servers: usize,
        pool_size: u32,
        env: Vec<(String, String)>,
    ) -> Result<Deployment, String> {
        let mut layout = Layout::plain(servers, pool_size);
        layout.env = env;
        Deployment::start_layout(program, layout).await
    }

    /// Starts the cluster (and its standby, and the proxies) that `layout` asks for,
    /// then its servers; returns once every server answers `/health` with 200.
    pub async fn start_layout(
        program: ServerProgram,
        layout: Layout,
    ) -> Result<Deployment, String> {
        let Layout {
            servers,
            pool_size,
            env,
            ..
        } = layout.clone();
        let dir = std::env::temp_dir().join(format!(
            "queen-faults-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        std::fs::create_dir_all(dir.join("spool"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let cluster = queen_pg::PersistentCluster::start(dir.join("pg"), 0)
            .await
            .map_err(|e| format!("cannot start PostgreSQL: {e}"))?;
        let (standby, replication) = match layout.standby {
            Some(r) => {
                let link = Proxy::start(cluster.port()).await?;
                let s = cluster
                    .start_standby_through(dir.join("standby"), 0, r, link.port())
                    .await
                    .map_err(|e| format!("cannot start the standby: {e}"))?;
                (Some(s), Some(link))
            }
            None => (None, None),
        };
        let mut db_ports = vec![cluster.port()];
        db_ports.extend(standby.as_ref().map(|s| s.port()));
        let mut proxies = Vec::new();
        if layout.proxies {
            for _ in 0..servers.max(1) {
                proxies.push(Proxy::start(cluster.port()).await?);
            }
        }
        let mut d = Deployment {
            dir,
            pg_port: cluster.port(),
            cluster: Some(cluster),
            standby,
            replication,
            db_ports,
            proxies,
            servers: Vec::new(),
            program,
            pool_size,
            env,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .map_err(|e| e.to_string())?,
        };
        for _ in 0..servers.max(1) {
            let port = free_port()?;
            d.servers.push(Server {
                port,
                child: None,
                starts: 0,
            });
        }
        for i in 0..d.servers.len() {
            d.spawn_server(i)?;
        }
        for i in 0..d.servers.len() {
            d.first_start(i).await?;
        }
        Ok(d)
    }

    /// Waits for server `i`'s first start. A free port is only free when it is picked:
    /// another process may take it before the server binds it, and the server then
    /// exits at once. Such a start is retried on a new port (at most twice), so a
    /// scenario is never failed by a port race; restarts keep their port.
    async fn first_start(&mut self, i: usize) -> Result<(), String> {
        for attempt in 0.. {
            let err = match self.wait_healthy(i, Duration::from_secs(60)).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let exited = self.servers[i]
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
            if !exited || attempt == 2 {
                return Err(err);
            }
            self.servers[i].port = free_port()?;
            self.servers[i].starts -= 1;
            self.spawn_server(i)?;
        }
        unreachable!("the loop returns")
    }

    /// Every server's base URL, in order.
    pub fn urls(&self) -> Vec<String> {
        (0..self.servers.len()).map(|i| self.url(i)).collect()
    }

    /// The base URL of server `i`.
    pub fn url(&self, i: usize) -> String {
        crate::launch::url(self.port(i))
    }

    /// The port server `i` listens on.
    pub fn port(&self, i: usize) -> u16 {
        self.servers[i].port
    }

    /// How many server processes the deployment has.
    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    /// Times server `i` was started.
    pub fn starts(&self, i: usize) -> u32 {
        self.servers[i].starts
    }

    /// The directory holding the cluster, the spool and the server logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn spawn_server(&mut self, i: usize) -> Result<(), String> {
        let launch = Launch {
            port: self.servers[i].port,
            database_url: self.database_url(i),
            spool_dir: self.dir.join("spool"),
            pool_size: self.pool_size,
            rust_log: std::env::var("QUEEN_FAULTS_LOG").unwrap_or_else(|_| "info,sqlx=warn".into()),
            env: self.env.clone(),
            log: Some(self.dir.join(format!("server-{i}.log"))),
            dir: Some(self.dir.clone()),
        };
        self.servers[i].child = Some(self.program.spawn(&launch)?);
        self.servers[i].starts += 1;
        Ok(())
    }

    /// The `DATABASE_URL` of server `i`: its proxy, or every host of the cluster.
    fn database_url(&self, i: usize) -> String {
        if let Some(p) = self.proxies.get(i) {
            return format!("postgres://postgres@127.0.0.1:{}/postgres", p.port());
        }
        let hosts: Vec<String> = self
            .db_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let attrs = if hosts.len() > 1 {
            "?target_session_attrs=read-write"
        } else {
            ""
        };
        format!("postgres://postgres@{}/postgres{attrs}", hosts.join(","))
    }

    /// Every server's `DATABASE_URL`, deduplicated.
    pub(crate) fn database_urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = (0..self.servers.len())
            .map(|i| self.database_url(i))
            .collect();
        urls.dedup();
        urls
    }

    /// Cuts server `i` off the database (its proxy resets and refuses connections):
    /// the connections reset.
    pub fn cut(&self, i: usize) -> Result<usize, String> {
        let p = self
            .proxies
            .get(i)
            .ok_or("this deployment has no proxies")?;
        Ok(p.cut())
    }

    /// Lets server `i` reach the database again.
    pub(crate) fn heal(&self, i: usize) {
        if let Some(p) = self.proxies.get(i) {
            p.heal();
        }
    }

    /// Cuts the standby's stream from the primary, so it falls behind: the
    /// connections reset.
    pub(crate) fn cut_replication(&self) -> Result<usize, String> {
        let link = self
            .replication
            .as_ref()
            .ok_or("this deployment has no standby")?;
        Ok(link.cut())
    }

    /// Promotes the standby; it becomes the deployment's cluster.
    pub(crate) async fn promote_standby(&mut self) -> Result<(), String> {
        let s = self
            .standby
            .take()
            .ok_or("this deployment has no standby")?;
        s.promote()
            .await
            .map_err(|e| format!("promotion failed: {e}"))?;
        self.pg_port = s.port();
        self.cluster = Some(s);
        Ok(())
    }

    /// Whether server `i` runs (a server killed for good does not).
    pub fn running(&self, i: usize) -> bool {
        self.servers[i].child.is_some()
    }

    /// Waits until server `i` answers `/health` with 200 (its database reachable).
    pub(crate) async fn wait_healthy(&mut self, i: usize, within: Duration) -> Result<(), String> {
        let url = self.url(i);
        let log = self.dir.join(format!("server-{i}.log"));
        let child = self.servers[i].child.as_mut();
        crate::launch::wait_healthy(&self.http, &url, child, within)
            .await
            .map_err(|e| format!("server {i}: {e}; see {}", log.display()))
    }

    /// Items server `i` still holds in its spool (`bufferedMessages`), if it answers.
    pub async fn buffered(&self, i: usize) -> Option<u64> {
        let r = self
            .http
            .get(format!("{}/api/v1/system/maintenance", self.url(i)))
            .send()
            .await
            .ok()?;
        let v: serde_json::Value = r.json().await.ok()?;
        v["bufferedMessages"].as_u64()
    }

    /// Items in server `i`'s spool as its `/health` reports them (HEALTH-2), which it
    /// answers with its database gone too.
    pub async fn spooled(&self, i: usize) -> Option<u64> {
        let r = self
            .http
            .get(format!("{}/health", self.url(i)))
            .send()
            .await
            .ok()?;
        let v: serde_json::Value = r.json().await.ok()?;
        v["spool"]["items"].as_u64()
    }

    /// Waits until every server is healthy and has replayed its spool.
    pub async fn settle(&mut self, within: Duration) -> Result<(), String> {
        let until = Instant::now() + within;
        for i in 0..self.servers.len() {
            if !self.running(i) {
                continue;
            }
            self.wait_healthy(i, until.saturating_duration_since(Instant::now()))
                .await?;
            loop {
                match self.buffered(i).await {
                    Some(0) => break,
                    left => {
                        if Instant::now() >= until {
                            return Err(format!(
                                "server {i} still holds {left:?} spooled items after {within:?}"
                            ));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// SIGSTOPs the postmaster, then every process it started; returns them all.
    pub(crate) fn pause_pg(&self) -> Result<Vec<i32>, String> {
        let c = self.cluster.as_ref().ok_or("PostgreSQL is not running")?;
        pause_tree(postmaster_pid(c.data_dir())?)
    }

    /// SIGCONTs what [`Deployment::pause_pg`] stopped (children first).
    pub(crate) fn resume_pg(&self, pids: &[i32]) {
        for &p in pids.iter().rev() {
            signal(p, libc::SIGCONT);
        }
    }

    /// SIGKILLs the postmaster and every backend (no shutdown, no checkpoint).
    pub(crate) async fn kill_pg(&mut self) -> Result<usize, String> {
        let pids = self.pause_pg()?;
        for &p in &pids {
            signal(p, libc::SIGKILL);
        }
        let until = Instant::now() + Duration::from_secs(10);
        while pids.iter().any(|&p| !dead(p)) {
            if Instant::now() >= until {
                return Err("PostgreSQL processes survived SIGKILL for 10 s".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Reaps the postmaster (our child); its stop finds it already dead.
        drop(self.cluster.take());
        Ok(pids.len())
    }

    /// Starts the cluster again on the same data directory and port (crash recovery).
    pub(crate) async fn restart_pg(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match queen_pg::PersistentCluster::start(self.dir.join("pg"), self.pg_port).await {
                Ok(c) => {
                    self.cluster = Some(c);
                    return Ok(());
                }
                // The port may linger a moment after the kill.
                Err(e) if started.elapsed() < Duration::from_secs(20) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(format!("PostgreSQL does not restart: {e}")),
            }
        }
    }

    /// SIGKILLs server `i` and reaps it.
    pub(crate) fn kill_server(&mut self, i: usize) -> Result<(), String> {
        let mut c = self.servers[i]
            .child
            .take()
            .ok_or_else(|| format!("server {i} is not running"))?;
        signal(c.id() as i32, libc::SIGKILL);
        c.wait().map_err(|e| format!("reaping server {i}: {e}"))?;
        Ok(())
    }

    /// SIGTERMs server `i` and waits up to `within` for it to exit: how long it took
    /// (`None`: still running, then SIGKILLed).
    pub(crate) async fn terminate_server(
        &mut self,
        i: usize,
        within: Duration,
    ) -> Option<Duration> {
        let mut c = self.servers[i].child.take()?;
        let t = Instant::now();
        signal(c.id() as i32, libc::SIGTERM);
        while t.elapsed() < within {
            if let Ok(Some(_)) = c.try_wait() {
                return Some(t.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// Server `i`'s resident memory in MiB (from /proc), if it runs.
    pub fn server_rss_mib(&self, i: usize) -> Option<f64> {
        crate::launch::rss_mib(self.servers[i].child.as_ref()?.id())
    }

    /// Starts server `i` again (same port, same spool directory) and waits for health.
    pub(crate) async fn restart_server(&mut self, i: usize) -> Result<(), String> {
        self.spawn_server(i)?;
        self.wait_healthy(i, Duration::from_secs(60)).await
    }

    /// The last lines of server `i`'s log.
    pub(crate) fn server_log_tail(&self, i: usize, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("server-{i}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Lines of every server log that contain `needle`.
    pub(crate) fn server_log_count(&self, needle: &str) -> usize {
        (0..self.servers.len())
            .map(|i| {
                std::fs::read_to_string(self.dir.join(format!("server-{i}.log")))
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(needle))
                    .count()
            })
            .sum()
    }

    /// Stops the servers (SIGTERM, then SIGKILL after 10 s) and the cluster.
    pub async fn stop(mut self) {
        self.stop_all().await;
    }

    async fn stop_all(&mut self) {
        for s in &mut self.servers {
            if let Some(mut c) = s.child.take() {
                signal(c.id() as i32, libc::SIGTERM);
                let until = Instant::now() + Duration::from_secs(10);
                while Instant::now() < until {
                    if let Ok(Some(_)) = c.try_wait() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        drop(self.cluster.take());
        drop(self.standby.take());
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for s in &mut self.servers {
            if let Some(mut c) = s.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        drop(self.cluster.take());
        drop(self.standby.take());
        if std::env::var_os("QUEEN_FAULTS_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
