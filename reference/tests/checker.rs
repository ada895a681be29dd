//! The checker against answers from the engine (which must all be accepted, whatever
//! OPEN choices the engine's policy makes) and against tampered answers (which must
//! be caught, naming the rules involved). Section 12 of PROTOCOL.md.

mod common;
use common::T0;
use queen_reference::checker::{Checker, StepError};
use queen_reference::choice::explore_project;
use queen_reference::engine::Engine;
use queen_reference::finding::{Accept, Finding, Kind};
use queen_reference::model::{apply, Hints, Outcome};
use queen_reference::policy::*;
use queen_reference::rules::*;
use queen_reference::time::{format_iso, Millis, Stamp};
use queen_reference::wire::*;
use serde_json::{json, Value};

/// An engine and a checker fed the engine's answers.
struct Lockstep {
    e: Engine,
    c: Checker,
    now: Millis,
}

impl Lockstep {
    fn new(policy: Policy) -> Lockstep {
        let e = Engine {
            policy,
            ..Engine::default()
        };
        let mut c = Checker::new();
        c.skew_ms = 0;
        Lockstep { e, c, now: T0 }
    }

    /// Sends at `now`, the engine answers at `now + at`, the answer arrives at `now + took`.
    fn send_timed(&mut self, req: HttpRequest, at: Millis, took: Millis) -> HttpResponse {
        let r = self.e.handle(&req, self.now + at);
        if let Err(e) = self.c.step(&req, self.now, self.now + took, &r) {
            panic!("checker refused the engine's answer: {e:?}");
        }
        self.now += took;
        r
    }

    fn send(&mut self, req: HttpRequest) -> HttpResponse {
        self.send_timed(req, 0, 0)
    }

    fn push(&mut self, q: &str, p: &str, txn: Option<&str>) -> HttpResponse {
        let mut item = json!({"queue": q, "partition": p, "payload": {"n": 1}});
        if let Some(t) = txn {
            item["transactionId"] = json!(t);
        }
        self.send(HttpRequest::post("/api/v1/push", &json!({"items": [item]})))
    }

    fn pop(&mut self, q: &str, query: &[(&str, &str)]) -> HttpResponse {
        self.send(HttpRequest::get(format!("/api/v1/pop/queue/{q}"), query))
    }

    /// Feeds a hand-made answer; returns the checker's verdict.
    fn feed(&mut self, req: &HttpRequest, answer: &HttpResponse) -> Result<usize, StepError> {
        self.c.step(req, self.now, self.now, answer)
    }

    /// Two messages pushed to one partition, the first popped alone: the ack of the
    /// second under the first's lease (outside its span, ACK-10).
    fn ack_outside_the_span(&mut self) -> HttpRequest {
        self.push("q", "a", Some("t1"));
        self.push("q", "a", Some("t2"));
        let p = self.pop("q", &[("batch", "1")]);
        let mut outside = acks_for(&p, "completed")[0].clone();
        outside["transactionId"] = json!("t2");
        HttpRequest::post("/api/v1/ack", &outside)
    }

    /// Feeds a hand-made answer that must diverge; returns the rules it names.
    fn diverged_rules(&mut self, req: &HttpRequest, answer: &HttpResponse) -> Vec<RuleId> {
        match self.feed(req, answer) {
            Err(StepError::Diverged(d)) => d.rules,
            other => panic!("{} {} must diverge: {other:?}", req.method, req.path),
        }
    }
}

fn acks_for(pop: &HttpResponse, status: &str) -> Vec<Value> {
    let p: PopResponse = serde_json::from_value(pop.body.clone().unwrap()).unwrap();
    p.messages
        .iter()
        .map(|m| json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": status}))
        .collect()
}

#[test]
fn checker_accepts_every_answer_of_our_engine() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "a", Some("t1"));
    l.push("q", "b", None);
    let p = l.pop("q", &[("consumerGroup", "g"), ("partitions", "0")]);
    l.send(HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"consumerGroup": "g", "acknowledgments": acks_for(&p, "failed")}),
    ));
    l.now += 1000;
    let p = l.pop("q", &[("consumerGroup", "g"), ("partitions", "0")]);
    let lease = p.body.as_ref().unwrap()["leaseId"]
        .as_str()
        .unwrap()
        .to_string();
    l.send(HttpRequest::post_raw(
        format!("/api/v1/lease/{lease}/extend"),
        b"{\"seconds\":5}".to_vec(),
    ));
    l.send(HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"consumerGroup": "g", "acknowledgments": acks_for(&p, "dlq")}),
    ));
    l.send(HttpRequest::get("/api/v1/dlq", &[("queue", "q")]));
    l.send(HttpRequest::post(
        "/api/v1/configure",
        &json!({"queue": "q", "options": {"retryLimit": 0}}),
    ));
    l.send(HttpRequest::post(
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push", "items": [{"queue": "q"}]}]}),
    ));
    l.send(HttpRequest::post(
        "/api/v1/system/maintenance",
        &json!({"enabled": true}),
    ));
    l.push("q", "a", None);
    l.send(HttpRequest::post(
        "/api/v1/system/maintenance",
        &json!({"enabled": false}),
    ));
    l.pop("q", &[("autoAck", "true"), ("batch", "10")]);
    l.send(HttpRequest::get("/api/v1/pop", &[]));
    l.send(HttpRequest::post_raw("/api/v1/push", b"{nope".to_vec()));
    l.send(HttpRequest::delete("/api/v1/resources/queues/q"));
    l.send(HttpRequest::get("/health", &[]));
    assert_eq!(l.c.worlds().len(), 1);
}

#[test]
fn open_points_every_policy_alternative_is_accepted() {
    let alt = Policy::alternative();
    for policy in [Policy::default(), alt] {
        let mut l = Lockstep::new(policy);
        l.send(HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": "q", "options": {"dedupWindowSeconds": 1}}),
        ));
        // PUSH-9: absent payload, traceId on a plain push.
        l.send(HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": "q", "partition": "a", "transactionId": "x", "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}]})));
        l.push("q", "b", Some("y"));
        l.push("q", "b", Some("z"));
        // POP-4: which partition comes first.
        let p = l.pop("q", &[("consumerGroup", "g"), ("partitions", "1")]);
        let p2 = l.pop("q", &[("consumerGroup", "g"), ("partitions", "1")]);
        // ACK step 6: fail y, complete z in one call.
        let b_pop = if p.body.as_ref().unwrap()["partition"] == "b" {
            &p
        } else {
            &p2
        };
        let mut acks = acks_for(b_pop, "completed");
        acks[0]["status"] = json!("failed");
        l.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"consumerGroup": "g", "acknowledgments": acks}),
        ));
        // ACK-8: acking a message older than the dedup window.
        l.now += 2_000;
        let a_pop = if p.body.as_ref().unwrap()["partition"] == "a" {
            &p
        } else {
            &p2
        };
        let a = acks_for(a_pop, "completed");
        l.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"consumerGroup": "g", "acknowledgments": a}),
        ));
        // Step 7: a group without cursor, without lease.
        let pid = a_pop.body.as_ref().unwrap()["partitionId"].clone();
        l.send(HttpRequest::post(
            "/api/v1/ack",
            &json!({"transactionId": "x", "partitionId": pid, "consumerGroup": "stranger"}),
        ));
        // Partition route on an unknown queue, then delete tells whether it exists.
        l.send(HttpRequest::get("/api/v1/pop/queue/ghost/partition/p", &[]));
        l.send(HttpRequest::delete("/api/v1/resources/queues/ghost"));
        l.send(HttpRequest::get("/api/v1/dlq", &[]));
    }
}

#[test]
fn section_12_deadline_inside_the_interval_allows_both_answers_until_one_is_seen() {
    // A 1 s lease; the second pop's interval straddles the deadline.
    for engine_at in [0, 600] {
        let mut l = Lockstep::new(Policy::default());
        l.push("q", "p", Some("m"));
        l.pop("q", &[("leaseSeconds", "1")]);
        l.now += 500;
        // Sent at +500 ms, answered at +1100 ms; the engine decides at +500 or +1100.
        let r = l.send_timed(HttpRequest::get("/api/v1/pop/queue/q", &[]), engine_at, 600);
        assert_eq!(r.status, if engine_at == 0 { 204 } else { 200 });
        assert_eq!(
            l.c.worlds().len(),
            1,
            "the answer decided which world is real"
        );
    }
}

/// The broker's clock may be `skew_ms` either side of the interval the client saw: an
/// answer from just past a deadline (before it, by the client's clock) is accepted, and so
/// is one from just before it (after it, by the client's clock).
#[test]
fn section_12_the_skew_allowance_widens_the_interval_both_ways() {
    for (offset, expired) in [(-8, true), (8, false)] {
        let mut l = Lockstep::new(Policy::default());
        l.c.skew_ms = 5;
        l.push("q", "p", Some("m"));
        l.pop("q", &[("leaseSeconds", "1")]);
        let second = HttpRequest::get("/api/v1/pop/queue/q", &[]);
        // The engine decides on the other side of the deadline from the client's clock.
        let engine_at = if expired { 1_000 } else { 999 };
        let r = l.e.handle(&second, l.now + engine_at);
        assert_eq!(r.status, if expired { 200 } else { 204 });
        // The first pop's own skew already puts the deadline anywhere in 995..=1005 ms.
        let seen = l.now + 1_000 + offset;
        let mut exact = l.c.clone();
        exact.skew_ms = 0;
        assert!(
            exact.step(&second, seen, seen, &r).is_err(),
            "offset {offset}"
        );
        assert!(l.c.step(&second, seen, seen, &r).is_ok(), "offset {offset}");
    }
}

#[test]
fn section_12_an_undecided_open_point_keeps_several_worlds_until_an_answer_decides() {
    let mut l = Lockstep::new(Policy::default());
    // A partition-route pop on an unknown queue answers 204 whether or not the broker
    // created the queue row: both states stay possible...
    l.send(HttpRequest::get("/api/v1/pop/queue/ghost/partition/p", &[]));
    assert_eq!(l.c.worlds().len(), 2);
    // ...until the delete's `existed` says which one is real.
    l.send(HttpRequest::delete("/api/v1/resources/queues/ghost"));
    assert_eq!(l.c.worlds().len(), 1);
}

