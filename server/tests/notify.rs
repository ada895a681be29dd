//! CLUSTER-2: a broker tells the other brokers on its database of what its writes made
//! claimable, after they commit, and only while another broker listens: a broker alone
//! sends no notification at all, and a second broker hears of pushes as soon as it listens.

mod common;
use common::*;
use queen_server::app::{spawn, Running};
use queen_server::pg::PgBroker;
use queen_server::testing::{config, TempDir};
use serde_json::json;
use sqlx::postgres::PgListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One of our brokers on `url`, serving HTTP.
async fn broker_on(url: &str, dir: &TempDir) -> Running {
    let cfg = config(dir.path());
    let broker = PgBroker::connect(url, &cfg)
        .await
        .expect("the PostgreSQL engine starts");
    spawn(Arc::new(broker), &cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("the server binds")
}

/// A database of its own, and a plain session on it listening to the brokers' channels.
async fn database_overheard() -> (queen_pg::TestDb, PgListener) {
    let db = own_database().await;
    let mut l = PgListener::connect(db.url()).await.unwrap();
    l.listen_all(["queen_push", "queen_hello"]).await.unwrap();
    (db, l)
}

/// Waits for the next notification on `l`'s channels, for at most `within`.
async fn next(l: &mut PgListener, within: Duration) -> Option<(String, String)> {
    let n = tokio::time::timeout(within, l.recv()).await.ok()?.ok()?;
    Some((n.channel().to_string(), n.payload().to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_2_a_broker_alone_on_its_database_sends_no_notification() {
    // A plain session listening: not a broker, so not a reason to notify.
    let (db, mut l) = database_overheard().await;
    let dir = TempDir::new("alone");
    let server = broker_on(db.url(), &dir).await;
    assert_eq!(
        next(&mut l, Duration::from_secs(10)).await.map(|n| n.0),
        Some("queen_hello".to_string()),
        "the broker's listener says hello once it listens"
    );
    let c = reqwest::Client::new();
    push_one(&c, &server.url(), "q", json!({"n": 1})).await;
    let (s, _) = get(&c, &format!("{}/api/v1/pop/queue/q", server.url())).await;
    assert_eq!(s, 200, "the push was written");
    let heard = next(&mut l, Duration::from_millis(1500)).await;
    assert_eq!(heard, None, "a broker alone notified");
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_2_a_second_broker_is_told_of_pushes_once_it_listens() {
    let (db, mut l) = database_overheard().await;
    let (da, db_dir) = (TempDir::new("first"), TempDir::new("second"));
    let first = broker_on(db.url(), &da).await;
    let second = broker_on(db.url(), &db_dir).await;
    // Both listeners have said hello: each knows of the other from here on.
    for _ in 0..2 {
        assert_eq!(
            next(&mut l, Duration::from_secs(10)).await.map(|n| n.0),
            Some("queen_hello".to_string())
        );
    }
    let c = reqwest::Client::new();
    let parked = {
        let (c, url) = (c.clone(), second.url());
        tokio::spawn(async move {
            let t = Instant::now();
            let pop = format!("{url}/api/v1/pop/queue/q?wait=true&timeout=20000");
            let (s, _) = get(&c, &pop).await;
            (s, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    push_one(&c, &first.url(), "q", json!({"n": 1})).await;
    assert_eq!(
        next(&mut l, Duration::from_secs(10)).await,
        Some(("queen_push".to_string(), "q".to_string())),
        "the first broker notified the queue it pushed to"
    );
    let (status, took) = parked.await.unwrap();
    assert_eq!(
        status, 200,
        "the pop parked on the second broker delivered the push"
    );
    assert!(
        took < Duration::from_secs(10),
        "the parked pop waited {took:?}: woken by its timeout, not by the push"
    );
    let _ = first.stop().await;
    let _ = second.stop().await;
}

/// A broker reads anew which listeners are connected once what it read is a second old,
/// so it finds a listener it was never greeted by (one that connected after the broker
/// last looked and said no hello): its next push after that second is told to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_2_a_broker_finds_a_listener_it_was_not_greeted_by() {
    let (db, mut l) = database_overheard().await;
    let dir = TempDir::new("ungreeted");
    let server = broker_on(db.url(), &dir).await;
    assert_eq!(
        next(&mut l, Duration::from_secs(10)).await.map(|n| n.0),
        Some("queen_hello".to_string())
    );
    let c = reqwest::Client::new();
    // Alone: the push reads that no other listener is connected, and tells nobody.
    push_one(&c, &server.url(), "q", json!({"n": 1})).await;
    assert_eq!(next(&mut l, Duration::from_millis(300)).await, None);
    // A listener named as a broker's, silent.
    let opts: sqlx::postgres::PgConnectOptions = db.url().parse().unwrap();
    let named = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(opts.application_name("queen-listener"))
        .await
        .unwrap();
    let mut silent = PgListener::connect_with(&named).await.unwrap();
    silent.listen("queen_push").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    push_one(&c, &server.url(), "q", json!({"n": 2})).await;
    assert_eq!(
        next(&mut l, Duration::from_secs(10)).await,
        Some(("queen_push".to_string(), "q".to_string())),
        "the broker did not look again for listeners"
    );
    let _ = server.stop().await;
}
