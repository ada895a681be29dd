//! `queen-conformance`: see `queen_conformance::cli`.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = queen_conformance::cli::Cli::parse();
    let code = queen_conformance::cli::main_with(cli).await;
    std::process::exit(code);
}