/// Past `max_worlds` possible states the checker says it cannot decide rather than
/// going on with a partial set (a verdict from some of the worlds could be wrong).
#[test]
fn more_possible_states_than_the_bound_is_inconclusive() {
    let ghost_pop = HttpRequest::get("/api/v1/pop/queue/ghost/partition/p", &[]);
    let mut l = Lockstep::new(Policy::default());
    let answer = l.e.handle(&ghost_pop, l.now);
    let mut at_bound = l.c.clone();
    at_bound.max_worlds = 2;
    assert_eq!(at_bound.step(&ghost_pop, l.now, l.now, &answer), Ok(2));
    l.c.max_worlds = 1;
    assert!(matches!(
        l.feed(&ghost_pop, &answer),
        Err(StepError::Inconclusive(_))
    ));
    // The same bound holds for a request whose answer never came.
    let mut l = Lockstep::new(Policy::default());
    l.c.max_worlds = 1;
    let mut at_bound = l.c.clone();
    at_bound.max_worlds = 2;
    assert_eq!(at_bound.step_unknown(&ghost_pop, l.now, l.now), Ok(2));
    assert!(matches!(
        l.c.step_unknown(&ghost_pop, l.now, l.now),
        Err(StepError::Inconclusive(_))
    ));
}

#[test]
fn broken_empty_pop_with_200_and_body_is_caught() {
    let mut l = Lockstep::new(Policy::default());
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    let bad = HttpResponse {
        status: 200,
        body: Some(json!({})),
    };
    match l.feed(&req, &bad) {
        Err(StepError::Diverged(d)) => {
            assert!(d.rules.contains(&POP_6));
            assert_eq!(d.expected[0].status, 204);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn broken_ack_2_clamp_skipped_is_caught() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "p", Some("m1"));
    l.push("q", "p", Some("m2"));
    let p = l.pop("q", &[("consumerGroup", "g")]);
    let mut acks = acks_for(&p, "completed");
    acks[0]["status"] = json!("failed");
    l.send(HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"consumerGroup": "g", "acknowledgments": acks}),
    ));
    l.now += 1_000;
    // A broker that skipped the clamp committed m2 and has nothing left to deliver.
    let next = HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g")]);
    match l.feed(
        &next,
        &HttpResponse {
            status: 204,
            body: None,
        },
    ) {
        Err(StepError::Diverged(d)) => {
            assert!(d.reasons[0].contains("POP-2"), "{d}");
            assert_eq!(
                d.expected[0].status, 200,
                "the model expected m1 and m2 again"
            );
        }
        other => panic!("a broker that skipped the clamp must be caught: {other:?}"),
    }
}

#[test]
fn ids_must_stay_consistent() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "p", Some("m"));
    let req = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "partition": "p", "transactionId": "m"}]}),
    );
    let mut dup = l.e.handle(&req, l.now);
    // A duplicate must carry the original message id (PUSH-13).
    dup.body.as_mut().unwrap()[0]["message_id"] = json!(uuid::Uuid::now_v7().to_string());
    match l.feed(&req, &dup) {
        Err(StepError::Diverged(d)) => assert!(d.reasons[0].contains("PUSH-13"), "{d}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rejected_requests_need_an_error_body_and_change_nothing() {
    let mut l = Lockstep::new(Policy::default());
    let req = HttpRequest::post_raw("/api/v1/ack", b"[]".to_vec());
    let ok = HttpResponse {
        status: 400,
        body: Some(json!({"error": "ack body must be a JSON object"})),
    };
    assert!(l.feed(&req, &ok).is_ok());
    let silent = HttpResponse {
        status: 400,
        body: None,
    };
    assert!(l.feed(&req, &silent).is_err());
    let accepted = HttpResponse {
        status: 200,
        body: Some(json!([])),
    };
    assert!(l.feed(&req, &accepted).is_err());
}

#[test]
fn an_unanswered_push_may_have_taken_effect_and_a_cloned_checker_branches() {
    // Engine and checker diverge on purpose: the engine applies the push, the checker
    // never sees its answer (a timeout).
    let mut l = Lockstep::new(Policy::default());
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "uq", "partition": "p", "transactionId": "t1", "payload": {"n": 1}}]}),
    );
    let _lost = l.e.handle(&push, l.now);
    let pop_req = HttpRequest::get("/api/v1/pop/queue/uq", &[]);
    let popped = l.e.handle(&pop_req, l.now);
    assert_eq!(popped.status, 200);
    // Without the push, the delivery is impossible.
    let mut never = l.c.clone();
    assert!(matches!(
        never.step(&pop_req, l.now, l.now, &popped),
        Err(StepError::Diverged(_))
    ));
    // With it applied as unanswered, the delivery is accepted (ids learnt from the pop).
    l.c.step_unknown(&push, l.now, l.now).unwrap();
    assert!(l.c.step(&pop_req, l.now, l.now, &popped).is_ok());
}

/// A broker that departs from a PROJECT decision that changes state (ACK-5: the live
/// lease id acking an offset outside its span is accepted): a strict checker diverges,
/// a lax one follows it and records the departure with its rule id.
#[test]
fn project_alternatives_diverge_strictly_and_are_recorded_laxly() {
    let scenario = |strict: bool| -> (Result<usize, StepError>, Checker) {
        let mut l = Lockstep::new(Policy {
            ack_outside_span: 1,
            ..Policy::default()
        });
        l.c.strict_project = strict;
        let req = l.ack_outside_the_span();
        let r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()[0]["success"], json!(true));
        (l.feed(&req, &r), l.c)
    };
    let (strict, c) = scenario(true);
    match strict {
        Err(StepError::Diverged(d)) => assert!(d.rules.contains(&ACK_10), "{d}"),
        other => panic!("a strict checker must diverge: {other:?}"),
    }
    assert!(c.findings().is_empty());
    let (lax, c) = scenario(false);
    assert!(lax.is_ok(), "{lax:?}");
    let diffs = c.findings();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0].rule, ACK_10);
    assert_eq!(diffs[0].kind, Kind::Alternative);
}

/// A checker that does not explain refusals (a search's) refuses and accepts exactly what
/// one that explains does; only the explanation is missing. With a state divergence
/// accepted, the rules an explanation names decide, so it explains then.
#[test]
fn a_checker_that_does_not_explain_decides_the_same() {
    let scenario = |explain: bool, accept: Option<&str>| {
        let mut l = Lockstep::new(Policy {
            ack_outside_span: 1,
            ..Policy::default()
        });
        l.c.explain = explain;
        l.c.accept = accept
            .map(|a| vec![Accept::parse(a).unwrap()])
            .unwrap_or_default();
        let req = l.ack_outside_the_span();
        let r = l.e.handle(&req, l.now);
        (l.feed(&req, &r), l.c.findings())
    };
    let Err(StepError::Diverged(full)) = scenario(true, None).0 else {
        panic!("a strict checker refuses an ack outside the lease's span")
    };
    let Err(StepError::Diverged(bare)) = scenario(false, None).0 else {
        panic!("a checker that does not explain refuses it too")
    };
    assert_eq!(full.rules, vec![ACK_10], "{full}");
    assert!(
        !full.expected.is_empty() && bare.expected.is_empty(),
        "{bare}"
    );
    // ACK-10 accepted as a state divergence: both follow the broker with one finding.
    let (explained, found) = scenario(true, Some("ACK-10:state"));
    let (unexplained, found_bare) = scenario(false, Some("ACK-10:state"));
    assert!(explained.is_ok() && unexplained.is_ok(), "{unexplained:?}");
    assert_eq!(found, found_bare);
    assert_eq!(found[0].rule, ACK_10);
}

/// MGMT-11 [PROJECT]: a broker that refuses the delete of one message with 405 and
/// keeps delivering it is followed by a lax checker, which records the difference; a
/// strict one diverges.
#[test]
fn a_refused_message_delete_is_a_project_difference() {
    for strict in [true, false] {
        let mut l = Lockstep::new(Policy {
            message_delete_refused: 1,
            ..Policy::default()
        });
        l.c.strict_project = strict;
        l.push("q", "a", Some("t1"));
        let p = l.pop("q", &[("autoAck", "true")]);
        let pid = p.body.as_ref().unwrap()["messages"][0]["partitionId"]
            .as_str()
            .unwrap()
            .to_string();
        let del = HttpRequest::delete(format!("/api/v1/messages/{pid}/t1"));
        let r = l.e.handle(&del, l.now);
        assert_eq!(r.status, 405);
        if strict {
            assert!(l.diverged_rules(&del, &r).contains(&MGMT_11));
            continue;
        }
        assert!(l.feed(&del, &r).is_ok());
        // The message is still there for a new group: the checker followed the refusal.
        let again = l.pop("q", &[("consumerGroup", "fresh")]);
        assert_eq!(again.status, 200);
        let rules: Vec<RuleId> = l.c.findings().iter().map(|d| d.rule).collect();
        assert_eq!(rules, vec![MGMT_11]);
        assert_eq!(l.c.findings()[0].kind, Kind::Alternative);
    }
}

/// Answer-only PROJECT points: a duplicate with a fresh message_id (PUSH-5) and a 400
/// without `{"error"}` (PUSH-8) diverge strictly; laxly they are recorded, and a SEED
/// departure in the same answers (a wrong status) still diverges.
#[test]
fn answer_only_project_points_are_relaxed_and_recorded_when_lax() {
    for strict in [true, false] {
        let mut l = Lockstep::new(Policy::default());
        l.c.strict_project = strict;
        l.push("q", "a", Some("t1"));
        let req = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "partition": "a", "transactionId": "t1"}]}),
        );
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()[0]["status"], json!("duplicate"));
        r.body.as_mut().unwrap()[0]["message_id"] = json!(uuid_v7_like());
        assert_eq!(l.feed(&req, &r).is_ok(), !strict, "strict {strict}");
        let bad = HttpRequest::post_raw("/api/v1/push", "not json");
        let bad_answer = HttpResponse {
            status: 400,
            body: Some(json!({"message": "body is not JSON"})),
        };
        assert_eq!(l.feed(&bad, &bad_answer).is_ok(), !strict);
        let wrong_status = HttpResponse {
            status: 200,
            body: Some(json!({"message": "fine"})),
        };
        assert!(
            l.feed(&bad, &wrong_status).is_err(),
            "a 200 to bad input is never accepted"
        );
        let rules: Vec<RuleId> = l.c.findings().iter().map(|d| d.rule).collect();
        if strict {
            assert!(rules.is_empty());
        } else {
            assert_eq!(rules, vec![PUSH_13, PUSH_8]);
        }
    }
}

