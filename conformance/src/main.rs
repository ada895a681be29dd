//! `queen-conformance`: see `queen_conformance::cli`.

use clap::Parser;

/// The model and the checker allocate and free small values all the time; with glibc's
/// malloc that was about a third of their time (`cargo bench -p queen-reference --bench
/// model` runs under the same allocator). The server binary uses jemalloc instead
/// (`server/src/main.rs`): with mimalloc its resident memory under 10,000 parked polls
/// was higher.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = queen_conformance::cli::Cli::parse();
    let code = queen_conformance::cli::main_with(cli).await;
    std::process::exit(code);
}
