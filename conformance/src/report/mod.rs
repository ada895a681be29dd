//! The verdict of a run and its reports. [`Report::build`] applies the rules of the
//! exit status to the raw results. A failure counts at the level of the rules it breaks
//! (a PROJECT rule never fails a SEED case as a SEED failure): SEED failures fail the
//! run, PROJECT ones only with `--strict` (listed apart as "differs on project-resolved
//! points"), OPEN ones never. Every departure the checker recorded is one [`FindingEntry`]
//! however many cases met it, with its rule, an example exchange, a diff and a curl
//! repro; an unaccepted SEED finding fails the run (a PROJECT one with `--strict`).
//! Expected failures are excused and stale ones are failures; a run that executed no
//! case fails; a broker that stopped answering ends the run with exit status 3.

pub mod accepts;
pub mod bound;
pub mod document;
pub mod json;
pub mod junit;
pub mod problem;
pub mod terminal;

use crate::case::{Capability, Failure};
use crate::concurrent::Scenario;
use crate::concurrent::CONCURRENT_ID;
use crate::exchange::Exchange;
use crate::findings::Example;
use crate::lockstep::repro::{curl_marked, curl_script};
use crate::lockstep::LockstepOutcome;
use crate::rules::{Level, RuleId, ACK_1, ACK_2, ACK_4, ACK_6, ACK_7, PUSH_7};
use crate::runner::{RunResults, Status};
use queen_reference::diff::{diff, Difference};
use queen_reference::finding::{Accept, Finding, Kind};
use std::collections::BTreeSet;

pub use crate::lockstep::LOCKSTEP_ID;
pub use problem::Problem;

/// A case's final verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
// Variant docs only for rustdoc, as for `Capability`: they keep the schema's plain `enum`.
#[cfg_attr(not(doc), allow(missing_docs))]
pub enum Verdict {
    #[cfg_attr(doc, doc = "Every answer was allowed and every assertion held.")]
    Passed,
    #[cfg_attr(doc, doc = "An answer was not allowed, or an assertion failed.")]
    Failed,
    #[cfg_attr(doc, doc = "Not run: a capability it needs is excluded or missing.")]
    Skipped,
    /// Failed, and listed in the expected-failures file, or failed only through
    /// deviations accepted with `--accept`.
    ExpectedFailure,
    /// Passed, but listed as an expected failure: the list is out of date.
    StalePass,
}

impl Verdict {
    /// The verdict's kebab-case name, as the reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Skipped => "skipped",
            Verdict::ExpectedFailure => "expected failure",
            Verdict::StalePass => "stale (passed but expected to fail)",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The case's id, or the property run's or concurrent scenario's.
    pub id: String,
    /// The rule ids checked.
    pub rules: Vec<String>,
    /// The level of the rules checked.
    pub level: Level,
    /// The capability needed.
    pub capability: Capability,
    /// How it ended.
    pub verdict: Verdict,
    /// Why it was skipped.
    pub(crate) skip_reason: Option<String>,
    /// Why it failed.
    pub failure: Option<Failure>,
    /// Its exchanges with the broker (kept for failures).
    pub transcript: Vec<Exchange>,
    /// A curl script replaying a failure.
    pub curl: Option<String>,
    /// How long it took (ms).
    pub duration_ms: u64,
    /// Whether this entry fails the run.
    pub fails_run: bool,
}

/// One departure of the broker from one rule (at one level), however many cases met it,
/// in however many places and kinds of difference.
#[derive(Clone, Debug)]
pub struct FindingEntry {
    /// The first instance.
    pub finding: Finding,
    /// Every distinct instance (its own text, path and example), the first included.
    pub(crate) instances: Vec<Finding>,
    /// Covered by `--accept`: listed, never a failure.
    pub accepted: bool,
    /// Where it was met: case ids (and `lockstep/property-run`), in catalog order.
    pub seen_in: Vec<String>,
    /// The first instance: the transcript up to it.
    pub(crate) example: Example,
    /// Every difference between the model's answer and the broker's at that exchange.
    pub(crate) diff: Vec<Difference>,
    /// A script replaying the example.
    pub curl: String,
    /// Whether the finding fails the run.
    pub fails_run: bool,
}

