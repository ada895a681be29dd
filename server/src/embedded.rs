//! Opening the PostgreSQL engine: on `DATABASE_URL`, or on an embedded cluster kept in
//! a data directory that survives restarts (the provider's [`PersistentCluster`]), which
//! keeps an encryption key of its own unless one is given (ENC-4, `keyfile.rs`).

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
    let config = with_key(config, cluster.as_ref().map(PersistentCluster::data_dir))?;
    let broker = PgBroker::connect(&url, &config).await?;
    Ok(PgEngine {
        broker,
        cluster,
        location,
    })
}

/// ENC-4: `config` with the embedded cluster's own key when none was given; with
/// `DATABASE_URL` and no key, one line says why encryption is refused.
fn with_key(
    config: &Config,
    embedded: Option<&std::path::Path>,
) -> Result<Config, Box<dyn std::error::Error + Send + Sync>> {
    let mut config = config.clone();
    match (embedded, &config.encryption_key) {
        (_, Some(_)) => {}
        (None, None) => tracing::info!(
            "no QUEEN_ENCRYPTION_KEY: queues with encryptionEnabled are refused (ENC-2); \
             on DATABASE_URL a key must be given, since a key this broker made up could not \
             be shared with the other brokers on that database"
        ),
        (Some(data_dir), None) => {
            let path = crate::keyfile::path_for(data_dir);
            let (key, made) = crate::keyfile::load_or_create(&path)?;
            if made {
                tracing::info!(
                    "made the embedded database's encryption key in {} (mode 0600): keep it \
                     with the data, sealed payloads cannot be read without it",
                    path.display()
                );
            }
            config.encryption_key = Some(key);
        }
    }
    Ok(config)
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