/// A UUIDv7 no engine minted.
fn uuid_v7_like() -> String {
    "01890a5d-ac96-774b-bcce-b302099a8057".to_string()
}

/// A checker for a broker that is not ours: answer-only differences are findings.
fn keep_going(l: &mut Lockstep) {
    l.c.keep_going = true;
    l.c.strict_project = false;
}

/// The answer with every push result's status code changed (a framework writing 200).
fn with_status(mut r: HttpResponse, status: u16) -> HttpResponse {
    r.status = status;
    r
}

/// PUSH-1 answered 200: strictly a divergence; kept going, one finding under PUSH-1
/// (recorded once however often it recurs) and every later answer still checked.
#[test]
fn keep_going_records_an_answer_only_difference_once_and_checks_the_rest() {
    let mut strict = Lockstep::new(Policy::default());
    let req = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "transactionId": "t1"}]}),
    );
    let r = strict.e.handle(&req, strict.now);
    assert!(strict.feed(&req, &with_status(r, 200)).is_err());

    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    for t in ["t1", "t2"] {
        let req = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "transactionId": t}]}),
        );
        let r = l.e.handle(&req, l.now);
        assert!(l.feed(&req, &with_status(r, 200)).is_ok());
        // The case reads the protocol's answer, whatever status the broker chose.
        assert_eq!(l.c.last_expected().map(|e| e.status), Some(201), "{t}");
    }
    let f = l.c.findings();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].rule, f[0].kind, f[0].level),
        (PUSH_1, Kind::Status, Level::Seed)
    );
    // The state is still checked: a pop that skips t1 is a divergence under POP-1.
    let pop = HttpRequest::get("/api/v1/pop/queue/q", &[("batch", "1")]);
    let mut r = l.e.handle(&pop, l.now);
    r.body.as_mut().unwrap()["messages"][0]["transactionId"] = json!("t2");
    assert_eq!(l.diverged_rules(&pop, &r), vec![POP_1]);
}

/// Ack items without `noop` and with other error texts: findings under ACK-3 and
/// ACK-5; an ack whose `success` differs is a divergence naming the ack's rule.
#[test]
fn ack_answer_findings_name_the_field_rule() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.push("q", "a", Some("t1"));
    let p = l.pop("q", &[]);
    let acks = acks_for(&p, "completed");
    l.send(HttpRequest::post("/api/v1/ack", &acks[0]));
    // Again: at or below the cursor, noop:true, here without the key.
    let req = HttpRequest::post("/api/v1/ack", &acks[0]);
    let mut r = l.e.handle(&req, l.now);
    r.body.as_mut().unwrap()[0]
        .as_object_mut()
        .unwrap()
        .remove("noop");
    assert!(l.feed(&req, &r).is_ok());
    let mut failed = acks[0].clone();
    failed["status"] = json!("failed");
    let req = HttpRequest::post("/api/v1/ack", &failed);
    let mut r = l.e.handle(&req, l.now);
    assert_eq!(
        r.body.as_ref().unwrap()[0]["error"],
        json!("already committed")
    );
    r.body.as_mut().unwrap()[0]["error"] = json!("Already committed");
    assert!(l.feed(&req, &r).is_ok());
    let kinds: Vec<(RuleId, Kind)> = l.c.findings().iter().map(|f| (f.rule, f.kind)).collect();
    assert_eq!(
        kinds,
        vec![(ACK_3, Kind::MissingField), (ACK_3, Kind::ErrorText)]
    );
    let mut r = l.e.handle(&req, l.now);
    r.body.as_mut().unwrap()[0]["success"] = json!(true);
    assert_eq!(l.diverged_rules(&req, &r), vec![ACK_3]);
}

/// The divergence of an ack item whose `success` is wrong names the rule that decides
/// that item: ACK-3 for a completion at or below the cursor (a noop), ACK-6 for a
/// failure that dead-letters.
#[test]
fn a_wrong_ack_success_names_the_rule_of_that_item() {
    let diverged_rules = |l: &mut Lockstep, ack: &Value| {
        let req = HttpRequest::post("/api/v1/ack", ack);
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()[0]["success"], json!(true));
        r.body.as_mut().unwrap()[0]["success"] = json!(false);
        r.body.as_mut().unwrap()[0]["error"] = json!("refused");
        l.diverged_rules(&req, &r)
    };
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "a", Some("t1"));
    let acks = acks_for(&l.pop("q", &[]), "completed");
    l.send(HttpRequest::post("/api/v1/ack", &acks[0]));
    assert_eq!(
        diverged_rules(&mut l, &acks[0]),
        vec![ACK_3],
        "a noop completion"
    );

    let mut l = Lockstep::new(Policy::default());
    l.send(HttpRequest::post(
        "/api/v1/configure",
        &json!({"queue": "q", "options": {"retryLimit": 0}}),
    ));
    l.push("q", "a", Some("t1"));
    let acks = acks_for(&l.pop("q", &[]), "failed");
    assert_eq!(
        diverged_rules(&mut l, &acks[0]),
        vec![ACK_6],
        "a dead-lettering failure"
    );
}

/// An ack that completes the leased span but answers `leaseReleased:false`: strictly a
/// divergence under the flag's own rule (ACK step 5, PROJECT), since strictness does not
/// make a flag proof of the state it names (ACK-1); kept going, only a flag finding: what
/// the broker said. Whether the lease was in fact kept is read from the next pop:
/// released, the flag stays the only finding; kept, the diagnosis names the variant that
/// keeps it as the cause.
#[test]
fn a_flag_that_disagrees_with_the_state_is_a_flag_until_a_later_answer_shows_the_state() {
    for (going, kept) in [(false, false), (true, false), (true, true)] {
        let mut l = Lockstep::new(Policy::default());
        l.c.diagnose = true;
        if going {
            keep_going(&mut l);
        }
        l.push("q", "a", Some("t1"));
        let acks = acks_for(&l.pop("q", &[]), "completed");
        let req = HttpRequest::post("/api/v1/ack", &acks[0]);
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()[0]["leaseReleased"], json!(true));
        r.body.as_mut().unwrap()[0]["leaseReleased"] = json!(false);
        let verdict = l.feed(&req, &r);
        if !going {
            match verdict {
                Err(StepError::Diverged(d)) => assert_eq!(d.rules, vec![ACK_STEP_5], "{d}"),
                other => panic!("must diverge: {other:?}"),
            }
            continue;
        }
        assert!(verdict.is_ok(), "{verdict:?}");
        let f = l.c.findings();
        assert_eq!((f[0].rule, f[0].kind), (ACK_STEP_5, Kind::Flag));
        assert!(f[0].kind.answer_only());
        l.push("q", "a", Some("t2"));
        let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
        let answer = if kept {
            HttpResponse {
                status: 204,
                body: None,
            }
        } else {
            l.e.handle(&req, l.now)
        };
        assert!(l.feed(&req, &answer).is_ok());
        let kinds: Vec<(RuleId, Kind)> = l.c.findings().iter().map(|f| (f.rule, f.kind)).collect();
        if kept {
            assert_eq!(kinds, vec![(ACK_1, Kind::Cause)]);
            assert!(l.c.findings()[0].what.contains("completion-keeps-lease"));
        } else {
            assert_eq!(kinds, vec![(ACK_STEP_5, Kind::Flag)]);
        }
    }
}

/// A wrong health or maintenance answer diverges under that route's rule.
#[test]
fn health_and_maintenance_answers_are_judged_by_their_own_rules() {
    for (path, rule) in [
        ("/health", HEALTH_1),
        ("/api/v1/system/maintenance", MAINT_1),
        ("/api/v1/system/maintenance/pop", MAINT_2),
    ] {
        let mut l = Lockstep::new(Policy::default());
        let req = HttpRequest::get(path, &[]);
        let wrong = HttpResponse {
            status: 503,
            body: Some(json!({"error": "down"})),
        };
        assert_eq!(l.diverged_rules(&req, &wrong), vec![rule], "{path}");
    }
}

/// An ack item's `error` against the one due: a refused item with a null error, and an
/// applied one with an error text, are each a finding under their own rule.
#[test]
fn an_ack_items_error_field_is_judged_both_ways() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.push("q", "a", Some("t1"));
    let mut acks = acks_for(&l.pop("q", &[]), "completed");
    let mut stale = acks[0].clone();
    stale["leaseId"] = json!(uuid_v7_like());
    let req = HttpRequest::post("/api/v1/ack", &stale);
    let mut r = l.e.handle(&req, l.now);
    assert_eq!(
        r.body.as_ref().unwrap()[0]["error"],
        json!("invalid or expired lease")
    );
    r.body.as_mut().unwrap()[0]["error"] = Value::Null;
    assert!(l.feed(&req, &r).is_ok());
    let req = HttpRequest::post("/api/v1/ack", &acks.remove(0));
    let mut r = l.e.handle(&req, l.now);
    assert_eq!(r.body.as_ref().unwrap()[0]["error"], Value::Null);
    r.body.as_mut().unwrap()[0]["error"] = json!("all good");
    assert!(l.feed(&req, &r).is_ok());
    let kinds: Vec<(RuleId, Kind)> = l.c.findings().iter().map(|f| (f.rule, f.kind)).collect();
    assert_eq!(
        kinds,
        vec![(ACK_5, Kind::MissingField), (ACK_0, Kind::Value)]
    );
}