/// A finished run, judged.
pub struct Report {
    /// The run's id: 8 hex digits, in the queue names it made (`cf<run>c<case>-...`).
    pub run_id: String,
    /// The broker checked, as the reports describe it.
    pub target: String,
    /// When the run started (ms since the Unix epoch).
    pub(crate) started_ms: i64,
    /// How long the run took (ms).
    pub duration_ms: u64,
    /// Whether PROJECT departures fail the run (`--strict`).
    pub strict: bool,
    /// One entry per selected case, property run and concurrent scenario.
    pub entries: Vec<Entry>,
    /// The lockstep property run, if it ran.
    pub lockstep: Option<LockstepOutcome>,
    /// The concurrent scenario (`run --concurrency N`), with its anomaly counts.
    pub concurrent: Option<Scenario>,
    /// Where the timeline of a concurrent history that is not linearizable was written.
    pub timeline: Option<std::path::PathBuf>,
    /// The capabilities excluded with `--without`.
    pub without: BTreeSet<Capability>,
    /// Every distinct finding, by rule.
    pub findings: Vec<FindingEntry>,
    /// The deviations declared known (`--accept`).
    pub accepted: Vec<Accept>,
    /// Set when the broker stopped answering during the run (exit status 3).
    pub target_down: Option<String>,
    /// Why the run fails (empty: it passes).
    pub problems: Vec<Problem>,
    /// Catalog cases the selection (`--only`, `--rule`, `--skip`) left out.
    pub left_out: usize,
}

impl Entry {
    /// Applies the expected failures (and `--accept`) to this entry's own verdict, from
    /// scratch so that a run can be judged again; the problem it raises, if any.
    fn judge(
        &mut self,
        expected: &BTreeSet<String>,
        accepted: &[Accept],
        strict: bool,
    ) -> Option<Problem> {
        self.verdict = match self.verdict {
            Verdict::ExpectedFailure => Verdict::Failed,
            Verdict::StalePass => Verdict::Passed,
            v => v,
        };
        self.fails_run = false;
        let excused = matches!(&self.failure, Some(Failure::Findings(fs))
            if !fs.is_empty() && fs.iter().all(|f| accepted.iter().any(|a| a.covers(f))));
        let listed = expected.contains(&self.id) || (excused && self.verdict == Verdict::Failed);
        match (self.verdict, listed) {
            (Verdict::Failed, true) => {
                self.verdict = Verdict::ExpectedFailure;
                None
            }
            (Verdict::Passed, true) => {
                self.verdict = Verdict::StalePass;
                self.fails_run = true;
                Some(Problem::StalePass {
                    id: self.id.clone(),
                })
            }
            (Verdict::Failed, false) => {
                self.fails_run = fails(self.level, strict);
                self.fails_run.then(|| Problem::CaseFailed {
                    id: self.id.clone(),
                    level: self.level,
                })
            }
            _ => None,
        }
    }
}

/// Every departure the checker recorded while the cases and the lockstep run went on,
/// in the order the findings list keeps its first instances.
fn recorded_examples(results: &RunResults) -> Vec<Example> {
    let mut examples = Vec::new();
    for o in &results.cases {
        examples.extend(Example::all(
            &o.findings,
            &o.transcript,
            &o.prefix,
            o.case.id,
        ));
    }
    if let Some(l) = &results.lockstep {
        examples.extend(l.findings.iter().cloned());
    }
    examples
}

/// A case's outcome as an entry, with its divergence as an example for the findings.
fn case_entry(o: crate::runner::CaseOutcome) -> (Entry, Option<Example>) {
    let (verdict, skip_reason, failure) = match o.status {
        Status::Passed => (Verdict::Passed, None, None),
        Status::Failed(f) => (Verdict::Failed, None, Some(f)),
        Status::Skipped(why) => (Verdict::Skipped, Some(why), None),
    };
    let curl = failure
        .as_ref()
        .map(|f| bound::text(&curl_script(&o.transcript, &o.prefix, Some(f))).into_owned());
    let level = failure
        .as_ref()
        .map_or(o.case.level, |f| f.level(o.case.level));
    let divergence = failure
        .as_ref()
        .and_then(|f| divergence_example(f, level, &o.transcript, &o.prefix, o.case.id));
    let entry = Entry {
        id: o.case.id.to_string(),
        rules: o.case.rules.iter().map(|r| r.to_string()).collect(),
        level,
        capability: o.case.capability,
        verdict,
        skip_reason,
        failure,
        transcript: o.transcript,
        curl,
        duration_ms: o.duration_ms,
        fails_run: false,
    };
    (entry, divergence)
}

/// The lockstep counterexample's divergence as an example for the findings.
fn lockstep_divergence(l: &LockstepOutcome) -> Option<Example> {
    let c = l.counterexample.as_ref()?;
    let level = c.failure.level(Level::Seed);
    // The counterexample's own script (in its entry) makes the names fresh; this one
    // replays them as they were.
    divergence_example(&c.failure, level, &c.transcript, "", LOCKSTEP_ID)
}

