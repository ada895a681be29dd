//! Bad input (PUSH-8, ACK-0, POP-10, LEASE-3, TXN-3, CFG-3, DLQ-2): malformed JSON,
//! wrong types, unknown statuses, missing fields, oversized bodies, invalid UUIDs and
//! hostile names. Each case checks the 400 (or 413) and then that nothing changed: the
//! model never changed its state for a rejection, so every later answer is judged on
//! the unchanged state (a follow-up pop or listing shows no effect).

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::ensure;
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::{json, Value};

pub fn cases() -> Vec<Case> {
    cases![
        push_not_json: "bad-input/push-body-not-json", [PUSH_8], Project, BadInput;
        push_items: "bad-input/push-items-missing-or-not-an-array", [PUSH_8], Project, BadInput;
        push_missing_queue: "bad-input/push-item-without-a-queue", [PUSH_8], Project, BadInput;
        push_wrong_types: "bad-input/push-wrong-types-and-trace-id", [PUSH_8], Project, BadInput;
        push_empty: "bad-input/push-empty-items-is-201", [PUSH_8, PUSH_1], Project, BadInput;
        oversized: "bad-input/oversized-body-is-413", [PUSH_8], Project, BadInput;
        push_undeliverable: "bad-input/push-undeliverable-payloads-are-400", [PUSH_11], Project, BadInput;
        ack_malformed: "bad-input/ack-malformed-calls", [ACK_9], Project, BadInput;
        bad_uuids: "bad-input/invalid-uuids", [ACK_9, LEASE_3, TXN_3], Project, BadInput;
        pop_params: "bad-input/pop-parameters-that-do-not-parse", [POP_10], Seed, BadInput;
        dlq_params: "bad-input/dlq-query-out-of-range", [DLQ_2], Project, BadInput;
        txn_malformed: "bad-input/transaction-malformed", [TXN_3], Project, BadInput, needs [Transactions];
        hostile_names: "bad-input/hostile-and-unicode-names-are-ordinary", [PUSH_1, POP_1, WIRE_2], Seed, BadInput;
        long_names: "bad-input/names-over-255-bytes-are-400", [PUSH_8, POP_10], Project, BadInput;
    ]
}

/// A pop on `q` that must find nothing (nothing was written).
async fn nothing_in(s: &mut Session, q: &str) -> CaseResult {
    let p = s.pop_q(q, &[("partitions", "0")]).await?;
    ensure!(p.is_none(), PUSH_8, "a rejected request wrote something")
}

async fn reject_all(s: &mut Session, path: &str, bodies: &[Vec<u8>]) -> CaseResult {
    for b in bodies {
        s.rejected(HttpRequest::post_raw(path, b.clone()), 400)
            .await?;
    }
    Ok(())
}

fn j(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("serializes")
}

async fn push_not_json(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let half = format!("{{\"items\":[{{\"queue\":\"{q}\"");
    reject_all(
        s,
        "/api/v1/push",
        &[
            b"{not json".to_vec(),
            half.into_bytes(),
            b"".to_vec(),
            b"\xff\xfe".to_vec(),
        ],
    )
    .await?;
    nothing_in(s, &q).await
}

async fn push_items(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    reject_all(
        s,
        "/api/v1/push",
        &[
            j(json!({})),
            j(json!({"items": {"queue": q}})),
            j(json!({"items": "x"})),
            j(json!([{"queue": q}])),
        ],
    )
    .await?;
    nothing_in(s, &q).await
}

async fn push_missing_queue(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    reject_all(
        s,
        "/api/v1/push",
        &[
            j(json!({"items": [{"partition": "p"}]})),
            j(json!({"items": [{"queue": ""}]})),
            j(json!({"items": [{"queue": null}]})),
            j(json!({"items": [{"queue": q}, 5]})),
        ],
    )
    .await?;
    nothing_in(s, &q).await
}

async fn push_wrong_types(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    reject_all(
        s,
        "/api/v1/push",
        &[
            j(json!({"items": [{"queue": 5}]})),
            j(json!({"items": [{"queue": q, "partition": 7}]})),
            j(json!({"items": [{"queue": q, "transactionId": 9}]})),
            j(json!({"items": [{"queue": q, "traceId": "not-a-uuid"}]})),
            j(json!({"items": [{"queue": q, "traceId": 12}]})),
        ],
    )
    .await?;
    nothing_in(s, &q).await
}