/// Every field of a dead-letter listing is the model's: changing any one of them
/// diverges under DLQ-2, except how many there are, which is state (DLQ-1).
#[test]
fn each_field_of_a_dead_letter_listing_is_checked() {
    let tamper: [(&str, Value); 12] = [
        ("/total", json!(2)),
        ("/limit", json!(5)),
        ("/offset", json!(1)),
        ("/messages/0/transactionId", json!("other")),
        ("/messages/0/partition", json!("b")),
        ("/messages/0/queue", json!("q2")),
        ("/messages/0/consumerGroup", json!("g")),
        ("/messages/0/errorMessage", json!("other error")),
        ("/messages/0/retryCount", json!(3)),
        ("/messages/0/data", json!({"n": 2})),
        ("/messages/0/createdAt", json!("2001-01-01T00:00:00.000Z")),
        ("/messages/0/failedAt", json!("2001-01-01T00:00:00.000Z")),
    ];
    for (at, value) in tamper {
        let mut l = Lockstep::new(Policy::default());
        l.send(HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": "q", "options": {"retryLimit": 0}}),
        ));
        l.push("q", "a", Some("t1"));
        let mut failed = acks_for(&l.pop("q", &[]), "failed")[0].clone();
        failed["error"] = json!("boom");
        l.send(HttpRequest::post("/api/v1/ack", &failed));
        let req = HttpRequest::get("/api/v1/dlq", &[("queue", "q")]);
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()["total"], json!(1));
        *r.body.as_mut().unwrap().pointer_mut(at).unwrap() = value;
        let rule = if at == "/total" { DLQ_1 } else { DLQ_2 };
        assert_eq!(l.diverged_rules(&req, &r), vec![rule], "{at}");
    }
}

/// A dead letter pushed without a payload, never delivered, lists its data as null or
/// `{}` (PUSH-9), nothing else.
#[test]
fn a_dead_letter_without_payload_lists_null_or_an_empty_object() {
    for (data, ok) in [
        (json!(null), true),
        (json!({}), true),
        (json!({"x": 1}), false),
    ] {
        let mut l = Lockstep::new(Policy::default());
        l.push("q", "a", Some("t1"));
        l.send(HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "partition": "a", "transactionId": "t2"}]}),
        ));
        // Only t1 is delivered; t2 is dead-lettered by an ack without a lease.
        let mut ack = acks_for(&l.pop("q", &[("batch", "1")]), "dlq")[0].clone();
        ack["transactionId"] = json!("t2");
        ack.as_object_mut().unwrap().remove("leaseId");
        let r = l.send(HttpRequest::post("/api/v1/ack", &ack));
        assert_eq!(r.body.unwrap()[0]["dlq"], json!(true));
        let req = HttpRequest::get("/api/v1/dlq", &[("queue", "q")]);
        let mut r = l.e.handle(&req, l.now);
        r.body.as_mut().unwrap()["messages"][0]["data"] = data.clone();
        assert_eq!(l.feed(&req, &r).is_ok(), ok, "{data}");
    }
}

/// A configure answer's differences are named by what they are: a namespace or task
/// (CFG-3), an option left as it was before the call (CFG-1), another default where the
/// call set nothing (CFG-2), another value than the one set (CFG-1).
#[test]
fn configure_answer_differences_name_their_rule() {
    let cases: [(&str, Value, RuleId); 4] = [
        ("/namespace", json!("other"), CFG_3),
        ("/options/retryLimit", json!(3), CFG_1),
        ("/options/leaseTime", json!(999), CFG_2),
        ("/options/retryLimit", json!(7), CFG_1),
    ];
    for (at, value, rule) in cases {
        let mut l = Lockstep::new(Policy::default());
        let configure = |retry: u32| {
            HttpRequest::post(
                "/api/v1/configure",
                &json!({"queue": "q", "options": {"retryLimit": retry}}),
            )
        };
        l.send(configure(3));
        let req = configure(5);
        let mut r = l.e.handle(&req, l.now);
        *r.body.as_mut().unwrap().pointer_mut(at).unwrap() = value;
        assert_eq!(l.diverged_rules(&req, &r), vec![rule], "{at}");
    }
}

/// A message's `leaseId` that is not the pop's own diverges under POP-5; kept going, a
/// field of another JSON type is a mistyped-field finding, not a value one.
#[test]
fn field_checks_name_a_different_value_and_a_different_type() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "a", Some("t1"));
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    let mut r = l.e.handle(&req, l.now);
    r.body.as_mut().unwrap()["messages"][0]["leaseId"] = json!(uuid_v7_like());
    assert_eq!(l.diverged_rules(&req, &r), vec![POP_5]);
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    let req = HttpRequest::get("/health", &[]);
    let mut r = l.e.handle(&req, l.now);
    r.body.as_mut().unwrap()["status"] = json!(1);
    assert!(l.feed(&req, &r).is_ok());
    let kinds: Vec<(RuleId, Kind)> = l.c.findings().iter().map(|f| (f.rule, f.kind)).collect();
    assert_eq!(kinds, vec![(HEALTH_1, Kind::MistypedField)]);
}

/// An extend answer: a 4xx to a valid body is LEASE-3's (the body was valid); an
/// answer wrapped in a one-element array is followed, kept going, as a shape finding,
/// and a longer array is no extend answer.
#[test]
fn extend_answers_a_refusal_and_a_wrapped_object() {
    let setup = |going: bool| {
        let mut l = Lockstep::new(Policy::default());
        if going {
            keep_going(&mut l);
        }
        l.push("q", "a", Some("t1"));
        let r = l.pop("q", &[]);
        let lease = r.body.unwrap()["leaseId"].as_str().unwrap().to_string();
        let req = HttpRequest::post(
            format!("/api/v1/lease/{lease}/extend"),
            &json!({"seconds": 30}),
        );
        let answer = l.e.handle(&req, l.now);
        (l, req, answer)
    };
    let (mut l, req, _) = setup(false);
    let refused = HttpResponse {
        status: 400,
        body: Some(json!({"error": "bad"})),
    };
    assert_eq!(l.diverged_rules(&req, &refused), vec![LEASE_3]);
    let (mut l, req, answer) = setup(true);
    let obj = answer.body.clone().unwrap();
    let mut twice = l.c.clone();
    let wrapped = HttpResponse {
        status: 200,
        body: Some(json!([obj])),
    };
    assert!(l.feed(&req, &wrapped).is_ok());
    let f = l.c.findings();
    assert_eq!((f[0].rule, f[0].kind), (LEASE_2, Kind::Shape));
    let two = HttpResponse {
        status: 200,
        body: Some(json!([obj, obj])),
    };
    assert!(twice.step(&req, l.now, l.now, &two).is_err());
}

/// The deadline an extend answers is state: another one diverges under LEASE-1 when the
/// extend named its seconds, under POP-9 (the queue's lease time) when it did not.
#[test]
fn an_extends_expires_at_is_the_new_deadline() {
    for (body, rule) in [(json!({"seconds": 30}), LEASE_1), (json!({}), POP_9)] {
        let mut l = Lockstep::new(Policy::default());
        l.push("q", "a", Some("t1"));
        let r = l.pop("q", &[]);
        let lease = r.body.unwrap()["leaseId"].as_str().unwrap().to_string();
        let req = HttpRequest::post(format!("/api/v1/lease/{lease}/extend"), &body);
        let mut r = l.e.handle(&req, l.now);
        assert!(r.body.as_ref().unwrap()["expiresAt"].is_string(), "{r:?}");
        let mut right = l.c.clone();
        assert!(right.step(&req, l.now, l.now, &r).is_ok());
        r.body.as_mut().unwrap()["expiresAt"] = json!("2001-01-01T00:00:00.000Z");
        assert_eq!(l.diverged_rules(&req, &r), vec![rule], "{body}");
    }
}

/// A pop that delivers where nothing was claimable diverges under POP-2.
#[test]
fn a_delivery_from_nothing_names_pop_2() {
    let mut elsewhere = Lockstep::new(Policy::default());
    elsewhere.push("q", "a", Some("t1"));
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    let delivered = elsewhere.e.handle(&req, elsewhere.now);
    let mut l = Lockstep::new(Policy::default());
    l.send(HttpRequest::post(
        "/api/v1/configure",
        &json!({"queue": "q", "options": {}}),
    ));
    assert_eq!(l.diverged_rules(&req, &delivered), vec![POP_2]);
}

/// A delivered message's `createdAt` narrows when it was written: a later group that
/// subscribes from after that instant must not see it, however wide the push's own
/// interval was (POP-12, POP-13).
#[test]
fn a_shown_created_at_narrows_the_write_time() {
    let mut l = Lockstep::new(Policy::default());
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "partition": "a", "transactionId": "t1"}]}),
    );
    // Written at +5 ms of a push the client saw take 10 ms.
    l.send_timed(push, 5, 10);
    let r = l.pop("q", &[("consumerGroup", "g1")]);
    let created = r.body.unwrap()["messages"][0]["createdAt"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(created, format_iso(T0 + 5));
    let later = format_iso(T0 + 7);
    let req = HttpRequest::get(
        "/api/v1/pop/queue/q",
        &[
            ("consumerGroup", "g2"),
            ("subscriptionFrom", later.as_str()),
        ],
    );
    // What a broker that ignored the time would deliver.
    let mut wrong = l.e.handle(
        &HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g3")]),
        l.now,
    );
    wrong.body.as_mut().unwrap()["consumerGroup"] = json!("g2");
    for m in wrong.body.as_mut().unwrap()["messages"]
        .as_array_mut()
        .unwrap()
    {
        m["consumerGroup"] = json!("g2");
    }
    let mut c = l.c.clone();
    assert!(c.step(&req, l.now, l.now, &wrong).is_err());
    assert_eq!(l.send(req).status, 204);
    // From the shown instant itself it is due: an empty answer diverges.
    let at = HttpRequest::get(
        "/api/v1/pop/queue/q",
        &[
            ("consumerGroup", "g4"),
            ("subscriptionFrom", created.as_str()),
        ],
    );
    let nothing = HttpResponse {
        status: 204,
        body: None,
    };
    assert!(l.c.clone().step(&at, l.now, l.now, &nothing).is_err());
    assert_eq!(l.send(at).status, 200);
}

