//! `--write-accepts FILE`: the run's known deviations as an expectations file.
//!
//! An author meeting a broker's first report wants the second run to show only what
//! is left. Writing 28 `--accept` flags by hand from the findings list is where that
//! goes wrong, so the run writes them: one line per answer-only finding and per
//! diagnosed cause, each with a comment saying what it excuses and where it was seen.

use super::Report;
use queen_reference::finding::{Accept, Kind};
use std::path::Path;

/// The `accept` lines that excuse this run's answer-only findings and diagnosed causes,
/// one per deviation (a cause by its variant's name, the rest by rule and kind), with a
/// comment naming what each accepts. Those already accepted are kept as they were.
pub fn accepts_of(report: &Report) -> Vec<(Accept, String)> {
    let mut out: Vec<(Accept, String)> = Vec::new();
    for f in &report.findings {
        let x = &f.finding;
        if !(x.kind.answer_only() || x.kind == Kind::Cause) {
            continue;
        }
        let a = Accept::for_finding(x);
        if out.iter().any(|(o, _)| *o == a) {
            continue;
        }
        let why = format!(
            "{} [{}] {}: {} (seen in {})",
            x.rule,
            x.level,
            x.kind,
            x.what,
            f.seen_in.join(", ")
        );
        out.push((a, why));
    }
    out
}

/// Writes [`accepts_of`] `report` to `path` as an expectations file.
pub fn write(path: &Path, report: &Report) -> std::io::Result<()> {
    let mut s = format!(
        "# Known deviations of {}, written by queen-conformance --write-accepts (run {}).\n\
         # Load with --expect-failures FILE: each line is allowed everywhere, so a second\n\
         # run reports only what is left. Delete a line once the broker is fixed.\n",
        report.target, report.run_id
    );
    for (a, why) in accepts_of(report) {
        s.push_str(&format!("accept {a}  # {}\n", why.replace('\n', " ")));
    }
    std::fs::write(path, s)
}
