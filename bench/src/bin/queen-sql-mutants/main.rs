//! `queen-sql-mutants`: mutation testing of the SQL functions in `server/sql/*.sql`.
//!
//! Each one-point mutant ([`mutants`]) is written into a copy of the folder; one
//! `queen-server` binary is started on it (the server applies its functions from
//! `QUEEN_SQL_MUTANT_DIR` when that is set) with a fresh database, and the conformance
//! suite runs against it with `--strict`. A mutant the suite fails on is killed; one it
//! passes is tried against the server's own PostgreSQL tests that read the tables
//! (`--server-tests`), and one those pass too survived: each survivor gets a case that kills it or a reason it cannot
//! change behaviour (`docs/decisions/0032-sql-mutation-testing.md`). A mutant PostgreSQL
//! will not create, so the server does not start, is unviable and not counted.
//!
//! ```text
//! cargo build --release -p queen-server -p queen-conformance -p queen-bench
//! target/release/queen-sql-mutants --list                 # the mutants, no run
//! target/release/queen-sql-mutants --sample 20 --seed 7   # a bounded sample
//! target/release/queen-sql-mutants                        # every mutant
//! ```

mod mutants;
mod run;

use clap::Parser;
use std::path::PathBuf;

/// Mutation testing of the PostgreSQL engine's SQL functions.
#[derive(Parser, Debug)]
#[command(version)]
pub struct Args {
    /// Print the mutants and stop.
    #[arg(long)]
    list: bool,
    /// The folder of function files to mutate.
    #[arg(long, default_value = "server/sql")]
    sql: PathBuf,
    /// Only the mutants of these files (repeatable, e.g. `03_claim.sql`).
    #[arg(long)]
    file: Vec<String>,
    /// Only these operators (repeatable: comparison, integer, and-or, drop-conjunct,
    /// greatest-least, coalesce-default, row-lock, skip-locked, advisory-lock,
    /// order-direction).
    #[arg(long)]
    operator: Vec<String>,
    /// Run a sample of this many mutants, spread over the files, instead of all.
    #[arg(long)]
    sample: Option<usize>,
    /// The sample's seed, also given to the suite (its lockstep and concurrent runs), so a
    /// verdict can be reproduced.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only the mutants that survived in this earlier run's `results.jsonl` (after new
    /// cases, say); `--sample` is then ignored. Use another `--out`: this run writes its
    /// own.
    #[arg(long)]
    survivors_of: Option<PathBuf>,
    /// Start at this mutant of the selection (1-based; the ones before it are left out,
    /// and `results.jsonl` is appended to): resumes an interrupted run.
    #[arg(long, default_value_t = 1)]
    from: usize,
    /// Leave out the mutants `--out`'s `results.jsonl` already has a verdict for (found
    /// by their description, so the list's order may change) and append to it: a full
    /// run continued over several sittings.
    #[arg(long)]
    resume: bool,
    /// Print the table of `--out`'s `results.jsonl` for the selection, and how many
    /// mutants have no verdict yet, then stop.
    #[arg(long)]
    summary: bool,
    /// Write each selected mutant's function folder to `DIR/NNN/` (its name in
    /// `DIR/NNN/MUTANT`) and stop: to try one test against a mutant by hand, with
    /// `QUEEN_SQL_MUTANT_DIR=DIR/NNN`.
    #[arg(long, value_name = "DIR")]
    write_to: Option<PathBuf>,
    /// The server binary (default: `queen-server` beside this one).
    #[arg(long)]
    server: Option<PathBuf>,
    /// The suite binary (default: `queen-conformance` beside this one).
    #[arg(long)]
    conformance: Option<PathBuf>,
    /// Clients of the suite's concurrent scenario (0: none). Lock and ordering mutants
    /// are mostly seen there.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// The server's own PostgreSQL test binaries (`cargo test -p queen-server --test
    /// NAME`, comma-separated; run from the workspace) that a mutant the suite missed is
    /// tried against next, with the mutant's functions: they read the tables, which the
    /// wire cannot show. Empty: none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "encryption,retention,management,engine"
    )]
    server_tests: Vec<String>,
    /// Seconds one suite run may take before the mutant counts as a timeout.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// Where the results go: one line per mutant in `results.jsonl`, each run's output
    /// under `logs/`.
    #[arg(long, default_value = "target/sql-mutants")]
    out: PathBuf,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let code = match run::main(args).await {
        Ok(0) => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("queen-sql-mutants: {e}");
            2
        }
    };
    std::process::exit(code);
}
