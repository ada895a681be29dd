//! `watch` between real clients and a broker, and `check` on what it recorded: the
//! concurrent workload's clients go through the watcher to our server (no finding), and
//! a recorded history with a planted violation is reported by `check`. (The deviant
//! doubles are watched in `deviants.rs`, where the suite's traffic goes to each.)

mod common;

use queen_conformance::concurrent::{run_workload, Workload};
use queen_conformance::session::Target;
use queen_conformance::watch::record::{read_history, Record};
use queen_conformance::watch::{self, QueueVerdict, WatchReport};
use std::path::PathBuf;

/// The concurrent workload's clients (`clients` × 30 calls over 2 queues) through a
/// watcher in front of `target`.
async fn watched(target: &str, clients: usize, seed: u64, record: Option<PathBuf>) -> WatchReport {
    let (url, stop, task) = common::watcher(target, record).await;
    let w = Workload::new(clients, 30, 2, seed);
    let history = run_workload(&Target::new(&url, common::lax()), &w).await;
    assert!(history.ops.len() >= clients * 30, "the workload ran");
    let _ = stop.send(());
    task.await.expect("the watch ends")
}

fn describe(r: &WatchReport) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_server_through_the_watcher_has_no_findings() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let dir = tempdir();
    let record = dir.join("history.jsonl");
    let report = watched(&server.url(), 1, 7, Some(record.clone())).await;
    assert!(report.findings.is_empty(), "{}", describe(&report));
    assert!(report.passed);
    assert!(report.counts.checked >= 25, "{}", describe(&report));
    assert!(
        report
            .queues
            .iter()
            .all(|q| q.verdict == QueueVerdict::Checked),
        "{}",
        describe(&report)
    );
    // The same traffic checked again from the recording gets the same verdicts.
    let again = watch::check(&record, common::lax(), &server.url()).unwrap();
    assert!(again.findings.is_empty(), "{}", describe(&again));
    assert_eq!(again.counts.checked, report.counts.checked);
    let concurrent = watched(&server.url(), 4, 8, None).await;
    assert!(concurrent.findings.is_empty(), "{}", describe(&concurrent));
    assert!(concurrent.counts.checked > 0, "{}", describe(&concurrent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_violation_in_a_recorded_history_is_reported_by_check() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let dir = tempdir();
    let record = dir.join("history.jsonl");
    let report = watched(&server.url(), 1, 11, Some(record.clone())).await;
    assert!(report.findings.is_empty(), "{}", describe(&report));
    let mut records = read_history(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let planted = plant(&mut records).expect("the history has a delivery to change");
    let path = dir.join("planted.jsonl");
    let text: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    let checked = watch::check(&path, common::lax(), &server.url()).unwrap();
    assert!(!checked.passed, "{}", describe(&checked));
    let f = &checked.findings[0];
    assert!(
        f.exchanges.iter().any(|r| r.id == planted),
        "the finding shows the changed exchange #{planted}: {}",
        describe(&checked)
    );
    assert!(f.curl.starts_with("curl "), "{}", f.curl);
}

/// Changes the payload of the first message a pop delivered: no allowed behaviour
/// delivers what was never pushed (POP-17). The changed exchange's id.
fn plant(records: &mut [Record]) -> Option<u64> {
    let r = records.iter_mut().find(|r| {
        r.status == Some(200)
            && r.path.starts_with("/api/v1/pop")
            && r.response
                .as_ref()
                .is_some_and(|b| !b["messages"][0].is_null())
    })?;
    r.response.as_mut()?["messages"][0]["data"] = serde_json::json!({"planted": true});
    Some(r.id)
}

/// Raw bytes no HTTP client would send, each on a connection of its own.
const HOSTILE: &[&[u8]] = &[
    b"GARBAGE\r\n\r\n",
    b"\x00\x01\x02\xff\xfe\r\n\r\n",
    b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n{\"items\"",
    b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nxx\r\n",
    b"GET /api/v1/pop/queue/%FF%FE%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /api/v1/pop?namespace=%ff&task=%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /api/v1/ack/batch HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n\xff\xfe\xfd\xfc\xfb",
    b"DELETE /api/v1/messages/not-a-uuid/x/../../ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /api/v1/lease//extend HTTP/1.0\r\n\r\n",
];

/// Nothing a client sends brings the watcher down: raw garbage, broken framing, bytes
/// that are not UTF-8 and the suite's own bad-input cases (judged, not misjudged: our
/// server rejects them as the protocol says, so none is a finding), and a plain push
/// still goes through afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_never_bring_the_watcher_down() {
    use std::io::{Read, Write};
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let (url, stop, task) = common::watcher(&server.url(), None).await;
    let addr = url.trim_start_matches("http://").to_string();
    for bytes in HOSTILE {
        let addr = addr.clone();
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let _ = s.write_all(&bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
        })
        .await
        .unwrap();
    }
    let report = common::run(&common::options(&url, &["bad-input"], None)).await;
    assert!(report.passed(), "the bad-input cases through the watcher");
    push_one(&reqwest::Client::new(), &url, "after").await;
    let _ = stop.send(());
    let report = task.await.unwrap();
    let failing: Vec<&watch::WatchFinding> = report
        .findings
        .iter()
        .filter(|f| f.level == queen_reference::rules::Level::Seed)
        .collect();
    assert!(failing.is_empty(), "{}", describe(&report));
    assert!(report.counts.checked > 20, "{}", describe(&report));
}

/// A queue deleted with nothing found on it is dropped from the watcher's memory, and a
/// queue of the same name made afterwards is judged afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_is_retired_and_its_name_starts_afresh() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let (url, stop, task) = common::watcher(&server.url(), None).await;
    let c = reqwest::Client::new();
    for _ in 0..2 {
        push_one(&c, &url, "gone").await;
        let r = c.delete(format!("{url}/api/v1/resources/queues/gone"));
        assert_eq!(r.send().await.unwrap().status(), 200);
    }
    push_one(&c, &url, "gone").await;
    let _ = stop.send(());
    let report = task.await.unwrap();
    assert!(report.findings.is_empty(), "{}", describe(&report));
    assert_eq!(report.counts.retired, 2, "{}", describe(&report));
    assert_eq!(report.counts.checked, 5, "{}", describe(&report));
    assert_eq!(report.queues.len(), 1, "{}", describe(&report));
}

