//! The JSON report (`run --json`) as types. Tools that read the report need its shape to
//! be a contract, not whatever a run happened to print: these types are that contract.
//! `spec/report.schema.json` is generated from them (`queen-conformance report-schema`
//! prints it) and checked in; a test fails when the two drift apart, and the reports
//! the tests write are validated against it.
//!
//! Values the suite takes from the reference model (findings, differences) serialize
//! through the model's own types; the schema of each is described here by a
//! schema-only twin (`FindingSchema`, `DifferenceSchema`) that rejects unknown members,
//! so a field added on one side and not the other fails validation.
//!
//! A field documented with `#[schemars(description = "")]` keeps its doc out of the
//! schema, which describes only the fields it described when it was checked in.

use crate::case::Capability;
use crate::lockstep::coverage::Coverage;
use crate::report::Verdict;
use queen_reference::diff::Difference;
use queen_reference::finding::Finding;
use queen_reference::rules::Level;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A `queen-conformance run` report.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "queen-conformance report")]
pub struct Document {
    /// Always `queen-conformance`.
    pub(crate) tool: &'static str,
    /// The suite's version.
    pub(crate) suite_version: &'static str,
    /// The git revision the suite was built from (`unknown` outside a checkout).
    pub(crate) git_revision: &'static str,
    /// The version of `spec/PROTOCOL.md` the suite checks.
    pub(crate) spec_version: &'static str,
    /// The run's id: 8 hex digits, in the queue names it made (`cf<run>c<case>-...`).
    #[schemars(description = "")]
    pub run_id: String,
    /// The broker checked (its URL, or which embedded engine).
    pub target: String,
    /// When the run started (RFC 3339, UTC).
    pub(crate) started_at: String,
    /// How long the run took (ms).
    #[schemars(description = "")]
    pub duration_ms: u64,
    /// Whether PROJECT departures failed the run (`--strict`).
    pub strict: bool,
    /// The capabilities excluded with `--without`.
    pub without: Vec<Capability>,
    /// Whether the run passed.
    #[schemars(description = "")]
    pub passed: bool,
    /// Why the run fails (empty when it passes).
    pub problems: Vec<String>,
    /// 0 conformant, 1 not conformant, 3 the broker stopped answering.
    pub exit_code: i32,
    /// Why the run was cut short, when the broker stopped answering.
    pub target_down: Option<String>,
    /// The deviations declared known (`--accept`), as `RULE-ID[:kind]`.
    pub accepted: Vec<String>,
    /// Every distinct departure, by rule.
    pub findings: Vec<FindingEntryDoc>,
    /// How many cases ended each way.
    #[schemars(description = "")]
    pub summary: Summary,
    /// Every selected case (and the property run and the concurrent scenario).
    pub cases: Vec<CaseDoc>,
    /// The lockstep property run, if it ran.
    #[schemars(description = "")]
    pub lockstep: Option<LockstepDoc>,
    /// The concurrent scenario (`run --concurrency N`): its workload, the
    /// linearizability verdict per queue, the drain and the anomaly counts.
    pub concurrent: Option<Value>,
}

/// How many cases ended each way.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Cases that passed.
    #[schemars(description = "")]
    pub passed: usize,
    /// Cases that failed.
    #[schemars(description = "")]
    pub failed: usize,
    /// Cases skipped.
    #[schemars(description = "")]
    pub skipped: usize,
    /// Cases that failed as listed in the expectations.
    #[schemars(description = "")]
    pub(crate) expected_failures: usize,
    /// Passed, but listed as expected failures.
    pub stale: usize,
    /// Catalog cases the selection left out (not run, not listed).
    pub left_out: usize,
}

/// One case's outcome.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaseDoc {
    /// The case's id.
    #[schemars(description = "")]
    pub id: String,
    /// The rule ids the case checks.
    pub rules: Vec<String>,
    #[schemars(with = "LevelSchema")]
    /// The level of the rules checked.
    #[schemars(description = "")]
    pub level: Level,
    /// The capability the case needs.
    #[schemars(description = "")]
    pub capability: Capability,
    /// How the case ended.
    #[schemars(description = "")]
    pub verdict: Verdict,
    /// Whether the case fails the run.
    #[schemars(description = "")]
    pub fails_run: bool,
    /// How long the case took (ms).
    #[schemars(description = "")]
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why the case was skipped.
    #[schemars(description = "")]
    pub(crate) skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why the case failed.
    #[schemars(description = "")]
    pub failure: Option<FailureDoc>,
    /// Every exchange of a failed case, up to the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Vec<ExchangeDoc>>,
    /// A shell script replaying a failed case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curl: Option<String>,
}

