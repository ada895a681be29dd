//! Queue delete, health and maintenance cases (PROTOCOL.md sections 9–11: DEL-1,
//! HEALTH-1, MAINT-1..2 and PUSH-7). The maintenance switches are broker-wide, so those
//! cases run alone ("exclusive"), after every other case, and always switch off again.

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::{ensure, late};
use crate::rules::*;
use crate::session::*;
use crate::transport::transmit;
use queen_reference::wire::*;
use serde_json::json;

pub fn cases() -> Vec<Case> {
    cases![
        delete_all: "del-1/delete-removes-everything", [DEL_1], Project, Delete, needs [DeadLetter];
        delete_unknown: "del-1/delete-of-an-unknown-queue", [DEL_1], Project, Delete;
        health: "health-1/healthy-and-connected", [HEALTH_1], Project, Core;
        push_maintenance: "maint-1/push-maintenance-buffers-and-replays-in-order", [MAINT_1, MAINT_3, PUSH_7, PUSH_5, CLUSTER_1], Seed, Maintenance, alone = true, one_broker = true;
        pop_maintenance: "maint-2/pop-maintenance-answers-a-bare-204", [MAINT_2, POP_6], Seed, Maintenance, alone = true;
        maintenance_body: "maint-1/bad-switch-body-is-400", [MAINT_1, MAINT_2], Project, Maintenance, needs [BadInput], alone = true;
        txn_under_maintenance: "txn-4/a-transaction-push-is-refused-under-maintenance", [TXN_4], Project, Maintenance, alone = true;
    ]
}

async fn delete_all(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    let p = s
        .pop_some(&q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    s.ack_batch(Some("g"), acks_for(&p, "dlq")).await?;
    s.pop_some(&q, &[]).await?; // a live lease too
    let d = s.delete(&q).await?;
    ensure!(d.deleted && d.existed, DEL_1, "the queue existed")?;
    let l = s.dlq(&[("queue", &q)]).await?;
    ensure!(l.total == 0, DEL_1, "its dead letters are gone")?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        DEL_1,
        "its messages are gone"
    )?;
    // Messages pushed again start a fresh queue: no leases or cursors survive.
    s.push1(&q, "p", "c").await?;
    let p = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(txns(&p) == ["c"], DEL_1, "a fresh queue after delete")
}

async fn delete_unknown(s: &mut Session) -> CaseResult {
    let q = s.name("never");
    let d = s.delete(&q).await?;
    ensure!(d.deleted && !d.existed, DEL_1, "existed:false")?;
    s.push1(&q, "p", "x").await?;
    let d = s.delete(&q).await?;
    ensure!(d.existed, DEL_1, "existed:true after a push")?;
    let d = s.delete(&q).await?;
    ensure!(!d.existed, DEL_1, "existed:false the second time")
}

async fn health(s: &mut Session) -> CaseResult {
    let r = s.get("/health", &[]).await?;
    let h: HealthResponse = decode(&r, 200, "health")?;
    ensure!(
        h.status == "healthy" && h.database == "connected",
        HEALTH_1,
        "{h:?}"
    )
}

/// How long a switch-off is given to take effect before the next case that runs alone.
const SWITCH_SETTLE_MS: u64 = 500;

/// Switches both maintenance modes off without checking (cleanup after a failure too).
async fn switch_off(s: &Session) {
    for path in [
        "/api/v1/system/maintenance",
        "/api/v1/system/maintenance/pop",
    ] {
        let _ = transmit(
            s.target(),
            &HttpRequest::post(path, &json!({"enabled": false})),
        )
        .await;
    }
    // A broker may answer a switch before it applies it: the next case that runs alone
    // must not have it applied under its feet.
    sleep_ms(SWITCH_SETTLE_MS).await;
}

async fn push_maintenance(s: &mut Session) -> CaseResult {
    let r = push_maintenance_body(s).await;
    switch_off(s).await;
    r
}

async fn push_maintenance_body(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let off: MaintenanceResponse = decode(
        &s.get("/api/v1/system/maintenance", &[]).await?,
        200,
        "maintenance",
    )?;
    ensure!(!off.maintenance_mode, MAINT_1, "maintenance starts off")?;
    s.push1(&q, "p", "before").await?;
    let on: MaintenanceResponse = decode(
        &s.post("/api/v1/system/maintenance", json!({"enabled": true}))
            .await?,
        200,
        "maintenance",
    )?;
    ensure!(on.maintenance_mode, MAINT_1, "maintenance on")?;
    let r = s.push_many(&q, "p", &["s1", "s2", "before"]).await?;
    ensure!(
        r.iter().all(|x| x.status == PushStatus::Buffered),
        [PUSH_7, MAINT_1],
        "pushes under maintenance are buffered"
    )?;
    let st: MaintenanceResponse = decode(
        &s.get("/api/v1/system/maintenance", &[]).await?,
        200,
        "maintenance",
    )?;
    ensure!(
        st.buffered_messages == 3,
        MAINT_1,
        "bufferedMessages {}",
        st.buffered_messages
    )?;
    s.post("/api/v1/system/maintenance", json!({"enabled": false}))
        .await?;
    replayed(s).await?;
    // Replayed in order, subject to dedup ("before" was already written).
    let p = s.pop_q(&q, &[("batch", "10")]).await?;
    ensure!(
        txns(&p) == ["before", "s1", "s2"],
        PUSH_7,
        "after replay: {:?}",
        txns(&p)
    )
}

