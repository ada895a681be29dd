//! `examples/ci/conformance.yml`, the workflow a broker author copies, stays true: it
//! parses as YAML, every `queen-conformance` command in it parses with the real CLI
//! (so a renamed or removed flag breaks this test, not a user's CI), it installs the
//! slim suite with a profile the workspace defines, and it uploads the reports the run
//! writes.

use clap::error::ErrorKind;
use clap::Parser;
use queen_conformance::cli::{Cli, Command};
use std::collections::HashMap;
use yaml_rust2::{Yaml, YamlLoader};

const WORKFLOW: &str = include_str!("../../examples/ci/conformance.yml");

fn workflow() -> Yaml {
    YamlLoader::load_from_str(WORKFLOW)
        .expect("the workflow is YAML")
        .remove(0)
}

/// The job's `env`, to expand `$NAME` and `"$NAME"` in its commands.
fn env(job: &Yaml) -> HashMap<String, String> {
    job["env"]
        .as_hash()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v.as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Every shell command of the job's steps, backslash continuations joined, with the
/// job's variables expanded.
fn commands(job: &Yaml) -> Vec<Vec<String>> {
    let vars = env(job);
    let mut out = Vec::new();
    for step in job["steps"].as_vec().expect("steps") {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        for line in script.replace("\\\n", " ").lines() {
            let Ok(words) = shell_words::split(line) else {
                continue;
            };
            let words: Vec<String> = words
                .into_iter()
                .map(|w| match w.strip_prefix('$') {
                    Some(name) if vars.contains_key(name) => vars[name].clone(),
                    _ => w,
                })
                .collect();
            out.push(words);
        }
    }
    out
}

#[test]
fn the_ci_example_runs_real_commands_and_uploads_what_they_write() {
    let doc = workflow();
    let job = &doc["jobs"]["queen-conformance"];
    assert!(!job.is_badvalue(), "the job is named queen-conformance");
    let cmds = commands(job);

    let suite: Vec<&Vec<String>> = cmds
        .iter()
        .filter(|c| c.first().is_some_and(|w| w == "queen-conformance"))
        .collect();
    assert!(suite.len() >= 2, "{cmds:?}");
    let mut run = None;
    for c in &suite {
        match Cli::try_parse_from(c.iter()) {
            Ok(Cli {
                command: Command::Run(args),
            }) => run = Some(args),
            Ok(other) => panic!("{c:?} is not a run: {other:?}"),
            Err(e) if e.kind() == ErrorKind::DisplayVersion => {}
            Err(e) => panic!("{c:?} does not parse with the CLI:\n{e}"),
        }
    }
    let run = run.expect("the workflow runs the suite");
    assert_eq!(run.broker.target.as_deref(), Some("http://127.0.0.1:6632"));
    let junit = run.reports.junit.expect("--junit").display().to_string();
    let json = run.reports.json.expect("--json").display().to_string();
    let failures = format!("{}/", run.lockstep.failures_dir.display());

    // The install names the package, the slim build and a profile the workspace has.
    let install = cmds
        .iter()
        .find(|c| c.starts_with(&["cargo".into(), "install".into()]))
        .expect("a cargo install step");
    assert!(install.iter().any(|w| w == "queen-conformance"));
    assert!(install.iter().any(|w| w == "--no-default-features"));
    let profile = install
        .iter()
        .skip_while(|w| *w != "--profile")
        .nth(1)
        .expect("--profile");
    let manifest = include_str!("../../Cargo.toml");
    assert!(
        manifest.contains(&format!("[profile.{profile}]")),
        "the workspace defines profile {profile}"
    );

    // The reports the run writes are the ones uploaded, even when the run fails.
    let upload = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact"))
        })
        .expect("an upload step");
    assert_eq!(upload["if"].as_str(), Some("always()"));
    let paths = upload["with"]["path"].as_str().unwrap();
    for p in [junit.as_str(), json.as_str(), failures.as_str()] {
        assert!(
            paths.lines().any(|l| l.trim() == p),
            "{p} is uploaded: {paths}"
        );
    }
}
