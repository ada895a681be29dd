//! Every variant of the library, played by the model as a broker, is named as the cause
//! by a diagnosing checker, and nothing else is: no finding that changes state at any
//! other rule. The same scenario against the protocol's broker leaves no finding at all,
//! so each scenario shows its variant and only it.

use queen_reference::checker::{Checker, StepError};
use queen_reference::engine::Engine;
use queen_reference::finding::{Finding, Kind};
use queen_reference::policy::Policy;
use queen_reference::time::Millis;
use queen_reference::variant::{Variant, VariantSet};
use queen_reference::wire::*;
use serde_json::{json, Value};

const T0: Millis = 1_700_000_000_000;

/// A broker (the model playing `variant`) and a checker that watches it.
struct Env {
    broker: Engine,
    checker: Checker,
    now: Millis,
    failed: Option<String>,
}

impl Env {
    fn new(variant: Option<Variant>) -> Env {
        let broker = Engine {
            policy: Policy {
                variants: variant.map_or(VariantSet::EMPTY, |v| VariantSet::of(&[v])),
                ..Policy::default()
            },
            ..Engine::default()
        };
        let mut checker = Checker::new();
        checker.diagnose = true;
        checker.keep_going = true;
        checker.strict_project = false;
        Env {
            broker,
            checker,
            now: T0,
            failed: None,
        }
    }

    fn send(&mut self, req: HttpRequest) -> HttpResponse {
        let r = self.broker.handle(&req, self.now);
        if self.failed.is_none() {
            if let Err(e) = self.checker.step(&req, self.now, self.now, &r) {
                self.failed = Some(match e {
                    StepError::Diverged(d) => d.to_string(),
                    StepError::Inconclusive(w) => w,
                });
            }
        }
        self.now += 10;
        r
    }

    fn wait(&mut self, ms: Millis) {
        self.now += ms;
    }

    fn push(&mut self, q: &str, p: &str, txn: &str) -> HttpResponse {
        let item = json!({"queue": q, "partition": p, "transactionId": txn, "payload": {"t": txn}});
        self.send(HttpRequest::post(
            "/api/v1/push",
            &json!({ "items": [item] }),
        ))
    }

    fn configure(&mut self, q: &str, options: Value) {
        self.send(HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": q, "options": options}),
        ));
    }

    /// A queue pop: the messages it delivered.
    fn pop(&mut self, q: &str, query: &[(&str, &str)]) -> Vec<Value> {
        self.pop_path(&format!("/api/v1/pop/queue/{q}"), query)
    }

    fn pop_path(&mut self, path: &str, query: &[(&str, &str)]) -> Vec<Value> {
        let r = self.send(HttpRequest::get(path, query));
        r.body
            .and_then(|b| b.get("messages").cloned())
            .and_then(|m| m.as_array().cloned())
            .unwrap_or_default()
    }

    /// Acks `msgs` with `statuses` in one call, with their lease.
    fn ack(&mut self, msgs: &[(&Value, &str)]) -> Vec<Value> {
        let acks: Vec<Value> = msgs
            .iter()
            .map(|(m, s)| {
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                       "leaseId": m["leaseId"], "status": s})
            })
            .collect();
        let r = self.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({ "acknowledgments": acks }),
        ));
        r.body
            .and_then(|b| b.as_array().cloned())
            .unwrap_or_default()
    }

    fn ack_without_lease(&mut self, m: &Value, status: &str) {
        self.send(HttpRequest::post(
            "/api/v1/ack",
            &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": status}),
        ));
    }

    fn extend(&mut self, lease: &str, seconds: u32) {
        self.send(HttpRequest::post(
            format!("/api/v1/lease/{lease}/extend"),
            &json!({ "seconds": seconds }),
        ));
    }

    /// The departures that are not answer-only, and whether a step failed.
    fn state_findings(&self) -> Vec<Finding> {
        self.checker
            .findings()
            .into_iter()
            .filter(|f| !f.kind.answer_only())
            .collect()
    }
}