/// The lockstep run as one entry: failed by its counterexample, or by the error that
/// ended it (the broker going down when `target_down`).
fn lockstep_entry(l: &LockstepOutcome, target_down: bool) -> Entry {
    let failure = l.counterexample.as_ref().map(|c| c.failure.clone());
    let rules: Vec<String> = failure
        .as_ref()
        .map(|f| f.rules().iter().map(|r| r.to_string()).collect())
        .unwrap_or_default();
    let level = failure
        .as_ref()
        .map_or(Level::Seed, |f| f.level(Level::Seed));
    let (verdict, failure) = match (&l.error, failure) {
        (_, Some(f)) => (Verdict::Failed, Some(f)),
        (Some(e), None) if target_down => (Verdict::Failed, Some(Failure::TargetDown(e.clone()))),
        (Some(e), None) => (Verdict::Failed, Some(Failure::Transport(e.clone()))),
        (None, None) => (Verdict::Passed, None),
    };
    Entry {
        id: LOCKSTEP_ID.to_string(),
        rules,
        level,
        capability: Capability::Core,
        verdict,
        skip_reason: None,
        failure,
        transcript: l
            .counterexample
            .as_ref()
            .map(|c| c.transcript.clone())
            .unwrap_or_default(),
        curl: l
            .counterexample
            .as_ref()
            .map(|c| bound::text(&c.curl).into_owned()),
        duration_ms: l.duration_ms,
        fails_run: false,
    }
}

/// The rules the concurrent scenario checks: linearizability against the model covers
/// every rule its calls touch; the drain invariants name these.
const CONCURRENT_RULES: [RuleId; 6] = [PUSH_7, ACK_1, ACK_2, ACK_4, ACK_6, ACK_7];

/// The concurrent scenario as one entry: failed when the history is not shown
/// linearizable (a violation, or a search out of budget) or any anomaly is bad.
fn concurrent_entry(c: &Scenario) -> Entry {
    let lin = c.outcome.verdict_name();
    let failure = if let Some(why) = c.inconclusive_reason() {
        // Calls went unanswered: never called linearizable, whatever the search found.
        Some(Failure::Inconclusive { step: 0, why })
    } else if lin == "unknown" && c.invariants.passed() {
        Some(Failure::Inconclusive {
            step: 0,
            why: "the linearizability search could not decide (budget exhausted or the \
                  model undecided); see the concurrent section"
                .into(),
        })
    } else if !c.passed() {
        let bad: Vec<String> = c
            .invariants
            .counts()
            .into_iter()
            .filter(|(_, n)| n.bad > 0)
            .map(|(k, n)| format!("{k} {}", n.bad))
            .collect();
        Some(Failure::Assertion {
            message: format!(
                "concurrent history: {lin}; bad anomalies: {}",
                if bad.is_empty() {
                    "none".to_string()
                } else {
                    bad.join(", ")
                }
            ),
            rules: CONCURRENT_RULES.to_vec(),
        })
    } else {
        None
    };
    Entry {
        id: CONCURRENT_ID.to_string(),
        rules: CONCURRENT_RULES.iter().map(|r| r.to_string()).collect(),
        level: Level::Seed,
        capability: Capability::Core,
        verdict: if failure.is_some() {
            Verdict::Failed
        } else {
            Verdict::Passed
        },
        skip_reason: None,
        failure,
        transcript: vec![],
        curl: None,
        duration_ms: c.duration_ms,
        fails_run: false,
    }
}

impl Report {
    /// Judges `results` under `--strict` and the expected failures.
    pub fn build(results: RunResults, strict: bool, expected: &BTreeSet<String>) -> Report {
        Report::build_with(results, strict, expected, &[])
    }

    /// [`Report::build`] with the deviations declared known (`--accept`).
    pub fn build_with(
        results: RunResults,
        strict: bool,
        expected: &BTreeSet<String>,
        accepted: &[Accept],
    ) -> Report {
        let mut examples = recorded_examples(&results);
        let mut entries = Vec::new();
        for o in results.cases {
            let (entry, divergence) = case_entry(o);
            examples.extend(divergence);
            entries.push(entry);
        }
        if let Some(l) = &results.lockstep {
            examples.extend(lockstep_divergence(l));
            entries.push(lockstep_entry(l, results.target_down.is_some()));
        }
        if let Some(c) = &results.concurrent {
            entries.push(concurrent_entry(c));
        }
        let findings = findings(examples, accepted, strict);
        let mut report = Report {
            run_id: results.run_id,
            target: results.target_label,
            started_ms: results.started_ms,
            duration_ms: results.duration_ms,
            strict,
            entries,
            lockstep: results.lockstep,
            concurrent: results.concurrent,
            timeline: None,
            without: results.without,
            findings,
            accepted: accepted.to_vec(),
            target_down: results.target_down,
            left_out: results.left_out,
            problems: vec![],
        };
        report.judge(expected);
        report
    }

