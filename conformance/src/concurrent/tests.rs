//! The scenario as a whole: too many unanswered calls make it inconclusive, never
//! linearizable; and, against our own server made to lease longer than asked (as an
//! independent broker may), the drain finds the messages still leased, not lost, and
//! finishes well within its time.

use super::*;
use queen_reference::time::Millis;
use queen_reference::wire::{HttpRequest, HttpResponse};
use serde_json::json;

const T: Millis = 1_700_000_000_000;

/// A history of `clients` x `per_client` pushes, the first `unknown` calls of client
/// `silent` unanswered.
fn pushes(clients: usize, per_client: usize, silent: usize, unknown: usize) -> History {
    let mut ops = Vec::new();
    for c in 0..clients {
        for i in 0..per_client {
            let t = format!("c{c}m{i}");
            let at = T + (c * per_client + i) as Millis * 10;
            let answer = if c == silent && i < unknown {
                Answer::Unknown("no answer within 10000 ms".into())
            } else {
                Answer::Known(HttpResponse {
                    status: 201,
                    body: Some(json!([{"index": 0, "status": "queued", "queueName": "q",
                        "transaction_id": t,
                        "message_id": format!("0190f0d0-0000-7000-8000-{:012}", c * 100 + i)}])),
                })
            };
            ops.push(Op {
                id: 0,
                client: c,
                key: "q".into(),
                request: HttpRequest::post(
                    "/api/v1/push",
                    &json!({"items": [{"queue": "q", "partition": format!("p{c}"),
                        "transactionId": t, "payload": 1}]}),
                ),
                invoke_ms: at,
                complete_ms: at + 5,
                answer,
            });
        }
    }
    History::new(ops)
}

fn judged(h: &History) -> Outcome {
    check(h, &CheckSettings::default(), 10_000).judge_unanswered(h)
}

#[test]
fn a_history_with_more_unanswered_calls_than_the_threshold_is_inconclusive() {
    // 1 of 10 calls unknown (10%, not more): the search's verdict stands.
    let h = pushes(2, 5, 0, 1);
    assert_eq!(judged(&h).verdict_name(), "linearizable");
    // 2 of 10 (20%): the search places no unknown call and says linearizable, which
    // shows nothing about them: inconclusive, and not a pass.
    let h = pushes(2, 5, 0, 2);
    let out = judged(&h);
    assert!(out.keys.iter().all(|k| k.verdict.name() == "linearizable"));
    assert_eq!(out.verdict_name(), "inconclusive");
    assert!(!out.passed());
    let why = out.unanswered.as_deref().unwrap_or_default();
    assert!(why.contains("2 of 10 calls went unanswered"), "{why}");
    assert!(summary(&h, &out).contains("inconclusive: 2 of 10"));
    // Every call of one client unanswered, under the share: inconclusive too.
    let h = pushes(11, 2, 3, 2);
    let why = linearize::unanswered(&h).expect("inconclusive");
    assert!(why.contains("every call of client c3"), "{why}");
    // The search alone (the fault scenarios judge unknown calls themselves) is unchanged.
    assert_eq!(
        check(&h, &CheckSettings::default(), 10_000).verdict_name(),
        "linearizable"
    );
}

#[test]
fn an_all_unknown_history_is_inconclusive() {
    // A dead broker: every call unanswered.
    let h = pushes(3, 4, usize::MAX, 0);
    let h = History::new(
        h.ops
            .into_iter()
            .map(|o| Op {
                answer: Answer::Unknown("Connection refused".into()),
                ..o
            })
            .collect(),
    );
    let out = judged(&h);
    assert_eq!(out.verdict_name(), "inconclusive");
    let s = Scenario {
        workload: Workload::new(3, 4, 1, 1),
        history: h,
        outcome: out,
        drain: Drain::default(),
        invariants: InvariantReport::default(),
        duration_ms: 0,
    };
    assert!(!s.passed());
    assert_eq!(s.verdict_name(), "inconclusive");
    let why = s.inconclusive_reason().expect("a reason");
    assert!(why.contains("12 of 12 calls went unanswered"), "{why}");
    assert_eq!(s.to_json()["linearizability"]["verdict"], "inconclusive");
}

