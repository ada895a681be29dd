//! The summary a person reads: counts by capability and level, each distinct finding
//! once (its rule, where it was met, every difference by JSON path and a curl repro),
//! each failure with the request, the actual answer, the model's allowed answers and a
//! curl line, skipped cases, the lockstep run with its coverage, the concurrent scenario
//! with its anomaly counts, the failing rule ids and the verdict.

use super::{Entry, FindingEntry, Report, Verdict};
use crate::case::{join, Capability, Failure};
use crate::exchange::curl_one;
use crate::rules::Level;
use comfy_table::{presets, CellAlignment, Table};
use console::Style;
use queen_reference::diff::diff;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Colours for a terminal that wants them (on a TTY without `NO_COLOR`); plain text
/// otherwise, for logs, files and tests.
#[derive(Clone, Copy)]
pub(crate) struct Paint {
    on: bool,
}

impl Paint {
    /// No colours.
    pub const PLAIN: Paint = Paint { on: false };

    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty (no-color.org).
    pub(crate) fn for_stdout() -> Paint {
        use std::io::IsTerminal;
        let no_color = std::env::var("NO_COLOR").ok();
        Paint::when(std::io::stdout().is_terminal(), no_color.as_deref())
    }

    /// Colour on a terminal, unless `NO_COLOR` is set to something.
    pub fn when(on_terminal: bool, no_color: Option<&str>) -> Paint {
        Paint {
            on: on_terminal && no_color.is_none_or(str::is_empty),
        }
    }

    fn with(self, style: Style, s: &str) -> String {
        style.force_styling(self.on).apply_to(s).to_string()
    }

    pub(crate) fn red(self, s: &str) -> String {
        self.with(Style::new().red().bold(), s)
    }

    pub(crate) fn green(self, s: &str) -> String {
        self.with(Style::new().green().bold(), s)
    }

    pub(crate) fn yellow(self, s: &str) -> String {
        self.with(Style::new().yellow(), s)
    }

