//! `queen-server`: start-up. Reads the configuration, opens the engine (PostgreSQL from
//! `DATABASE_URL` or the embedded cluster, or the in-memory model), says where the data
//! lives, and serves until SIGTERM or ctrl-c.

use clap::Parser;
use queen_server::app::run;
use queen_server::config::Config;
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
