//! Configure cases (PROTOCOL.md section 8: CFG-1..3).

use super::cases;
use crate::case::{Case, CaseResult};
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::json;

pub fn cases() -> Vec<Case> {
    cases![
        full_replace: "cfg-1/configure-is-a-full-replace", [CFG_1, CFG_2], Seed, Configure, needs [DeadLetter];
        defaults: "cfg-2/defaults-are-answered-in-full", [CFG_2], Seed, Configure;
        derived: "cfg-3/namespace-and-task-derived-from-the-name", [CFG_3], Project, Configure;
        bad_options: "cfg-3/bad-option-is-400-and-changes-nothing", [CFG_3], Project, Configure, needs [BadInput, DeadLetter];
    ]
}

async fn full_replace(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 0, "leaseTime": 10, "priority": 4}))
        .await?;
    let r = s.configure(&q, json!({"retryDelay": 0})).await?;
    ensure(
        r.options.retry_limit == 3 && r.options.lease_time == 300 && r.options.priority == 0,
        || {
            (
                "omitted options returned to their defaults".into(),
                vec![CFG_1],
            )
        },
    )?;
    // And the broker behaves so: one failure is not final any more.
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let a = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure(!a[0].dlq, || {
        ("retryLimit is back to 3".into(), vec![CFG_1])
    })
}

async fn defaults(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s.configure(&q, json!({})).await?;
    ensure(r.configured && r.options == QueueOptions::default(), || {
        (format!("defaults {:?}", r.options), vec![CFG_2])
    })?;
    let r = s.post("/api/v1/configure", json!({"queue": q})).await?;
    ensure(r.status == 200, || {
        ("options may be omitted".into(), vec![CFG_2])
    })
}

async fn derived(s: &mut Session) -> CaseResult {
    let base = s.name("ns");
    let r = s.configure(&format!("{base}.task.v2"), json!({})).await?;
    ensure(r.namespace == base && r.task == "task", || {
        (
            format!("namespace {:?} task {:?}", r.namespace, r.task),
            vec![CFG_3],
        )
    })?;
    let r = s.configure(&base, json!({})).await?;
    ensure(r.namespace == base && r.task.is_empty(), || {
        ("no dot: task is \"\"".into(), vec![CFG_3])
    })?;
    let r = s
        .post(
            "/api/v1/configure",
            json!({"queue": format!("{base}.x"), "namespace": "mine", "task": "t", "options": {}}),
        )
        .await?;
    ensure(r.status == 200, || {
        ("explicit namespace and task".into(), vec![CFG_3])
    })
}

async fn bad_options(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 0})).await?;
    for options in [
        json!({"retryLimit": -1}),
        json!({"retryLimit": "3"}),
        json!({"leaseTime": 0}),
        json!({"leaseTime": 1.5}),
        json!({"encryptionEnabled": "yes"}),
        json!({"priority": "high"}),
        json!([1, 2]),
    ] {
        s.rejected(
            HttpRequest::post(
                "/api/v1/configure",
                &json!({"queue": q, "options": options}),
            ),
            400,
        )
        .await?;
    }
    for body in [
        json!({"options": {}}),
        json!({"queue": 5}),
        json!({"queue": ""}),
        json!([]),
    ] {
        s.rejected(HttpRequest::post("/api/v1/configure", &body), 400)
            .await?;
    }
    // retryLimit is still 0: the first failure is final.
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let a = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure(a[0].dlq, || {
        ("the rejected configure changed nothing".into(), vec![CFG_3])
    })
}