    pub(crate) fn bold(self, s: &str) -> String {
        self.with(Style::new().bold(), s)
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{}\n", clip(l, 400)))
        .collect()
}

fn failure_block(out: &mut String, e: &Entry, verbose: bool, p: Paint) {
    let mark = if e.fails_run {
        p.red("FAIL")
    } else {
        p.yellow("fail")
    };
    let _ = writeln!(
        out,
        "  {mark} {} [{}] ({})",
        e.id,
        e.level,
        e.rules.join(", ")
    );
    if let Some(f) = &e.failure {
        let _ = writeln!(out, "       {}", clip(&f.headline(), 300));
        match f {
            Failure::Diverged { divergence, .. } => {
                out.push_str(&indent(&f.details(), "         "));
                if let Some(want) = divergence.expected.first() {
                    for d in diff(want, &divergence.actual) {
                        let _ = writeln!(out, "         diff {}", clip(&d.to_string(), 200));
                    }
                }
                let _ = writeln!(
                    out,
                    "       repro: {}",
                    clip(&curl_one("$BASE", &divergence.request), 600)
                );
            }
            Failure::Findings(d) => {
                for x in d {
                    let _ = writeln!(out, "         {}", clip(&x.to_string(), 300));
                }
                let _ = writeln!(
                    out,
                    "       (each finding is shown with its repro under \"Findings\")"
                );
            }
            _ => {}
        }
        if !f.rules().is_empty() {
            let _ = writeln!(out, "       rules: {}", join(&f.rules()));
        }
    }
    if verbose {
        if let Some(c) = &e.curl {
            out.push_str(&indent(c, "       | "));
        }
    }
    if verbose {
        for (i, x) in e.transcript.iter().enumerate() {
            let _ = writeln!(
                out,
                "       #{:<2} {} {} -> {} {}",
                i + 1,
                x.request.method,
                x.request.path,
                x.response.status,
                clip(
                    &x.response
                        .body
                        .as_ref()
                        .map_or(String::new(), |b| b.to_string()),
                    160
                )
            );
        }
    }
}

/// One distinct finding: where it was met, what differs, how to reproduce it.
fn finding_block(out: &mut String, f: &FindingEntry, verbose: bool, p: Paint) {
    let mark = match (f.accepted, f.fails_run) {
        (true, _) => p.yellow("accepted"),
        (_, true) => p.red("FAIL"),
        _ => p.yellow("note"),
    };
    let x = &f.finding;
    let _ = writeln!(
        out,
        "  {mark} {} [{}] {}",
        x.rule,
        x.level,
        x.rule.rule().title
    );
    for i in f.instances.iter().take(6) {
        let at = i
            .path
            .as_deref()
            .map_or(String::new(), |p| format!(" at {p}"));
        let _ = writeln!(out, "       {}: {}{at}", i.kind, clip(&i.what, 200));
        if let Some(e) = &i.example {
            let _ = writeln!(out, "         e.g. {}", clip(e, 300));
        }
    }
    if f.instances.len() > 6 {
        let _ = writeln!(
            out,
            "       … {} more (in the JSON report)",
            f.instances.len() - 6
        );
    }
    let n = f.seen_in.len();
    let shown: Vec<&str> = f.seen_in.iter().take(3).map(String::as_str).collect();
    let more = if n > 3 {
        format!(", … {} more", n - 3)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "       seen in {n} case(s)/run(s): {}{more}; first at exchange #{} of {}",
        shown.join(", "),
        f.example.seen.step + 1,
        f.example.origin
    );
    for d in f.diff.iter().take(12) {
        let _ = writeln!(out, "       diff {}", clip(&d.to_string(), 200));
    }
    if let Some(x) = f.example.transcript.get(f.example.seen.step) {
        let _ = writeln!(
            out,
            "       repro: {}",
            clip(&curl_one("$BASE", &x.request), 600)
        );
        if f.example.seen.step > 0 {
            let _ = writeln!(
                out,
                "              (after {} earlier exchange(s) of that case: the script is in the JSON and JUnit reports{})",
                f.example.seen.step,
                if verbose { ", and below" } else { "; -v prints it" }
            );
        }
    }
    if verbose {
        out.push_str(&indent(&f.curl, "       | "));
    }
}

/// Renders the report as plain text.
pub fn render(r: &Report, verbose: bool) -> String {
    render_with(r, verbose, Paint::PLAIN)
}

/// Renders the report, in colour when `p` says so.
pub(crate) fn render_with(r: &Report, verbose: bool, p: Paint) -> String {
    let mut out = String::new();
    header(&mut out, r, p);
    verdict_table(&mut out, r);
    findings_section(&mut out, r, verbose, p);
    failures_section(&mut out, r, verbose, p);
    listed_sections(&mut out, r);
    if let Some(l) = &r.lockstep {
        lockstep_section(&mut out, l);
    }
    if let Some(c) = &r.concurrent {
        let _ = writeln!(out, "Concurrent: {}", c.summary().trim_end());
        if let Some(p) = &r.timeline {
            let _ = writeln!(out, "timeline: {}", p.display());
        }
        let _ = writeln!(out);
    }
    closing(&mut out, r, p);
    out
}

/// What ran against what, and whether the broker went down: the first lines a reader
/// needs to trust the rest.
fn header(out: &mut String, r: &Report, p: Paint) {
    let _ = writeln!(
        out,
        "{}",
        p.bold(&format!(
            "queen-conformance run {} against {}",
            r.run_id, r.target
        ))
    );
    let _ = writeln!(out, "{}", crate::version::line());
    if let Some(why) = &r.target_down {
        let _ = writeln!(
            out,
            "\nTHE BROKER STOPPED ANSWERING; the run was cut short (exit status 3):"
        );
        out.push_str(&indent(why, "  "));
    }
    if !r.without.is_empty() {
        let w: Vec<_> = r.without.iter().map(|c| c.as_str()).collect();
        let _ = writeln!(out, "without: {}", w.join(", "));
    }
    let _ = writeln!(out);
}

/// The verdicts counted by capability and level.
fn verdict_table(out: &mut String, r: &Report) {
    let mut table: BTreeMap<(Capability, Level), [usize; 4]> = BTreeMap::new();
    for e in &r.entries {
        let row = table.entry((e.capability, e.level)).or_default();
        match e.verdict {
            Verdict::Passed => row[0] += 1,
            Verdict::Failed | Verdict::StalePass => row[1] += 1,
            Verdict::Skipped => row[2] += 1,
            Verdict::ExpectedFailure => row[3] += 1,
        }
    }
    out.push_str(&counts_table(&table));
    out.push('\n');
    let _ = writeln!(out);
}

/// Every distinct finding, each once, and the deviations accepted.
fn findings_section(out: &mut String, r: &Report, verbose: bool, p: Paint) {
    if !r.findings.is_empty() {
        let failing = r.findings.iter().filter(|f| f.fails_run).count();
        let _ = writeln!(
            out,
            "Findings: {} rule(s) the broker departs from, {failing} failing the run (each once, with every kind of difference seen):",
            r.findings.len()
        );
        for f in &r.findings {
            finding_block(out, f, verbose, p);
        }
        let _ = writeln!(out);
    }
    if !r.accepted.is_empty() {
        let names: Vec<String> = r.accepted.iter().map(|a| a.to_string()).collect();
        let n = r.findings.iter().filter(|f| f.accepted).count();
        let _ = writeln!(
            out,
            "Accepted deviations (--accept): {} ({n} finding(s) accepted)\n",
            names.join(", ")
        );
    }
}

/// The failed entries, grouped by the level that decides whether they fail the run.
fn failures_section(out: &mut String, r: &Report, verbose: bool, p: Paint) {
    let failed: Vec<&Entry> = r
        .entries
        .iter()
        .filter(|e| e.verdict == Verdict::Failed)
        .collect();
    let groups = [
        (Level::Seed, "Failures (SEED rules: non-conformant)"),
        (
            Level::Project,
            if r.strict {
                "Failures on project-resolved points (--strict)"
            } else {
                "Differs on project-resolved points (fail only with --strict)"
            },
        ),
        (Level::Open, "Differs on OPEN points (never fails a run)"),
    ];
    for (level, title) in groups {
        let these: Vec<&&Entry> = failed.iter().filter(|e| e.level == level).collect();
        if these.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}:");
        for e in these {
            failure_block(out, e, verbose, p);
        }
        let _ = writeln!(out);
    }
}

