//! The suite catches broken brokers: test doubles wrap our memory engine and break one
//! rule each; the catalog must fail the case about that rule, and the lockstep run must
//! find a divergence and shrink it to a handful of steps naming the rule. The runs use a
//! model that is lax on PROJECT points (the CLI without `--strict`): these SEED breakages
//! must still fail the run, never pass as project differences.

mod common;

use async_trait::async_trait;
use common::*;
use queen_conformance::lockstep::Step;
use queen_conformance::report::{Verdict, LOCKSTEP_ID};
use queen_reference::rules::*;
use queen_reference::wire::*;
use queen_server::broker::Broker;
use queen_server::memory::MemoryBroker;
use queen_server::wakes::Wakes;
use serde_json::json;
use std::sync::Arc;

/// How a double breaks the protocol.
#[derive(Clone, Copy)]
enum Breakage {
    /// POP-6: an empty pop answers 200 `{}` instead of a bare 204.
    EmptyPopIs200,
    /// ACK-2: a failure in a batch that also completes something in the same partition
    /// is dropped, so the later success commits past it.
    SkipsClamp,
    /// ACK-3: a failure below the cursor is answered as a successful noop.
    FakesAcks,
    /// ACK-6: a `retry` ack is charged as a `failed` one (a retry spent, and a dead
    /// letter once the budget is gone), instead of spending nothing.
    ChargesRetries,
}

struct Broken {
    inner: MemoryBroker,
    how: Breakage,
}

#[async_trait]
impl Broker for Broken {
    async fn call(&self, req: Request) -> Answer {
        match (self.how, req) {
            (Breakage::EmptyPopIs200, req @ Request::Pop { .. }) => {
                match self.inner.call(req).await {
                    Answer::Empty => Answer::Raw(HttpResponse {
                        status: 200,
                        body: Some(json!({})),
                    }),
                    a => a,
                }
            }
            (Breakage::SkipsClamp, Request::AckBatch(items)) => self.skip_clamp(items).await,
            (Breakage::FakesAcks, req) => match self.inner.call(req).await {
                Answer::Acked(mut items) => {
                    for i in &mut items {
                        if i.error.as_deref() == Some(ERR_ALREADY_COMMITTED) {
                            (i.success, i.noop, i.error) = (true, true, None);
                        }
                    }
                    Answer::Acked(items)
                }
                a => a,
            },
            (Breakage::ChargesRetries, Request::AckBatch(items)) => {
                self.inner
                    .call(Request::AckBatch(items.into_iter().map(charged).collect()))
                    .await
            }
            (Breakage::ChargesRetries, Request::Ack(item)) => {
                self.inner.call(Request::Ack(charged(item))).await
            }
            (_, req) => self.inner.call(req).await,
        }
    }

    fn wakes(&self) -> &Wakes {
        self.inner.wakes()
    }

    async fn pop_paused(&self) -> bool {
        self.inner.pop_paused().await
    }
}

/// A `retry` acknowledgment turned into a `failed` one.
fn charged(mut item: AckItem) -> AckItem {
    if item.status == AckStatus::Retry {
        item.status = AckStatus::Failed;
    }
    item
}

impl Broken {
    /// ACK-2 broken: the failures of a partition the batch also completes are dropped,
    /// and answered as if they had succeeded.
    async fn skip_clamp(&self, items: Vec<AckItem>) -> Answer {
        let completes = |p: &str| {
            items
                .iter()
                .any(|i| *i.partition_id == *p && i.status == AckStatus::Completed)
        };
        let keep: Vec<bool> = items
            .iter()
            .map(|i| i.status == AckStatus::Completed || !completes(&i.partition_id))
            .collect();
        let kept: Vec<AckItem> = items
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(i, _)| i.clone())
            .collect();
        let res = match self.inner.call(Request::AckBatch(kept)).await {
            Answer::Acked(res) => res,
            other => return other,
        };
        let released = res.iter().any(|r| r.lease_released);
        let mut res = res.into_iter();
        let out = items
            .iter()
            .zip(&keep)
            .enumerate()
            .map(|(index, (i, k))| {
                let mut r = if *k {
                    res.next().expect("one result per kept item")
                } else {
                    let mut faked = AckResult::new(index, &i.transaction_id, true, None, false);
                    faked.lease_released = released;
                    faked
                };
                r.index = index;
                r
            })
            .collect();
        Answer::Acked(out)
    }
}

