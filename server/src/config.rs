//! Configuration from flags and environment variables.
//!
//! Every setting has a flag and an environment variable; the names of the variables are
//! the ones PROTOCOL.md and the seeds use (`PORT`, `DATABASE_URL`, `DEFAULT_TIMEOUT`,
//! `POP_DEFAULT_TIMEOUT_MS`, `POP_WAIT_*`), so a deployment of the original broker can
//! keep its environment.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Which engine answers the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// PostgreSQL (`DATABASE_URL`, or the embedded cluster).
    Pg,
    /// The reference model in memory, with the system clock: nothing is persisted.
    Memory,
}

#[derive(Clone, Debug, Parser)]
#[command(
    name = "queen-server",
    version,
    about = "A Queen-compatible message broker on PostgreSQL"
)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "HOST", default_value = "0.0.0.0")]
    pub host: String,
    /// Port to listen on.
    #[arg(long, env = "PORT", default_value_t = 6632)]
    pub port: u16,
    /// PostgreSQL to use; without it an embedded cluster is started in --data-dir.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Where the embedded PostgreSQL cluster keeps its data (survives restarts).
    #[arg(long, env = "QUEEN_DATA_DIR", default_value = ".queen/postgres")]
    pub data_dir: PathBuf,
    /// Port of the embedded PostgreSQL cluster (0: pick a free one).
    #[arg(long, env = "QUEEN_EMBEDDED_PG_PORT", default_value_t = 0)]
    pub embedded_pg_port: u16,
    /// The engine behind the routes.
    #[arg(long, value_enum, env = "QUEEN_ENGINE", default_value = "pg")]
    pub engine: EngineKind,
    /// Database connections the broker opens: its pool and its one LISTEN connection.
    #[arg(long, env = "DB_POOL_SIZE", default_value_t = 10)]
    pub pool_size: u32,
    /// Group-commit writers for pushes (each holds a pool connection while writing);
    /// default: half the pool.
    #[arg(long, env = "PUSH_WRITERS")]
    pub push_writers: Option<usize>,
    /// The most items one group-commit write takes (see `pg/writers.rs`).
    #[arg(long, env = "PUSH_BATCH_ITEMS", default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    pub push_batch_items: u32,
    /// Largest request body in bytes (413 above).
    #[arg(long, env = "BODY_LIMIT", default_value_t = 16 * 1024 * 1024)]
    pub body_limit: usize,
    /// Directory of the push spool (PUSH-7).
    #[arg(long, env = "SPOOL_DIR", default_value = ".queen/spool")]
    pub spool_dir: PathBuf,
    /// LIMIT-1: the most items one request carries (push items, batch acks, a
    /// transaction's operations with each pushed item counted); 413 above.
    #[arg(long, env = "MAX_ITEMS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_items: u64,
    /// CONN-1: how long a connection may take to deliver a request's head, in ms. The
    /// clock starts when the connection begins waiting for a head, so on a kept-alive
    /// connection this is also how long it may sit idle between requests.
    #[arg(long, env = "HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: u64,
    /// CONN-1: how long a request's body may take to arrive once its head has (408 after).
    #[arg(long, env = "BODY_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: u64,
    /// CONN-1: connections served at once; more are answered 503 and closed. Each parked
    /// long poll holds one.
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = 16_384, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// STOP-1: how long in-flight requests may take to finish after SIGTERM, in ms.
    #[arg(long, env = "SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
    /// PUSH-10: the most bytes the spool holds; a push past it is answered 503.
    #[arg(long, env = "SPOOL_MAX_BYTES", default_value_t = 1 << 30)]
    pub spool_max_bytes: u64,
    /// PUSH-10: the most bytes one replay transaction writes (a larger push goes alone).
    #[arg(long, env = "SPOOL_CHUNK_BYTES", default_value_t = 8 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub spool_chunk_bytes: u64,
    /// PUSH-10: the most items one replay transaction writes.
    #[arg(long, env = "SPOOL_CHUNK_ITEMS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    pub spool_chunk_items: u64,
    /// Default long-poll timeout in ms; wins over POP_DEFAULT_TIMEOUT_MS.
    #[arg(long, env = "DEFAULT_TIMEOUT")]
    pub default_timeout: Option<u64>,
    /// Default long-poll timeout in ms when DEFAULT_TIMEOUT is unset.
    #[arg(long, env = "POP_DEFAULT_TIMEOUT_MS")]
    pub pop_default_timeout_ms: Option<u64>,
    /// First re-check interval of a parked pop (POP-11).
    #[arg(long, env = "POP_WAIT_INITIAL_INTERVAL_MS", default_value_t = 100)]
    pub pop_wait_initial_interval_ms: u64,
    /// Empty re-checks before the interval grows.
    #[arg(long, env = "POP_WAIT_BACKOFF_THRESHOLD", default_value_t = 3)]
    pub pop_wait_backoff_threshold: u32,
    /// Growth factor of the re-check interval.
    #[arg(long, env = "POP_WAIT_BACKOFF_MULTIPLIER", default_value_t = 2.0)]
    pub pop_wait_backoff_multiplier: f64,
    /// Largest re-check interval.
    #[arg(long, env = "POP_WAIT_MAX_INTERVAL_MS", default_value_t = 1000)]
    pub pop_wait_max_interval_ms: u64,
    /// ENC-3: the AES-256-GCM key (64 hex digits) that seals the payloads of queues with
    /// `encryptionEnabled`; without it such queues are refused (ENC-2).
    #[arg(long, env = "QUEEN_ENCRYPTION_KEY", hide_env_values = true)]
    pub encryption_key: Option<String>,
    /// RET-3: how often the retention job removes what retention allows (milliseconds).
    #[arg(long, env = "RETENTION_INTERVAL_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub retention_interval_ms: u64,
    /// The most messages one retention round removes from one partition.
    #[arg(long, env = "RETENTION_BATCH", default_value_t = 10_000, value_parser = clap::value_parser!(i64).range(1..))]
    pub retention_batch: i64,
    /// MGMT-10: how many queues, and how many (group, queue) pairs, get series of their
    /// own at `/metrics/prometheus` (the deepest and the most lagging), so the label
    /// sets stay bounded whatever the number of queues.
    #[arg(long, env = "METRICS_TOP", default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub metrics_top: u32,
    /// Authentication and roles (section 14, AUTH-5).
    #[command(flatten)]
    pub auth: crate::auth::AuthConfig,
}