/// The entries listed by id only: stale and excused expected failures, and skips.
fn listed_sections(out: &mut String, r: &Report) {
    for (v, title) in [
        (
            Verdict::StalePass,
            "Stale expected failures (they pass now; run with --fix)",
        ),
        (Verdict::ExpectedFailure, "Expected failures (excused)"),
    ] {
        let these: Vec<&Entry> = r.entries.iter().filter(|e| e.verdict == v).collect();
        if !these.is_empty() {
            let _ = writeln!(out, "{title}:");
            for e in these {
                let _ = writeln!(out, "  {} [{}]", e.id, e.level);
            }
            let _ = writeln!(out);
        }
    }
    let skipped: Vec<&Entry> = r
        .entries
        .iter()
        .filter(|e| e.verdict == Verdict::Skipped)
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(out, "Skipped:");
        for e in skipped {
            let _ = writeln!(
                out,
                "  {} ({})",
                e.id,
                e.skip_reason.as_deref().unwrap_or("")
            );
        }
        let _ = writeln!(out);
    }
}

/// The lockstep run: its size, coverage and counterexample.
fn lockstep_section(out: &mut String, l: &crate::lockstep::LockstepOutcome) {
    let _ = writeln!(
        out,
        "Lockstep: {} sequences of up to {} steps (seed {}, {} workers), {} exchanges checked, {} cut short as undecidable, {:.1} s",
        l.sequences, l.steps, l.seed, l.workers, l.exchanges, l.inconclusive, l.duration_ms as f64 / 1000.0
    );
    let ops: Vec<String> = l
        .coverage
        .operations
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(out, "  operations: {}", ops.join(", "));
    let outs: Vec<String> = l
        .coverage
        .outcomes
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(out, "  outcomes:   {}", outs.join(", "));
    let missing = l.coverage.missing();
    if !missing.is_empty() {
        let _ = writeln!(out, "  never reached: {}", missing.join(", "));
    }
    if let Some(c) = &l.counterexample {
        let _ = writeln!(
            out,
            "  counterexample: {} steps (shrunk from {}):",
            c.steps.len(),
            c.first_len
        );
        for s in &c.steps {
            let _ = writeln!(out, "    {}", s.to_rust());
        }
        for p in &c.saved {
            let _ = writeln!(out, "  saved: {}", p.display());
        }
        if c.saved.is_empty() {
            let _ = writeln!(out, "  curl script:");
            out.push_str(&indent(&super::bound::text(&c.curl), "    "));
        }
    }
    if !l.findings.is_empty() {
        let _ = writeln!(
            out,
            "  findings met: {} (listed under \"Findings\")",
            l.findings.len()
        );
    }
    if let Some(e) = &l.error {
        let _ = writeln!(out, "  error: {e}");
    }
    let _ = writeln!(out);
}