    /// Judges every entry against the expected failures (again, after `--fix` rewrote
    /// them) and lists why the run fails: the broker going down first, then the entries,
    /// the findings, and a run that executed nothing.
    pub(crate) fn judge(&mut self, expected: &BTreeSet<String>) {
        let mut problems: Vec<Problem> = self
            .target_down
            .iter()
            .map(|why| Problem::TargetDown(why.clone()))
            .collect();
        for e in &mut self.entries {
            problems.extend(e.judge(expected, &self.accepted, self.strict));
        }
        problems.extend(
            self.findings
                .iter()
                .filter(|f| f.fails_run)
                .map(|f| Problem::Finding(f.finding.clone())),
        );
        if self.entries.iter().all(|e| e.verdict == Verdict::Skipped) {
            problems.push(Problem::NothingRan);
        }
        self.problems = problems;
    }

    /// Whether the run passes (no problem).
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }

    /// The process exit status: 0 when the run passes, 1 when the broker departs from
    /// the protocol, 3 when the broker stopped answering during the run (2, the suite
    /// could not run at all, is decided before a report exists).
    pub fn exit_code(&self) -> i32 {
        if self.target_down.is_some() {
            3
        } else if self.passed() {
            0
        } else {
            1
        }
    }

    /// Ids of every failed case (expected or not): what `--fix` writes.
    pub(crate) fn failing_ids(&self) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|e| matches!(e.verdict, Verdict::Failed | Verdict::ExpectedFailure))
            .map(|e| e.id.clone())
            .collect()
    }

    /// How many entries ended with this verdict.
    pub fn count(&self, v: Verdict) -> usize {
        self.entries.iter().filter(|e| e.verdict == v).count()
    }
}

/// One entry per broken rule (and level), from the first example of each, in rule
/// order; each fails the run at its level unless every instance is accepted.
fn findings(examples: Vec<Example>, accepted: &[Accept], strict: bool) -> Vec<FindingEntry> {
    let mut out: Vec<FindingEntry> = Vec::new();
    let group = |f: &Finding| (f.rule, f.level);
    for e in examples {
        let f = &e.seen.finding;
        if let Some(x) = out.iter_mut().find(|x| group(&x.finding) == group(f)) {
            if !x.seen_in.contains(&e.origin) {
                x.seen_in.push(e.origin.clone());
            }
            if !x.instances.iter().any(|i| i.key() == f.key()) {
                x.instances.push(f.clone());
                if !accepted.iter().any(|a| a.covers(f)) {
                    x.accepted = false;
                    x.fails_run = fails(f.level, strict);
                }
            }
            continue;
        }
        let f = e.seen.finding.clone();
        let is_accepted = accepted.iter().any(|a| a.covers(&f));
        let fails_run = !is_accepted && fails(f.level, strict);
        let at = e.seen.step;
        let diff = match (&e.seen.expected, e.transcript.get(at)) {
            (Some(want), Some(x)) => diff(want, &x.response),
            _ => vec![],
        };
        let mark = vec![format!(">>> FINDING HERE: {f}")];
        let curl =
            bound::text(&curl_marked(&e.transcript, &e.prefix, Some((at, mark)))).into_owned();
        out.push(FindingEntry {
            seen_in: vec![e.origin.clone()],
            instances: vec![f.clone()],
            finding: f,
            accepted: is_accepted,
            example: e,
            diff,
            curl,
            fails_run,
        });
    }
    out.sort_by(|a, b| a.finding.cmp(&b.finding));
    out
}

/// A divergence as a finding of kind `state` under the first rule whose check failed, so
/// that a state departure is listed by rule beside the answer-only ones.
fn divergence_example(
    f: &Failure,
    level: Level,
    transcript: &[Exchange],
    prefix: &str,
    origin: &str,
) -> Option<Example> {
    let Failure::Diverged { step, divergence } = f else {
        return None;
    };
    let rule = *divergence.rules.first()?;
    let mut finding = Finding::new(
        rule,
        Kind::State,
        "what the broker did differs from every allowed outcome",
    )
    .at_level(level);
    if let Some(why) = divergence.reasons.first() {
        finding = finding.example(why.clone());
    }
    Some(Example {
        seen: crate::findings::Seen {
            finding,
            step: *step,
            expected: divergence.expected.first().cloned(),
        },
        origin: origin.to_string(),
        prefix: prefix.to_string(),
        transcript: transcript[..(*step + 1).min(transcript.len())].to_vec(),
    })
}

/// Whether an unaccepted departure at `level` fails the run.
fn fails(level: Level, strict: bool) -> bool {
    match level {
        Level::Seed => true,
        Level::Project => strict,
        Level::Open => false,
    }
}