impl Config {
    /// The pop `timeout` default: `DEFAULT_TIMEOUT`, else `POP_DEFAULT_TIMEOUT_MS`, else 30000.
    pub fn pop_timeout_ms(&self) -> u64 {
        self.default_timeout
            .or(self.pop_default_timeout_ms)
            .unwrap_or(30_000)
    }

    /// The long-poll re-check schedule.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            initial: Duration::from_millis(self.pop_wait_initial_interval_ms.max(1)),
            threshold: self.pop_wait_backoff_threshold,
            multiplier: self.pop_wait_backoff_multiplier.max(1.0),
            max: Duration::from_millis(self.pop_wait_max_interval_ms.max(1)),
        }
    }

    /// A configuration with every default, for tests and embedding.
    pub fn defaults() -> Config {
        Config::parse_from(["queen-server"])
    }
}

/// How a parked pop re-checks between wake-ups (POP-11).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub threshold: u32,
    pub multiplier: f64,
    pub max: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pop_timeout_precedence() {
        let mut c = Config::defaults();
        assert_eq!(c.pop_timeout_ms(), 30_000);
        c.pop_default_timeout_ms = Some(5);
        assert_eq!(c.pop_timeout_ms(), 5);
        c.default_timeout = Some(7);
        assert_eq!(c.pop_timeout_ms(), 7, "DEFAULT_TIMEOUT wins");
        assert_eq!(c.port, 6632);
    }

    #[test]
    fn a_push_batch_of_no_items_is_refused_at_start_up() {
        let refused = Config::try_parse_from(["queen-server", "--push-batch-items", "0"]);
        assert!(refused.is_err(), "0 items per write would never write");
        let c = Config::try_parse_from(["queen-server", "--push-batch-items", "1"]).unwrap();
        assert_eq!(c.push_batch_items, 1);
        assert_eq!(Config::defaults().push_batch_items, 2000);
    }
}