/// One message pushed to `queue` through `url`, answered 201.
async fn push_one(c: &reqwest::Client, url: &str, queue: &str) {
    let push = serde_json::json!({"items": [{"queue": queue, "payload": 1}]});
    let r = c
        .post(format!("{url}/api/v1/push"))
        .json(&push)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("queen-watch-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A discovery pop is judged on each queue it delivered from, as the part of it that
/// claimed there: in queue mode a queue of its namespace it took nothing from is as it
/// was and still judged; a named group's pop leaves such a queue unknown (it may have
/// recorded the group's subscription there). A changed delivery is found on its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_pop_is_judged_on_the_queues_it_delivered_from() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let dir = tempdir();
    let record = dir.join("history.jsonl");
    let (url, stop, task) = common::watcher(&server.url(), Some(record.clone())).await;
    let c = reqwest::Client::new();
    for q in ["ns.a", "ns.a", "ns.b", "ns.c"] {
        push_one(&c, &url, q).await;
    }
    let drained = c
        .get(format!("{url}/api/v1/pop/queue/ns.c?autoAck=true"))
        .send();
    assert_eq!(drained.await.unwrap().status(), 200);
    let pop = |query: &'static str| c.get(format!("{url}/api/v1/pop?{query}")).send();
    let found = pop("namespace=ns&batch=10&partitions=10").await.unwrap();
    assert_eq!(found.status(), 200);
    let body: serde_json::Value = found.json().await.unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 3, "{body}");
    let again = c.get(format!("{url}/api/v1/pop/queue/ns.a")).send();
    assert_eq!(
        again.await.unwrap().status(),
        204,
        "leased by the discovery pop"
    );
    push_one(&c, &url, "other.d").await;
    let named = pop("namespace=other&consumerGroup=g&batch=10")
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    push_one(&c, &url, "other.e").await;
    let named = pop("namespace=other&consumerGroup=h&batch=1&partitions=1")
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    let _ = stop.send(());
    let report = task.await.unwrap();
    assert!(report.findings.is_empty(), "{}", describe(&report));
    let verdict = |name: &str| {
        report
            .queues
            .iter()
            .find(|q| q.name == name)
            .map(|q| (q.verdict.clone(), q.checked))
            .unwrap()
    };
    for (q, judged) in [("ns.a", 4), ("ns.b", 2), ("ns.c", 2)] {
        assert_eq!(
            verdict(q),
            (QueueVerdict::Checked, judged),
            "{}",
            describe(&report)
        );
    }
    // h's pop took one message from `other`: the queue it took nothing from may now hold
    // h's subscription.
    let untouched = ["other.d", "other.e"]
        .into_iter()
        .filter(|q| matches!(verdict(q).0, QueueVerdict::Unknown(w) if w.contains("POP-18")))
        .count();
    assert_eq!(untouched, 1, "{}", describe(&report));
    // A delivery changed in the recording is found on its queue.
    let mut records = read_history(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let r = records
        .iter_mut()
        .find(|r| r.path == "/api/v1/pop" && r.status == Some(200))
        .unwrap();
    let planted = r.id;
    r.response.as_mut().unwrap()["messages"][2]["data"] = serde_json::json!({"planted": true});
    let text: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    let path = dir.join("planted.jsonl");
    std::fs::write(&path, text.join("\n")).unwrap();
    let checked = watch::check(&path, common::lax(), &server.url()).unwrap();
    let f = checked
        .findings
        .first()
        .expect("the changed delivery is found");
    assert!(f.queue.starts_with("ns."), "{}", describe(&checked));
    assert_eq!(f.exchanges.last().map(|r| r.id), Some(planted));
}

/// A committed transaction across queues is judged on each queue as its own part of it
/// (its operations and their results); a refused one leaves its queues unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_across_queues_is_judged_on_each() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let record = tempdir().join("history.jsonl");
    let (url, stop, task) = common::watcher(&server.url(), Some(record.clone())).await;
    let c = reqwest::Client::new();
    let mut ack = leased_ack(&c, &url, "in").await;
    ack["type"] = serde_json::json!("ack");
    let push = serde_json::json!({"type": "push", "items": [{"queue": "out", "payload": 2}]});
    let txn = |ops: serde_json::Value| {
        c.post(format!("{url}/api/v1/transaction"))
            .json(&serde_json::json!({ "operations": ops }))
            .send()
    };
    let done: serde_json::Value = txn(serde_json::json!([ack, push]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["success"], true, "{done}");
    // An ack of a message that is not there answers success:false, so the whole is refused.
    let mut missing = ack.clone();
    missing["transactionId"] = serde_json::json!("not-there");
    let refused: serde_json::Value = txn(serde_json::json!([missing, push]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["success"], false, "{refused}");
    let _ = stop.send(());
    let report = task.await.unwrap();
    assert!(report.findings.is_empty(), "{}", describe(&report));
    for q in &report.queues {
        assert!(
            matches!(&q.verdict, QueueVerdict::Unknown(w) if w.contains("transaction across queues")),
            "{}",
            describe(&report)
        );
    }
    let judged: u64 = report.queues.iter().map(|q| q.checked).sum();
    assert_eq!(
        judged,
        4,
        "push, pop and the committed part on `in`; its part on `out`: {}",
        describe(&report)
    );
    // The committed push said `duplicate` instead of `queued`: found on `out`.
    let planted = planted(&record, &server.url(), "/api/v1/transaction", |a| {
        a["results"][1]["status"] = serde_json::json!("duplicate");
    });
    found_on(&planted, "out");
}

/// A batch ack over two queues is judged on each queue as its own items and results
/// (each item is evaluated per partition and group); a changed result is found on its
/// queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_ack_across_queues_is_judged_on_each() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let record = tempdir().join("history.jsonl");
    let (url, stop, task) = common::watcher(&server.url(), Some(record.clone())).await;
    let c = reqwest::Client::new();
    let mut acks = Vec::new();
    for q in ["left", "right"] {
        acks.push(leased_ack(&c, &url, q).await);
    }
    let answer = c
        .post(format!("{url}/api/v1/ack/batch"))
        .json(&serde_json::json!({ "acknowledgments": acks }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let _ = stop.send(());
    each_judged(&task.await.unwrap(), 3);
    let planted = planted(&record, &server.url(), "/api/v1/ack/batch", |a| {
        a[1]["leaseReleased"] = serde_json::json!(false);
    });
    found_on(&planted, "right");
}

/// PUSH-3: an accepted push to two queues is judged on each queue as its own items and
/// results, and the pops after it too; one refused as malformed (PUSH-8) is judged on its
/// own and leaves both queues judged; a changed result is found on its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_two_queues_is_judged_on_each() {
    let server = common::serve(std::sync::Arc::new(common::memory())).await;
    let record = tempdir().join("history.jsonl");
    let (url, stop, task) = common::watcher(&server.url(), Some(record.clone())).await;
    let c = reqwest::Client::new();
    let push = |items: serde_json::Value| {
        c.post(format!("{url}/api/v1/push"))
            .json(&serde_json::json!({ "items": items }))
            .send()
    };
    let both = serde_json::json!([{"queue": "east", "payload": 1}, {"queue": "west", "payload": 2},
                                  {"queue": "east", "payload": 3}]);
    assert_eq!(push(both).await.unwrap().status(), 201);
    let bad = serde_json::json!([{"queue": "east"}, {"queue": "west", "partition": 5}]);
    assert_eq!(push(bad).await.unwrap().status(), 400);
    for q in ["east", "west"] {
        let popped = c
            .get(format!("{url}/api/v1/pop/queue/{q}"))
            .query(&[("batch", "5")])
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), 200);
    }
    let _ = stop.send(());
    // Each queue judged its part of the push and its pop.
    each_judged(&task.await.unwrap(), 2);
    let planted = planted(&record, &server.url(), "/api/v1/push", |a| {
        a[1]["status"] = serde_json::json!("duplicate");
    });
    found_on(&planted, "west");
}

