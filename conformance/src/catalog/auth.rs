//! Authentication and roles (PROTOCOL.md section 14: AUTH-1..4), for a broker that has
//! authentication on and whose tokens the suite holds (capability `auth`).
//!
//! Every exchange is checked by the model, told what each token stands for: a refusal
//! must be the 401 or 403 it predicts, and the answers after it prove the refusal
//! changed nothing (a refused push is not there to pop, a refused pop claimed nothing).

use super::cases;
use crate::auth::Tokens;
use crate::calls::*;
use crate::case::{CaseResult, Failure};
use crate::failure::{ensure, fail};
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn cases() -> Vec<crate::case::Case> {
    cases![
        pop_read_only: "auth-1/a-pop-with-a-read-only-token-is-refused", [AUTH_1, AUTH_4], Seed, Auth;
        pop_anonymous: "auth-1/a-pop-without-a-valid-token-is-refused-on-every-route", [AUTH_1, AUTH_4], Seed, Auth, needs [Discovery];
        producer_sub: "auth-2/producer-sub-is-the-sub-of-the-pushing-token", [AUTH_2], Seed, Auth, needs [Transactions];
        producer_sub_forged: "auth-2/a-push-body-cannot-choose-its-producer-sub", [AUTH_2], Seed, Auth;
        levels: "auth-3/every-route-family-needs-its-level", [AUTH_3, AUTH_4, AUTH_6], Project, Auth, needs [Configure, DeadLetter, Transactions, Maintenance, Delete, LeaseExtend];
        invalid_tokens: "auth-4/invalid-tokens-are-refused-401", [AUTH_4], Project, Auth;
        before_bad_input: "auth-4/a-refusal-comes-before-bad-input", [AUTH_4], Project, Auth, needs [BadInput];
    ]
}

fn tokens(s: &Session) -> Result<Arc<Tokens>, Failure> {
    s.target().tokens.clone().ok_or_else(|| {
        fail(
            "this target has no tokens (capability auth: --jwt-secret or --token-*)",
            &[],
        )
    })
}

fn pop_path(q: &str) -> String {
    PopRoute::Queue(q.into()).path()
}

/// Sends `req` with `token` (`None`: without one) and requires `status`.
async fn refused(
    s: &mut Session,
    req: HttpRequest,
    token: Option<&str>,
    status: u16,
    rules: &[RuleId],
) -> CaseResult {
    let req = match token {
        Some(t) => req.with_bearer(t),
        None => req.anonymous(),
    };
    let what = format!("{} {}", req.method, req.path);
    let r = s.send(req).await?;
    if r.status == status {
        Ok(())
    } else {
        Err(fail(
            format!("{what} answered {} where {status} is due", r.status),
            rules,
        ))
    }
}

async fn pop_read_only(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let pop = HttpRequest::get(pop_path(&q), &[("consumerGroup", "g")]);
    refused(s, pop.clone(), Some(&t.ro), 403, &[AUTH_1]).await?;
    // Nothing was claimed: the read-write token gets the message at once.
    let r = s.send(pop.with_bearer(&t.rw)).await?;
    ensure!(
        r.status == 200,
        AUTH_1,
        "a refused pop must leave its message claimable"
    )
}

async fn pop_anonymous(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    let ns = s.namespace();
    let routes = [
        HttpRequest::get(pop_path(&q), &[]),
        HttpRequest::get(PopRoute::Partition(q.clone(), "p".into()).path(), &[]),
        HttpRequest::get("/api/v1/pop", &[("namespace", ns.as_str())]),
    ];
    for req in routes {
        refused(s, req.clone(), None, 401, &[AUTH_1]).await?;
        refused(s, req, Some("not-a-token"), 401, &[AUTH_1]).await?;
    }
    ensure!(
        s.pop_q(&q, &[]).await?.is_some(),
        AUTH_1,
        "a refused pop must leave its message claimable"
    )
}

/// The `producerSub` of each popped message, by transactionId.
fn subs(p: &PopResponse) -> Vec<(String, Option<String>)> {
    p.messages
        .iter()
        .map(|m| (m.transaction_id.clone(), m.producer_sub.clone()))
        .collect()
}

async fn producer_sub(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let q = s.name("q");
    let item = |txn: &str| json!({"queue": q, "partition": "p", "transactionId": txn});
    for (txn, token) in [("by-rw", &t.rw), ("by-admin", &t.admin)] {
        let req = HttpRequest::post("/api/v1/push", &json!({"items": [item(txn)]}));
        let r = s.send(req.with_bearer(token)).await?;
        let _: Vec<PushResult> = decode(&r, 201, "push")?;
    }
    let txn = json!({"operations": [{"type": "push", "items": [item("by-txn")]}]});
    let r = s
        .send(HttpRequest::post("/api/v1/transaction", &txn).with_bearer(&t.rw))
        .await?;
    let _: TxnResponse = decode(&r, 200, "transaction")?;
    // The model checks every message's producerSub against the token that pushed it;
    // the case also asks that a token with a `sub` gave one.
    let p = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let book = t.book();
    let want = |token: &String| book.principals[token].sub.clone();
    let expected = vec![
        ("by-rw".to_string(), want(&t.rw)),
        ("by-admin".to_string(), want(&t.admin)),
        ("by-txn".to_string(), want(&t.rw)),
    ];
    ensure!(
        subs(&p) == expected,
        AUTH_2,
        "producerSub by message: {:?}",
        subs(&p)
    )
}

