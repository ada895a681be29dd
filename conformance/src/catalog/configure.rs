//! Configure cases (PROTOCOL.md section 8: CFG-1..3).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
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
        encrypted: "enc-1/an-encrypted-queue-answers-its-payloads-as-pushed", [ENC_1, ENC_2, POP_17], Seed, Configure, needs [DeadLetter];
    ]
}

async fn full_replace(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 0, "leaseTime": 10, "priority": 4}))
        .await?;
    let r = s.configure(&q, json!({"retryDelay": 0})).await?;
    ensure!(
        r.options.known.retry_limit == 3
            && r.options.known.lease_time == 300
            && r.options.known.priority == 0,
        CFG_1,
        "omitted options returned to their defaults"
    )?;
    // And the broker behaves so: one failure is not final any more.
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let a = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure!(!a[0].dlq, CFG_1, "retryLimit is back to 3")
}

async fn defaults(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let r = s.configure(&q, json!({})).await?;
    ensure!(
        r.configured && r.options.known == QueueOptions::default(),
        CFG_2,
        "defaults {:?}",
        r.options
    )?;
    let r = s.post("/api/v1/configure", json!({"queue": q})).await?;
    ensure!(r.status == 200, CFG_2, "options may be omitted")
}

async fn derived(s: &mut Session) -> CaseResult {
    let base = s.name("ns");
    let r = s.configure(&format!("{base}.task.v2"), json!({})).await?;
    ensure!(
        r.namespace == base && r.task == "task",
        CFG_3,
        "namespace {:?} task {:?}",
        r.namespace,
        r.task
    )?;
    let r = s.configure(&base, json!({})).await?;
    ensure!(
        r.namespace == base && r.task.is_empty(),
        CFG_3,
        "no dot: task is \"\""
    )?;
    let r = s
        .post(
            "/api/v1/configure",
            json!({"queue": format!("{base}.x"), "namespace": "mine", "task": "t", "options": {}}),
        )
        .await?;
    ensure!(r.status == 200, CFG_3, "explicit namespace and task")
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
    first_failure_is_final(s, &q, CFG_3).await
}

/// After rejected configures of a queue set to `retryLimit: 0`: its first failure is still
/// final, so the rejections changed nothing (`rule`).
pub(super) async fn first_failure_is_final(s: &mut Session, q: &str, rule: RuleId) -> CaseResult {
    s.push1(q, "p", "m").await?;
    let p = s.pop_some(q, &[]).await?;
    let a = s.ack_batch(None, acks_for(&p, "failed")).await?;
    ensure!(a[0].dlq, rule, "a rejected configure changed the queue")
}

/// ENC-1, ENC-2: with a key the broker configures the queue and every pop and dead-letter
/// listing shows the payloads as pushed (the model compares them, numbers by their text);
/// without one it refuses with 400 and the queue stays as it was. Either is allowed: the
/// key is the operator's setting.
async fn encrypted(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let body = json!({"queue": q, "options": {"encryptionEnabled": true, "retryLimit": 0}});
    let r = s.post("/api/v1/configure", body).await?;
    let configured = r.status == 200;
    if !configured {
        // No key (ENC-2): the same queue in clear, so the rest checks the same.
        s.configure(&q, json!({"retryLimit": 0})).await?;
    }
    let payload = r#"{"card":"4111-1111","big":18446744073709551616,"f":0.10,"s":"\u00e9"}"#;
    let push = format!(
        r#"{{"items":[{{"queue":"{q}","partition":"p","transactionId":"a","payload":{payload}}},{{"queue":"{q}","partition":"p","transactionId":"b","payload":[1,2]}}]}}"#
    );
    let r = s.post_raw("/api/v1/push", push).await?;
    let _: Vec<PushResult> = decode(&r, 201, "push")?;
    let p = s.pop_some(&q, &[("batch", "1")]).await?;
    // A dead letter of an encrypted queue is listed as pushed too.
    s.ack_batch(None, acks_for(&p, "failed")).await?;
    let d = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        d.total == 1,
        ENC_1,
        "one dead letter (retryLimit 0), listed {}",
        d.total
    )?;
    let rest = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&rest) == ["b"],
        ENC_1,
        "the second message after the first became a dead letter (configured: {configured})"
    )
}
