//! The conformance suite gates our server: the whole catalog and a lockstep property
//! run against the PostgreSQL engine on a fresh database, every answer checked by the
//! reference model. Prints the terminal report; fails on any failure (strict: PROJECT
//! points included, since our server follows them exactly).

use queen_conformance::lockstep::LockstepOptions;
use queen_conformance::report::{terminal, Report};
use queen_conformance::runner::{self, RunOptions};
use queen_conformance::session::{CheckSettings, Target};
use queen_tests::pg_server;
use std::collections::BTreeSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_passes_on_the_pg_engine() {
    let server = pg_server().await;
    let url = server.url();
    let failures =
        std::env::temp_dir().join(format!("queen-conformance-pg-{}", std::process::id()));
    let opts = RunOptions::whole(
        Target::new(&url, CheckSettings::default()),
        &format!("{url} (our server, PostgreSQL engine, fresh database)"),
        Some(LockstepOptions::sized(4_242, 24, 40, failures.clone())),
    );
    let report = Report::build(runner::run(&opts).await, true, &BTreeSet::new());
    let text = terminal::render(&report, true);
    println!("{text}");
    // How long the suite takes is a figure of `queen-bench --workloads suite`.
    assert!(report.passed(), "{text}");
    let _ = std::fs::remove_dir_all(failures);
}
