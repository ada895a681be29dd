//! `queen-conformance serve`: our server as a separate process, for fault scenarios
//! that must SIGKILL and restart it. Runs exactly what `queen-server` runs (the same
//! library: configuration from flags and environment, the PostgreSQL engine or the
//! memory one, graceful shutdown on SIGTERM), so the harness needs no second binary;
//! cargo builds this one fresh for the conformance tests
//! (`CARGO_BIN_EXE_queen-conformance`), which it does not do for another package's.

use clap::Parser;
use queen_server::app::run;
use queen_server::config::Config;

/// Runs the server with `args` (queen-server's flags) until SIGTERM; returns the exit code.
pub async fn main(args: &[String]) -> i32 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let config = match Config::try_parse_from(
        std::iter::once("queen-server".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    match run(config).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("queen-server: {e}");
            1
        }
    }
}
