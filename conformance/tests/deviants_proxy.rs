//! The deviant brokers really deviate: each test starts one double (tests/common/deviant.rs)
//! and shows over plain HTTP that its one behaviour differs from ours, often next to the
//! honest server behind the proxy, and that an unrelated request still gets the right
//! answer.

mod common;

use common::deviant::{start, DeviantBroker, Deviation};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// An answer: status, JSON body (if any) and whether it was labelled JSON.
#[derive(Debug)]
struct Got {
    status: u16,
    body: Option<Value>,
    json_ct: bool,
}

impl Got {
    fn json(&self) -> &Value {
        self.body.as_ref().expect("a JSON body")
    }
}

/// A client of one base URL.
struct At {
    base: String,
    http: reqwest::Client,
}

impl At {
    fn new(base: &str) -> At {
        At {
            base: base.to_string(),
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Got {
        let resp = r.send().await.expect("answers");
        let status = resp.status().as_u16();
        let json_ct = resp
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let bytes = resp.bytes().await.expect("a body");
        let body = (!bytes.is_empty()).then(|| serde_json::from_slice(&bytes).expect("JSON"));
        Got {
            status,
            body,
            json_ct,
        }
    }

    async fn get(&self, path: &str) -> Got {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    async fn delete(&self, path: &str) -> Got {
        self.send(self.http.delete(format!("{}{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, v: &Value) -> Got {
        self.post_raw(path, serde_json::to_vec(v).unwrap()).await
    }

    async fn post_raw(&self, path: &str, body: Vec<u8>) -> Got {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body);
        self.send(r).await
    }

    /// Pushes `items` and expects them written.
    async fn push(&self, items: Value) -> Got {
        let g = self.post("/api/v1/push", &json!({ "items": items })).await;
        assert!(g.status == 201 || g.status == 200, "{g:?}");
        g
    }

    async fn push1(&self, q: &str) -> Got {
        self.push(json!([{"queue": q, "payload": {"n": 1}}])).await
    }

    async fn pop(&self, q: &str, query: &str) -> Got {
        self.get(&format!("/api/v1/pop/queue/{q}?{query}")).await
    }

    async fn configure(&self, body: Value) -> Got {
        let g = self.post("/api/v1/configure", &body).await;
        assert_eq!(g.status, 200, "{g:?}");
        g
    }

    /// Acks the first message of a pop answer with `status`.
    async fn ack_first(&self, popped: &Got, status: &str) -> Got {
        let m = &popped.json()["messages"][0];
        let body = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                          "leaseId": m["leaseId"], "status": status});
        self.post("/api/v1/ack", &body).await
    }
}

/// The double and clients of it (`d`) and of the honest server behind it (`honest`).
async fn double(dev: Deviation) -> (DeviantBroker, At, At) {
    let b = start(dev).await;
    let d = At::new(&b.url);
    let honest = At::new(b.upstream());
    (b, d, honest)
}

fn millis(ts: &Value) -> i64 {
    queen_reference::time::parse_iso(ts.as_str().expect("a timestamp")).expect("ISO-8601")
}

#[test]
fn the_catalog_is_well_formed() {
    let names: HashSet<&str> = Deviation::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(names.len(), Deviation::ALL.len(), "names are unique");
    for d in Deviation::ALL {
        let n = d.name();
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{n} is kebab-case"
        );
        // A double that breaks nothing (a slow replay MAINT-3 allows, a hang the model
        // cannot name) says so in its own test.
        let breaks_nothing = matches!(
            d,
            Deviation::SlowSpoolReplay | Deviation::ExtendNeverAnswered
        );
        assert!(!d.rules().is_empty() || breaks_nothing, "{n} names a rule");
        for r in d.rules() {
            let id = queen_reference::rules::RuleId::parse(r).map(|i| i.as_str());
            assert_eq!(id, Some(*r), "{n}: {r} is a rule");
        }
        assert!(d.describe().ends_with('.'), "{n}: one sentence");
    }
    let answer_only: Vec<&str> = Deviation::ALL
        .iter()
        .filter(|d| d.answer_only())
        .map(|d| d.name())
        .collect();
    for n in [
        "status-200-everywhere",
        "ack-without-noop",
        "capitalised-errors",
        "ack-moves-cursor-back",
        "dlq-other-shape",
        "created-at-without-z",
    ] {
        assert!(answer_only.contains(&n), "{n} is answer-only");
    }
    for n in [
        "extend-array-and-empty-body-400",
        "dedup-forever",
        "crash-on-non-utf8",
    ] {
        assert!(
            !answer_only.contains(&n),
            "{n} changes what the broker does"
        );
    }
}

#[tokio::test]
async fn status_200_everywhere() {
    let (b, d, _) = double(Deviation::Status200Everywhere).await;
    let g = d.push1("q").await;
    assert_eq!(g.status, 200, "push answers 200, not 201");
    assert_eq!(g.json()[0]["status"], "queued");
    let g = d.pop("empty", "").await;
    assert_eq!(g.status, 200, "an empty pop answers 200, not 204");
    assert_eq!(g.body, Some(json!({"messages": []})));
    assert!(g.json_ct);
    // Unrelated: a pop that finds something, and a rejection.
    let g = d.pop("q", "").await;
    assert_eq!(g.status, 200);
    assert_eq!(g.json()["messages"].as_array().unwrap().len(), 1);
    assert_eq!(g.json()["partitionsClaimed"], 1);
    let g = d.post_raw("/api/v1/push", b"{not json".to_vec()).await;
    assert_eq!(g.status, 400);
    assert!(g.json()["error"].is_string());
    b.stop().await;
}

#[tokio::test]
async fn ack_without_noop() {
    let (b, d, honest) = double(Deviation::AckWithoutNoop).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(g.status, 200);
    let item = g.json()[0].as_object().unwrap();
    assert!(!item.contains_key("noop"), "{item:?}");
    assert_eq!(item["success"], true);
    assert_eq!(
        item["leaseReleased"], true,
        "the rest of the item is intact"
    );
    let batch = json!({"acknowledgments": [{
        "transactionId": popped.json()["messages"][0]["transactionId"],
        "partitionId": popped.json()["messages"][0]["partitionId"]}]});
    let g = d.post("/api/v1/ack/batch", &batch).await;
    assert!(!g.json()[0].as_object().unwrap().contains_key("noop"));
    assert_eq!(g.json()[0]["success"], true);
    let g = honest.post("/api/v1/ack/batch", &batch).await;
    assert_eq!(g.json()[0]["noop"], true, "ours says noop");
    b.stop().await;
}

#[tokio::test]
async fn capitalised_errors() {
    let (b, d, _) = double(Deviation::CapitalisedErrors).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let m = popped.json()["messages"][0].clone();
    let other_lease = uuid::Uuid::new_v4().to_string();
    let bad_lease = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                           "leaseId": other_lease});
    let g = d.post("/api/v1/ack", &bad_lease).await;
    assert_eq!(g.json()[0]["error"], "Invalid or expired lease");
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(
        g.json()[0]["success"],
        true,
        "unrelated: a good ack succeeds"
    );
    assert_eq!(g.json()[0]["error"], Value::Null);
    let g = d.ack_first(&popped, "failed").await;
    assert_eq!(g.json()[0]["error"], "Already committed");
    let unknown =
        json!({"acknowledgments": [{"transactionId": "nope", "partitionId": m["partitionId"]}]});
    let g = d.post("/api/v1/ack/batch", &unknown).await;
    assert_eq!(g.json()[0]["error"], "Unresolvable");
    b.stop().await;
}