async fn push_empty(s: &mut Session) -> CaseResult {
    let r = s.push(json!([])).await?;
    ensure!(r.is_empty(), PUSH_8, "empty items is 201 []")
}

async fn oversized(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let limit = s.settings().body_limit;
    let pad = "x".repeat(limit + 1);
    let body = j(json!({"items": [{"queue": q, "payload": pad}]}));
    s.rejected(HttpRequest::post_raw("/api/v1/push", body), 413)
        .await?;
    nothing_in(s, &q).await
}

/// PUSH-11: a payload nested past the limit, or holding a lone surrogate escape, could
/// be stored but not read back by a consumer: it is refused, and nothing is written.
async fn push_undeliverable(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let nested = |n: usize| format!("{}0{}", "[".repeat(n), "]".repeat(n));
    let bodies: Vec<Vec<u8>> = [
        nested(PAYLOAD_DEPTH_LIMIT + 1),
        nested(1000),
        r#""\ud800""#.to_string(),
        r#"["a\udc00"]"#.to_string(),
    ]
    .iter()
    .map(|p| format!(r#"{{"items":[{{"queue":"{q}","payload":{p}}}]}}"#).into_bytes())
    .collect();
    reject_all(s, "/api/v1/push", &bodies).await?;
    nothing_in(s, &q).await
}

async fn ack_malformed(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let (t, pid, l) = (
        p.messages[0].transaction_id.clone(),
        p.partition_id.clone(),
        p.lease_id.clone(),
    );
    reject_all(
        s,
        "/api/v1/ack",
        &[
            b"{nope".to_vec(),
            j(json!([])),
            j(json!({"partitionId": pid, "leaseId": l})),
            j(json!({"transactionId": t, "leaseId": l})),
            j(json!({"transactionId": t, "partitionId": pid, "leaseId": l, "status": "done"})),
            j(json!({"transactionId": t, "partitionId": pid, "leaseId": l, "status": 1})),
            j(json!({"transactionId": 5, "partitionId": pid})),
        ],
    )
    .await?;
    reject_all(s, "/api/v1/ack/batch", &[
        j(json!({})),
        j(json!({"acknowledgments": {"transactionId": t}})),
        j(json!({"acknowledgments": [{"transactionId": t, "partitionId": pid, "status": "finished"}]})),
        j(json!({"acknowledgments": [{"transactionId": t, "partitionId": pid}, {"partitionId": pid}]})),
    ])
    .await?;
    // Nothing was acknowledged: the lease is still held and still acks.
    ensure!(
        s.pop_q(&q, &[]).await?.is_none(),
        ACK_9,
        "the lease is still held"
    )?;
    let r = s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(
        r[0].success && !r[0].noop,
        ACK_9,
        "the message was not committed by a 400"
    )
}

async fn bad_uuids(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let p = s.pop_some(&q, &[]).await?;
    let (t, pid, l) = (
        p.messages[0].transaction_id.clone(),
        p.partition_id.clone(),
        p.lease_id.clone(),
    );
    reject_all(
        s,
        "/api/v1/ack",
        &[
            j(json!({"transactionId": t, "partitionId": "123"})),
            j(json!({"transactionId": t, "partitionId": pid.replace('-', "")})),
            j(json!({"transactionId": t, "partitionId": pid, "leaseId": "zzz"})),
        ],
    )
    .await?;
    s.rejected(
        HttpRequest::post_raw("/api/v1/lease/xyz/extend", b"{}".to_vec()),
        400,
    )
    .await?;
    s.rejected(
        HttpRequest::post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "ack", "transactionId": t, "partitionId": "nope"}]}),
        ),
        400,
    )
    .await?;
    let r = s
        .ack_batch(
            None,
            vec![json!({"transactionId": t, "partitionId": pid, "leaseId": l})],
        )
        .await?;
    ensure!(r[0].success, ACK_9, "nothing changed: the lease still acks")
}

