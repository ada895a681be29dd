//! The commands the README and the guides show are true: every fenced shell line that
//! runs `queen-conformance`, `queen-server` or `queen-bench` (directly, through
//! `cargo run -p ...`, or as the suite's container image) parses with the real command
//! line of that program, so a renamed or removed flag breaks this test, not a reader's
//! first run. `queen-bench` is asked for `--help` after the shown arguments: it parses
//! them first, and refuses a wrong one.

use clap::error::ErrorKind;
use clap::Parser;
use std::path::Path;

/// The documents whose commands a reader copies.
const DOCUMENTS: [&str; 5] = [
    "README.md",
    "docs/broker-authors.md",
    "docs/operating.md",
    "docs/benchmarks.md",
    "conformance/README.md",
];

/// Every line of the `sh`/`bash` fenced blocks of `text`, continuations joined.
fn shell_lines(text: &str) -> Vec<String> {
    let (mut out, mut fenced, mut pending) = (Vec::new(), false, String::new());
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced && (t == "```sh" || t == "```bash" || t == "```shell");
            continue;
        }
        if !fenced {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(t);
                out.push(std::mem::take(&mut pending));
            }
        }
    }
    out
}

/// The program a shell line runs and the arguments it gives it, if it is one of ours.
fn invocation(line: &str) -> Option<(String, Vec<String>)> {
    let words = shell_words::split(line).ok()?;
    // Variable assignments before the command.
    let words: Vec<String> = words
        .into_iter()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .collect();
    let first = words.first()?;
    let name = Path::new(first).file_name()?.to_string_lossy().into_owned();
    let ours = ["queen-conformance", "queen-server", "queen-bench"];
    if ours.contains(&name.as_str()) {
        return Some((name, words[1..].to_vec()));
    }
    if name == "cargo" && words.get(1).is_some_and(|w| w == "run") {
        let package = words.windows(2).find(|w| w[0] == "-p")?[1].clone();
        let args = match words.iter().position(|w| w == "--") {
            Some(at) => words[at + 1..].to_vec(),
            None => vec![],
        };
        return ours.contains(&package.as_str()).then_some((package, args));
    }
    if name == "docker" && words.get(1).is_some_and(|w| w == "run") {
        let at = words
            .iter()
            .position(|w| w.starts_with("queen-conformance:"))?;
        return Some(("queen-conformance".into(), words[at + 1..].to_vec()));
    }
    None
}

/// Why `args` do not parse as a command line of `program`, if they do not.
fn refusal(program: &str, args: &[String]) -> Option<String> {
    let argv = std::iter::once(program.to_string()).chain(args.iter().cloned());
    let shown = |e: clap::Error| {
        (!matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion))
            .then(|| e.to_string())
    };
    match program {
        "queen-conformance" => queen_conformance::cli::Cli::try_parse_from(argv)
            .err()
            .and_then(shown),
        "queen-server" => queen_server::config::Config::try_parse_from(argv)
            .err()
            .and_then(shown),
        _ => {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_queen-bench"))
                .args(args)
                .arg("--help")
                .output()
                .expect("queen-bench runs");
            (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

#[test]
fn every_command_the_documents_show_parses_with_the_real_cli() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (mut checked, mut wrong) = (Vec::new(), Vec::new());
    for doc in DOCUMENTS {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for line in shell_lines(&text) {
            let Some((program, args)) = invocation(&line) else {
                continue;
            };
            if let Some(why) = refusal(&program, &args) {
                wrong.push(format!("{doc}: {line}\n  {why}"));
            }
            checked.push(program);
        }
    }
    for program in ["queen-conformance", "queen-server", "queen-bench"] {
        assert!(
            checked.iter().any(|p| p == program),
            "no {program} command was found"
        );
    }
    assert!(checked.len() >= 20, "{} commands found", checked.len());
    assert!(
        wrong.is_empty(),
        "commands that do not parse:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_wrong_flag_is_caught() {
    let (program, args) = invocation("queen-conformance run --no-such-flag").unwrap();
    assert!(refusal(&program, &args).is_some());
    let (program, args) =
        invocation("DATABASE_URL=x cargo run --release -p queen-server -- --port 1").unwrap();
    assert_eq!((program.as_str(), args.len()), ("queen-server", 2));
    assert!(refusal(&program, &args).is_none());
    assert!(refusal("queen-server", &["--nope".into()]).is_some());
    assert!(refusal("queen-bench", &["--no-such-flag".into()]).is_some());
    assert!(refusal("queen-bench", &["--workloads".into(), "suite".into()]).is_none());
    assert_eq!(
        shell_lines("```sh\nqueen-bench \\\n  --repeat 1\n```\n```text\nqueen-bench --x\n```"),
        ["queen-bench --repeat 1"]
    );
}