/// MAINT-3: waits (asking `bufferedMessages`) until the replay that switching push
/// maintenance off started is over, for at most the bound the rule gives.
async fn replayed(s: &mut Session) -> CaseResult {
    let start = std::time::Instant::now();
    for wait_ms in POLL_STEPS_MS {
        let st: MaintenanceResponse = decode(
            &s.get("/api/v1/system/maintenance", &[]).await?,
            200,
            "maintenance",
        )?;
        if st.buffered_messages == 0 {
            return Ok(());
        }
        sleep_ms(wait_ms).await;
    }
    Err(late(
        format!(
            "the spool still holds messages {} ms after push maintenance was switched off",
            start.elapsed().as_millis()
        ),
        &[MAINT_3],
    ))
}

async fn txn_under_maintenance(s: &mut Session) -> CaseResult {
    let r = txn_under_maintenance_body(s).await;
    switch_off(s).await;
    r
}

/// TXN-4: with push maintenance on, a transaction with a push is refused 503 and
/// applies nothing (its ack neither); one with acks only goes through.
async fn txn_under_maintenance_body(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push_many(&q, "p", &["a", "b"]).await?;
    let p = s
        .pop_some(&q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    let lease = p.lease_id.clone();
    s.post("/api/v1/system/maintenance", json!({"enabled": true}))
        .await?;
    let mut ack = acks_for(&p, "completed").remove(0);
    ack["type"] = json!("ack");
    ack["consumerGroup"] = json!("g");
    let push =
        json!({"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "t"}]});
    let r = s
        .post(
            "/api/v1/transaction",
            json!({"operations": [push, ack.clone()]}),
        )
        .await?;
    ensure!(
        r.status == 503,
        TXN_4,
        "a transaction with a push under maintenance answered {}",
        r.status
    )?;
    let r = s
        .post("/api/v1/transaction", json!({"operations": [ack]}))
        .await?;
    let t: TxnResponse = decode(&r, 200, "transaction")?;
    ensure!(
        t.success,
        TXN_4,
        "an acks-only transaction under maintenance: {:?}",
        t.error
    )?;
    s.post("/api/v1/system/maintenance", json!({"enabled": false}))
        .await?;
    let next = s
        .pop_q(&q, &[("consumerGroup", "g"), ("batch", "10")])
        .await?;
    ensure!(
        txns(&next) == ["b"],
        TXN_4,
        "after the refused transaction (lease {lease}): {:?}",
        txns(&next)
    )
}

async fn pop_maintenance(s: &mut Session) -> CaseResult {
    let r = pop_maintenance_body(s).await;
    switch_off(s).await;
    r
}

async fn pop_maintenance_body(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let on: PopMaintenanceResponse = decode(
        &s.post("/api/v1/system/maintenance/pop", json!({"enabled": true}))
            .await?,
        200,
        "pop maintenance",
    )?;
    ensure!(on.pop_maintenance_mode, MAINT_2, "pop maintenance on")?;
    let r = s.get(&PopRoute::Queue(q.clone()).path(), &[]).await?;
    ensure!(
        r.status == 204 && r.body.is_none(),
        [MAINT_2, POP_6],
        "a bare 204 under pop maintenance"
    )?;
    let r = s
        .get(
            &PopRoute::Queue(q.clone()).path(),
            &[("wait", "true"), ("timeout", "500")],
        )
        .await?;
    ensure!(r.status == 204, MAINT_2, "a long poll too")?;
    let st: PopMaintenanceResponse = decode(
        &s.get("/api/v1/system/maintenance/pop", &[]).await?,
        200,
        "pop maintenance",
    )?;
    ensure!(st.pop_maintenance_mode, MAINT_2, "GET shows it on")?;
    s.post("/api/v1/system/maintenance/pop", json!({"enabled": false}))
        .await?;
    ensure!(
        txns(&s.pop_q(&q, &[]).await?) == ["m"],
        MAINT_2,
        "pops deliver again"
    )
}

async fn maintenance_body(s: &mut Session) -> CaseResult {
    let r = maintenance_body_inner(s).await;
    switch_off(s).await;
    r
}

async fn maintenance_body_inner(s: &mut Session) -> CaseResult {
    for path in [
        "/api/v1/system/maintenance",
        "/api/v1/system/maintenance/pop",
    ] {
        for body in [&br#"{"enabled":"yes"}"#[..], b"{}", b"[]", b"{nope"] {
            s.rejected(HttpRequest::post_raw(path, body), 400).await?;
        }
    }
    // Nothing was switched on: a push is queued, a pop delivers.
    let q = s.name("q");
    let r = s.push1(&q, "p", "m").await?;
    ensure!(
        r.status == PushStatus::Queued,
        MAINT_1,
        "still no maintenance"
    )?;
    ensure!(
        s.pop_q(&q, &[]).await?.is_some(),
        MAINT_2,
        "pops still deliver"
    )
}