/// Why a case failed.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDoc {
    /// `diverged`, `assertion`, `findings`, `project-difference`, `timeout`, ...
    pub kind: &'static str,
    /// What went wrong, in a sentence.
    #[schemars(description = "")]
    pub message: String,
    /// The rule ids involved.
    #[schemars(description = "")]
    pub rules: Vec<String>,
    /// For a divergence: the exchange (0-based) where the broker's answer was not allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// For a divergence: the request whose answer was not allowed.
    #[schemars(description = "")]
    pub request: Option<RequestDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// For a divergence: the broker's answer.
    #[schemars(description = "")]
    pub(crate) actual: Option<AnswerDoc>,
    /// Every answer the model allowed there, and why the broker's differs from each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<AllowedDoc>>,
    /// The departures that failed a case whose every answer was allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<FindingSchema>>")]
    pub findings: Option<Vec<Finding>>,
}

pub use crate::exchange::RequestDoc;

/// An answer: its status and body (null when it had none).
#[derive(Serialize, JsonSchema)]
pub struct AnswerDoc {
    /// The HTTP status.
    #[schemars(description = "")]
    pub status: u16,
    /// The JSON body (null when there was none).
    #[schemars(description = "")]
    pub body: Value,
}

/// An answer the model allowed, and how the broker's differs from it.
#[derive(Serialize, JsonSchema)]
pub struct AllowedDoc {
    /// The HTTP status allowed.
    #[schemars(description = "")]
    pub status: u16,
    /// The JSON body allowed.
    #[schemars(description = "")]
    pub body: Value,
    /// How the broker's answer differs from it.
    #[schemars(description = "")]
    pub differs: String,
}

/// One exchange of a transcript.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeDoc {
    /// The request sent.
    #[schemars(description = "")]
    pub request: RequestDoc,
    /// The broker's answer.
    #[schemars(description = "")]
    pub response: AnswerDoc,
    /// When it was sent (ms since the Unix epoch).
    pub(crate) sent_ms: i64,
    /// How long the answer took (ms).
    #[schemars(description = "")]
    pub(crate) took_ms: i64,
    /// How many model states were still possible after it.
    pub(crate) worlds: usize,
}

/// One distinct departure of the broker from one rule.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingEntryDoc {
    #[schemars(with = "FindingSchema")]
    /// The first instance of the finding.
    #[schemars(description = "")]
    pub finding: Finding,
    /// Every distinct instance, the first included.
    #[schemars(with = "Vec<FindingSchema>")]
    pub(crate) instances: Vec<Finding>,
    /// Covered by `--accept`.
    pub accepted: bool,
    /// Whether the finding fails the run.
    #[schemars(description = "")]
    pub fails_run: bool,
    /// Where it was met: case ids and `lockstep/property-run`.
    pub seen_in: Vec<String>,
    /// The exchange where it was first seen.
    #[schemars(description = "")]
    pub(crate) example: ExampleDoc,
    /// Every difference between the model's answer and the broker's there.
    #[schemars(with = "Vec<DifferenceSchema>")]
    pub(crate) diff: Vec<Difference>,
    /// A shell script replaying the example.
    pub curl: String,
}

/// Where a finding was first seen.
#[derive(Serialize, JsonSchema)]
pub struct ExampleDoc {
    /// Where it was seen: a case id or `lockstep/property-run`.
    #[schemars(description = "")]
    pub(crate) origin: String,
    /// The exchange's index in that transcript.
    #[schemars(description = "")]
    pub step: usize,
    /// The request sent there.
    #[schemars(description = "")]
    pub request: Option<RequestDoc>,
    /// The broker's answer.
    #[schemars(description = "")]
    pub(crate) actual: Option<AnswerDoc>,
    /// The model's answer.
    #[schemars(description = "")]
    pub expected: Option<AnswerDoc>,
}

