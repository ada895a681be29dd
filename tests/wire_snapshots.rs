//! Snapshots of every route's answers, success and error, from one fixed scenario
//! against our server (`snapshots/` at the workspace root). Server-minted ids and
//! timestamps are checked to be real UUIDs / ISO-8601 UTC times, then redacted. The
//! scenario is one function of the target URL, so each engine must produce the very
//! same snapshots. CI runs with `CI=true`: insta then writes nothing and fails on any
//! difference or missing snapshot; locally a difference leaves a `.snap.new` (ignored
//! by git) and fails until reviewed with `cargo insta review`.

use queen_reference::time::is_iso_utc_z;
use queen_reference::wire::*;
use queen_tests::{memory_server, pg_server, send};
use serde_json::{json, Value};

/// Keys whose string values are server-minted ids (or client-given transactionIds).
const ID_KEYS: &[&str] = &[
    "id",
    "message_id",
    "messageId",
    "transaction_id",
    "transactionId",
    "partitionId",
    "leaseId",
];
/// Keys whose values are timestamps.
const TIME_KEYS: &[&str] = &[
    "createdAt",
    "failedAt",
    "expiresAt",
    "leaseExpiresAt",
    "timestamp",
    "from",
    "to",
];
/// Keys whose numbers depend on the clock (MGMT-3's lag in seconds, HEALTH-4's uptime).
const SECONDS_KEYS: &[&str] = &["lagSeconds", "uptimeSeconds"];

/// One exchange of the scenario: a name and what was asked and answered.
struct Shot {
    name: String,
    value: Value,
}

struct Scenario {
    client: reqwest::Client,
    base: String,
    shots: Vec<Shot>,
}

impl Scenario {
    async fn send(&mut self, name: &str, req: HttpRequest) -> HttpResponse {
        let (r, _, _) = send(&self.client, &self.base, &req).await;
        let mut request = json!({"method": req.method, "path": req.path});
        if !req.query.is_empty() {
            request["query"] = req.query.iter().map(|(k, v)| json!([k, v])).collect();
        }
        if !req.body.is_empty() {
            request["body"] = serde_json::from_slice(&req.body)
                .unwrap_or_else(|_| json!(format!("<{} raw bytes>", req.body.len())));
        }
        let mut body = r.body.clone();
        if req.path == "/health" {
            // HEALTH-2's spool and the push writers are the PostgreSQL engine's own
            // (server/tests/spool.rs, hostile.rs); the memory engine has neither, and
            // the two must snapshot alike.
            if let Some(b) = body.as_mut().and_then(Value::as_object_mut) {
                b.shift_remove("spool");
                b.shift_remove("pushWriterRestarts");
            }
        }
        self.shots.push(Shot {
            name: format!("wire-{:02}-{name}", self.shots.len() + 1),
            value: json!({"request": request, "status": r.status, "body": body}),
        });
        r
    }

    async fn post(&mut self, name: &str, path: &str, body: Value) -> HttpResponse {
        self.send(name, HttpRequest::post(path, &body)).await
    }

    async fn get(&mut self, name: &str, path: &str, query: &[(&str, &str)]) -> HttpResponse {
        self.send(name, HttpRequest::get(path, query)).await
    }
}

fn pop_body(r: &HttpResponse) -> PopResponse {
    serde_json::from_value(r.body.clone().expect("a pop with messages")).expect("a pop answer")
}

