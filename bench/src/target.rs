//! What the benchmark drives: a broker URL on loopback, or our own server started here
//! as a child process on a PostgreSQL cluster of its own (so its RSS can be read and the
//! database's own ceiling measured on the same cluster), durable unless asked otherwise.

use std::net::{IpAddr, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A broker under test.
pub struct Target {
    pub url: String,
    /// The broker's database, when known (our server): ceiling and connection counts.
    pub database_url: Option<String>,
    /// The broker process, when we started it: its RSS.
    pub pid: Option<u32>,
    child: Option<Child>,
    /// The spool directory we gave the server we started: removed with it.
    spool: Option<std::path::PathBuf>,
    _cluster: Option<queen_pg::LocalCluster>,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.spool {
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
    pub fn external(url: &str, database_url: Option<String>) -> Result<Target, String> {
        check_loopback(url)?;
        Ok(Target {
            url: url.to_string(),
            database_url,
            pid: None,
            child: None,
            spool: None,
            _cluster: None,
        })
    }

    /// Starts a cluster of the given durability and `queen-server` (the binary next to
    /// this one) on it; both are removed when the target is dropped.
    pub async fn ours(pool_size: u32, durability: queen_pg::Durability) -> Result<Target, String> {
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let spool = std::env::temp_dir().join(format!("queen-bench-spool-{}", std::process::id()));
        let child = Command::new(&server)
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .env("DATABASE_URL", cluster.url())
            .env("DB_POOL_SIZE", pool_size.to_string())
            .env("SPOOL_DIR", &spool)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        // Built before the health wait, so that a server that never becomes healthy is
        // still killed and its spool removed when this returns an error.
        let target = Target {
            url: url.clone(),
            database_url: Some(cluster.url().to_string()),
            pid: Some(child.id()),
            child: Some(child),
            spool: Some(spool),
            _cluster: Some(cluster),
        };
        let client = reqwest::Client::new();
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = client.get(format!("{url}/health")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            if Instant::now() > until {
                return Err("queen-server did not become healthy within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
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

    /// Resident memory of the broker process in MiB, when we know its pid.
    pub fn rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid?)).ok()?;
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb / 1024.0)
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