#[cfg(feature = "embedded")]
mod against_our_server {
    use super::*;
    use async_trait::async_trait;
    use queen_reference::wire::Request;
    use queen_server::broker::Broker;
    use queen_server::memory::MemoryBroker;
    use queen_server::wakes::Wakes;
    use std::sync::Arc;

    /// Our memory engine, leasing every pop for `lease_seconds` whatever the pop asks
    /// (a broker that ignores `leaseSeconds`).
    struct LongLeases {
        inner: MemoryBroker,
        lease_seconds: u32,
    }

    #[async_trait]
    impl Broker for LongLeases {
        async fn call(&self, mut req: Request) -> queen_reference::wire::Answer {
            if let Request::Pop { query, .. } = &mut req {
                query.lease_seconds = Some(self.lease_seconds);
            }
            self.inner.call(req).await
        }

        fn wakes(&self) -> &Wakes {
            self.inner.wakes()
        }

        async fn pop_paused(&self) -> bool {
            self.inner.pop_paused().await
        }
    }

    async fn scenario(lease_seconds: Option<u32>, seed: u64) -> Scenario {
        let c = queen_server::config::Config::defaults();
        let inner = MemoryBroker::new(c.pop_timeout_ms(), c.body_limit);
        let broker: Arc<dyn Broker> = match lease_seconds {
            Some(s) => Arc::new(LongLeases {
                inner,
                lease_seconds: s,
            }),
            None => Arc::new(inner),
        };
        let server = queen_server::app::spawn(broker, &c, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("binds");
        let target = crate::target::Target::new(&server.url(), CheckSettings::default());
        let s = run_scenario(&target, &Workload::new(4, 25, 2, seed), 20_000).await;
        let _ = server.stop().await;
        s
    }

    fn extends(s: &Scenario) -> usize {
        extends_in(&s.drain.ops)
    }

    fn extends_in(ops: &[crate::concurrent::history::Op]) -> usize {
        ops.iter()
            .filter(|o| o.request.path.ends_with("/extend"))
            .count()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn messages_behind_a_300_s_lease_are_still_leased_not_lost() {
        let s = scenario(Some(300), 3).await;
        let text = s.summary();
        println!("{text}");
        let counts = s.invariants.counts();
        assert_eq!(counts["lost"].bad, 0, "{text}");
        assert_eq!(counts["drain-incomplete"].bad, 0, "{text}");
        assert!(counts["still-leased"].allowed > 0, "{text}");
        assert!(extends(&s) > 0, "{text}");
        // It stops once it has seen the leases outlive it, not at its 31 s limit.
        assert!(s.drain.elapsed_ms < 30_000.0, "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn our_broker_drains_without_asking_about_leases() {
        let s = scenario(None, 3).await;
        assert!(s.passed(), "{}", s.summary());
        assert_eq!(extends(&s), 0);
        // The expiry bursts raced lease ends with extends, and the history still passed.
        assert!(extends_in(&s.history.ops) > 0, "{}", s.summary());
        assert_eq!(s.invariants.counts()["still-leased"], Default::default());
    }
}

/// A history written for a failing round reads back as the same calls.
#[test]
fn a_written_history_reads_back() {
    let mut h = pushes(2, 3, 1, 2);
    h.ops[0].request.query = vec![("consumerGroup".into(), "g".into())];
    let back = History::from_json(&h.to_json()).unwrap();
    assert_eq!(back.ops.len(), h.ops.len());
    for (a, b) in h.ops.iter().zip(&back.ops) {
        assert_eq!((a.id, a.client, &a.key), (b.id, b.client, &b.key));
        assert_eq!((a.invoke_ms, a.complete_ms), (b.invoke_ms, b.complete_ms));
        assert_eq!(a.answer, b.answer);
        assert_eq!(a.request.query, b.request.query);
        let body = |r: &HttpRequest| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap();
        assert_eq!(body(&a.request), body(&b.request));
    }
    assert!(History::from_json(&json!({"calls": []})).is_err());
}