async fn broken(how: Breakage) -> queen_server::app::Running {
    serve(Arc::new(Broken {
        inner: memory(),
        how,
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_pop_answered_200_is_caught_by_cases_and_shrunk_to_one_pop() {
    let server = broken(Breakage::EmptyPopIs200).await;
    let report = run(&options(
        &server.url(),
        &["pop-6/", "lockstep"],
        Some((7, 8, 20)),
    ))
    .await;
    let case = report
        .entries
        .iter()
        .find(|e| e.id == "pop-6/nothing-delivered-is-a-bare-204")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Failed);
    assert!(case.fails_run, "a SEED failure fails the run");
    assert!(case.failure.as_ref().unwrap().rules().contains(&POP_6));
    assert!(!report.passed());
    let c = report
        .lockstep
        .as_ref()
        .unwrap()
        .counterexample
        .as_ref()
        .expect("lockstep finds it");
    assert_eq!(c.steps.len(), 1, "shrunk to a single pop: {:?}", c.steps);
    assert!(matches!(c.steps[0], Step::Pop(_)));
    assert!(c.failure.rules().contains(&POP_6), "{}", c.failure);
    assert!(
        c.curl.contains("curl") && c.curl.contains("DIVERGES HERE"),
        "{}",
        c.curl
    );
    assert!(c.rust.contains("Step::Pop"), "{}", c.rust);
    // The failure, the counterexample and the findings fit the report's schema.
    let doc = queen_conformance::report::json::render(&report);
    assert!(doc["lockstep"]["counterexample"].is_object() && doc["findings"][0].is_object());
    assert_valid_report(&doc);
    let text = queen_conformance::report::terminal::render(&report, false);
    assert!(
        text.contains("RESULT: FAIL") && text.contains("POP-6"),
        "{text}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_ack_2_clamp_is_caught_and_shrunk_to_a_handful_of_steps() {
    let server = broken(Breakage::SkipsClamp).await;
    let report = run(&options(
        &server.url(),
        &["ack-2/failure-clamps*", "lockstep"],
        Some((11, 48, 30)),
    ))
    .await;
    let case = report
        .entries
        .iter()
        .find(|e| e.id == "ack-2/failure-clamps-later-success")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Failed, "the ACK-2 case catches it");
    assert!(case.fails_run, "a SEED failure without --strict");
    let lock = report.entries.iter().find(|e| e.id == LOCKSTEP_ID).unwrap();
    assert_eq!(lock.verdict, Verdict::Failed);
    assert!(lock.fails_run && lock.failure.as_ref().unwrap().kind() == "divergence");
    assert!(!report.passed());
    let c = report
        .lockstep
        .as_ref()
        .unwrap()
        .counterexample
        .as_ref()
        .expect("lockstep finds it");
    assert!(c.steps.len() <= 8, "a handful of steps: {:#?}", c.steps);
    // The sequence fails a message and completes a later one in one call...
    assert!(
        c.steps
            .iter()
            .any(|s| matches!(s, Step::Ack { picks, .. } if picks.len() >= 2)),
        "{:#?}",
        c.steps
    );
    // ...and the divergence names the rule whose check observed the broken state: a span
    // that should have come back (POP-2), or a later ack answered `noop` because the
    // cursor had already moved past it (ACK-3).
    let rules = c.failure.rules();
    assert!(
        rules.contains(&POP_2) || rules.contains(&ACK_2) || rules.contains(&ACK_3),
        "{rules:?}: {}",
        c.failure
    );
    eprintln!(
        "{}",
        queen_conformance::report::terminal::render(&report, false)
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faked_acks_are_caught_by_the_ack_3_case() {
    let server = broken(Breakage::FakesAcks).await;
    let report = run(&options(&server.url(), &["ack-3/"], None)).await;
    let case = report
        .entries
        .iter()
        .find(|e| e.id == "ack-3/no-faked-acks-below-the-cursor")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Failed);
    assert!(case.fails_run, "a SEED failure without --strict");
    let f = case.failure.as_ref().unwrap();
    assert!(f.rules().contains(&ACK_3), "{f}");
    assert!(
        f.details().contains("already committed"),
        "the model's allowed answer is shown: {f}"
    );
    server.stop().await.unwrap();
}

/// A broker that charges a retry for every `retry` ack passes every other case: the two
/// cases that show `retry` free must fail, under ACK-6 or DLQ-1, and so must the lockstep
/// run, whose sequences reach a `retry` ack of a message with its budget spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_charged_for_retry_acks_are_caught_by_the_ack_6_cases_and_lockstep() {
    let server = broken(Breakage::ChargesRetries).await;
    let report = run(&options(
        &server.url(),
        &["ack-6/retry-*", "lockstep"],
        Some((7, 64, 50)),
    ))
    .await;
    let text = queen_conformance::report::terminal::render(&report, false);
    for id in [
        "ack-6/retry-spends-no-retry-budget",
        "ack-6/retry-after-a-spent-retry-is-still-free",
    ] {
        let case = report.entries.iter().find(|e| e.id == id).unwrap();
        assert_eq!(case.verdict, Verdict::Failed, "{id}:\n{text}");
        assert!(case.fails_run, "a SEED failure without --strict");
        let rules = case.failure.as_ref().unwrap().rules();
        assert!(
            rules.iter().all(|r| [ACK_6, DLQ_1].contains(r)),
            "{id} names the rule it breaks, nothing else: {rules:?}"
        );
    }
    let lock = report.entries.iter().find(|e| e.id == LOCKSTEP_ID).unwrap();
    assert_eq!(lock.verdict, Verdict::Failed, "{text}");
    let c = report.lockstep.as_ref().unwrap().counterexample.as_ref();
    let rules = c.expect("lockstep finds it").failure.rules();
    // The shrunk sequence may end at the ack that dead-lettered too early, or at the pop
    // that then finds nothing to claim (POP-2, or POP-3 when it stops with budget left).
    assert!(
        rules
            .iter()
            .any(|r| [ACK_6, DLQ_1, POP_2, POP_3].contains(r)),
        "{rules:?}\n{text}"
    );
    server.stop().await.unwrap();
}

/// A broker whose body limit is above the one the suite expects accepts the oversized
/// push: the case fails and quotes a body of a megabyte in its failure, transcript and
/// curl script, and still every report stays small, with the cut marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_case_with_a_huge_body_keeps_the_reports_small() {
    let server = serve(Arc::new(memory())).await;
    let mut opts = options(&server.url(), &["bad-input/oversized-body-is-413"], None);
    opts.target.settings.body_limit = 1024 * 1024;
    let report = run(&opts).await;
    let case = &report.entries[0];
    assert_eq!(case.verdict, Verdict::Failed);
    let doc = queen_conformance::report::json::render(&report);
    assert_valid_report(&doc);
    let json = serde_json::to_string_pretty(&doc).unwrap();
    let junit = queen_conformance::report::junit::render(&report);
    let text = queen_conformance::report::terminal::render(&report, true);
    for (name, r) in [("json", &json), ("junit", &junit), ("terminal", &text)] {
        assert!(r.len() < 64 * 1024, "{name}: {} bytes", r.len());
    }
    assert!(json.contains("[truncated: "), "{json}");
    assert!(junit.contains("[truncated: "), "{junit}");
    server.stop().await.unwrap();
}
