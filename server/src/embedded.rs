//! Opening the PostgreSQL engine: on `DATABASE_URL`, or on an embedded cluster kept in
//! a data directory that survives restarts (the provider's [`PersistentCluster`]).

use crate::config::Config;
use crate::pg::PgBroker;
use queen_pg::PersistentCluster;

/// The engine and, when embedded, the cluster it runs on (stopped when dropped).
pub struct PgEngine {
    pub broker: PgBroker,
    pub cluster: Option<PersistentCluster>,
    /// Where the data lives, for the start-up log line.
    pub location: String,
}

/// Connects to `DATABASE_URL`, or starts the embedded cluster in `config.data_dir`.
pub async fn open(config: &Config) -> Result<PgEngine, Box<dyn std::error::Error + Send + Sync>> {
    let (url, cluster, location) = match &config.database_url {
        Some(url) => (url.clone(), None, format!("PostgreSQL at {}", redact(url))),
        None => {
            let c = PersistentCluster::start(&config.data_dir, config.embedded_pg_port).await?;
            let location = format!(
                "embedded PostgreSQL in {} ({}), port {}",
                c.data_dir().display(),
                if c.initialised() {
                    "new cluster"
                } else {
                    "existing cluster"
                },
                c.port()
            );
            (c.url().to_string(), Some(c), location)
        }
    };
    let broker = PgBroker::connect(&url, config).await?;
    Ok(PgEngine {
        broker,
        cluster,
        location,
    })
}

/// A connection URL without its password.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}