#[tokio::test]
async fn extend_array_and_empty_body_400() {
    let (b, d, honest) = double(Deviation::ExtendArrayAndEmptyBody400).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let lease = popped.json()["leaseId"].as_str().unwrap().to_string();
    let path = format!("/api/v1/lease/{lease}/extend");
    let g = d.post(&path, &json!({"seconds": 30})).await;
    assert_eq!(g.status, 200);
    let arr = g.json().as_array().expect("an array");
    assert_eq!(arr.len(), 1);
    assert_eq!(arr[0]["leaseId"], lease.as_str());
    assert_eq!(arr[0]["success"], true);
    let g = d.post_raw(&path, vec![]).await;
    assert_eq!(g.status, 400);
    assert_eq!(g.body, Some(json!({"error": "seconds is required"})));
    let g = honest.post_raw(&path, vec![]).await;
    assert_eq!(g.status, 200, "ours takes the lease's own duration");
    assert_eq!(g.json()["success"], true);
    // Unrelated: an ack answers as ours.
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(g.json()[0]["success"], true);
    b.stop().await;
}

#[tokio::test]
async fn no_discovery_route() {
    let (b, d, honest) = double(Deviation::NoDiscoveryRoute).await;
    d.push1("ns.task.q").await;
    for path in ["/api/v1/pop?namespace=ns", "/api/v1/pop"] {
        let g = d.get(path).await;
        assert_eq!(g.status, 404, "{path}");
        assert_eq!(g.body, Some(json!({"error": "not found"})));
    }
    assert_eq!(honest.get("/api/v1/pop").await.status, 400, "ours: POP-10");
    let g = d.pop("ns.task.q", "").await;
    assert_eq!(g.status, 200, "unrelated: the queue route works");
    b.stop().await;
}

