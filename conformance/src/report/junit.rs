//! `--junit PATH`: JUnit XML for CI systems. One `<testsuite>` per capability, one
//! `<testcase>` per case (and one for the lockstep run); a failure that fails the run is
//! a `<failure>`, an excused one (PROJECT without `--strict`, OPEN, expected) is
//! reported as `<skipped>` with the reason, so the CI's red/green matches the exit
//! status. Rules and level are in each test case's `<properties>` and output. A case
//! that differs only on project-resolved points is therefore a `<skipped message="differs
//! on a PROJECT point ...">` with the rule ids and what differed in `<system-out>`
//! without `--strict`, and a `<failure type="project-difference">` with it. Findings are
//! a `<testsuite name="findings">` of their own, one `<testcase>` per distinct finding
//! named by its rule and kind, failing when it fails the run, with its diff and curl
//! script.

use super::{Report, Verdict};
use crate::case::Capability;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Escapes text for XML attributes and content (and drops characters XML 1.0 forbids).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

/// The report as JUnit XML.
pub fn render(r: &Report) -> String {
    let mut by_cap: BTreeMap<Capability, Vec<&super::Entry>> = BTreeMap::new();
    for e in &r.entries {
        by_cap.entry(e.capability).or_default().push(e);
    }
    let failing = |e: &super::Entry| e.fails_run;
    let total = r.entries.len() + r.findings.len();
    let failures = r.entries.iter().filter(|e| failing(e)).count()
        + r.findings.iter().filter(|f| f.fails_run).count();
    let skipped = r
        .entries
        .iter()
        .filter(|e| !failing(e) && e.verdict != Verdict::Passed)
        .count()
        + r.findings.iter().filter(|f| !f.fails_run).count();
    let mut x = String::new();
    let _ = writeln!(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        x,
        "<testsuites name=\"queen-conformance\" tests=\"{total}\" failures=\"{failures}\" skipped=\"{skipped}\" errors=\"0\" time=\"{:.3}\">",
        r.duration_ms as f64 / 1000.0
    );
    for (cap, entries) in by_cap {
        let f = entries.iter().filter(|e| failing(e)).count();
        let s = entries
            .iter()
            .filter(|e| !failing(e) && e.verdict != Verdict::Passed)
            .count();
        let t: u64 = entries.iter().map(|e| e.duration_ms).sum();
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" skipped=\"{s}\" errors=\"0\" time=\"{:.3}\">",
            esc(cap.as_str()),
            entries.len(),
            t as f64 / 1000.0
        );
        let _ = writeln!(x, "    <properties><property name=\"target\" value=\"{}\"/><property name=\"run\" value=\"{}\"/><property name=\"suite-version\" value=\"{}\"/><property name=\"git-revision\" value=\"{}\"/><property name=\"spec-version\" value=\"{}\"/></properties>", esc(&r.target), esc(&r.run_id), crate::version::SUITE, esc(crate::version::GIT_REVISION), crate::version::SPEC);
        for e in entries {
            let _ = writeln!(
                x,
                "    <testcase name=\"{}\" classname=\"queen.conformance.{}\" time=\"{:.3}\">",
                esc(&e.id),
                esc(cap.as_str()),
                e.duration_ms as f64 / 1000.0
            );
            let _ = writeln!(
                x,
                "      <properties><property name=\"level\" value=\"{}\"/><property name=\"rules\" value=\"{}\"/></properties>",
                e.level,
                esc(&e.rules.join(","))
            );
            let headline = e.failure.as_ref().map(|f| f.headline()).unwrap_or_default();
            let details = e
                .failure
                .as_ref()
                .map(|f| super::bound::text(&f.details()).into_owned())
                .unwrap_or_default();
            match e.verdict {
                Verdict::Passed => {}
                Verdict::Skipped => {
                    let _ = writeln!(
                        x,
                        "      <skipped message=\"{}\"/>",
                        esc(e.skip_reason.as_deref().unwrap_or(""))
                    );
                }
                Verdict::StalePass => {
                    let _ = writeln!(x, "      <failure message=\"passed, but listed as an expected failure\" type=\"stale-expectation\"/>");
                }
                Verdict::ExpectedFailure => {
                    let _ = writeln!(
                        x,
                        "      <skipped message=\"expected failure: {}\"/>",
                        esc(&headline)
                    );
                }
                Verdict::Failed if e.fails_run => {
                    let kind = e.failure.as_ref().map_or("failure", |f| f.kind());
                    let _ = writeln!(
                        x,
                        "      <failure message=\"{}\" type=\"{}\">{}\n{}</failure>",
                        esc(&format!("[{}] {headline}", e.level)),
                        esc(kind),
                        esc(&details),
                        esc(e.curl.as_deref().unwrap_or(""))
                    );
                }
                Verdict::Failed => {
                    let _ = writeln!(
                        x,
                        "      <skipped message=\"{}\"/>",
                        esc(&format!(
                            "differs on a {} point (does not fail the run): {headline}",
                            e.level
                        ))
                    );
                }
            }
            if e.failure.is_some() {
                let _ = writeln!(x, "      <system-out>{}</system-out>", esc(&details));
            }
            let _ = writeln!(x, "    </testcase>");
        }
        let _ = writeln!(x, "  </testsuite>");
    }
    findings(&mut x, r);
    let _ = writeln!(x, "</testsuites>");
    x
}

/// The findings suite: one test case per distinct finding.
fn findings(x: &mut String, r: &Report) {
    if r.findings.is_empty() {
        return;
    }
    let f = r.findings.iter().filter(|f| f.fails_run).count();
    let _ = writeln!(
        x,
        "  <testsuite name=\"findings\" tests=\"{}\" failures=\"{f}\" skipped=\"{}\" errors=\"0\" time=\"0\">",
        r.findings.len(),
        r.findings.len() - f
    );
    for e in &r.findings {
        let n = &e.finding;
        let _ = writeln!(
            x,
            "    <testcase name=\"{}\" classname=\"queen.conformance.findings\" time=\"0\">",
            esc(&format!("{} [{}]", n.rule, n.level))
        );
        let diff: String = e
            .diff
            .iter()
            .map(|d| format!("{}\n", super::bound::text(&d.to_string())))
            .collect();
        let body = format!("{n}\nseen in: {}\n{diff}\n{}", e.seen_in.join(", "), e.curl);
        if e.fails_run {
            let _ = writeln!(
                x,
                "      <failure message=\"{}\" type=\"finding\">{}</failure>",
                esc(&format!("[{}] {n}", n.level)),
                esc(&body)
            );
        } else {
            let why = if e.accepted {
                "accepted (--accept)"
            } else {
                "does not fail the run"
            };
            let _ = writeln!(
                x,
                "      <skipped message=\"{}\"/>",
                esc(&format!("[{}] {why}: {n}", n.level))
            );
        }
        let _ = writeln!(x, "      <system-out>{}</system-out>", esc(&body));
        let _ = writeln!(x, "    </testcase>");
    }
    let _ = writeln!(x, "  </testsuite>");
}