/// An empty pop is a bare 204: a 204 that still carries a body is a POP-6 difference.
#[test]
fn an_empty_pop_with_a_204_and_a_body_is_not_bare() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "a", Some("t1"));
    l.pop("q", &[]);
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    let with_body = HttpResponse {
        status: 204,
        body: Some(json!({"messages": []})),
    };
    assert_eq!(l.diverged_rules(&req, &with_body), vec![POP_6]);
}

const TRACE: &str = "01a3185c-5000-7000-8000-0000000000aa";

/// A delivered message shows what was pushed (POP-5), and where PUSH-9 leaves a choice
/// (an absent payload as null or `{}`, a plain push's traceId kept or dropped) the
/// first delivery makes it: a redelivery must show the same.
#[test]
fn a_messages_content_is_the_pushed_one_and_open_choices_stay_made() {
    // (traceId, payload) pushed; the field tampered; its value at first and at the
    // redelivery; whether the first is allowed; whether the redelivery is.
    let (tr, other) = (TRACE, "01a3185c-5000-7000-8000-0000000000bb");
    let cases: [(Value, &str, Value, Value, bool, bool); 8] = [
        (
            json!(null),
            "data",
            json!({"n": 2}),
            json!({"n": 2}),
            false,
            false,
        ),
        (json!(null), "data", json!(null), json!({}), true, false),
        (json!(null), "data", json!({}), json!(null), true, false),
        (json!(null), "data", json!([1]), json!([1]), false, false),
        (json!(tr), "traceId", json!(tr), json!(null), true, false),
        (json!(tr), "traceId", json!(null), json!(tr), true, false),
        (
            json!(tr),
            "traceId",
            json!(other),
            json!(other),
            false,
            false,
        ),
        (json!(tr), "traceId", json!(5), json!(5), false, false),
    ];
    for (trace, field, first, again, first_ok, again_ok) in cases {
        let mut l = Lockstep::new(Policy::default());
        let mut item = json!({"queue": "q", "partition": "a", "transactionId": "t1"});
        if trace.is_string() {
            item["traceId"] = trace.clone();
            item["payload"] = json!({"n": 1});
        }
        l.send(HttpRequest::post("/api/v1/push", &json!({"items": [item]})));
        let req = HttpRequest::get("/api/v1/pop/queue/q", &[("leaseSeconds", "1")]);
        let mut r = l.e.handle(&req, l.now);
        r.body.as_mut().unwrap()["messages"][0][field] = first.clone();
        let case = format!("{field} {first} then {again}");
        assert_eq!(l.feed(&req, &r).is_ok(), first_ok, "{case}");
        if !first_ok {
            continue;
        }
        l.now += 2_000;
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.status, 200, "{case}: redelivered after the lease");
        r.body.as_mut().unwrap()["messages"][0][field] = again.clone();
        assert_eq!(l.feed(&req, &r).is_ok(), again_ok, "{case}");
    }
    // A transaction's push keeps its traceId: shown as pushed, nothing else.
    for (shown, ok) in [
        (json!(tr), true),
        (json!(other), false),
        (json!(null), false),
    ] {
        let mut l = Lockstep::new(Policy::default());
        let item = json!({"queue": "q", "partition": "a", "transactionId": "t1", "traceId": tr});
        l.send(HttpRequest::post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push", "items": [item]}]}),
        ));
        let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
        let mut r = l.e.handle(&req, l.now);
        r.body.as_mut().unwrap()["messages"][0]["traceId"] = shown.clone();
        assert_eq!(
            l.feed(&req, &r).is_ok(),
            ok,
            "transaction trace shown as {shown}"
        );
    }
}

/// A push answer that reuses another message's id diverges: under PUSH-1 for a new
/// message, under PUSH-13 for a duplicate (which must carry its original's id).
#[test]
fn a_reused_message_id_names_push_1_or_push_13() {
    for (txn, rule) in [("t2", PUSH_1), ("t1", PUSH_13)] {
        let mut l = Lockstep::new(Policy::default());
        let first = l.push("q", "a", Some("t1"));
        let first_id = first.body.unwrap()[0]["message_id"].clone();
        let third_id = l.push("q", "a", Some("t3")).body.unwrap()[0]["message_id"].clone();
        let req = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "partition": "a", "transactionId": txn}]}),
        );
        let mut r = l.e.handle(&req, l.now);
        // A new message shown with t1's id; a duplicate of t1 shown with t3's.
        r.body.as_mut().unwrap()[0]["message_id"] = if txn == "t2" { first_id } else { third_id };
        assert_eq!(l.diverged_rules(&req, &r), vec![rule], "{txn}");
    }
}

/// An aborted transaction (an ack item that would fail, TXN-2) says why in `error`: with
/// it the answer is the model's, without it a TXN-3 difference.
#[test]
fn an_aborted_transaction_must_say_why() {
    for (error, ok) in [
        (json!("ack 0 failed: unresolvable"), true),
        (json!(""), false),
    ] {
        let mut l = Lockstep::new(Policy::default());
        l.push("q", "a", Some("t1"));
        let p = l.pop("q", &[]);
        let mut ack = acks_for(&p, "completed")[0].clone();
        ack["transactionId"] = json!("nobody");
        ack["type"] = json!("ack");
        let req = HttpRequest::post("/api/v1/transaction", &json!({"operations": [ack]}));
        let mut r = l.e.handle(&req, l.now);
        assert_eq!(r.body.as_ref().unwrap()["success"], json!(false), "{r:?}");
        r.body.as_mut().unwrap()["error"] = error.clone();
        assert_eq!(l.feed(&req, &r).is_ok(), ok, "error {error}");
    }
}

/// `--accept`: a declared deviation is allowed even without keep-going.
#[test]
fn an_accepted_deviation_is_allowed_and_still_listed() {
    let mut l = Lockstep::new(Policy::default());
    l.c.accept = vec![Accept::parse("PUSH-1:status").unwrap()];
    let req = HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": "q"}]}));
    let r = l.e.handle(&req, l.now);
    assert!(l.feed(&req, &with_status(r.clone(), 200)).is_ok());
    assert_eq!(l.c.findings()[0].rule, PUSH_1);
    // Only that kind: a missing field of PUSH-1 is still a divergence.
    let mut r = r;
    r.body.as_mut().unwrap()[0]
        .as_object_mut()
        .unwrap()
        .remove("queueName");
    assert!(l.feed(&req, &r).is_err());
}

/// A route the broker lacks: a SEED finding, and the state stays as it was, so the
/// next pop on the queue route still has the message to deliver.
#[test]
fn a_missing_route_is_a_finding_that_changes_nothing() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.send(HttpRequest::post(
        "/api/v1/configure",
        &json!({"queue": "ns.t", "options": {}}),
    ));
    l.push("ns.t", "a", Some("t1"));
    let req = HttpRequest::get("/api/v1/pop", &[("namespace", "ns")]);
    let missing = HttpResponse {
        status: 404,
        body: Some(json!({"error": "not found"})),
    };
    assert!(l.feed(&req, &missing).is_ok());
    let f = l.c.findings();
    assert_eq!(
        (f[0].rule, f[0].kind, f[0].level),
        (POP_10, Kind::RouteMissing, Level::Seed)
    );
    l.pop("ns.t", &[]);
    // A queue-scoped pop the broker lacks breaks POP-5, the route's own rule.
    let req = HttpRequest::get("/api/v1/pop/queue/ns.t", &[]);
    assert!(l.feed(&req, &missing).is_ok());
    let f = l.c.findings();
    let queue_route = f.iter().find(|f| f.rule == POP_5).unwrap();
    assert_eq!(queue_route.kind, Kind::RouteMissing);
    // One text per route, whatever the queue: instances group under it.
    assert_eq!(
        queue_route.what,
        "GET /api/v1/pop/queue/{queue} answers 404"
    );
}

/// A pop that takes fewer messages than `batch` allows (a broker whose default `batch`
/// is one) is read as the smaller claim it was: a POP-3 finding, and the rest is
/// delivered by the next pop as the model expects.
#[test]
fn a_smaller_claim_is_followed_with_a_finding() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.push("q", "a", Some("t1"));
    l.push("q", "a", Some("t2"));
    let small = HttpRequest::get(
        "/api/v1/pop/queue/q",
        &[("batch", "1"), ("autoAck", "true")],
    );
    let r = l.e.handle(&small, l.now);
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[("autoAck", "true")]);
    assert!(l.feed(&req, &r).is_ok(), "followed as a claim of one");
    assert!(l.c.last_claim_short());
    assert_eq!(
        l.c.last_expected(),
        None,
        "the smaller claim matched exactly"
    );
    let f = l.c.findings();
    assert_eq!((f[0].rule, f[0].kind), (POP_3, Kind::Claim));
    let r = l.pop("q", &[("autoAck", "true")]);
    assert_eq!(r.body.unwrap()["messages"][0]["transactionId"], json!("t2"));
    assert!(!l.c.last_claim_short(), "a full claim is not short");
}

/// A pop that answered nothing may have had none of its side effects: kept going, the
/// state before it stays possible, with the rule it skipped (POP-8 for an unknown
/// queue's row), and a later answer showing the row was never made is followed.
#[test]
fn an_empty_pop_that_skipped_its_side_effect_is_followed_with_a_finding() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.pop("ghost", &[]);
    let delete = HttpRequest::delete("/api/v1/resources/queues/ghost");
    let never_made = Engine::default().handle(&delete, l.now);
    assert_eq!(never_made.body.as_ref().unwrap()["existed"], json!(false));
    assert!(l.feed(&delete, &never_made).is_ok());
    let f = l.c.findings();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].rule, f[0].kind), (POP_8, Kind::Claim));
    // A strict checker holds the broker to the side effect.
    let mut strict = Lockstep::new(Policy::default());
    strict.pop("ghost", &[]);
    assert!(strict.feed(&delete, &never_made).is_err());
}

