//! `--json PATH`: the whole run as one JSON document for tools, shaped by the types of
//! [`super::document`] (its schema is `spec/report.schema.json`): every case with its
//! verdict, rules, level and capability; failures with the divergence (request, actual
//! answer, the model's allowed answers and why each differs), the transcript and a curl
//! script; the lockstep run with its coverage and counterexample; the concurrent
//! scenario with its linearizability verdict per queue and its anomaly counts; every
//! distinct finding with its rule, kind, level, where it was met, the example exchange,
//! the structured diff and a curl script. A case failing only on findings of PROJECT
//! rules has a failure of kind `project-difference` with `findings: [...]` (level
//! PROJECT, `failsRun` only with `--strict`). Bodies and scripts past 4 KiB are cut and
//! marked.

use super::document::*;
use super::{Entry, FindingEntry, Report, Verdict};
use crate::case::Failure;
use crate::exchange::{request_doc as request, Exchange};
use crate::lockstep::LockstepOutcome;
use queen_reference::wire::HttpResponse;
use serde_json::Value;

/// The report as JSON, every quoted body and long text cut at [`super::bound::LIMIT`].
pub fn render(r: &Report) -> Value {
    let mut v = serde_json::to_value(document(r)).expect("the report serializes");
    super::bound::json(&mut v);
    v
}

/// The report as its typed document.
pub fn document(r: &Report) -> Document {
    Document {
        tool: "queen-conformance",
        suite_version: crate::version::SUITE,
        git_revision: crate::version::GIT_REVISION,
        spec_version: crate::version::SPEC,
        run_id: r.run_id.clone(),
        target: r.target.clone(),
        started_at: queen_reference::time::format_iso(r.started_ms),
        duration_ms: r.duration_ms,
        strict: r.strict,
        without: r.without.iter().copied().collect(),
        passed: r.passed(),
        problems: r.problems.iter().map(ToString::to_string).collect(),
        exit_code: r.exit_code(),
        target_down: r.target_down.clone(),
        accepted: r.accepted.iter().map(|a| a.to_string()).collect(),
        findings: r.findings.iter().map(finding).collect(),
        summary: Summary {
            passed: r.count(Verdict::Passed),
            failed: r.count(Verdict::Failed),
            skipped: r.count(Verdict::Skipped),
            expected_failures: r.count(Verdict::ExpectedFailure),
            stale: r.count(Verdict::StalePass),
            left_out: r.left_out,
        },
        cases: r.entries.iter().map(case).collect(),
        lockstep: r.lockstep.as_ref().map(lockstep),
        concurrent: r.concurrent.as_ref().map(|c| c.to_json()),
    }
}

fn case(e: &Entry) -> CaseDoc {
    CaseDoc {
        id: e.id.clone(),
        rules: e.rules.clone(),
        level: e.level,
        capability: e.capability,
        verdict: e.verdict,
        fails_run: e.fails_run,
        duration_ms: e.duration_ms,
        skip_reason: e.skip_reason.clone(),
        failure: e.failure.as_ref().map(failure),
        transcript: e
            .failure
            .as_ref()
            .map(|_| e.transcript.iter().map(exchange).collect()),
        curl: e.failure.as_ref().and(e.curl.clone()),
    }
}

fn failure(f: &Failure) -> FailureDoc {
    let mut doc = FailureDoc {
        kind: f.kind(),
        message: f.headline(),
        rules: f.rules().iter().map(|r| r.to_string()).collect(),
        step: None,
        request: None,
        actual: None,
        allowed: None,
        findings: None,
    };
    if let Failure::Diverged { step, divergence } = f {
        doc.step = Some(*step);
        doc.request = Some(request(&divergence.request));
        doc.actual = Some(answer(&divergence.actual));
        doc.allowed = Some(
            divergence
                .expected
                .iter()
                .zip(&divergence.reasons)
                .map(|(e, why)| AllowedDoc {
                    status: e.status,
                    body: e.body.clone().unwrap_or(Value::Null),
                    differs: why.clone(),
                })
                .collect(),
        );
    }
    if let Failure::Findings(d) = f {
        doc.findings = Some(d.clone());
    }
    doc
}

fn answer(a: &HttpResponse) -> AnswerDoc {
    AnswerDoc {
        status: a.status,
        body: a.body.clone().unwrap_or(Value::Null),
    }
}

fn exchange(x: &Exchange) -> ExchangeDoc {
    ExchangeDoc {
        request: request(&x.request),
        response: answer(&x.response),
        sent_ms: x.sent_ms,
        took_ms: x.received_ms - x.sent_ms,
        worlds: x.worlds,
    }
}

fn finding(f: &FindingEntry) -> FindingEntryDoc {
    let x = f.example.transcript.get(f.example.seen.step);
    FindingEntryDoc {
        finding: f.finding.clone(),
        instances: f.instances.clone(),
        accepted: f.accepted,
        fails_run: f.fails_run,
        seen_in: f.seen_in.clone(),
        example: ExampleDoc {
            origin: f.example.origin.clone(),
            step: f.example.seen.step,
            request: x.map(|x| request(&x.request)),
            actual: x.map(|x| answer(&x.response)),
            expected: f.example.seen.expected.as_ref().map(answer),
        },
        diff: f.diff.clone(),
        curl: f.curl.clone(),
    }
}

fn lockstep(l: &LockstepOutcome) -> LockstepDoc {
    LockstepDoc {
        seed: l.seed.to_string(),
        workers: l.workers,
        cases: l.cases,
        max_steps: l.steps,
        sequences: l.sequences,
        findings: l.findings.len(),
        exchanges: l.exchanges,
        inconclusive: l.inconclusive,
        duration_ms: l.duration_ms,
        coverage: l.coverage.clone(),
        never_reached: l.coverage.missing().iter().map(|s| s.to_string()).collect(),
        error: l.error.clone(),
        counterexample: l.counterexample.as_ref().map(|c| CounterexampleDoc {
            worker: c.worker,
            shrunk_from: c.first_len,
            steps: c.steps.iter().map(|s| s.to_rust()).collect(),
            failure: failure(&c.failure),
            curl: c.curl.clone(),
            rust: c.rust.clone(),
            saved: c.saved.iter().map(|p| p.display().to_string()).collect(),
        }),
    }
}
