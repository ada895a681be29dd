//! Hostile and unlucky clients against the PostgreSQL engine: oversized names, unusable
//! times, pops racing deletes, internal failures and broken bodies. Each answer is a
//! 400, 413 or 204 that changes nothing, or a 500 that says nothing of the database.

mod common;
use common::*;
use serde_json::json;
use std::io::{Read, Write};

/// CFG-3: a namespace or task over 255 bytes is refused up front, not a 500 from the
/// database's index, and no queue row appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cfg_3_an_oversized_namespace_or_task_is_400_and_changes_nothing() {
    let app = pg_app("longns").await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    for key in ["namespace", "task"] {
        let body = json!({"queue": "q", key: "n".repeat(2800)});
        let (status, answer) = post(&c, &format!("{base}/api/v1/configure"), &body).await;
        assert_eq!(status, 400, "{answer:?}");
        let error = answer.unwrap()["error"].as_str().unwrap().to_string();
        assert!(error.contains(key) && error.contains("255"), "{error}");
    }
    let queues: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_queues")
        .fetch_one(app.broker.pool())
        .await
        .unwrap();
    assert_eq!(queues, 0);
    let ok = json!({"queue": "q", "namespace": "n".repeat(255), "task": "t".repeat(255)});
    assert_eq!(
        post(&c, &format!("{base}/api/v1/configure"), &ok).await.0,
        200
    );
}

/// POP-13: a subscriptionFrom outside PostgreSQL's years is ignored like an
/// unparseable time (the group starts at the oldest message), not a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_13_an_out_of_range_subscription_time_is_ignored() {
    let app = pg_app("fromrange").await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    let push = json!({"items": [{"queue": "q", "payload": 1}]});
    assert_eq!(post(&c, &format!("{base}/api/v1/push"), &push).await.0, 201);
    for (group, from) in [
        ("g1", "-200000-01-01T00:00:00"),
        ("g2", "+200000-01-01T00:00:00Z"),
    ] {
        let url = format!(
            "{base}/api/v1/pop/queue/q?consumerGroup={group}&subscriptionFrom={}",
            urlencode(from)
        );
        let (status, body) = get(&c, &url).await;
        assert_eq!(status, 200, "{from}: {body:?}");
        assert_eq!(body.unwrap()["messages"].as_array().unwrap().len(), 1);
    }
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// ERR-1, POP-6: pops racing the deletion of their queue answer 200 or 204, never a
/// 500 (a foreign-key violation from writing a cursor under a partition just deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn err_1_pops_racing_a_queue_delete_never_answer_500() {
    let app = pg_app("popdel").await;
    let c = reqwest::Client::new();
    let base = app.server.url();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for round in 0..30 {
        let push = json!({"items": (0..4).map(|p| json!({"queue": "q", "partition": format!("p{p}")})).collect::<Vec<_>>()});
        assert_eq!(post(&c, &format!("{base}/api/v1/push"), &push).await.0, 201);
        let pops = (0..8).map(|k| {
            let (c, url) = (
                c.clone(),
                format!(
                    "{base}/api/v1/pop/queue/q?consumerGroup=g{round}-{k}&autoAck={}",
                    k % 2 == 0
                ),
            );
            tokio::spawn(async move { c.get(url).send().await.unwrap().status().as_u16() })
        });
        let pops: Vec<_> = pops.collect();
        let (s, _) = delete(&c, &format!("{base}/api/v1/resources/queues/q")).await;
        assert_eq!(s, 200);
        for p in pops {
            *statuses.entry(p.await.unwrap()).or_default() += 1;
        }
    }
    assert!(
        statuses.keys().all(|s| [200, 204].contains(s)),
        "pop statuses while their queue was deleted: {statuses:?}"
    );
}

/// ERR-1: a 500 carries a generic message and the request id the log has the cause
/// under, never the database's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn err_1_an_internal_error_says_nothing_of_the_database() {
    let app = pg_app("err500").await;
    sqlx::query("ALTER TABLE queen_dead_letters RENAME TO queen_dead_letters_gone")
        .execute(app.broker.pool())
        .await
        .unwrap();
    let c = reqwest::Client::new();
    let r = c
        .get(format!("{}/api/v1/dlq?queue=q", app.server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body, json!({"error": "internal error", "requestId": id}));
}

/// A chunked body that breaks the chunked encoding is a 400, not "body exceeds the
/// limit" (413 is for bodies that are too large).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_chunked_body_is_400() {
    let app = pg_app("chunked").await;
    let addr = app.server.addr;
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(
            b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("could not be read"), "{answer}");
}
