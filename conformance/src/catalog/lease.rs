//! Lease extension cases (PROTOCOL.md section 5: LEASE-1..3).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;

pub fn cases() -> Vec<Case> {
    cases![
        renews_all: "lease-1/extend-renews-every-partition-and-never-shortens", [LEASE_1, LEASE_2], Seed, LeaseExtend;
        not_revived: "lease-1/a-gone-lease-is-not-revived", [LEASE_1, LEASE_2], Seed, LeaseExtend;
        keeps_alive: "lease-1/extended-lease-outlives-its-first-deadline", [LEASE_1, POP_2], Seed, LeaseExtend;
        unknown_200: "lease-2/unknown-lease-is-200-with-success-false", [LEASE_2], Seed, LeaseExtend;
        body_optional: "lease-3/body-optional-and-seconds-validated", [LEASE_3], Project, LeaseExtend, needs [BadInput];
    ]
}

async fn renews_all(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p1", "a").await?;
    s.push1(&q, "p2", "b").await?;
    let p = s
        .pop_some(&q, &[("partitions", "0"), ("leaseSeconds", "30")])
        .await?;
    ensure!(p.partitions_claimed == 2, POP_3, "one pop, two partitions")?;
    let e = s.extend(&p.lease_id, Some(120)).await?;
    ensure!(
        e.success && e.renewed == 2,
        LEASE_1,
        "both partitions renewed"
    )?;
    // A shorter extension never shortens (the model checks expiresAt).
    let e = s.extend(&p.lease_id, Some(1)).await?;
    ensure!(e.success && e.renewed == 2, LEASE_1, "still renewed")
}

async fn not_revived(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[("leaseSeconds", "1")]).await?;
    sleep_ms(1300).await;
    let e = s.extend(&p.lease_id, Some(60)).await?;
    ensure!(
        !e.success && e.renewed == 0 && e.error.is_some(),
        [LEASE_1, LEASE_2],
        "an expired lease is not revived"
    )?;
    // Released by an ack: gone too.
    let p = s.pop_some(&q, &[]).await?;
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    let e = s.extend(&p.lease_id, None).await?;
    ensure!(!e.success, LEASE_1, "a released lease is not revived")
}

async fn keeps_alive(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[("leaseSeconds", "2")]).await?;
    let e = s.extend(&p.lease_id, Some(30)).await?;
    ensure!(e.success, LEASE_1, "extend of a live lease")?;
    sleep_ms(2300).await;
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        LEASE_1,
        "the extended lease is still live after its first deadline"
    )?;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(r[0].success, [LEASE_1, ACK_5], "the holder can still ack")
}

async fn unknown_200(s: &mut Session) -> CaseResult {
    let id = uuid::Uuid::new_v4().to_string();
    let e = s.extend(&id, Some(10)).await?;
    ensure!(
        !e.success && e.renewed == 0 && e.expires_at.is_none(),
        LEASE_2,
        "an unknown lease answers 200, success:false"
    )
}

async fn body_optional(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[("leaseSeconds", "20")]).await?;
    let path = format!("/api/v1/lease/{}/extend", p.lease_id);
    for body in ["", "{}", "{\"seconds\":null}"] {
        let r = s.post_raw(&path, body).await?;
        ensure!(
            r.status == 200,
            LEASE_3,
            "body {body:?} means the lease's own duration"
        )?;
    }
    for body in [
        "{\"seconds\":0}",
        "{\"seconds\":-5}",
        "{\"seconds\":1.5}",
        "{\"seconds\":\"9\"}",
        "[1]",
        "{oops",
    ] {
        s.rejected(HttpRequest::post_raw(&path, body), 400).await?;
    }
    s.rejected(
        HttpRequest::post_raw("/api/v1/lease/not-a-uuid/extend", ""),
        400,
    )
    .await?;
    Ok(())
}