/// On a known queue the side effect an empty pop may have skipped is the group's
/// subscription (POP-13): a group that later acts as if it never subscribed is followed.
#[test]
fn an_empty_group_pop_that_did_not_subscribe_is_followed_with_a_finding() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.push("q", "p", Some("old"));
    let g = [("consumerGroup", "g"), ("subscriptionMode", "new")];
    l.pop("q", &g);
    l.push("q", "p", Some("m1"));
    // A broker without the subscription seeds the group now, past m1.
    let req = HttpRequest::get("/api/v1/pop/queue/q", &g);
    let nothing = HttpResponse {
        status: 204,
        body: None,
    };
    l.now += 10;
    assert!(l.feed(&req, &nothing).is_ok());
    let f = l.c.findings();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].rule, f[0].kind), (POP_18, Kind::Claim));
}

/// A pop is followed as a smaller claim only when it claimed less than the request
/// allowed: more messages than `batch`, or more partitions than `partitions`, is an
/// over-claim that diverges even when kept going (POP-3).
#[test]
fn an_over_claim_is_never_read_as_a_smaller_claim() {
    let claim = |batch: &'static str, partitions: &'static str| {
        vec![
            ("batch", batch),
            ("partitions", partitions),
            ("autoAck", "true"),
        ]
    };
    for (query, wide) in [
        (vec![("batch", "1")], vec![("batch", "2")]),
        (claim("1", "1"), claim("2", "1")),
        (claim("3", "1"), claim("3", "2")),
        (claim("2", "1"), claim("3", "2")),
    ] {
        let mut l = Lockstep::new(Policy::default());
        keep_going(&mut l);
        l.push("q", "a", Some("t1"));
        l.push("q", "a", Some("t2"));
        l.push("q", "b", Some("t3"));
        let more =
            l.e.handle(&HttpRequest::get("/api/v1/pop/queue/q", &wide), l.now);
        let req = HttpRequest::get("/api/v1/pop/queue/q", &query);
        assert!(l.feed(&req, &more).is_err(), "{query:?} answered {more:?}");
    }
}

/// The finding of a smaller claim says what was asked and what was claimed.
#[test]
fn a_smaller_claim_finding_names_the_request_and_the_claim() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    l.push("q", "a", Some("t1"));
    l.push("q", "a", Some("t2"));
    let one = l.e.handle(
        &HttpRequest::get("/api/v1/pop/queue/q", &[("batch", "1")]),
        l.now,
    );
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[("batch", "5")]);
    assert!(l.feed(&req, &one).is_ok());
    let f = l.c.findings();
    assert_eq!(
        f[0].example.as_deref(),
        Some("GET /api/v1/pop/queue/q (batch 5, partitions 1) claimed 1 message(s) in 1 partition(s)")
    );
}

/// An unanswered request is applied anywhere in its interval widened by the skew: just
/// before a lease deadline by the client's clock the lease may have expired, just after
/// it may still be live.
#[test]
fn section_12_an_unanswered_pop_near_a_deadline_keeps_both_worlds_within_the_skew() {
    for offset in [-8, 8] {
        let mut l = Lockstep::new(Policy::default());
        l.c.skew_ms = 5;
        l.push("q", "p", Some("m"));
        l.pop("q", &[("leaseSeconds", "1")]);
        let at = l.now + 1_000 + offset;
        let mut exact = l.c.clone();
        exact.skew_ms = 0;
        let pop = HttpRequest::get("/api/v1/pop/queue/q", &[]);
        assert_eq!(exact.step_unknown(&pop, at, at), Ok(1), "offset {offset}");
        assert_eq!(l.c.step_unknown(&pop, at, at), Ok(2), "offset {offset}");
    }
}

/// A lax checker explores the PROJECT alternatives of an unanswered request too (ACK-5
/// here); a strict one only the project's decision.
#[test]
fn an_unanswered_request_branches_on_project_alternatives_only_when_lax() {
    for strict in [true, false] {
        let mut l = Lockstep::new(Policy::default());
        l.c.strict_project = strict;
        let req = l.ack_outside_the_span();
        let worlds = l.c.step_unknown(&req, l.now, l.now).unwrap();
        assert_eq!(worlds, if strict { 1 } else { 2 }, "strict {strict}");
    }
}

/// A pop delivering from a partition no push created diverges, naming the rules whose
/// checks failed.
#[test]
fn a_delivery_from_a_partition_never_pushed_diverges() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "a", Some("t1"));
    let mut answer =
        l.e.handle(&HttpRequest::get("/api/v1/pop/queue/q", &[]), l.now);
    answer.body.as_mut().unwrap()["messages"][0]["partitionId"] = json!(uuid_v7_like());
    answer.body.as_mut().unwrap()["messages"][0]["transactionId"] = json!("never-pushed");
    let req = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    match l.feed(&req, &answer) {
        Err(StepError::Diverged(d)) => assert!(!d.rules.is_empty(), "{d}"),
        other => panic!("must diverge: {other:?}"),
    }
}

/// A partitionId the checker has not seen is bound by name only to a partition the
/// route could claim: a broker that delivers another queue's identical message under
/// this route diverges at once.
#[test]
fn a_new_partition_id_is_bound_only_within_the_routes_scope() {
    let cases: [(&str, &str, &str); 3] = [
        ("/api/v1/pop/queue/q2/partition/p", "q1", "q2"),
        ("/api/v1/pop?namespace=n2", "n1.q", "n2.q"),
        ("/api/v1/pop?task=t2", "x.q1", "x.q2"),
    ];
    for (route, other, mine) in cases {
        let mut l = Lockstep::new(Policy::default());
        for (q, ns, task) in [(other, "n1", "t1"), (mine, "n2", "t2")] {
            let (ns, task) = if route.contains("namespace") {
                (ns, "")
            } else {
                ("", task)
            };
            let mut options = json!({});
            if !ns.is_empty() {
                options["namespace"] = json!(ns);
            }
            if !task.is_empty() {
                options["task"] = json!(task);
            }
            l.send(HttpRequest::post(
                "/api/v1/configure",
                &json!({"queue": q, "options": options}),
            ));
        }
        l.push(other, "p", Some("same"));
        l.push(mine, "p", Some("same"));
        // The broker claims `other`'s partition under a route that cannot reach it.
        let wrong = l.e.handle(
            &HttpRequest::get(format!("/api/v1/pop/queue/{other}/partition/p"), &[]),
            l.now,
        );
        let (path, query) = route.split_once('?').unwrap_or((route, ""));
        let q: Vec<(&str, &str)> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let req = HttpRequest::get(path, &q);
        let mut body = wrong.body.clone().unwrap();
        body["queue"] = json!(mine);
        for m in body["messages"].as_array_mut().unwrap() {
            m["queue"] = json!(mine);
        }
        let verdict = l.feed(
            &req,
            &HttpResponse {
                status: 200,
                body: Some(body),
            },
        );
        assert!(verdict.is_err(), "{route}: delivered {other}'s message");
    }
}

/// Without keep-going a strict checker still stops at the first difference, and a
/// 5xx to bad input is never a finding: it is not a rejection.
#[test]
fn a_server_error_to_bad_input_diverges_even_when_kept_going() {
    let mut l = Lockstep::new(Policy::default());
    keep_going(&mut l);
    let bad = HttpRequest::post_raw("/api/v1/push", "not json");
    let five = HttpResponse {
        status: 500,
        body: Some(json!({"error": "boom"})),
    };
    assert_eq!(l.diverged_rules(&bad, &five), vec![PUSH_8]);
    let other_4xx = HttpResponse {
        status: 422,
        body: Some(json!({"error": "bad"})),
    };
    assert!(l.feed(&bad, &other_4xx).is_ok());
    assert_eq!(l.c.findings()[0].level, Level::Project);
}

/// Every outcome a lax exploration (PROJECT alternatives allowed) gives an ack batch
/// on the engine's state, with the alternatives each took.
fn lax_ack_outcomes(e: &Engine, now: Millis, acks: Vec<Value>) -> Vec<(Outcome, Vec<Finding>)> {
    let req = HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"consumerGroup": "g", "acknowledgments": acks}),
    );
    let op = e
        .ids
        .resolve(&parse_request(&req, DEFAULT_POP_TIMEOUT_MS, 1 << 20).unwrap());
    explore_project(Stamp::exact(now), true, |ctx| {
        let mut st = e.state.clone();
        let mut mint = |i: usize| format!("<minted {i}>");
        let hints = &mut Hints {
            minter: &mut mint,
            pop_order: None,
        };
        apply(&mut st, &op, hints, ctx)
    })
    .unwrap()
    .into_iter()
    .map(|(out, _, taken)| (out, taken))
    .collect()
}

