//! `--json PATH`: the whole run as one JSON document, for tools: every case with its
//! verdict, rules, level and capability; failures with the divergence (request, actual
//! answer, the model's allowed answers and why each differs), the transcript and a curl
//! script; the lockstep run with its coverage and counterexample; the concurrent
//! scenario with its linearizability verdict per queue and its anomaly counts; every
//! distinct finding with its rule, kind, level, where it was met, the example exchange,
//! the structured diff and a curl script. A case failing only on findings of PROJECT
//! rules has a failure of kind `project-difference` with `findings: [...]` (level
//! PROJECT, `failsRun` only with `--strict`).

use super::{Report, Verdict};
use crate::case::Failure;
use crate::session::request_json;
use serde_json::{json, Value};

fn failure_json(f: &Failure) -> Value {
    let mut v = json!({"kind": f.kind(), "message": f.headline(), "rules": f.rules()});
    if let Failure::Diverged { step, divergence } = f {
        v["step"] = json!(step);
        v["request"] = request_json(&divergence.request);
        v["actual"] = json!({"status": divergence.actual.status, "body": divergence.actual.body});
        v["allowed"] = divergence
            .expected
            .iter()
            .zip(&divergence.reasons)
            .map(|(e, why)| json!({"status": e.status, "body": e.body, "differs": why}))
            .collect();
    }
    if let Failure::Findings(d) = f {
        v["findings"] = json!(d);
    }
    v
}

fn finding_json(f: &super::FindingEntry) -> Value {
    let x = f.example.transcript.get(f.example.seen.step);
    json!({
        "finding": f.finding,
        "instances": f.instances,
        "accepted": f.accepted,
        "failsRun": f.fails_run,
        "seenIn": f.seen_in,
        "example": {
            "origin": f.example.origin,
            "step": f.example.seen.step,
            "request": x.map(|x| request_json(&x.request)),
            "actual": x.map(|x| json!({"status": x.response.status, "body": x.response.body})),
            "expected": f.example.seen.expected.as_ref().map(|e| json!({"status": e.status, "body": e.body})),
        },
        "diff": f.diff,
        "curl": f.curl,
    })
}

/// The report as JSON, every quoted body and long text cut at [`super::bound::LIMIT`].
pub fn render(r: &Report) -> Value {
    let mut v = render_whole(r);
    super::bound::json(&mut v);
    v
}

fn render_whole(r: &Report) -> Value {
    let cases: Vec<Value> = r
        .entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "id": e.id,
                "rules": e.rules,
                "level": e.level,
                "capability": e.capability,
                "verdict": e.verdict,
                "failsRun": e.fails_run,
                "durationMs": e.duration_ms,
            });
            if let Some(why) = &e.skip_reason {
                v["skipReason"] = json!(why);
            }
            if let Some(f) = &e.failure {
                v["failure"] = failure_json(f);
                v["transcript"] = e.transcript.iter().map(|x| x.to_json()).collect();
                v["curl"] = json!(e.curl);
            }
            v
        })
        .collect();
    let lockstep = r.lockstep.as_ref().map(|l| {
        json!({
            "seed": l.seed.to_string(),
            "workers": l.workers,
            "cases": l.cases,
            "maxSteps": l.steps,
            "sequences": l.sequences,
            "findings": l.findings.len(),
            "exchanges": l.exchanges,
            "inconclusive": l.inconclusive,
            "durationMs": l.duration_ms,
            "coverage": l.coverage,
            "neverReached": l.coverage.missing(),
            "error": l.error,
            "counterexample": l.counterexample.as_ref().map(|c| json!({
                "worker": c.worker,
                "shrunkFrom": c.first_len,
                "steps": c.steps.iter().map(|s| s.to_rust()).collect::<Vec<_>>(),
                "failure": failure_json(&c.failure),
                "curl": c.curl,
                "rust": c.rust,
                "saved": c.saved.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            })),
        })
    });
    json!({
        "tool": "queen-conformance",
        "suiteVersion": crate::version::SUITE,
        "gitRevision": crate::version::GIT_REVISION,
        "specVersion": crate::version::SPEC,
        "runId": r.run_id,
        "target": r.target,
        "startedAt": queen_reference::time::format_iso(r.started_ms),
        "durationMs": r.duration_ms,
        "strict": r.strict,
        "without": r.without,
        "passed": r.passed(),
        "problems": r.problems,
        "exitCode": r.exit_code(),
        "targetDown": r.target_down,
        "accepted": r.accepted.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "findings": r.findings.iter().map(finding_json).collect::<Vec<_>>(),
        "summary": {
            "passed": r.count(Verdict::Passed),
            "failed": r.count(Verdict::Failed),
            "skipped": r.count(Verdict::Skipped),
            "expectedFailures": r.count(Verdict::ExpectedFailure),
            "stale": r.count(Verdict::StalePass),
            "leftOut": r.left_out,
        },
        "cases": cases,
        "lockstep": lockstep,
        "concurrent": r.concurrent.as_ref().map(|c| c.to_json()),
    })
}