#[tokio::test]
async fn batch_default_1() {
    let (b, d, honest) = double(Deviation::BatchDefault1).await;
    let three = json!([{"queue": "q"}, {"queue": "q"}, {"queue": "q"}]);
    d.push(three.clone()).await;
    let g = d.pop("q", "").await;
    assert_eq!(g.json()["messages"].as_array().unwrap().len(), 1, "batch 1");
    for q in ["two", "two-honest"] {
        d.push(json!([{"queue": q, "partition": "a"}, {"queue": q, "partition": "b"}]))
            .await;
    }
    let g = d.pop("two", "partitions=0&batch=10").await;
    assert_eq!(g.json()["partitionsClaimed"], 1, "partitions=0 read as 1");
    let g = honest.pop("two-honest", "partitions=0&batch=10").await;
    assert_eq!(g.json()["partitionsClaimed"], 2, "ours: no cap");
    d.push(json!([{"queue": "r"}, {"queue": "r"}, {"queue": "r"}]))
        .await;
    let g = d.pop("r", "batch=10").await;
    assert_eq!(
        g.json()["messages"].as_array().unwrap().len(),
        3,
        "unrelated"
    );
    b.stop().await;
}

#[tokio::test]
async fn push_created_lease_300() {
    let (b, d, honest) = double(Deviation::PushCreatedLease300).await;
    // The lease deadline, read back from an extend that cannot lengthen it, against the
    // message's createdAt (both the broker's clock).
    async fn lease_secs(at: &At, q: &str, query: &str) -> i64 {
        at.push1(q).await;
        let g = at.pop(q, query).await;
        let lease = g.json()["leaseId"].as_str().unwrap().to_string();
        let created = millis(&g.json()["messages"][0]["createdAt"]);
        let e = at
            .post(
                &format!("/api/v1/lease/{lease}/extend"),
                &json!({"seconds": 1}),
            )
            .await;
        (millis(&e.json()["expiresAt"]) - created) / 1000
    }
    let s = lease_secs(&d, "q", "").await;
    assert!(
        (295..=301).contains(&s),
        "a push-created queue leases 300 s: {s}"
    );
    let s = lease_secs(&honest, "q-honest", "").await;
    assert!((55..=61).contains(&s), "ours: 60 s: {s}");
    let s = lease_secs(&d, "q2", "leaseSeconds=5").await;
    assert!(
        (3..=6).contains(&s),
        "unrelated: an explicit leaseSeconds: {s}"
    );
    d.configure(json!({"queue": "c", "options": {"leaseTime": 10}}))
        .await;
    let s = lease_secs(&d, "c", "").await;
    assert!((8..=11).contains(&s), "unrelated: a configured queue: {s}");
    b.stop().await;
}

#[tokio::test]
async fn dedup_forever() {
    let (b, d, honest) = double(Deviation::DedupForever).await;
    for q in ["q", "h"] {
        d.configure(json!({"queue": q, "options": {"dedupWindowSeconds": 0}}))
            .await;
    }
    let first = d.push(json!([{"queue": "q", "transactionId": "t1"}])).await;
    let id = first.json()[0]["message_id"].clone();
    assert_eq!(first.json()[0]["status"], "queued");
    let g = d
        .push(json!([{"queue": "q", "transactionId": "t1"}, {"queue": "q", "transactionId": "t2"}]))
        .await;
    assert_eq!(g.status, 201);
    let items = g.json().as_array().unwrap();
    assert_eq!(items[0]["status"], "duplicate", "outside the window");
    assert_eq!(items[0]["message_id"], id, "the original's id");
    assert_eq!(items[0]["index"], 0);
    assert_eq!(items[0]["transaction_id"], "t1");
    assert_eq!(items[1]["status"], "queued");
    assert_eq!(items[1]["index"], 1);
    let g = d.push(json!([{"queue": "q", "transactionId": "t1"}])).await;
    assert_eq!(
        g.json()[0]["status"],
        "duplicate",
        "answered by the proxy alone"
    );
    let g = d.pop("q", "batch=10").await;
    let txs: Vec<&Value> = g.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["transactionId"])
        .collect();
    assert_eq!(txs, [&json!("t1"), &json!("t2")], "t1 was written once");
    // Ours: with a window of 0 the second push is a new message.
    for _ in 0..2 {
        let g = honest
            .push(json!([{"queue": "h", "transactionId": "t1"}]))
            .await;
        assert_eq!(g.json()[0]["status"], "queued");
    }
    // Unrelated: the same id in another partition is a new message.
    let g = d
        .push(json!([{"queue": "q", "partition": "p", "transactionId": "t1"}]))
        .await;
    assert_eq!(g.json()[0]["status"], "queued");
    b.stop().await;
}

