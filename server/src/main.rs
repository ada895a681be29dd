//! `queen-server`: start-up. Reads the configuration, opens the engine (PostgreSQL from
//! `DATABASE_URL` or the embedded cluster, or the in-memory model), says where the data
//! lives, and serves until SIGTERM or ctrl-c.

use clap::Parser;
use queen_server::app::run;
use queen_server::config::Config;

/// jemalloc, not the system allocator: glibc's malloc and free dominated the server's
/// CPU under push load and kept more memory resident
/// (docs/decisions/0008-allocator-and-logs.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The settings jemalloc reads at start (`_RJEM_MALLOC_CONF` in the environment still
/// overrides them): pages freed stay mapped for 100 ms rather than 10 s, so the memory of
/// one burst of connections, such as thousands of long polls, is handed back before the
/// next burst instead of being held beside it.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 36] = b"dirty_decay_ms:100,muzzy_decay_ms:0\0";

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
