//! The suite's modules form floors: a module imports only from its own floor or the
//! floors below it, and the modules of one floor import each other in no loop, so the
//! module graph has no cycle. This test reads every `crate::` path in the code of
//! `conformance/src` (not its comments), finds the imports that point up a floor, and
//! holds them to the list of those not yet moved ([`NOT_YET`], empty now): a new one
//! fails, and so does one that is gone but still listed.

use std::collections::BTreeSet;
use std::path::Path;

/// The floors, bottom first. Each module of `conformance/src` is on exactly one.
const FLOORS: &[&[&str]] = &[
    // What every floor reads: one exchange, a failure, the findings seen, rule ids,
    // tokens, versions, files.
    &[
        "exchange", "failure", "findings", "rules", "auth", "version", "expect", "progress",
        "database", "launch",
    ],
    &["health"],
    // The broker and one request to it, unchecked.
    &["target", "transport"],
    &["session"],
    // What a case does with a session: the protocol's calls.
    &["calls", "case", "probe"],
    // The entries of a run: named cases, lockstep sequences, concurrent and fault runs.
    &["catalog", "lockstep", "concurrent", "faults"],
    &["select"],
    &["runner"],
    &["report"],
    // Live checking of real traffic, reported as a run is.
    &["watch"],
    &["embedded"],
    &["cli"],
];

/// Imports that still point up a floor, as `from -> to`: debts to pay, not to add to.
const NOT_YET: &[&str] = &[];

fn floor(module: &str) -> usize {
    FLOORS
        .iter()
        .position(|f| f.contains(&module))
        .unwrap_or_else(|| panic!("module {module} is on no floor: add it to FLOORS"))
}

/// Every `crate::<module>` a file under `dir` names, as (its top module, the named one).
fn imports(dir: &Path, top: Option<&str>, out: &mut BTreeSet<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            imports(&path, Some(top.unwrap_or(&name)), out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let from = match top {
            Some(t) => t.to_string(),
            None if name == "lib" || name == "main" => continue,
            None => name,
        };
        let text: String = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (i, _) in text.match_indices("crate::") {
            let to: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !to.is_empty() && to != from && to.chars().next().unwrap().is_lowercase() {
                out.insert((from.clone(), to));
            }
        }
    }
}

#[test]
fn no_module_imports_from_a_floor_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut edges = BTreeSet::new();
    imports(&src, None, &mut edges);
    let upward: BTreeSet<String> = edges
        .iter()
        .filter(|(from, to)| floor(to) > floor(from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    let listed: BTreeSet<String> = NOT_YET.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = upward.difference(&listed).collect();
    let paid: Vec<_> = listed.difference(&upward).collect();
    assert!(
        new.is_empty(),
        "imports that point up a floor: {new:?}; move what they need down"
    );
    assert!(
        paid.is_empty(),
        "no longer upward, drop from NOT_YET: {paid:?}"
    );
}

#[test]
fn the_modules_of_one_floor_import_each_other_in_no_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut edges = BTreeSet::new();
    imports(&src, None, &mut edges);
    let level: Vec<(String, String)> = edges
        .into_iter()
        .filter(|(from, to)| floor(from) == floor(to))
        .collect();
    // Removes modules nothing on their floor imports from, until none is left (no loop)
    // or every one left is imported by another (a loop among them).
    let mut left: BTreeSet<String> = level
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    loop {
        let sinks: Vec<String> = left
            .iter()
            .filter(|m| !level.iter().any(|(a, b)| a == *m && left.contains(b)))
            .cloned()
            .collect();
        if sinks.is_empty() {
            break;
        }
        for m in sinks {
            left.remove(&m);
        }
    }
    assert!(
        left.is_empty(),
        "modules importing each other in a loop: {left:?}"
    );
}