async fn producer_sub_forged(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let q = s.name("q");
    let body =
        json!({"items": [{"queue": q, "transactionId": "x", "producerSub": "someone-else"}]});
    let r = s
        .send(HttpRequest::post("/api/v1/push", &body).with_bearer(&t.rw))
        .await?;
    let _: Vec<PushResult> = decode(&r, 201, "push")?;
    let p = s.pop_some(&q, &[]).await?;
    let sub = p.messages.first().and_then(|m| m.producer_sub.clone());
    ensure!(
        sub.as_deref() != Some("someone-else"),
        AUTH_2,
        "the push body chose its own producerSub"
    )
}

async fn levels(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let q = s.name("q");
    let p = s.push1(&q, "p", "a").await?;
    let popped = s.pop_some(&q, &[("consumerGroup", "g")]).await?;
    let ack = ack_of(&popped, &p);
    let read_write = [
        HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": q}]})),
        HttpRequest::get(pop_path(&q), &[]),
        HttpRequest::post("/api/v1/ack", &ack),
        HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"acknowledgments": [ack.clone()]}),
        ),
        HttpRequest::post(
            format!("/api/v1/lease/{}/extend", popped.lease_id),
            &json!({"seconds": 30}),
        ),
        HttpRequest::post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push", "items": [{"queue": q}]}]}),
        ),
        HttpRequest::post("/api/v1/configure", &json!({"queue": q, "options": {}})),
    ];
    for req in read_write {
        refused(s, req, Some(&t.ro), 403, &[AUTH_3]).await?;
    }
    // Switching maintenance off is harmless to the other cases even where it is let in.
    let admin = [
        HttpRequest::get("/api/v1/system/maintenance", &[]),
        HttpRequest::post("/api/v1/system/maintenance", &json!({"enabled": false})),
        HttpRequest::get("/api/v1/system/maintenance/pop", &[]),
        HttpRequest::post("/api/v1/system/maintenance/pop", &json!({"enabled": false})),
        HttpRequest::delete(format!("/api/v1/resources/queues/{}", encode_segment(&q))),
    ];
    for req in admin {
        refused(s, req, Some(&t.rw), 403, &[AUTH_3]).await?;
    }
    // Read-only reads with any valid token; public routes with none.
    let r = s
        .send(HttpRequest::get("/api/v1/dlq", &[("queue", q.as_str())]).with_bearer(&t.ro))
        .await?;
    let _: DlqResponse = decode(&r, 200, "dlq")?;
    let r = s.send(HttpRequest::get("/health", &[]).anonymous()).await?;
    ensure!(
        (200..300).contains(&r.status) || r.status == 503,
        AUTH_3,
        "/health without a token answered {}",
        r.status
    )?;
    // Nothing refused took effect: the lease is still the pop's, and the ack completes it.
    let done = s.ack(ack).await?;
    ensure!(
        done.success,
        AUTH_4,
        "the refused requests changed the lease"
    )
}

fn ack_of(popped: &PopResponse, p: &PushResult) -> Value {
    json!({"transactionId": p.transaction_id, "partitionId": popped.partition_id,
           "consumerGroup": "g", "leaseId": popped.lease_id})
}

async fn invalid_tokens(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let q = s.name("q");
    let push = HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": q}]}));
    let mut bad: Vec<Option<String>> = vec![
        None,
        Some("not-a-jwt".into()),
        Some(t.forged()),
        Some(t.unsigned()),
    ];
    bad.extend([t.expired(), t.wrong_key()].into_iter().flatten().map(Some));
    for token in &bad {
        refused(s, push.clone(), token.as_deref(), 401, &[AUTH_4]).await?;
    }
    // None of them wrote anything.
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        AUTH_4,
        "a push with an invalid token was written"
    )
}

async fn before_bad_input(s: &mut Session) -> CaseResult {
    let t = tokens(s)?;
    let malformed = HttpRequest::post_raw("/api/v1/push", "{not json");
    refused(s, malformed.clone(), None, 401, &[AUTH_4]).await?;
    refused(s, malformed.clone(), Some(&t.ro), 403, &[AUTH_4]).await?;
    let r = s.send(malformed.with_bearer(&t.rw)).await?;
    ensure!(
        r.status == 400,
        PUSH_8,
        "a malformed push with a valid token answered {}",
        r.status
    )
}