#[tokio::test]
async fn ack_moves_cursor_back() {
    let (b, d, honest) = double(Deviation::AckMovesCursorBack).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(g.json()[0]["success"], true);
    assert_eq!(g.json()[0]["noop"], false, "unrelated: a first commit");
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(g.json()[0]["success"], true);
    assert_eq!(g.json()[0]["noop"], false, "a re-ack claims to commit");
    let g = honest.ack_first(&popped, "completed").await;
    assert_eq!(g.json()[0]["noop"], true, "ours: noop");
    b.stop().await;
}

#[tokio::test]
async fn lease_kept_after_ack() {
    let (b, d, honest) = double(Deviation::LeaseKeptAfterAck).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let g = d.ack_first(&popped, "completed").await;
    assert_eq!(g.json()[0]["success"], true);
    assert_eq!(
        g.json()[0]["leaseReleased"],
        false,
        "it says the lease is kept"
    );
    d.push1("q").await;
    assert_eq!(d.pop("q", "").await.status, 204, "and acts so");
    let g = d.pop("q", "").await;
    assert_eq!(g.status, 200, "for one pop");
    assert_eq!(g.json()["messages"].as_array().unwrap().len(), 1);
    let h = honest.ack_first(&g, "completed").await;
    assert_eq!(h.json()[0]["leaseReleased"], true, "ours says released");
    // Unrelated: another group pops as ours.
    let g = d.pop("q", "consumerGroup=g").await;
    assert_eq!(g.json()["messages"].as_array().unwrap().len(), 2);
    b.stop().await;
}

#[tokio::test]
async fn crash_on_non_utf8() {
    let (b, d, honest) = double(Deviation::CrashOnNonUtf8).await;
    assert_eq!(
        d.push1("q").await.status,
        201,
        "unrelated: it works until then"
    );
    assert_eq!(d.get("/health").await.status, 200);
    let sent = d
        .http
        .post(format!("{}/api/v1/push", d.base))
        .body(vec![0xff, 0xfe, b'{'])
        .send()
        .await;
    assert!(sent.is_err(), "no answer: {sent:?}");
    let fresh = reqwest::Client::new();
    let e = fresh
        .get(format!("{}/health", d.base))
        .send()
        .await
        .expect_err("gone");
    assert!(e.is_connect(), "connection refused: {e:?}");
    assert!(d
        .http
        .get(format!("{}/health", d.base))
        .send()
        .await
        .is_err());
    assert_eq!(
        honest.get("/health").await.status,
        200,
        "our broker is fine"
    );
    b.stop().await;
}

#[tokio::test]
async fn raw_path_segments() {
    let (b, d, honest) = double(Deviation::RawPathSegments).await;
    d.push(json!([{"queue": "a b", "partition": "x y"}, {"queue": "a b", "partition": "x y"}]))
        .await;
    assert_eq!(
        d.pop("a%20b", "").await.status,
        204,
        "it looks for \"a%20b\""
    );
    let g = d.get("/api/v1/pop/queue/a%20b/partition/x%20y").await;
    assert_eq!(g.status, 204);
    let g = d.delete("/api/v1/resources/queues/a%20b").await;
    assert_eq!(g.json()["queue"], "a%20b", "it deletes \"a%20b\"");
    let g = honest.get("/api/v1/pop/queue/a%20b/partition/x%20y").await;
    assert_eq!(g.status, 200, "ours decodes, and \"a b\" is still there");
    assert_eq!(g.json()["messages"].as_array().unwrap().len(), 2);
    // Unrelated: names without escapes.
    d.push1("plain").await;
    assert_eq!(d.pop("plain", "").await.status, 200);
    b.stop().await;
}