/// The alternatives of section 4 steps 3 and 5 are explored only where they change
/// something: charging every failure needs two failed offsets, releasing on a partial
/// commit needs a lease the call would keep.
#[test]
fn ack_step_3_and_5_alternatives_are_explored_only_where_they_change_the_outcome() {
    let mut l = Lockstep::new(Policy::default());
    for t in ["m1", "m2", "m3"] {
        l.push("q", "p", Some(t));
    }
    let p = l.pop("q", &[("consumerGroup", "g"), ("batch", "3")]);
    let acks = acks_for(&p, "failed");
    let done = acks_for(&p, "completed");
    let alternatives = |outs: &[(Outcome, Vec<Finding>)]| -> Vec<Vec<RuleId>> {
        outs.iter()
            .map(|(_, f)| f.iter().map(|f| f.rule).collect())
            .collect()
    };
    let ours: Vec<RuleId> = Vec::new();
    // One failure: charging "every" failure is our own decision.
    let one = lax_ack_outcomes(&l.e, l.now, vec![acks[0].clone()]);
    assert_eq!(alternatives(&one), vec![ours.clone()]);
    // Two failures: the second is charged too on the alternative.
    let two = lax_ack_outcomes(&l.e, l.now, vec![acks[0].clone(), acks[1].clone()]);
    assert_eq!(alternatives(&two), vec![ours.clone(), vec![ACK_STEP_3]]);
    // A partial commit keeps the lease; the alternative releases it.
    let partial = lax_ack_outcomes(&l.e, l.now, vec![done[0].clone()]);
    assert_eq!(alternatives(&partial), vec![ours.clone(), vec![ACK_STEP_5]]);
    let released: Vec<bool> = partial
        .iter()
        .map(|(o, _)| match o {
            Outcome::Ack(items) => items[0].result.lease_released,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(released, vec![false, true]);
    // Committing the whole span releases the lease anyway: nothing to explore.
    let whole = lax_ack_outcomes(&l.e, l.now, vec![done[2].clone()]);
    assert_eq!(alternatives(&whole), vec![ours]);
}

/// ACK step 6 [OPEN] lets a broker refuse only a completion blocked by a lower failure:
/// a strict checker refuses an answer that refuses a plain completion.
#[test]
fn broken_ack_1_refusing_an_unblocked_completion_is_caught() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "p", Some("m1"));
    let p = l.pop("q", &[("consumerGroup", "g")]);
    let req = HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"consumerGroup": "g", "acknowledgments": acks_for(&p, "completed")}),
    );
    let mut r = l.e.handle(&req, l.now);
    let item = &mut r.body.as_mut().unwrap()[0];
    assert_eq!(item["success"], json!(true));
    item["success"] = json!(false);
    item["error"] = json!("blocked by an earlier failure in the same call");
    match l.feed(&req, &r) {
        Err(StepError::Diverged(d)) => assert!(d.rules.contains(&ACK_1), "{d}"),
        other => panic!("a refused completion with nothing below it diverges: {other:?}"),
    }
}

/// A checker fed the engine's answers at explicit intervals (requests may overlap).
fn fresh_checker() -> Checker {
    let mut c = Checker::new();
    c.skew_ms = 0;
    c
}

/// POP-14: without `windowBuffer` or `delayedProcessing` a message is visible at once, so
/// a pop whose interval overlaps the push's still must deliver it: a 204 diverges.
#[test]
fn pop_14_no_window_or_delay_hides_nothing_even_when_intervals_overlap() {
    let mut e = Engine::default();
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "partition": "p", "transactionId": "m"}]}),
    );
    let pop = HttpRequest::get("/api/v1/pop/queue/q", &[]);
    let mut c = fresh_checker();
    let r = e.handle(&push, T0 + 500);
    c.step(&push, T0, T0 + 1000, &r).unwrap();
    let delivered = e.handle(&pop, T0 + 600);
    assert_eq!(delivered.status, 200);
    assert!(c
        .clone()
        .step(&pop, T0 + 100, T0 + 1100, &delivered)
        .is_ok());
    let empty = HttpResponse {
        status: 204,
        body: None,
    };
    match c.step(&pop, T0 + 100, T0 + 1100, &empty) {
        Err(StepError::Diverged(_)) => {}
        other => panic!("a visible message must be delivered: {other:?}"),
    }
}

/// POP-13: when the message's write interval straddles `subscriptionFrom`, it may have
/// been written before or after that time: both delivering it and skipping it are accepted.
#[test]
fn pop_13_subscription_time_inside_a_write_interval_allows_both_seeds() {
    let mut e = Engine::default();
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "partition": "p", "transactionId": "m"}]}),
    );
    let from = format_iso(T0 + 500);
    let pop = HttpRequest::get(
        "/api/v1/pop/queue/q",
        &[("consumerGroup", "g"), ("subscriptionFrom", &from)],
    );
    let mut c = fresh_checker();
    let r = e.handle(&push, T0 + 600);
    c.step(&push, T0, T0 + 1000, &r).unwrap();
    let delivered = e.handle(&pop, T0 + 2000);
    assert_eq!(delivered.status, 200, "written after the time: delivered");
    let empty = HttpResponse {
        status: 204,
        body: None,
    };
    assert!(c.clone().step(&pop, T0 + 2000, T0 + 2000, &empty).is_ok());
    assert!(c.step(&pop, T0 + 2000, T0 + 2000, &delivered).is_ok());
}

/// TXN-3: the checker reads each minted transactionId of a transaction's pushes from
/// the answer's results, across several push operations, and follows them to the pop.
#[test]
fn txn_3_minted_transaction_ids_of_several_push_operations_are_followed() {
    let mut l = Lockstep::new(Policy::default());
    let items = json!([{"queue": "q", "payload": 1}, {"queue": "q", "payload": 2}]);
    l.send(HttpRequest::post(
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push", "items": items}, {"type": "push", "items": items}]}),
    ));
    let p = l.pop("q", &[("batch", "10")]);
    assert_eq!(p.body.unwrap()["messages"].as_array().unwrap().len(), 4);
    assert_eq!(l.c.worlds().len(), 1);
}

/// A broker that differs from ours on section 16 (no maxSize, no removal, no gate) at
/// one request `send`: a strict checker names the rule, a lax one follows it with one
/// finding on that rule.
fn section_16_alternative(
    policy: Policy,
    rule: RuleId,
    scenario: fn(&mut Lockstep) -> HttpRequest,
) {
    for strict in [true, false] {
        let mut l = Lockstep::new(policy);
        l.c.strict_project = strict;
        let req = scenario(&mut l);
        let r = l.e.handle(&req, l.now);
        let verdict = l.feed(&req, &r);
        if strict {
            match verdict {
                Err(StepError::Diverged(d)) => assert!(d.rules.contains(&rule), "{d}"),
                other => panic!("a strict checker must diverge on {rule}: {other:?}"),
            }
        } else {
            assert!(verdict.is_ok(), "{verdict:?}");
            let f = l.c.findings();
            assert!(
                f.iter()
                    .any(|f| f.rule == rule && f.kind == Kind::Alternative),
                "{f:?}"
            );
        }
    }
}

#[test]
fn ret_5_a_broker_without_max_size_is_named_by_ret_5() {
    section_16_alternative(
        Policy {
            max_size_ignored: 1,
            ..Policy::default()
        },
        RET_5,
        |l| {
            l.send(HttpRequest::post(
                "/api/v1/configure",
                &json!({"queue": "q", "options": {"maxSize": 1}}),
            ));
            l.push("q", "p", Some("a"));
            HttpRequest::post(
                "/api/v1/push",
                &json!({"items": [{"queue": "q", "partition": "p", "transactionId": "b"}]}),
            )
        },
    );
}

#[test]
fn ret_3_a_broker_that_never_removes_is_named_by_ret_3() {
    section_16_alternative(
        Policy {
            retention_ignored: 1,
            ..Policy::default()
        },
        RET_3,
        |l| {
            let opts =
                json!({"queue": "q", "options": {"retentionEnabled": true, "retentionSeconds": 1}});
            l.send(HttpRequest::post("/api/v1/configure", &opts));
            l.push("q", "p", Some("a"));
            l.now += 1_000 + queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS;
            HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g")])
        },
    );
}

#[test]
fn ret_2_a_broker_without_the_gate_is_named_by_ret_2() {
    section_16_alternative(
        Policy {
            retention_ungated: 1,
            ..Policy::default()
        },
        RET_2,
        |l| {
            let opts = json!({"queue": "q", "options": {"retentionSeconds": 1}});
            l.send(HttpRequest::post("/api/v1/configure", &opts));
            l.push("q", "p", Some("a"));
            l.now += 2_000;
            HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g")])
        },
    );
}

/// RET-3: inside the window both answers are allowed (after it, only the removal: see
/// `ret_3_a_broker_that_never_removes_is_named_by_ret_3`).
#[test]
fn ret_3_inside_the_window_both_answers_pass_and_after_it_only_removal() {
    for late in [0, 1] {
        let mut l = Lockstep::new(Policy {
            retention_late: late,
            ..Policy::default()
        });
        l.send(HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": "q", "options": {"maxWaitTimeSeconds": 1}}),
        ));
        l.push("q", "p", Some("a"));
        l.now += 1_500;
        let p = l.pop("q", &[("consumerGroup", "g"), ("autoAck", "true")]);
        assert_eq!(p.status, if late == 1 { 200 } else { 204 });
    }
}

/// MGMT-6, MGMT-3: a management answer is held to the model's view of the state, ids
/// learnt from it must agree with what pops showed, and a read changes no world.
#[test]
fn mgmt_views_are_held_to_the_model_and_reads_change_no_world() {
    let mut l = Lockstep::new(Policy::default());
    l.push("q", "p", Some("a"));
    l.push("q", "p", Some("b"));
    l.pop("q", &[("consumerGroup", "g"), ("batch", "1")]);
    let peek = HttpRequest::get(
        "/api/v1/messages",
        &[("queue", "q"), ("consumerGroup", "g")],
    );
    let honest = l.e.handle(&peek, l.now);
    let statuses = |r: &HttpResponse| -> Vec<Value> {
        r.body.as_ref().unwrap()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["status"].clone())
            .collect()
    };
    assert_eq!(statuses(&honest), [json!("leased"), json!("pending")]);
    // A broker whose peek claims the leased message is pending.
    let mut lying = honest.clone();
    lying.body.as_mut().unwrap()["messages"][0]["status"] = json!("pending");
    assert_eq!(l.diverged_rules(&peek, &lying), vec![MGMT_6]);
    // One that shows another partition id than the pop did.
    let mut other_id = honest.clone();
    other_id.body.as_mut().unwrap()["messages"][0]["partitionId"] =
        json!("01a3185c-5000-7000-8000-00000000ffff");
    assert_eq!(l.diverged_rules(&peek, &other_id), vec![MGMT_6]);
    // A group whose lag is off.
    let group = HttpRequest::get("/api/v1/consumer-groups/g", &[]);
    let mut wrong = l.e.handle(&group, l.now);
    wrong.body.as_mut().unwrap()["lag"] = json!(7);
    assert_eq!(l.diverged_rules(&group, &wrong), vec![MGMT_3]);
    // The honest answers are accepted, and the worlds are as before: the pop after the
    // reads is judged as if they never happened.
    l.send(peek);
    l.send(group);
    let next = l.pop("q", &[("consumerGroup", "h"), ("batch", "2")]);
    assert_eq!(next.status, 200);
}

