//! `queen-server`: start-up. Reads the configuration, opens the engine (PostgreSQL from
//! `DATABASE_URL` or the embedded cluster, or the in-memory model), says where the data
//! lives, and serves until SIGTERM or ctrl-c.

use clap::Parser;
use queen_server::app::{serve, shutdown_signal};
use queen_server::broker::Broker;
use queen_server::config::{Config, EngineKind};
use queen_server::memory::MemoryBroker;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn")),
        )
        .init();
    let config = Config::parse();
    if let Err(e) = run(config).await {
        tracing::error!("queen-server failed: {e}");
        eprintln!("queen-server: {e}");
        std::process::exit(1);
    }
}

async fn run(config: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The embedded cluster, if any, lives until the server has shut down.
    let mut _cluster: Option<queen_pg::PersistentCluster> = None;
    let broker: Arc<dyn Broker> = match config.engine {
        EngineKind::Memory => {
            tracing::info!("engine: the reference model in memory; nothing is persisted");
            Arc::new(MemoryBroker::new(
                config.pop_timeout_ms(),
                config.body_limit,
            ))
        }
        EngineKind::Pg => {
            let engine = queen_server::embedded::open(&config).await?;
            tracing::info!(
                "engine: {}; spool in {}",
                engine.location,
                config.spool_dir.display()
            );
            _cluster = engine.cluster;
            Arc::new(engine.broker)
        }
    };
    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port)).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    serve(listener, broker, &config, shutdown_signal()).await?;
    Ok(())
}