#[tokio::test]
async fn read_your_writes_lag() {
    let (b, d, _) = double(Deviation::ReadYourWritesLag).await;
    d.push1("q").await;
    assert_eq!(
        d.pop("q", "").await.status,
        204,
        "the first pop misses the push"
    );
    assert_eq!(d.pop("q", "").await.status, 200, "the next one sees it");
    // A long poll sees the push once the lag is over.
    d.push1("w").await;
    let t = Instant::now();
    let g = d.pop("w", "wait=true&timeout=2000").await;
    assert_eq!(g.status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    // Unrelated: a pop well after the push.
    d.push1("late").await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(d.pop("late", "").await.status, 200);
    b.stop().await;
}

#[tokio::test]
async fn namespace_not_derived() {
    let (b, d, honest) = double(Deviation::NamespaceNotDerived).await;
    let g = d.configure(json!({"queue": "shop.orders.eu"})).await;
    assert_eq!(g.json()["namespace"], "");
    assert_eq!(g.json()["task"], "");
    let g = honest.configure(json!({"queue": "shop.orders.us"})).await;
    assert_eq!(g.json()["namespace"], "shop", "ours derives");
    assert_eq!(g.json()["task"], "orders");
    let g = d
        .configure(json!({"queue": "shop.orders.fr", "namespace": "n", "task": "t"}))
        .await;
    assert_eq!(
        (&g.json()["namespace"], &g.json()["task"]),
        (&json!("n"), &json!("t"))
    );
    b.stop().await;
}

#[tokio::test]
async fn dlq_other_shape() {
    let (b, d, honest) = double(Deviation::DlqOtherShape).await;
    d.push1("q").await;
    let popped = d.pop("q", "").await;
    let g = d.ack_first(&popped, "dlq").await;
    assert_eq!(g.json()[0]["dlq"], true, "unrelated: acks as ours");
    let g = d.get("/api/v1/dlq?queue=q").await;
    assert_eq!(g.status, 200);
    let o = g.json().as_object().unwrap();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["items", "count"]);
    assert_eq!(o["count"], 1);
    assert_eq!(o["items"][0]["queue"], "q");
    let g = honest.get("/api/v1/dlq?queue=q").await;
    for k in ["messages", "total", "limit", "offset"] {
        assert!(g.json().get(k).is_some(), "ours has {k}");
    }
    b.stop().await;
}

#[tokio::test]
async fn created_at_without_z() {
    let (b, d, honest) = double(Deviation::CreatedAtWithoutZ).await;
    d.push(json!([{"queue": "q", "partition": "p"}, {"queue": "h", "partition": "p"}]))
        .await;
    let g = d.get("/api/v1/pop/queue/q/partition/p").await;
    let m = &g.json()["messages"][0];
    let t = m["createdAt"].as_str().unwrap();
    assert!(t.ends_with("+00:00") && !t.contains('Z'), "{t}");
    assert!(
        m["id"].is_string() && m["leaseId"].is_string(),
        "unrelated keys intact"
    );
    let g = honest.get("/api/v1/pop/queue/h/partition/p").await;
    let t = g.json()["messages"][0]["createdAt"].as_str().unwrap();
    assert!(t.ends_with('Z'), "ours: {t}");
    b.stop().await;
}

#[tokio::test]
async fn partitions_claimed_missing() {
    let (b, d, honest) = double(Deviation::PartitionsClaimedMissing).await;
    d.push1("q").await;
    d.push1("h").await;
    let g = d.pop("q", "").await;
    assert!(g.json().get("partitionsClaimed").is_none());
    assert_eq!(
        g.json()["messages"].as_array().unwrap().len(),
        1,
        "unrelated"
    );
    let g = honest.pop("h", "").await;
    assert_eq!(g.json()["partitionsClaimed"], 1);
    b.stop().await;
}

#[tokio::test]
async fn error_key_message() {
    let (b, d, _) = double(Deviation::ErrorKeyMessage).await;
    for path in ["/api/v1/push", "/api/v1/ack", "/api/v1/configure"] {
        let g = d.post_raw(path, b"{not json".to_vec()).await;
        assert_eq!(g.status, 400, "{path}");
        let o = g.json().as_object().unwrap();
        assert!(
            o["message"].is_string() && !o.contains_key("error"),
            "{path}: {o:?}"
        );
    }
    // Unrelated: the pop routes' POP-10 answer, and a success.
    let g = d.get("/api/v1/pop").await;
    assert_eq!(g.status, 400);
    assert_eq!(g.json()["error"], "namespace or task is required");
    assert_eq!(d.push1("q").await.status, 201);
    b.stop().await;
}

