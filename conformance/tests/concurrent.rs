//! Concurrent histories against our server (memory and PostgreSQL engines) must be
//! linearizable; a broker that leases one span twice must be caught by the search, and
//! its timeline written.

mod common;

use async_trait::async_trait;
use common::*;
use queen_conformance::concurrent::{run_and_check, summary, timeline, Verdict, Workload};
use queen_conformance::session::{CheckSettings, Target};
use queen_reference::wire::*;
use queen_server::broker::Broker;
use queen_server::memory::MemoryBroker;
use queen_server::wakes::Wakes;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

fn workload(clients: usize, ops: usize, seed: u64) -> Workload {
    Workload {
        clients,
        ops_per_client: ops,
        queues: 2,
        seed,
        op_timeout_ms: 10_000,
        prefix: format!("cc{}", &uuid::Uuid::new_v4().simple().to_string()[..10]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_engine_histories_are_linearizable() {
    let server = serve(Arc::new(memory())).await;
    let target = Target::new(&server.url(), CheckSettings::default());
    for seed in 1..=3 {
        let (h, out) = run_and_check(&target, &workload(4, 25, seed), 20_000).await;
        assert!(out.passed(), "{}", summary(&h, &out));
        assert_eq!(h.ops.len(), 100);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_engine_histories_are_linearizable() {
    // The PostgreSQL the other tests use (Docker or local binaries, pg/NOTES.md).
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests (see pg/NOTES.md)");
    let spool = std::env::temp_dir().join(format!(
        "queen-conformance-concurrent-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    std::fs::create_dir_all(&spool).expect("spool dir");
    let mut config = queen_server::config::Config::defaults();
    config.spool_dir = spool.clone();
    config.pool_size = 8;
    let broker = queen_server::pg::PgBroker::connect(db.url(), &config)
        .await
        .expect("PgBroker starts");
    let server =
        queen_server::app::spawn(Arc::new(broker), &config, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("binds");
    let settings = CheckSettings {
        body_limit: config.body_limit,
        default_timeout_ms: config.pop_timeout_ms(),
        ..CheckSettings::default()
    };
    let target = Target::new(&server.url(), settings);
    for seed in 1..=2 {
        let (h, out) = run_and_check(&target, &workload(4, 20, seed), 20_000).await;
        assert!(out.passed(), "{}", summary(&h, &out));
    }
    let _ = server.stop().await;
    let _ = std::fs::remove_dir_all(spool);
}

/// Answers a pop with the span the previous pop of the same route and group was just
/// given, under a second, fresh lease: two live leases on one cursor.
struct DoubleLease {
    inner: MemoryBroker,
    last: Mutex<HashMap<String, serde_json::Value>>,
}

#[async_trait]
impl Broker for DoubleLease {
    async fn call(&self, req: Request) -> HttpResponse {
        if let Request::Pop { .. } = &req {
            let key = format!("{req:?}");
            let replay = self.last.lock().unwrap().remove(&key);
            if let Some(mut body) = replay {
                {
                    let lease = uuid::Uuid::new_v4().to_string();
                    body["leaseId"] = json!(lease);
                    for m in body["messages"].as_array_mut().into_iter().flatten() {
                        m["leaseId"] = json!(lease);
                    }
                    return HttpResponse {
                        status: 200,
                        body: Some(body),
                    };
                }
            }
            let a = self.inner.call(req).await;
            if a.status == 200 {
                if let Some(b) = a.body.clone() {
                    self.last.lock().unwrap().insert(key, b);
                }
            }
            return a;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_leasing_one_span_twice_is_not_linearizable() {
    let server = serve(Arc::new(DoubleLease {
        inner: memory(),
        last: Mutex::new(HashMap::new()),
    }))
    .await;
    let target = Target::new(&server.url(), CheckSettings::default());
    let mut w = workload(2, 25, 11);
    w.queues = 1;
    // Proving a violation means refuting every order of the calls before it: two
    // clients keep that small, and the budget leaves a wide margin.
    let (h, out) = run_and_check(&target, &w, 50_000).await;
    assert_eq!(out.verdict_name(), "violation", "{}", summary(&h, &out));
    let Verdict::Violation(v) = &out.keys[0].verdict else {
        unreachable!()
    };
    assert!(!v.refused.is_empty());
    let page = timeline::html(&h, &out);
    assert!(page.contains("<svg") && page.contains("REFUSED"), "{page}");
}