/// The lockstep property run.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockstepDoc {
    /// The seed, as a string (it may exceed what a JSON number holds exactly).
    pub seed: String,
    /// Parallel runners.
    #[schemars(description = "")]
    pub workers: usize,
    /// Sequences asked for.
    pub cases: u32,
    /// Longest sequence asked for.
    #[schemars(description = "")]
    pub(crate) max_steps: u32,
    /// Sequences run.
    pub sequences: u64,
    /// Distinct findings met.
    pub findings: usize,
    /// Exchanges over all sequences.
    #[schemars(description = "")]
    pub exchanges: u64,
    /// Sequences the model could not decide (cut short, not failed).
    pub inconclusive: u64,
    /// How long the run took (ms).
    #[schemars(description = "")]
    pub duration_ms: u64,
    #[schemars(with = "CoverageSchema")]
    /// How often each operation was called and each outcome reached.
    #[schemars(description = "")]
    pub coverage: Coverage,
    /// Outcomes a healthy run should reach that this one did not.
    pub(crate) never_reached: Vec<String>,
    /// Why the run stopped early, if it did.
    #[schemars(description = "")]
    pub error: Option<String>,
    /// The minimal failing sequence, if one failed.
    #[schemars(description = "")]
    pub counterexample: Option<CounterexampleDoc>,
}

/// The shrunk sequence that made the broker diverge from the model.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CounterexampleDoc {
    /// The worker that found it.
    #[schemars(description = "")]
    pub worker: usize,
    /// How many steps it had before shrinking.
    pub(crate) shrunk_from: usize,
    /// The shrunk sequence, one step a line.
    #[schemars(description = "")]
    pub steps: Vec<String>,
    /// Why it fails.
    #[schemars(description = "")]
    pub failure: FailureDoc,
    /// The sequence as a curl script.
    #[schemars(description = "")]
    pub curl: String,
    /// The sequence as a Rust test.
    pub rust: String,
    /// Where it was saved.
    pub(crate) saved: Vec<String>,
}

/// A rule's level.
#[derive(JsonSchema)]
#[allow(dead_code)]
enum LevelSchema {
    #[serde(rename = "SEED")]
    Seed,
    #[serde(rename = "PROJECT")]
    Project,
    #[serde(rename = "OPEN")]
    Open,
}

/// One way a broker departed from a rule.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct FindingSchema {
    /// The rule it breaks.
    rule: String,
    /// `status`, `missing-field`, `mistyped-field`, `value`, `error-text`, `shape`,
    /// `flag`, `route-missing`, `claim`, `cause`, `alternative` or `state`.
    kind: String,
    #[schemars(with = "LevelSchema")]
    level: (),
    /// What the broker did.
    what: String,
    /// Where in the answer, as a JSON path.
    #[serde(default)]
    path: Option<String>,
    /// The first instance (e.g. the value the broker sent).
    #[serde(default)]
    example: Option<String>,
}

/// One place where the broker's answer differs from the model's.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DifferenceSchema {
    /// `status`, `$` for the whole body, `$.messages[0].noop`, ...
    path: String,
    /// `status`, `missing`, `extra`, `type` or `value`.
    kind: String,
    #[serde(default)]
    expected: Option<Value>,
    #[serde(default)]
    actual: Option<Value>,
}

/// How often each operation was called and each outcome reached.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CoverageSchema {
    operations: BTreeMap<String, u64>,
    outcomes: BTreeMap<String, u64>,
}

/// The report's JSON Schema, as checked in at `spec/report.schema.json`.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Document);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `spec/report.schema.json` is what the types generate; run with
    /// `QUEEN_UPDATE_SCHEMA=1` to rewrite it after changing them.
    #[test]
    fn the_checked_in_schema_is_the_one_the_types_generate() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/report.schema.json");
        let now = schema();
        if std::env::var("QUEEN_UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
            std::fs::write(path, &now).unwrap();
        }
        let checked_in = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            checked_in == now,
            "spec/report.schema.json is out of date: run \
             `QUEEN_UPDATE_SCHEMA=1 cargo test -p queen-conformance --lib document`"
        );
    }
}