/// Runs the scenario that shows `v`, against a broker playing `variant`.
fn scenario(v: Variant, e: &mut Env) {
    use Variant::*;
    let q = "q";
    match v {
        LeaseSecondsIgnored => {
            e.push(q, "p", "t1");
            e.pop(q, &[("leaseSeconds", "1")]);
            e.wait(1500);
            e.pop(q, &[]);
        }
        AutoAckIgnored => {
            e.push(q, "p", "t1");
            e.push(q, "p", "t2");
            e.pop(q, &[("autoAck", "true"), ("batch", "1")]);
            e.pop(q, &[]);
        }
        DelayIgnored | WindowBufferIgnored => {
            let key = if v == DelayIgnored {
                "delayedProcessing"
            } else {
                "windowBuffer"
            };
            e.configure(q, json!({ key: 10 }));
            e.push(q, "p", "t1");
            e.pop(q, &[]);
        }
        PartitionCapIgnored => {
            e.push(q, "p1", "t1");
            e.push(q, "p2", "t2");
            e.pop(q, &[("partitions", "1")]);
        }
        SubscriptionNewIgnored => {
            e.push(q, "p", "t1");
            e.pop(q, &[("consumerGroup", "g"), ("subscriptionMode", "new")]);
        }
        ExpiryChargesRetry => {
            e.configure(q, json!({"retryLimit": 1, "retryDelay": 0}));
            e.push(q, "p", "t1");
            e.pop(q, &[("leaseSeconds", "1")]);
            e.wait(1500);
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "failed")]);
            e.pop(q, &[]);
        }
        ImplicitLease300 => {
            e.push(q, "p", "t1");
            e.pop(q, &[]);
            e.wait(61_000);
            e.pop(q, &[]);
        }
        BatchIgnored => {
            e.push(q, "p", "t1");
            e.push(q, "p", "t2");
            e.pop(q, &[("batch", "1")]);
        }
        DiscoveryIgnoresTask => {
            e.push("ns.a", "p", "t1");
            e.push("ns.b", "p", "t2");
            e.pop_path(
                "/api/v1/pop",
                &[("namespace", "ns"), ("task", "a"), ("partitions", "0")],
            );
        }
        DedupWithoutWindow => {
            e.configure(q, json!({"dedupWindowSeconds": 1}));
            e.push(q, "p", "t1");
            e.wait(1500);
            e.push(q, "p", "t1");
        }
        DedupIgnored => {
            e.push(q, "p", "t1");
            e.push(q, "p", "t1");
        }
        CompletionKeepsLease => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "completed")]);
            e.push(q, "p", "t2");
            e.pop(q, &[]);
        }
        FailureKeepsLease => {
            e.configure(q, json!({"retryDelay": 0}));
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "retry")]);
            e.pop(q, &[]);
        }
        FailureBelowCursorMovesBack => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "completed")]);
            e.ack_without_lease(&m[0], "failed");
        }
        RetryCharged => {
            e.configure(q, json!({"retryLimit": 1, "retryDelay": 0}));
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "retry")]);
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "failed")]);
            e.pop(q, &[]);
        }
        RetryLimitOffByOne | FailureNeverCharged => {
            // Three failures tell "one more redelivery" from "never a dead letter".
            e.configure(q, json!({"retryLimit": 1, "retryDelay": 0}));
            e.push(q, "p", "t1");
            for _ in 0..3 {
                if let Some(m) = e.pop(q, &[]).first() {
                    e.ack(&[(m, "failed")]);
                }
            }
            e.pop(q, &[]);
        }
        EveryFailureDeadLettered => {
            e.configure(q, json!({"retryLimit": 3, "retryDelay": 0}));
            e.push(q, "p", "t1");
            e.push(q, "p", "t2");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "failed"), (&m[1], "failed")]);
            e.send(HttpRequest::get("/api/v1/dlq", &[("queue", q)]));
        }
        FailureNotClamping => {
            e.configure(q, json!({"retryDelay": 0}));
            e.push(q, "p", "t1");
            e.push(q, "p", "t2");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "retry"), (&m[1], "completed")]);
            e.pop(q, &[]);
        }
        FailureDroppedBySuccess => {
            // The dropped failure spends no retry: the second one does not dead-letter.
            e.configure(q, json!({"retryLimit": 1, "retryDelay": 0}));
            e.push(q, "p", "t1");
            e.push(q, "p", "t2");
            let m = e.pop(q, &[("leaseSeconds", "1")]);
            e.ack(&[(&m[0], "completed"), (&m[1], "failed")]);
            e.wait(1500);
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "failed")]);
            e.send(HttpRequest::get("/api/v1/dlq", &[("queue", q)]));
        }
        ExpiredLeaseAccepted => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[("leaseSeconds", "1")]);
            e.wait(1500);
            e.ack(&[(&m[0], "completed")]);
        }
        AckWithoutLeaseRefused => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack_without_lease(&m[0], "completed");
        }
        RetryDelayIgnored => {
            e.configure(q, json!({"retryDelay": 10_000}));
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "failed")]);
            e.pop(q, &[]);
        }
        DlqStatusCommits => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[]);
            e.ack(&[(&m[0], "dlq")]);
            e.send(HttpRequest::get("/api/v1/dlq", &[("queue", q)]));
        }
        ExtendFromDeadline | ExtendIgnoresSeconds | ExtendShortens | ExtendRevivesExpired => {
            e.push(q, "p", "t1");
            let m = e.pop(q, &[("leaseSeconds", "10")]);
            let lease = m[0]["leaseId"].as_str().unwrap_or_default().to_string();
            let (before, seconds, after) = match v {
                ExtendFromDeadline => (5_000, 10, 11_000),
                ExtendIgnoresSeconds => (5_000, 30, 20_000),
                ExtendShortens => (0, 2, 3_000),
                _ => (11_000, 10, 5_000),
            };
            e.wait(before);
            e.extend(&lease, seconds);
            e.wait(after);
            e.pop(q, &[]);
        }
        DeleteKeepsMessages => {
            e.push(q, "p", "t1");
            e.send(HttpRequest::delete(format!("/api/v1/resources/queues/{q}")));
            e.pop(q, &[]);
        }
        PushMaintenanceIgnored => {
            e.send(HttpRequest::post(
                "/api/v1/system/maintenance",
                &json!({"enabled": true}),
            ));
            e.push(q, "p", "t1");
            e.pop(q, &[]);
        }
        PopMaintenanceIgnored => {
            e.push(q, "p", "t1");
            e.send(HttpRequest::post(
                "/api/v1/system/maintenance/pop",
                &json!({"enabled": true}),
            ));
            e.pop(q, &[]);
        }
        TxnNotAtomic => {
            e.push(q, "p", "t1");
            let body = json!({"operations": [
                {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "t2", "payload": 1}]},
                {"type": "ack", "transactionId": "nope", "partitionId": "00000000-0000-7000-8000-000000000000"}
            ]});
            e.send(HttpRequest::post("/api/v1/transaction", &body));
            let m = e.pop(q, &[]);
            assert!(!m.is_empty());
        }
        PathNotDecoded => {
            e.push("a b", "p", "t1");
            e.pop_path("/api/v1/pop/queue/a%20b", &[]);
        }
        PartitionsZeroAsOne => {
            e.push(q, "p1", "t1");
            e.push(q, "p2", "t2");
            e.pop(q, &[("partitions", "0")]);
        }
    }
}

#[test]
fn the_protocols_broker_shows_no_finding_in_any_scenario() {
    for v in Variant::all() {
        let mut e = Env::new(None);
        scenario(v, &mut e);
        assert_eq!(e.failed, None, "{v}");
        assert_eq!(e.checker.findings(), vec![], "{v}");
    }
}

#[test]
fn each_variant_is_named_as_the_cause_and_nothing_else_changes_state() {
    let mut wrong = Vec::new();
    for v in Variant::all() {
        let mut e = Env::new(Some(v));
        scenario(v, &mut e);
        let found = e.state_findings();
        let named: Vec<String> = found.iter().map(|f| f.to_string()).collect();
        let right = e.failed.is_none()
            && found.len() == 1
            && found[0].kind == Kind::Cause
            && found[0].rule == v.rule()
            && found[0].what.ends_with(&format!("({})", v.name()));
        if !right {
            wrong.push(format!("{v}: failed {:?}, findings {named:?}", e.failed));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