#[tokio::test]
async fn configure_merges_options() {
    let (b, d, _) = double(Deviation::ConfigureMergesOptions).await;
    let g = d
        .configure(json!({"queue": "q", "options": {"retryLimit": 7}}))
        .await;
    assert_eq!(g.json()["options"]["retryLimit"], 7);
    let g = d
        .configure(json!({"queue": "q", "options": {"leaseTime": 20}}))
        .await;
    assert_eq!(g.json()["options"]["leaseTime"], 20);
    assert_eq!(g.json()["options"]["retryLimit"], 7, "kept, not reset to 3");
    // Unrelated: a first configure, and one after a delete, take the defaults.
    let g = d
        .configure(json!({"queue": "r", "options": {"leaseTime": 20}}))
        .await;
    assert_eq!(g.json()["options"]["retryLimit"], 3);
    assert_eq!(d.delete("/api/v1/resources/queues/q").await.status, 200);
    let g = d.configure(json!({"queue": "q"})).await;
    assert_eq!(g.json()["options"]["retryLimit"], 3);
    b.stop().await;
}

#[tokio::test]
async fn health_status_ok() {
    let (b, d, honest) = double(Deviation::HealthStatusOk).await;
    let g = d.get("/health").await;
    assert_eq!((g.status, g.body), (200, Some(json!({"status": "ok"}))));
    let g = honest.get("/health").await;
    assert_eq!(g.json()["status"], "healthy");
    assert_eq!(d.push1("q").await.status, 201, "unrelated");
    b.stop().await;
}

#[tokio::test]
async fn delete_without_existed() {
    let (b, d, honest) = double(Deviation::DeleteWithoutExisted).await;
    d.push1("q").await;
    let g = d.delete("/api/v1/resources/queues/q").await;
    assert_eq!(g.status, 200);
    assert_eq!(g.body, Some(json!({"deleted": true, "queue": "q"})));
    assert_eq!(d.pop("q", "").await.status, 204, "unrelated: it is gone");
    let g = honest.delete("/api/v1/resources/queues/q").await;
    assert!(g.json()["existed"].is_boolean(), "ours says");
    b.stop().await;
}

#[tokio::test]
async fn push_answer_camel_case() {
    let (b, d, honest) = double(Deviation::PushAnswerCamelCase).await;
    let g = d.push(json!([{"queue": "q", "transactionId": "t"}])).await;
    let o = g.json()[0].as_object().unwrap();
    assert_eq!(o["transactionId"], "t");
    assert!(o["messageId"].is_string());
    assert!(!o.contains_key("message_id") && !o.contains_key("transaction_id"));
    let g = honest.push(json!([{"queue": "h"}])).await;
    assert!(g.json()[0]["message_id"].is_string(), "ours");
    let g = d.pop("q", "").await;
    assert_eq!(g.json()["messages"][0]["transactionId"], "t", "unrelated");
    b.stop().await;
}

/// Every double forwards what it does not change: a request untouched by every
/// deviation (a configure with its namespace, then a dead-letter listing of the queue;
/// health for the ones that leave it alone) answers exactly as the honest server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_double_forwards_the_rest_faithfully() {
    for dev in Deviation::ALL {
        let (b, d, honest) = double(dev).await;
        let body = json!({"queue": "ns.t.q", "namespace": "ns", "task": "t"});
        let (a, h) = (
            d.post("/api/v1/configure", &body).await,
            honest.post("/api/v1/configure", &body).await,
        );
        assert_eq!((a.status, &a.body), (h.status, &h.body), "{}", dev.name());
        assert!(a.json_ct, "{}", dev.name());
        if dev != Deviation::DlqOtherShape {
            let (a, h) = (
                d.get("/api/v1/dlq?queue=ns.t.q").await,
                honest.get("/api/v1/dlq?queue=ns.t.q").await,
            );
            assert_eq!((a.status, &a.body), (h.status, &h.body), "{}", dev.name());
        }
        if dev != Deviation::HealthStatusOk {
            let (a, h) = (d.get("/health").await, honest.get("/health").await);
            assert_eq!((a.status, &a.body), (h.status, &h.body), "{}", dev.name());
        }
        b.stop().await;
    }
}
