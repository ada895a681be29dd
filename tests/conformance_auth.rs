//! The conformance suite against our server with authentication on (PROTOCOL.md section
//! 14) and an encryption key (section 15): every case and a lockstep run with the suite's
//! tokens, strictly, on the PostgreSQL engine (where `producerSub` is stored and read
//! back, and an encrypted queue's payloads are sealed and opened); and the same suite,
//! told to expect authentication, against a server that has none: the `auth` cases
//! fail, and every failure names AUTH rule ids only.

use queen_conformance::auth::Tokens;
use queen_conformance::case::Capability;
use queen_conformance::lockstep::LockstepOptions;
use queen_conformance::report::{terminal, Report};
use queen_conformance::runner::{self, RunOptions, RunResults, Status};
use queen_conformance::session::{CheckSettings, Target};
use queen_reference::rules::{AUTH_1, AUTH_2, AUTH_3, AUTH_4, AUTH_6};
use queen_tests::{memory_server, pg_server_with};
use std::collections::BTreeSet;
use std::sync::Arc;

const SECRET: &str = "conformance-auth-test-secret-32-bytes-long";

async fn run_with_tokens(url: &str, label: &str, lockstep: bool) -> RunResults {
    let tokens = Tokens::minted(SECRET, None, None);
    let settings = CheckSettings {
        auth: Some(Arc::new(tokens.book())),
        ..CheckSettings::default()
    };
    let mut target = Target::new(url, settings);
    target.tokens = Some(Arc::new(tokens));
    let failures =
        std::env::temp_dir().join(format!("queen-conformance-auth-{}", std::process::id()));
    let opts = RunOptions::whole(
        target,
        label,
        lockstep.then(|| LockstepOptions::sized(2_121, 12, 40, failures.clone())),
    );
    let results = runner::run(&opts).await;
    let _ = std::fs::remove_dir_all(failures);
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_suite_passes_with_authentication_and_encryption_on_the_pg_engine() {
    let server = pg_server_with(|c| {
        c.auth.jwt_enabled = true;
        c.auth.jwt_secret = Some(SECRET.into());
        c.encryption_key = Some("ab".repeat(32));
    })
    .await;
    let results = run_with_tokens(
        &server.url(),
        "our server, PostgreSQL, JWT and encryption on",
        true,
    )
    .await;
    let auth_cases = results
        .cases
        .iter()
        .filter(|c| c.case.capability == Capability::Auth)
        .filter(|c| matches!(c.status, Status::Passed))
        .count();
    let report = Report::build(results, true, &BTreeSet::new());
    let text = terminal::render(&report, true);
    println!("{text}");
    assert!(report.passed(), "{text}");
    assert_eq!(auth_cases, 7, "every auth case ran and passed:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_authentication_fails_the_auth_cases_by_rule_id() {
    let server = memory_server().await;
    let results = run_with_tokens(&server.url(), "our server without authentication", false).await;
    // A pop or push admitted above its level is AUTH-6 (SEED), the refusal is AUTH-4.
    let auth_rules = [AUTH_1, AUTH_2, AUTH_3, AUTH_4, AUTH_6];
    let mut failed = Vec::new();
    for c in &results.cases {
        match &c.status {
            Status::Failed(f) => {
                // Other cases may fail too, but only by AUTH-2: with authentication
                // expected, every popped message must carry its pusher's sub.
                let rules = f.rules();
                assert!(
                    !rules.is_empty() && rules.iter().all(|r| auth_rules.contains(r)),
                    "{} failed naming {rules:?}: {f}",
                    c.case.id
                );
                if c.case.capability == Capability::Auth {
                    failed.push(c.case.id);
                }
            }
            Status::Skipped(_) | Status::Passed => {}
        }
    }
    // Every auth case fails (the model wants each popped message to carry its pusher's
    // sub, so the forged-sub case fails too).
    let mut expected: Vec<&str> = queen_conformance::catalog::all()
        .iter()
        .filter(|c| c.capability == Capability::Auth)
        .map(|c| c.id)
        .collect();
    expected.sort();
    failed.sort();
    assert_eq!(failed, expected);
}
