//! `queen-server`: start-up. Reads the configuration, opens the engine (PostgreSQL from
//! `DATABASE_URL` or the embedded cluster, or the in-memory model), says where the data
//! lives, and serves until SIGTERM or ctrl-c.

use clap::Parser;
use queen_server::app::run;
use queen_server::config::Config;
use tracing_subscriber::EnvFilter;

/// jemalloc, not the system allocator: glibc's malloc and free were a third of the
/// server's CPU under push load (profiles/push-batch-server.txt), and its heap kept
/// more memory resident. Measured on 2 cores, alternating runs: push-batch 50-58 K ->
/// 63-65 K msgs/s with the server's CPU per message down by a third; 10,000 parked
/// polls 189 MB -> 133 MB RSS. (mimalloc helped less under push load and raised RSS
/// under parked polls to 261 MB.)
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