/// The fixed scenario: every route, success and error answers.
async fn scenario(base: &str) -> Vec<Shot> {
    let mut s = Scenario {
        client: reqwest::Client::new(),
        base: base.to_string(),
        shots: vec![],
    };
    let q = "snap.orders";
    s.get("health", "/health", &[]).await;
    s.post("push-created", "/api/v1/push", json!({"items": [
        {"queue": q, "partition": "eu", "transactionId": "o-1", "payload": {"n": 1}},
        {"queue": q, "partition": "eu", "transactionId": "o-2", "payload": {"n": 2}, "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"},
        {"queue": q, "partition": "us", "payload": [1, "two", null]},
        {"queue": q, "partition": "us", "transactionId": "o-1"},
    ]})).await;
    s.post(
        "push-duplicate",
        "/api/v1/push",
        json!({"items": [{"queue": q, "partition": "eu", "transactionId": "o-1"}]}),
    )
    .await;
    s.post("push-empty-items", "/api/v1/push", json!({"items": []}))
        .await;
    s.send(
        "push-not-json",
        HttpRequest::post_raw("/api/v1/push", "{nope"),
    )
    .await;
    s.post(
        "push-wrong-type",
        "/api/v1/push",
        json!({"items": [{"queue": q, "partition": 7}]}),
    )
    .await;
    s.send(
        "push-oversized",
        HttpRequest::post_raw("/api/v1/push", vec![b' '; 16 * 1024 * 1024 + 1]),
    )
    .await;
    let eu = s
        .get(
            "pop-partition-route",
            &PopRoute::Partition(q.into(), "eu".into()).path(),
            &[("consumerGroup", "billing")],
        )
        .await;
    s.get(
        "pop-leased-is-204",
        &PopRoute::Partition(q.into(), "eu".into()).path(),
        &[("consumerGroup", "billing")],
    )
    .await;
    let us = s
        .get(
            "pop-queue-route",
            &PopRoute::Queue(q.into()).path(),
            &[("consumerGroup", "billing"), ("batch", "10")],
        )
        .await;
    s.get(
        "pop-discovery-auto-ack",
        "/api/v1/pop",
        &[
            ("namespace", "snap"),
            ("task", "orders"),
            ("autoAck", "true"),
            ("partitions", "0"),
        ],
    )
    .await;
    s.get("pop-discovery-without-scope", "/api/v1/pop", &[])
        .await;
    s.get(
        "pop-bad-parameter",
        &PopRoute::Queue(q.into()).path(),
        &[("batch", "abc")],
    )
    .await;
    s.get(
        "pop-unknown-queue",
        &PopRoute::Queue("snap.nothing".into()).path(),
        &[("wait", "true"), ("timeout", "50")],
    )
    .await;
    let (eu, us) = (pop_body(&eu), pop_body(&us));
    let lease = eu.lease_id.clone();
    s.send(
        "extend",
        HttpRequest::post_raw(
            format!("/api/v1/lease/{lease}/extend"),
            r#"{"seconds":120}"#,
        ),
    )
    .await;
    s.send(
        "extend-unknown-lease",
        HttpRequest::post_raw(
            "/api/v1/lease/0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90/extend",
            "",
        ),
    )
    .await;
    s.send(
        "extend-bad-seconds",
        HttpRequest::post_raw(format!("/api/v1/lease/{lease}/extend"), r#"{"seconds":0}"#),
    )
    .await;
    let m = |p: &PopResponse, i: usize, status: &str| json!({"transactionId": p.messages[i].transaction_id, "partitionId": p.messages[i].partition_id, "leaseId": p.messages[i].lease_id, "status": status});
    s.post(
        "ack-batch-failure-clamps-success",
        "/api/v1/ack/batch",
        json!({"consumerGroup": "billing", "acknowledgments": [
            m(&eu, 0, "failed"), m(&eu, 1, "completed"),
            {"transactionId": "never", "partitionId": eu.partition_id},
        ]}),
    )
    .await;
    let mut single = m(&us, 0, "dlq");
    single["consumerGroup"] = json!("billing");
    single["error"] = json!("cannot parse");
    s.post("ack-single-dlq", "/api/v1/ack", single.clone())
        .await;
    s.post("ack-single-already-committed", "/api/v1/ack", single)
        .await;
    s.post(
        "ack-stale-lease",
        "/api/v1/ack/batch",
        json!({"consumerGroup": "billing", "acknowledgments": [m(&us, 1, "completed")]}),
    )
    .await;
    s.post(
        "ack-unknown-status",
        "/api/v1/ack",
        json!({"transactionId": "o-1", "partitionId": eu.partition_id, "status": "done"}),
    )
    .await;
    s.get("dlq-listing", "/api/v1/dlq", &[("queue", q)]).await;
    s.get("dlq-bad-limit", "/api/v1/dlq", &[("limit", "0")])
        .await;
    s.post("transaction", "/api/v1/transaction", json!({"operations": [
        {"type": "push", "items": [{"queue": "snap.audit", "transactionId": "a-1", "payload": "x"}]},
    ]})).await;
    s.post("transaction-aborted", "/api/v1/transaction", json!({"operations": [
        {"type": "push", "items": [{"queue": "snap.audit", "transactionId": "a-2"}]},
        {"type": "ack", "transactionId": "o-1", "partitionId": eu.partition_id, "leaseId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90", "consumerGroup": "billing"},
    ]})).await;
    s.post(
        "transaction-empty",
        "/api/v1/transaction",
        json!({"operations": []}),
    )
    .await;
    s.post(
        "configure",
        "/api/v1/configure",
        json!({"queue": "snap.jobs.v1", "options": {"retryLimit": 1, "leaseTime": 30}}),
    )
    .await;
    s.post(
        "configure-bad-option",
        "/api/v1/configure",
        json!({"queue": "snap.jobs.v1", "options": {"leaseTime": "long"}}),
    )
    .await;
    s.post(
        "maintenance-on",
        "/api/v1/system/maintenance",
        json!({"enabled": true}),
    )
    .await;
    s.post(
        "push-buffered",
        "/api/v1/push",
        json!({"items": [{"queue": "snap.audit", "transactionId": "b-1"}]}),
    )
    .await;
    s.get("maintenance-status", "/api/v1/system/maintenance", &[])
        .await;
    s.post(
        "maintenance-off",
        "/api/v1/system/maintenance",
        json!({"enabled": false}),
    )
    .await;
    s.post(
        "maintenance-bad-body",
        "/api/v1/system/maintenance",
        json!({"enabled": "yes"}),
    )
    .await;
    s.post(
        "pop-maintenance-on",
        "/api/v1/system/maintenance/pop",
        json!({"enabled": true}),
    )
    .await;
    s.get(
        "pop-under-maintenance",
        &PopRoute::Queue("snap.audit".into()).path(),
        &[],
    )
    .await;
    s.get(
        "pop-maintenance-status",
        "/api/v1/system/maintenance/pop",
        &[],
    )
    .await;
    s.post(
        "pop-maintenance-off",
        "/api/v1/system/maintenance/pop",
        json!({"enabled": false}),
    )
    .await;
    s.get(
        "pop-after-replay",
        &PopRoute::Queue("snap.audit".into()).path(),
        &[("batch", "10"), ("autoAck", "true")],
    )
    .await;
    s.send(
        "delete",
        HttpRequest::delete("/api/v1/resources/queues/snap.orders"),
    )
    .await;
    s.send(
        "delete-unknown",
        HttpRequest::delete("/api/v1/resources/queues/snap.orders"),
    )
    .await;
    s.get("unknown-route", "/api/v1/nope", &[]).await;
    // Section 16: options kept and echoed (CFG-4), a push past maxSize (RET-5).
    s.post(
        "configure-kept-options",
        "/api/v1/configure",
        json!({"queue": "snap.capped", "options": {"maxSize": 1, "deadLetterQueue": true, "ttl": 60}}),
    )
    .await;
    s.post(
        "push-fills-the-queue",
        "/api/v1/push",
        json!({"items": [{"queue": "snap.capped", "transactionId": "c-1"}]}),
    )
    .await;
    s.post(
        "push-past-max-size",
        "/api/v1/push",
        json!({"items": [{"queue": "snap.capped", "transactionId": "c-2"}]}),
    )
    .await;
    management(&mut s).await;
    s.shots
}

/// Section 17: the views of one queue with a leased message, a seek and a group delete.
async fn management(s: &mut Scenario) {
    s.post(
        "mgmt-push",
        "/api/v1/push",
        json!({"items": [
            {"queue": "snap.mgmt", "transactionId": "m-1", "payload": {"n": 1}},
            {"queue": "snap.mgmt", "transactionId": "m-2", "payload": {"n": 2}},
        ]}),
    )
    .await;
    let popped = s
        .get(
            "mgmt-pop",
            &PopRoute::Queue("snap.mgmt".into()).path(),
            &[("consumerGroup", "snap-g"), ("batch", "1")],
        )
        .await;
    let pid = pop_body(&popped).messages[0].partition_id.clone();
    s.get("mgmt-overview", "/api/v1/resources/overview", &[])
        .await;
    s.get("mgmt-queue", "/api/v1/resources/queues/snap.mgmt", &[])
        .await;
    s.get(
        "mgmt-queues-of-a-namespace",
        "/api/v1/resources/queues",
        &[("namespace", "snap"), ("limit", "2")],
    )
    .await;
    s.get(
        "mgmt-depth",
        "/api/v1/resources/queues/snap.mgmt/depth",
        &[("group", "snap-g")],
    )
    .await;
    s.get(
        "mgmt-partitions",
        "/api/v1/resources/partitions",
        &[("queue", "snap.mgmt")],
    )
    .await;
    s.get("mgmt-group", "/api/v1/consumer-groups/snap-g", &[])
        .await;
    s.get(
        "mgmt-peek",
        "/api/v1/messages",
        &[("queue", "snap.mgmt"), ("consumerGroup", "snap-g")],
    )
    .await;
    s.get("mgmt-message", &format!("/api/v1/messages/{pid}/m-1"), &[])
        .await;
    s.post(
        "mgmt-seek-to-end",
        "/api/v1/consumer-groups/snap-g/queues/snap.mgmt/seek",
        json!({"toEnd": true}),
    )
    .await;
    s.send(
        "mgmt-delete-group-on-a-queue",
        HttpRequest::delete("/api/v1/consumer-groups/snap-g/queues/snap.mgmt"),
    )
    .await;
    s.get("mgmt-bad-limit", "/api/v1/messages", &[("limit", "0")])
        .await;
    s.post(
        "mgmt-dead-letter-queue",
        "/api/v1/configure",
        json!({"queue": "snap.redo", "options": {"retryLimit": 0}}),
    )
    .await;
    s.post(
        "mgmt-dead-letter-push",
        "/api/v1/push",
        json!({"items": [{"queue": "snap.redo", "transactionId": "r-1", "payload": {"r": 1}}]}),
    )
    .await;
    let held = s
        .get(
            "mgmt-dead-letter-pop",
            &PopRoute::Queue("snap.redo".into()).path(),
            &[("consumerGroup", "snap-g")],
        )
        .await;
    let m = pop_body(&held);
    let (rpid, lease) = (m.messages[0].partition_id.clone(), m.lease_id.clone());
    s.post(
        "mgmt-dead-letter-ack",
        "/api/v1/ack",
        json!({"transactionId": "r-1", "partitionId": rpid, "leaseId": lease, "status": "dlq", "consumerGroup": "snap-g"}),
    )
    .await;
    s.post(
        "mgmt-retry-dead-letter",
        &format!("/api/v1/messages/{rpid}/r-1/retry"),
        json!({}),
    )
    .await;
    s.send(
        "mgmt-delete-one-message",
        HttpRequest::delete(format!("/api/v1/messages/{rpid}/r-1")),
    )
    .await;
    s.get(
        "mgmt-unknown-group",
        "/api/v1/consumer-groups/snap-nobody",
        &[],
    )
    .await; // The default window is the last 24 hours: by the day it is yesterday and today.
    s.get(
        "mgmt-analytics",
        "/api/v1/status/analytics",
        &[("queue", "snap.mgmt"), ("interval", "day")],
    )
    .await;
    s.get(
        "mgmt-analytics-bad-interval",
        "/api/v1/status/analytics",
        &[("interval", "week")],
    )
    .await;
    s.get(
        "mgmt-namespaces-page",
        "/api/v1/resources/namespaces",
        &[("limit", "1")],
    )
    .await;
    // An hour of lag is more than any group here has: an empty page, and its total.
    s.get(
        "mgmt-lagging-page",
        "/api/v1/consumer-groups/lagging",
        &[("minLagSeconds", "3600"), ("limit", "10")],
    )
    .await;
}

/// Checks every id and time is real, then replaces it by a placeholder.
fn redact(v: &mut Value, key: Option<&str>, shot: &str) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                redact(x, Some(k), shot);
            }
        }
        Value::Array(a) => {
            for x in a {
                redact(x, key, shot);
            }
        }
        Value::String(s) => {
            let k = key.unwrap_or("");
            if TIME_KEYS.contains(&k) {
                assert!(
                    is_iso_utc_z(s),
                    "{shot}: {k} {s:?} is not ISO-8601 UTC with Z"
                );
                *s = "[timestamp]".into();
            } else if ID_KEYS.contains(&k) {
                if is_uuid(s) {
                    *s = if matches!(k, "id" | "message_id" | "messageId") {
                        assert!(is_uuid_v7(s), "{shot}: {k} {s:?} is not a UUIDv7");
                        "[uuid-v7]".into()
                    } else {
                        "[uuid]".into()
                    };
                } else {
                    // Only client-given transactionIds may be other strings; "" is the
                    // autoAck leaseId (POP-7).
                    assert!(
                        matches!(k, "transactionId" | "transaction_id")
                            || (k == "leaseId" && s.is_empty()),
                        "{shot}: {k} {s:?} is not a UUID"
                    );
                }
            }
        }
        Value::Number(_) if key.is_some_and(|k| SECONDS_KEYS.contains(&k)) => {
            *v = json!("[seconds]");
        }
        _ => {}
    }
}

fn assert_snapshots(shots: Vec<Shot>) {
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
        for mut shot in shots {
            // The request echoes ids the scenario learnt; they are redacted as well.
            redact(&mut shot.value, None, &shot.name);
            if let Some(p) = shot.value["request"]["path"].as_str() {
                let redacted: String = p
                    .split('/')
                    .map(|seg| if is_uuid(seg) { "[uuid]" } else { seg })
                    .collect::<Vec<_>>()
                    .join("/");
                shot.value["request"]["path"] = json!(redacted);
            }
            // Rendered by serde_json, which writes numbers as they were read (insta's
            // own serializer does not know serde_json's exact numbers).
            let text = serde_json::to_string_pretty(&shot.value).expect("serializes");
            insta::assert_snapshot!(shot.name.clone(), text);
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_snapshots_memory_engine() {
    let server = memory_server().await;
    let shots = scenario(&server.url()).await;
    assert_snapshots(shots);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_snapshots_pg_engine_are_identical() {
    let server = pg_server().await;
    let shots = scenario(&server.url()).await;
    assert_snapshots(shots);
}
