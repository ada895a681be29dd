//! `queen-server`: start-up. Reads the configuration, opens the engine (PostgreSQL from
//! `DATABASE_URL` or the embedded cluster, or the in-memory model), says where the data
//! lives, and serves until SIGTERM or ctrl-c.

use clap::Parser;
use queen_server::app::run;
use queen_server::config::Config;

/// jemalloc, not the system allocator: glibc's malloc and free dominated the server's
/// CPU under push load and kept more memory resident (docs/decisions/0008-allocator.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    if let Err(e) = queen_server::logging::init() {
        eprintln!("queen-server: {e}");
        std::process::exit(2);
    }
    let config = Config::parse();
    if let Err(e) = run(config).await {
        tracing::error!("queen-server failed: {e}");
        eprintln!("queen-server: {e}");
        std::process::exit(1);
    }
}