/// The rules that fail the run, the result and why, and the counts.
fn closing(out: &mut String, r: &Report, p: Paint) {
    let mut rules: Vec<String> = r
        .entries
        .iter()
        .filter(|e| e.fails_run)
        .flat_map(|e| {
            e.failure
                .as_ref()
                .map(|f| f.rules().iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| e.rules.clone())
        })
        .chain(
            r.findings
                .iter()
                .filter(|f| f.fails_run)
                .map(|f| f.finding.rule.to_string()),
        )
        .collect();
    rules.sort();
    rules.dedup();
    if !rules.is_empty() {
        let _ = writeln!(out, "Failing rules: {}", rules.join(", "));
    }
    let _ = writeln!(
        out,
        "RESULT: {} in {:.1} s",
        if r.passed() {
            p.green("PASS")
        } else {
            p.red("FAIL")
        },
        r.duration_ms as f64 / 1000.0
    );
    for problem in &r.problems {
        let _ = writeln!(out, "  - {problem}");
    }
    let _ = writeln!(out, "queen-conformance: {}", closing_counts(r));
}

/// The closing line's counts: every verdict that occurred, and what the selection left
/// out, so expected failures are never hidden behind "0 failed".
fn closing_counts(r: &Report) -> String {
    let mut parts = vec![
        format!("{} passed", r.count(Verdict::Passed)),
        format!(
            "{} failed",
            r.count(Verdict::Failed) + r.count(Verdict::StalePass)
        ),
    ];
    let expected = r.count(Verdict::ExpectedFailure);
    if expected > 0 {
        parts.push(format!(
            "{expected} expected failure{}",
            if expected == 1 { "" } else { "s" }
        ));
    }
    parts.push(format!("{} skipped", r.count(Verdict::Skipped)));
    if r.left_out > 0 {
        parts.push(format!("{} left out by the selection", r.left_out));
    }
    parts.join(", ")
}

/// Counts by capability and level, as a table.
fn counts_table(rows: &BTreeMap<(Capability, Level), [usize; 4]>) -> String {
    let mut t = Table::new();
    t.load_style(presets::ASCII_BORDERS_ONLY_CONDENSED)
        .set_header([
            "capability",
            "level",
            "passed",
            "failed",
            "skipped",
            "expected",
        ]);
    for ((cap, level), counts) in rows {
        let mut row = vec![cap.as_str().to_string(), level.as_str().to_string()];
        row.extend(counts.iter().map(|n| n.to_string()));
        t.add_row(row);
    }
    for c in 2..6 {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let escapes = |p: Paint| p.red("FAIL").contains('\u{1b}');
        assert!(escapes(Paint::when(true, None)));
        assert!(escapes(Paint::when(true, Some(""))));
        assert!(!escapes(Paint::when(true, Some("1"))));
        assert!(!escapes(Paint::when(false, None)));
        assert_eq!(Paint::PLAIN.green("PASS"), "PASS");
    }
}
