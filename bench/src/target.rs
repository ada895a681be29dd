//! What the benchmark drives: a broker URL on loopback, or our own server started here
//! as a child process on a PostgreSQL cluster of its own (so its RSS can be read and the
//! database's own ceiling measured on the same cluster), durable unless asked otherwise;
//! started by the suite's launcher (`queen_conformance::launch`), as its fault scenarios
//! start theirs.

use queen_conformance::launch::{free_port, rss_mib, url, wait_healthy, Launch, ServerProgram};
use std::net::{IpAddr, ToSocketAddrs};
use std::process::Child;
use std::time::Duration;

/// A broker under test: one process, or several on one database (a cluster of
/// stateless brokers, which the client spreads its requests over).
pub struct Target {
    /// Every broker's URL; the client's workers spread over them.
    pub urls: Vec<String>,
    /// The brokers' database, when known (ours): ceiling and connection counts.
    pub database_url: Option<String>,
    /// The broker processes, when we started them: their RSS and CPU time.
    pub pids: Vec<u32>,
    children: Vec<Child>,
    /// The spool directories we gave the servers we started: removed with them.
    spools: Vec<std::path::PathBuf>,
    _cluster: Option<queen_pg::LocalCluster>,
}

impl Drop for Target {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for dir in &self.spools {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Refuses anything but loopback: a benchmark sends load only to this machine.
pub fn check_loopback(url: &str) -> Result<(), String> {
    let u = url::Url::parse(url).map_err(|e| format!("bad --target {url}: {e}"))?;
    let port = u.port_or_known_default().unwrap_or(80);
    let addrs: Vec<IpAddr> = match u.host().ok_or("--target has no host")? {
        url::Host::Ipv4(ip) => vec![IpAddr::V4(ip)],
        url::Host::Ipv6(ip) => vec![IpAddr::V6(ip)],
        url::Host::Domain(host) => (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .map(|a| a.ip())
            .collect(),
    };
    if addrs.is_empty() || !addrs.iter().all(|a| a.is_loopback()) {
        return Err(format!(
            "--target {url} is not a loopback address; queen-bench only loads this machine"
        ));
    }
    Ok(())
}

impl Target {
    /// Brokers already running: `urls` is comma-separated (several brokers of one
    /// deployment, spread over as ours are).
    pub fn external(urls: &str, database_url: Option<String>) -> Result<Target, String> {
        let urls: Vec<String> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        if urls.is_empty() {
            return Err("--target names no URL".into());
        }
        for u in &urls {
            check_loopback(u)?;
        }
        Ok(Target {
            urls,
            database_url,
            pids: vec![],
            children: vec![],
            spools: vec![],
            _cluster: None,
        })
    }

    /// Starts a cluster of the given durability and `brokers` `queen-server` processes
    /// (the binary next to this one) on it, each with `pool_size` connections; all are
    /// removed when the target is dropped.
    pub async fn ours(
        pool_size: u32,
        durability: queen_pg::Durability,
        brokers: usize,
    ) -> Result<Target, String> {
        let cluster = queen_pg::LocalCluster::start_with(durability)
            .await
            .map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let server = exe.with_file_name("queen-server");
        if !server.is_file() {
            return Err(format!(
                "{} not found: build it first (cargo build --release -p queen-server)",
                server.display()
            ));
        }
        // Built before the servers start, so that one that never becomes healthy is still
        // killed and its spool removed when this returns an error.
        let mut target = Target {
            urls: vec![],
            database_url: Some(cluster.url().to_string()),
            pids: vec![],
            children: vec![],
            spools: vec![],
            _cluster: None,
        };
        let program = ServerProgram::binary(server);
        for b in 0..brokers.max(1) {
            let port = free_port()?;
            let spool =
                std::env::temp_dir().join(format!("queen-bench-spool-{}-{b}", std::process::id()));
            target.spools.push(spool.clone());
            let child = program.spawn(&Launch {
                port,
                database_url: cluster.url().to_string(),
                spool_dir: spool,
                pool_size,
                rust_log: "warn".into(),
                env: vec![],
                log: None,
                dir: None,
            })?;
            target.pids.push(child.id());
            target.children.push(child);
            target.urls.push(url(port));
        }
        target._cluster = Some(cluster);
        let client = reqwest::Client::new();
        for (url, child) in target.urls.iter().zip(&mut target.children) {
            wait_healthy(&client, url, Some(child), Duration::from_secs(60)).await?;
        }
        Ok(target)
    }

    /// What the database promises about a commit, read from it (when its URL is known):
    /// every report carries it, so no figure is mistaken for a durable one.
    pub async fn database(&self) -> Database {
        let Some(url) = &self.database_url else {
            return Database::default();
        };
        let read = async {
            let pool = sqlx::PgPool::connect(url).await?;
            let mut settings = serde_json::Map::new();
            for name in SETTINGS {
                let v: String = sqlx::query_scalar("SELECT current_setting($1)")
                    .bind(name)
                    .fetch_one(&pool)
                    .await?;
                settings.insert((*name).into(), v.into());
            }
            pool.close().await;
            Ok::<_, sqlx::Error>(settings)
        };
        match read.await {
            Ok(settings) => {
                let on = |k: &str| settings.get(k).and_then(|v| v.as_str()) != Some("off");
                let durable = on("fsync") && on("synchronous_commit") && on("full_page_writes");
                Database {
                    durability: if durable { "durable" } else { "throwaway" }.into(),
                    settings: settings.into(),
                }
            }
            Err(e) => Database {
                durability: format!("unknown ({e})"),
                settings: serde_json::Value::Null,
            },
        }
    }

    /// CPU time the broker processes have used so far (seconds), when we know them.
    pub fn cpu_s(&self) -> Option<f64> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids
            .iter()
            .map(|p| crate::machine::process_cpu(*p))
            .sum()
    }

    /// Resident memory of the broker processes in MiB (summed), when we know them.
    pub fn rss_mib(&self) -> Option<f64> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids.iter().map(|p| rss_mib(*p)).sum()
    }
}

/// The settings that decide what a commit costs and promises.
const SETTINGS: &[&str] = &[
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "commit_delay",
    "shared_buffers",
];

/// The database a run measured, as reports print it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Database {
    /// `durable` (fsync, synchronous commit and full-page writes on), `throwaway`, or
    /// `unknown` when the bench does not know the broker's database.
    pub durability: String,
    pub settings: serde_json::Value,
}

impl Default for Database {
    fn default() -> Self {
        Database {
            durability: "unknown (no --database-url)".into(),
            settings: serde_json::Value::Null,
        }
    }
}

impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.durability)?;
        if let Some(m) = self.settings.as_object() {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(check_loopback("http://127.0.0.1:6632").is_ok());
        assert!(check_loopback("http://localhost:6632").is_ok());
        assert!(check_loopback("http://[::1]:6632").is_ok());
        assert!(check_loopback("http://10.0.0.1:6632").is_err());
        assert!(check_loopback("http://192.168.1.5").is_err());
    }
}
