//! `--junit PATH`: JUnit XML for CI systems, written with `quick-junit` and valid
//! against the schema CI systems validate with (Jenkins xunit's `junit-10.xsd`; a test
//! checks it). One `<testsuite>` per capability, one `<testcase>` per case (and one
//! for the lockstep run); a failure that fails the run is a `<failure>`, an excused one
//! (PROJECT without `--strict`, OPEN, expected) is reported as `<skipped>` with the
//! reason, so the CI's red/green matches the exit status. A case's rules and level open
//! its `<system-out>` (the schema allows no properties on a test case). A case that
//! differs only on project-resolved points is therefore a `<skipped message="differs on
//! a PROJECT point ...">` with the rule ids and what differed in `<system-out>` without
//! `--strict`, and a `<failure type="project-difference">` with it. Findings are a
//! `<testsuite name="findings">` of their own, one `<testcase>` per distinct finding
//! named by its rule and kind, failing when it fails the run, with its diff and curl
//! script.

use super::{bound, Entry, FindingEntry, Report, Verdict};
use crate::case::Capability;
use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};
use std::collections::BTreeMap;
use std::time::Duration;

/// The report as JUnit XML.
pub fn render(r: &Report) -> String {
    let started: DateTime<FixedOffset> = Utc
        .timestamp_millis_opt(r.started_ms)
        .single()
        .unwrap_or_default()
        .fixed_offset();
    let host = hostname();
    let mut by_cap: BTreeMap<Capability, Vec<&Entry>> = BTreeMap::new();
    for e in &r.entries {
        by_cap.entry(e.capability).or_default().push(e);
    }
    let mut out = quick_junit::Report::new("queen-conformance");
    out.set_time(Duration::from_millis(r.duration_ms));
    for (cap, entries) in by_cap {
        let mut suite = TestSuite::new(cap.as_str());
        suite.set_timestamp(started);
        suite.extra.insert("hostname".into(), host.as_str().into());
        suite.add_properties(properties(r));
        let t: u64 = entries.iter().map(|e| e.duration_ms).sum();
        suite.set_time(Duration::from_millis(t));
        suite.add_test_cases(entries.into_iter().map(|e| case(e, cap)));
        out.add_test_suite(suite);
    }
    if !r.findings.is_empty() {
        let mut suite = TestSuite::new("findings");
        suite.set_timestamp(started);
        suite.extra.insert("hostname".into(), host.as_str().into());
        suite.set_time(Duration::ZERO);
        suite.add_test_cases(r.findings.iter().map(finding));
        out.add_test_suite(suite);
    }
    let xml = out.to_string().expect("a JUnit report serializes");
    without_root_skipped(xml)
}

/// What every suite says of the run: the target, the run and what it was checked against.
fn properties(r: &Report) -> Vec<Property> {
    vec![
        Property::new("target", r.target.as_str()),
        Property::new("run", r.run_id.as_str()),
        Property::new("suite-version", crate::version::SUITE),
        Property::new("git-revision", crate::version::GIT_REVISION),
        Property::new("spec-version", crate::version::SPEC),
    ]
}

fn case(e: &Entry, cap: Capability) -> TestCase {
    let headline = e.failure.as_ref().map(|f| f.headline()).unwrap_or_default();
    let details = e
        .failure
        .as_ref()
        .map(|f| bound::text(&f.details()).into_owned());
    let status = match e.verdict {
        Verdict::Passed => TestCaseStatus::success(),
        Verdict::Skipped => skipped(e.skip_reason.as_deref().unwrap_or("")),
        Verdict::StalePass => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message("passed, but listed as an expected failure")
                .set_type("stale-expectation");
            s
        }
        Verdict::ExpectedFailure => skipped(&format!("expected failure: {headline}")),
        Verdict::Failed if e.fails_run => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("[{}] {headline}", e.level))
                .set_type(e.failure.as_ref().map_or("failure", |f| f.kind()))
                .set_description(format!(
                    "{}\n{}",
                    details.as_deref().unwrap_or(""),
                    e.curl.as_deref().unwrap_or("")
                ));
            s
        }
        Verdict::Failed => skipped(&format!(
            "differs on a {} point (does not fail the run): {headline}",
            e.level
        )),
    };
    let mut tc = TestCase::new(e.id.as_str(), status);
    tc.set_classname(format!("queen.conformance.{}", cap.as_str()))
        .set_time(Duration::from_millis(e.duration_ms));
    let mut out = format!("rules: {} ({})\n", e.rules.join(", "), e.level);
    if let Some(d) = &details {
        out.push_str(d);
    }
    tc.set_system_out(out);
    tc
}

fn skipped(message: &str) -> TestCaseStatus {
    let mut s = TestCaseStatus::skipped();
    s.set_message(message);
    s
}

/// One distinct finding as a test case.
fn finding(e: &FindingEntry) -> TestCase {
    let n = &e.finding;
    let diff: String = e
        .diff
        .iter()
        .map(|d| format!("{}\n", bound::text(&d.to_string())))
        .collect();
    let body = format!("{n}\nseen in: {}\n{diff}\n{}", e.seen_in.join(", "), e.curl);
    let status = if e.fails_run {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(format!("[{}] {n}", n.level))
            .set_type("finding")
            .set_description(body.as_str());
        s
    } else {
        let why = if e.accepted {
            "accepted (--accept)"
        } else {
            "does not fail the run"
        };
        skipped(&format!("[{}] {why}: {n}", n.level))
    };
    let mut tc = TestCase::new(format!("{} [{}]", n.rule, n.level), status);
    tc.set_classname("queen.conformance.findings")
        .set_time(Duration::ZERO)
        .set_system_out(body);
    tc
}

/// The machine's name, for the suites' `hostname` (CI systems show where a run ran).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// `quick-junit` always counts skipped tests on `<testsuites>`, an attribute
/// `junit-10.xsd` does not allow there (each `<testsuite>` still carries its own
/// count), so it is taken off the root element.
fn without_root_skipped(xml: String) -> String {
    let Some(start) = xml.find("<testsuites") else {
        return xml;
    };
    let Some(len) = xml[start..].find('>') else {
        return xml;
    };
    let tag = &xml[start..start + len];
    let Some(at) = tag.find(" skipped=\"") else {
        return xml;
    };
    let value_end = tag[at + 10..].find('"').map(|i| at + 10 + i + 1);
    match value_end {
        Some(end) => format!("{}{}", &xml[..start + at], &xml[start + end..]),
        None => xml,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_loses_its_skipped_count_and_nothing_else() {
        let xml = "<?xml version=\"1.0\"?>\n<testsuites name=\"q\" tests=\"3\" skipped=\"1\" failures=\"0\" errors=\"0\">\n<testsuite name=\"a\" skipped=\"1\">".to_string();
        assert_eq!(
            without_root_skipped(xml),
            "<?xml version=\"1.0\"?>\n<testsuites name=\"q\" tests=\"3\" failures=\"0\" errors=\"0\">\n<testsuite name=\"a\" skipped=\"1\">"
        );
    }
}