/// AUTH-6: a broker that lets a read-only token push (what AUTH-3 refuses with 403) is a
/// SEED divergence, so it fails a lax run; a refusal with another 4xx is AUTH-4's
/// PROJECT wording.
#[test]
fn a_caller_admitted_above_its_level_is_a_seed_failure_and_a_wrong_refusal_is_project() {
    let mut principals = std::collections::HashMap::new();
    principals.insert(
        "ro".to_string(),
        Principal {
            access: Access::ReadOnly,
            sub: None,
        },
    );
    let book = std::sync::Arc::new(TokenBook {
        principals,
        public: vec!["/health".into()],
    });
    let push = |bearer: &str| {
        let mut r = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "payload": 1}]}),
        );
        r.bearer = Some(bearer.into());
        r
    };
    for (answer, rule) in [
        (
            HttpResponse {
                status: 201,
                body: Some(
                    json!([{"index": 0, "message_id": "x", "transaction_id": "t", "queueName": "q", "status": "queued"}]),
                ),
            },
            Some(AUTH_6),
        ),
        (
            HttpResponse {
                status: 401,
                body: Some(json!({"error": "Authentication required"})),
            },
            None,
        ),
    ] {
        let mut c = Checker::new();
        c.auth = Some(book.clone());
        c.strict_project = false;
        c.keep_going = true;
        let r = c.step(&push("ro"), T0, T0 + 5, &answer);
        match (r, rule) {
            (Err(StepError::Diverged(d)), Some(rule)) => {
                assert_eq!(d.rules, vec![rule], "{d}");
                assert_eq!(rule.level(), Level::Seed);
            }
            (Ok(_), None) => {
                let f = c.findings();
                assert_eq!(
                    (f[0].rule, f[0].kind, f[0].level),
                    (AUTH_4, Kind::Status, Level::Project)
                );
            }
            (other, _) => panic!("{other:?}"),
        }
    }
}

/// A delivery of a partition the model holds back names the rule that holds it back:
/// the window a new write reopened (POP-14), a failed span's retryDelay (ACK-6), a live
/// lease (POP-2). The forged answer is what the engine gives once the hold is over.
#[test]
fn a_delivery_of_a_held_back_partition_names_the_rule_that_holds_it() {
    let held = |options: Value, setup: &dyn Fn(&mut Lockstep), later: Millis| {
        let mut l = Lockstep::new(Policy::default());
        l.send(HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": "q", "options": options}),
        ));
        setup(&mut l);
        let req = HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g")]);
        let forged = l.e.handle(&req, l.now + later);
        assert_eq!(forged.status, 200, "the hold ends within {later} ms");
        l.diverged_rules(&req, &forged)
    };
    let window = |l: &mut Lockstep| {
        l.push("q", "p", None);
        l.now += 1_500;
        l.pop("q", &[("consumerGroup", "g"), ("autoAck", "true")]);
        l.push("q", "p", None);
    };
    assert_eq!(held(json!({"windowBuffer": 1}), &window, 1_500), [POP_14]);
    let failed = |l: &mut Lockstep| {
        l.push("q", "p", None);
        let p = l.pop("q", &[("consumerGroup", "g")]);
        l.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"consumerGroup": "g", "acknowledgments": acks_for(&p, "failed")}),
        ));
    };
    assert_eq!(held(json!({"retryDelay": 5000}), &failed, 6_000), [ACK_6]);
    let leased = |l: &mut Lockstep| {
        l.push("q", "p", None);
        l.pop("q", &[("consumerGroup", "g"), ("leaseSeconds", "5")]);
    };
    assert_eq!(held(json!({}), &leased, 6_000), [POP_2]);
}

/// A dead-letter listing that leaves out the dead letter of a message retention removed
/// names RET-4, whose dead letters keep their own copy; left out while the message is
/// retained, it names the filing (DLQ-1).
#[test]
fn a_listing_short_of_a_removed_messages_dead_letter_names_ret_4() {
    let short_after = |wait: Millis| {
        let mut l = Lockstep::new(Policy::default());
        let opts = json!({"queue": "q", "options": {"maxWaitTimeSeconds": 1, "retryLimit": 0}});
        l.send(HttpRequest::post("/api/v1/configure", &opts));
        l.push("q", "p", Some("a"));
        let p = l.pop("q", &[("consumerGroup", "g")]);
        l.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"consumerGroup": "g", "acknowledgments": acks_for(&p, "failed")}),
        ));
        l.now += wait;
        let listing = HttpRequest::get("/api/v1/dlq", &[("queue", "q")]);
        assert_eq!(l.e.handle(&listing, l.now).body.unwrap()["total"], 1);
        let lost = HttpResponse {
            status: 200,
            body: Some(json!({"messages": [], "total": 0, "limit": 100, "offset": 0})),
        };
        l.diverged_rules(&listing, &lost)
    };
    assert_eq!(short_after(0), [DLQ_1]);
    let removed = 1_000 + queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS + 100;
    assert_eq!(short_after(removed), [RET_4]);
}

/// A transaction whose required lease is live, or was released by an ack, and the
/// engine's answer to it (the lease's message is acked first when `live` is false).
fn required_lease_txn(l: &mut Lockstep, live: bool) -> (HttpRequest, HttpResponse) {
    l.push("q", "a", Some("t1"));
    let p = l.pop("q", &[]);
    let acks = acks_for(&p, "completed");
    let lease = acks[0]["leaseId"].clone();
    if !live {
        l.send(HttpRequest::post(
            "/api/v1/ack/batch",
            &json!({"acknowledgments": acks}),
        ));
    }
    let req = HttpRequest::post(
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push", "items": [{"queue": "out", "payload": 1}]}],
                "requiredLeases": [lease]}),
    );
    let r = l.e.handle(&req, l.now);
    assert_eq!(r.body.as_ref().unwrap()["success"], json!(live), "{r:?}");
    (req, r)
}

/// TXN-6 [PROJECT], not TXN-1 [SEED]: a transaction refused although its required lease
/// is live, or committed although an ack released it, departs from what `requiredLeases`
/// means; whether it was all or nothing is for later reads to show.
#[test]
fn a_transaction_that_differs_over_its_required_lease_names_txn_6() {
    for live in [true, false] {
        let mut l = Lockstep::new(Policy::default());
        let (req, mut r) = required_lease_txn(&mut l, live);
        let b = r.body.as_mut().unwrap();
        b["success"] = json!(!live);
        b["error"] = if live {
            json!("required lease is not held")
        } else {
            Value::Null
        };
        let rules = l.diverged_rules(&req, &r);
        assert_eq!(rules, vec![TXN_6], "live {live}");
        assert_eq!(TXN_6.level(), Level::Project);
    }
}

/// A broker that does not check `requiredLeases` is one PROJECT finding under TXN-6 for a
/// checker of another broker, and the model follows it: the transaction's push is there
/// for the next pop, not a second finding under another rule.
#[test]
fn a_broker_that_ignores_required_leases_is_followed_after_one_txn_6_finding() {
    let mut broker = Engine {
        policy: Policy {
            txn_ignores_required_leases: 1,
            ..Policy::default()
        },
        ..Engine::default()
    };
    let mut c = Checker::new();
    (c.skew_ms, c.keep_going, c.strict_project) = (0, true, false);
    let mut send = |req: HttpRequest| {
        let r = broker.handle(&req, T0);
        c.step(&req, T0, T0, &r)
            .unwrap_or_else(|e| panic!("{} {}: {e:?}", req.method, req.path));
        r
    };
    send(HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "transactionId": "t1", "payload": 1}]}),
    ));
    let p = send(HttpRequest::get("/api/v1/pop/queue/q", &[]));
    let acks = acks_for(&p, "completed");
    let lease = acks[0]["leaseId"].clone();
    send(HttpRequest::post(
        "/api/v1/ack/batch",
        &json!({"acknowledgments": acks}),
    ));
    let t = send(HttpRequest::post(
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push", "items": [{"queue": "out", "payload": 1}]}],
                "requiredLeases": [lease]}),
    ));
    assert_eq!(t.body.as_ref().unwrap()["success"], json!(true), "{t:?}");
    let out = send(HttpRequest::get("/api/v1/pop/queue/out", &[]));
    assert_eq!(out.status, 200, "the transaction's push was followed");
    let f = c.findings();
    assert_eq!(
        f.iter().map(|f| (f.rule, f.level)).collect::<Vec<_>>(),
        [(TXN_6, Level::Project)]
    );
}

/// MGMT-6 [PROJECT], not DLQ-1 [SEED]: a strict checker holds a peek that shows a charged
/// failure as uncharged to the peek's own rule. A broker that never charges failures
/// would answer the same, but a management read is not proof of the state it shows;
/// strictness decides that the difference fails, not what caused it.
#[test]
fn a_peek_that_misreports_a_retry_is_mgmt_6_even_when_strict() {
    let mut l = Lockstep::new(Policy::default());
    l.c.diagnose = true;
    l.send(HttpRequest::post(
        "/api/v1/configure",
        &json!({"queue": "q", "options": {"retryLimit": 1, "retryDelay": 0}}),
    ));
    l.push("q", "a", Some("t1"));
    let acks = acks_for(&l.pop("q", &[]), "failed");
    l.send(HttpRequest::post("/api/v1/ack", &acks[0]));
    let req = HttpRequest::get("/api/v1/messages", &[("queue", "q")]);
    let mut r = l.e.handle(&req, l.now);
    let row = &mut r.body.as_mut().unwrap()["messages"][0];
    assert_eq!(row["retryCount"], json!(1));
    row["retryCount"] = json!(0);
    let mut accepting = l.c.clone();
    assert_eq!(l.diverged_rules(&req, &r), vec![MGMT_6]);
    // A run that accepts the variant follows it, as before.
    accepting.accept =
        vec![queen_reference::finding::Accept::parse("failure-never-charged").unwrap()];
    assert!(accepting.step(&req, l.now, l.now, &r).is_ok());
}
