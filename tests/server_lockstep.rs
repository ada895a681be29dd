//! Our server, both engines, driven by the workspace's one operation-sequence generator
//! (`queen_reference::sequence`, through the suite's lockstep runner): every answer is
//! checked by the reference model (PROTOCOL.md section 13), our PROJECT choices included,
//! and a failing sequence is shrunk to a minimal one with a curl script and a Rust repro.

use queen_conformance::lockstep::{self, LockstepOptions, LockstepOutcome};
use queen_conformance::target::{CheckSettings, Target};
use queen_tests::{memory_server, pg_server, TestServer};

/// Long sequences (the generator's steps reach the engines' rarer paths: retries spent,
/// dead letters, expired leases, transactions, management reads and writes).
async fn lockstep(server: &TestServer, seed: u64) -> LockstepOutcome {
    let settings = CheckSettings {
        strict_project: true,
        keep_going: false,
        ..CheckSettings::default()
    };
    let target = Target::new(&server.url(), settings);
    let failures = queen_tests::TempDir::new("server-lockstep");
    let opts = LockstepOptions {
        workers: 2,
        ..LockstepOptions::sized(seed, 12, 80, failures.0.clone())
    };
    lockstep::run(&target, &format!("sl{seed}"), &opts, None).await
}

fn assert_agrees(engine: &str, o: &LockstepOutcome) {
    assert!(o.error.is_none(), "{engine}: {:?}", o.error);
    if let Some(c) = &o.counterexample {
        panic!(
            "{engine} diverged from the model (seed {}), shrunk to {} steps:\n{}\n{}\n{}",
            c.seed,
            c.steps.len(),
            c.failure,
            c.curl,
            c.rust
        );
    }
    assert!(
        o.findings.is_empty(),
        "{engine}: {} findings",
        o.findings.len()
    );
    assert!(
        o.exchanges > 100,
        "{engine}: only {} exchanges were checked",
        o.exchanges
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_engine_agrees_with_the_model_on_random_sequences() {
    let server = pg_server().await;
    assert_agrees(
        "the PostgreSQL engine",
        &lockstep(&server, 20_261_205).await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_engine_agrees_with_the_model_on_random_sequences() {
    let server = memory_server().await;
    assert_agrees("the memory engine", &lockstep(&server, 20_261_205).await);
}