async fn pop_params(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "m").await?;
    let path = PopRoute::Queue(q.clone()).path();
    let long = "g".repeat(256);
    for (k, v) in [
        ("batch", "abc"),
        ("batch", "0"),
        ("partitions", "x"),
        ("timeout", "-1"),
        ("wait", "maybe"),
        ("autoAck", "yes please"),
        ("leaseSeconds", "1.5"),
        ("consumerGroup", long.as_str()),
    ] {
        s.rejected(HttpRequest::get(&path, &[(k, v)]), 400).await?;
    }
    // None of them claimed anything.
    ensure!(
        txns(&s.pop_q(&q, &[]).await?) == ["m"],
        POP_10,
        "the message is still there"
    )
}

async fn dlq_params(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    for (k, v) in [
        ("limit", "0"),
        ("limit", "1001"),
        ("limit", "abc"),
        ("offset", "-1"),
    ] {
        s.rejected(
            HttpRequest::get("/api/v1/dlq", &[("queue", q.as_str()), (k, v)]),
            400,
        )
        .await?;
    }
    let d = s.dlq(&[("queue", &q), ("limit", "1000")]).await?;
    ensure!(
        d.total == 0 && d.limit == 1000,
        DLQ_2,
        "limit 1000 is allowed"
    )
}

async fn txn_malformed(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    reject_all(s, "/api/v1/transaction", &[
        b"{nope".to_vec(),
        j(json!({})),
        j(json!({"operations": {}})),
        j(json!({"operations": []})),
        j(json!({"operations": [{"type": "nope"}]})),
        j(json!({"operations": [{"type": "push", "items": {}}]})),
        j(json!({"operations": [{"type": "push", "items": [{"queue": q}]}, {"type": "push", "items": [{"queue": 1}]}]})),
        j(json!({"operations": [{"type": "push", "items": [{"queue": q}]}, {"type": "ack", "partitionId": uuid::Uuid::new_v4().to_string()}]})),
    ])
    .await?;
    nothing_in(s, &q).await
}

async fn hostile_names(s: &mut Session) -> CaseResult {
    let prefix = s.name("");
    let mut names = vec![
        format!("{prefix}'; drop table queues; --"),
        format!("{prefix}очередь 🐝 キュー"),
        format!("{prefix}a/b?c#d%e&f=g+h"),
        format!("{prefix}\"quoted\" \\back\\ <tag>"),
        format!("{prefix}..%2e%2F"),
    ];
    let room = MAX_NAME_BYTES - prefix.len();
    names.push(format!("{prefix}{}", "n".repeat(room)));
    for (i, q) in names.iter().enumerate() {
        let partition = if i % 2 == 0 {
            "p/1 ü"
        } else {
            "Robert'); DROP TABLE partitions;--"
        };
        let t = format!("t-{i}-ünï");
        s.push(json!([{"queue": q, "partition": partition, "transactionId": t, "payload": {"name": q}}])).await?;
        let p = s
            .pop(PopRoute::Partition(q.clone(), partition.into()), &[])
            .await?;
        ensure!(
            txns(&p) == [t.clone()],
            [PUSH_1, POP_1],
            "queue {q:?} round-trips"
        )?;
        let p = p.expect("checked");
        s.ack_batch(None, acks_for(&p, "completed")).await?;
        ensure!(s.pop_q(q, &[]).await?.is_none(), ACK_1, "acked")?;
    }
    Ok(())
}

async fn long_names(s: &mut Session) -> CaseResult {
    let prefix = s.name("");
    let q = format!("{prefix}{}", "n".repeat(MAX_NAME_BYTES + 1 - prefix.len()));
    s.rejected(
        HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": q}]})),
        400,
    )
    .await?;
    s.rejected(
        HttpRequest::get(PopRoute::Queue(q.clone()).path(), &[]),
        400,
    )
    .await?;
    let ok = s.name("q");
    s.rejected(
        HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": ok, "partition": "p".repeat(256)}]}),
        ),
        400,
    )
    .await?;
    // Multi-byte: 128 two-byte characters are 256 bytes.
    let wide = format!("{prefix}{}", "é".repeat(128));
    s.rejected(
        HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": wide}]})),
        400,
    )
    .await?;
    nothing_in(s, &ok).await
}