/// No finding, and every queue judged, `calls` calls each.
fn each_judged(report: &WatchReport, calls: u64) {
    assert!(report.findings.is_empty(), "{}", describe(report));
    for q in &report.queues {
        assert_eq!(
            (&q.verdict, q.checked),
            (&QueueVerdict::Checked, calls),
            "{}",
            describe(report)
        );
    }
}

/// The first finding of `report` is on `queue`.
fn found_on(report: &WatchReport, queue: &str) {
    let f = report
        .findings
        .first()
        .expect("the changed result is found");
    assert_eq!(f.queue, queue, "{}", describe(report));
}

/// `check` of the recording at `record` with the answer of the first call to `path`
/// changed by `edit`.
fn planted(
    record: &std::path::Path,
    target: &str,
    path: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> WatchReport {
    let mut records = read_history(&std::fs::read_to_string(record).unwrap()).unwrap();
    let r = records.iter_mut().find(|r| r.path == path).unwrap();
    edit(r.response.as_mut().unwrap());
    let text: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    let file = record.with_file_name("planted.jsonl");
    std::fs::write(&file, text.join("\n")).unwrap();
    watch::check(&file, common::lax(), target).unwrap()
}

/// One message pushed to `queue` and popped with a lease: the ack item completing it.
async fn leased_ack(c: &reqwest::Client, url: &str, queue: &str) -> serde_json::Value {
    push_one(c, url, queue).await;
    let popped: serde_json::Value = c
        .get(format!("{url}/api/v1/pop/queue/{queue}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let m = &popped["messages"][0];
    serde_json::json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
        "leaseId": m["leaseId"], "status": "completed"})
}
