//! The management and observability routes on the PostgreSQL engine (PROTOCOL.md
//! section 17): every read leaves the tables as they were (MGMT-1), and a scrape of
//! `/metrics/prometheus` parses with a Prometheus text-format parser (MGMT-10).

mod common;

use common::*;
use serde_json::{json, Value};

/// Every row a read could touch, as text: cursors (leases, retries), subscriptions,
/// queues, partitions, messages and dead letters.
async fn tables(app: &TestServer) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT row_to_json(c)::text FROM queen_cursors c ORDER BY 1",
        "SELECT row_to_json(s)::text FROM queen_subscriptions s ORDER BY 1",
        "SELECT row_to_json(q)::text FROM queen_queues q ORDER BY 1",
        "SELECT row_to_json(p)::text FROM queen_partitions p ORDER BY 1",
        "SELECT count(*)::text FROM queen_messages",
        "SELECT row_to_json(d)::text FROM queen_dead_letters d ORDER BY 1",
    ] {
        let rows: Vec<String> = sqlx::query_scalar(sql)
            .fetch_all(app.broker().pool())
            .await
            .unwrap();
        out.extend(rows);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_1_no_read_changes_a_table() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    post(
        &c,
        &format!("{base}/api/v1/configure"),
        &json!({"queue": "ns.q", "options": {"retryLimit": 0}}),
    )
    .await;
    let items: Vec<Value> = (0..4).map(|i| json!({"queue": "ns.q", "partition": format!("p{}", i % 2), "transactionId": format!("t{i}"), "payload": i})).collect();
    post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    let (_, popped) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/ns.q?consumerGroup=g&batch=1"),
    )
    .await;
    let m = &popped.unwrap()["messages"][0];
    let (pid, txn) = (
        m["partitionId"].as_str().unwrap().to_string(),
        m["transactionId"].as_str().unwrap().to_string(),
    );
    let before = tables(&app).await;
    let reads = [
        "/api/v1/resources/overview".to_string(),
        "/api/v1/status".into(),
        "/api/v1/resources/queues".into(),
        "/api/v1/resources/queues/ns.q".into(),
        "/api/v1/status/queues".into(),
        "/api/v1/status/queues/ns.q".into(),
        "/api/v1/resources/queues/ns.q/depth?group=g".into(),
        "/api/v1/resources/queues/ns.q/depth?group=newcomer".into(),
        "/api/v1/resources/partitions?queue=ns.q".into(),
        "/api/v1/resources/namespaces".into(),
        "/api/v1/resources/tasks".into(),
        "/api/v1/consumer-groups".into(),
        "/api/v1/consumer-groups/g".into(),
        "/api/v1/consumer-groups/lagging?minLagSeconds=0".into(),
        "/api/v1/messages?queue=ns.q&consumerGroup=newcomer".into(),
        "/api/v1/status/queues/ns.q/messages?consumerGroup=g".into(),
        "/api/v1/messages?queue=ns.q&consumerGroup=g&status=leased".into(),
        format!("/api/v1/messages/{pid}/{txn}"),
        "/api/v1/status/analytics".into(),
        "/api/v1/status/analytics?namespace=ns&interval=minute".into(),
    ];
    for path in &reads {
        let (status, body) = get(&c, &format!("{base}{path}")).await;
        assert_eq!(status, 200, "{path}: {body:?}");
        assert!(
            body.is_some_and(|b| b.is_object()),
            "{path} answers a JSON object"
        );
    }
    // Refused reads: a 400 that names what is wrong, and nothing changed either.
    let refused = [
        ("/api/v1/resources/queues?limit=0", "limit"),
        ("/api/v1/resources/partitions?offset=-1", "offset"),
        (
            "/api/v1/consumer-groups/lagging?minLagSeconds=soon",
            "minLagSeconds",
        ),
        ("/api/v1/consumer-groups/lagging?limit=0", "limit"),
        ("/api/v1/resources/namespaces?offset=x", "offset"),
        ("/api/v1/resources/tasks?limit=1001", "limit"),
        ("/api/v1/messages?queue=ns.q&status=lost", "status"),
        ("/api/v1/status/analytics?interval=week", "interval"),
        (
            "/api/v1/status/analytics?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
            "from",
        ),
        ("/api/v1/status/analytics?from=yesterday", "from"),
        (
            "/api/v1/status/analytics?from=2020-01-01T00:00:00Z&interval=minute",
            "buckets",
        ),
    ];
    for (path, named) in refused {
        let (status, body) = get(&c, &format!("{base}{path}")).await;
        let error = body
            .as_ref()
            .and_then(|b| b["error"].as_str())
            .unwrap_or_default();
        assert_eq!(status, 400, "{path}: {body:?}");
        assert!(error.contains(named), "{path}: {error}");
    }
    assert_eq!(
        before,
        tables(&app).await,
        "a management read changed a table"
    );
    let (_, lagging) = get(
        &c,
        &format!("{base}/api/v1/consumer-groups/lagging?minLagSeconds=0"),
    )
    .await;
    assert_eq!(lagging.unwrap()["consumerGroups"][0]["name"], "g");
    let (status, _) = get(&c, &format!("{base}/api/v1/consumer-groups/newcomer")).await;
    assert_eq!(status, 404, "a read created no group");
}

/// MGMT-10: with more queues than METRICS_TOP, only the deepest get series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_10_backlog_series_are_bounded() {
    let app = pg_server_with(|c| c.metrics_top = 2).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for (queue, n) in [("a", 1), ("b", 3), ("c", 2), ("d", 0)] {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"queue": queue, "payload": i}))
            .collect();
        if n > 0 {
            post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
        }
    }
    let text = prometheus(&base).await;
    // A family's series come in no particular order.
    let mut shown: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("queen_queue_unconsumed{"))
        .collect();
    shown.sort();
    assert_eq!(
        shown,
        [
            "queen_queue_unconsumed{queue=\"b\"} 3",
            "queen_queue_unconsumed{queue=\"c\"} 2"
        ],
        "{text}"
    );
    assert!(text.contains("queen_queues 3"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_10_a_prometheus_scrape_parses_and_counts_what_happened() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "q", "payload": 1}]}),
    )
    .await;
    get(&c, &format!("{base}/api/v1/pop/queue/q?batch=1")).await;
    get(&c, &format!("{base}/api/v1/nowhere")).await;
    let text = prometheus(&base).await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("the exposition parses");
    let sample = |name: &str, labels: &[(&str, &str)]| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no sample {name} {labels:?} in\n{text}"))
            .value
            .clone()
    };
    let count = |v: prometheus_parse::Value| match v {
        prometheus_parse::Value::Counter(n)
        | prometheus_parse::Value::Gauge(n)
        | prometheus_parse::Value::Untyped(n) => n,
        other => panic!("not a number: {other:?}"),
    };
    assert!(
        count(sample(
            "queen_requests_total",
            &[("route", "push"), ("status", "2xx")]
        )) >= 1.0
    );
    assert!(
        count(sample(
            "queen_requests_total",
            &[("route", "pop"), ("status", "2xx")]
        )) >= 1.0
    );
    assert!(
        count(sample(
            "queen_requests_total",
            &[("route", "other"), ("status", "4xx")]
        )) >= 1.0
    );
    assert!(
        count(sample("queen_db_pool_connections", &[])) >= 1.0,
        "the pool holds a connection"
    );
    assert_eq!(count(sample("queen_parked_polls", &[])), 0.0);
    assert_eq!(
        count(sample("queen_pushed_items_total", &[("outcome", "queued")])),
        1.0
    );
    assert_eq!(
        count(sample("queen_pops_total", &[("outcome", "delivered")])),
        1.0
    );
    // The backlog series, bounded by METRICS_TOP: the queue's one unconsumed message, the
    // queue-mode group one message behind.
    assert_eq!(
        count(sample("queen_queue_unconsumed", &[("queue", "q")])),
        1.0
    );
    assert_eq!(
        count(sample(
            "queen_group_lag",
            &[("group", "__QUEUE_MODE__"), ("queue", "q")]
        )),
        1.0
    );
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric.starts_with("queen_request_duration_seconds")),
        "latencies are exposed"
    );
    let (status, json) = get(&c, &format!("{base}/metrics")).await;
    let json = json.unwrap();
    assert_eq!(status, 200);
    assert!(
        json["pushes"].as_u64().unwrap() >= 1 && json["pops"].as_u64().unwrap() >= 1,
        "{json}"
    );
    assert!(json["uptimeSeconds"].is_u64(), "{json}");
}

/// MGMT-10: requests queued for a database connection show as `db_pool_waiting`, and
/// leave it when they get one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_10_requests_waiting_for_a_connection_are_counted() {
    use queen_server::broker::Broker;
    use sqlx::Connection;
    // Two pooled connections: DB_POOL_SIZE counts the listener's too.
    let app = pg_server_with(|c| c.pool_size = 3).await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "q", "payload": 1}]}),
    )
    .await;
    // Every queue listing blocks on this lock, holding its connection; the rest queue.
    let mut blocker = sqlx::PgConnection::connect(app.database_url().unwrap())
        .await
        .unwrap();
    let mut lock = blocker.begin().await.unwrap();
    sqlx::query("LOCK TABLE queen_queues IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let listings: Vec<_> = (0..5)
        .map(|_| {
            let (c, url) = (c.clone(), format!("{base}/api/v1/resources/queues"));
            tokio::spawn(async move { get(&c, &url).await.0 })
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let queued = loop {
        let stats = app.broker().pool_stats().expect("the engine has a pool");
        if stats.waiting >= 3 || std::time::Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // The retention sweep may queue beside the three listings.
    assert!(
        queued.open == 2 && queued.idle == 0 && queued.waiting >= 3,
        "two listings hold the connections, three wait: {queued:?}"
    );
    lock.commit().await.unwrap();
    for l in listings {
        assert_eq!(l.await.unwrap(), 200);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while app.broker().pool_stats().unwrap().waiting > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(app.broker().pool_stats().unwrap().waiting, 0);
    let waiting = metric(&base, "queen_db_pool_waiting").await;
    assert_eq!(waiting, 0.0, "the gauge is exposed");
}

/// MGMT-3: a subscribed queue is listed once, with zeros before the group reads any of
/// its partitions and with its figures after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_3_a_subscribed_queue_is_listed_once() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    post(
        &c,
        &format!("{base}/api/v1/configure"),
        &json!({"queue": "s.q"}),
    )
    .await;
    let pop = format!(
        "{base}/api/v1/pop/queue/s.q?consumerGroup=g&batch=1&wait=false&subscriptionMode=all"
    );
    get(&c, &pop).await;
    let queues = |v: Option<Value>| v.unwrap()["queues"].clone();
    let (_, before) = get(&c, &format!("{base}/api/v1/consumer-groups/g")).await;
    assert_eq!(
        queues(before),
        json!([{"queue": "s.q", "partitions": 0, "lag": 0, "lagSeconds": 0, "leased": 0, "state": "caughtUp"}])
    );
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"queue": "s.q", "partition": "p", "transactionId": format!("t{i}"), "payload": i}))
        .collect();
    post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    get(&c, &format!("{pop}&autoAck=true")).await;
    let (_, after) = get(&c, &format!("{base}/api/v1/consumer-groups/g")).await;
    let after = queues(after);
    assert_eq!(after.as_array().unwrap().len(), 1, "{after}");
    assert_eq!(after[0]["partitions"], 1, "{after}");
    assert_eq!(after[0]["lag"], 2, "{after}");
    assert_eq!(after[0]["state"], "behind", "{after}");
}

/// MGMT-4: a queue counts the groups reading it from its cursors' queue column, which
/// each of the three writes that make a cursor (a pop's claim, a subscription's start, a
/// seek) fills with the partition's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_4_every_way_to_make_a_cursor_counts_its_group_for_the_queue() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let items: Vec<Value> = ["a.q", "b.q"]
        .iter()
        .flat_map(|q| (0..4).map(move |i| json!({"queue": q, "partition": format!("p{}", i % 2), "transactionId": format!("{q}{i}"), "payload": i})))
        .collect();
    post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    let pop = |q: &str, group: &str, extra: &str| {
        format!("{base}/api/v1/pop/queue/{q}?consumerGroup={group}&batch=1&wait=false{extra}")
    };
    get(&c, &pop("a.q", "claimer", "")).await;
    get(&c, &pop("b.q", "subscriber", "&subscriptionMode=new")).await;
    // A partition made after the claimer's subscription gets its cursor from the claim.
    let late = json!({"items": [{"queue": "a.q", "partition": "late", "transactionId": "late", "payload": 0}]});
    post(&c, &format!("{base}/api/v1/push"), &late).await;
    let (_, claimed) = get(&c, &pop("a.q/partition/late", "claimer", "")).await;
    assert_eq!(claimed.unwrap()["messages"][0]["transactionId"], "late");
    let (status, body) = post(
        &c,
        &format!("{base}/api/v1/consumer-groups/seeker/queues/b.q/seek"),
        &json!({"toEnd": true}),
    )
    .await;
    assert_eq!(status, 200, "{body:?}");
    let cursors: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT c.consumer_group, count(*), count(*) FILTER (WHERE c.queue_id <> p.queue_id)
         FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
         GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(app.broker().pool())
    .await
    .unwrap();
    // Every group holds a cursor on each partition of its queue, none naming another.
    let made = |g: &str, n| (g.to_string(), n, 0);
    assert_eq!(
        cursors,
        [made("claimer", 3), made("seeker", 2), made("subscriber", 2)]
    );
    let (_, queues) = get(&c, &format!("{base}/api/v1/resources/queues")).await;
    let counts: Vec<(String, u64)> = queues.unwrap()["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["name"].as_str().unwrap().into(),
                q["consumerGroups"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [("a.q".into(), 1), ("b.q".into(), 2)]);
}

/// MGMT-4: the namespaces and the tasks, each with how many queues it has, by name
/// bytewise, one page at a time. A dotless queue is its own namespace with the task `""`
/// (CFG-3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_4_namespaces_and_tasks_count_their_queues() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for q in ["shop.orders", "shop.refunds", "Zed.orders.v2", "plain"] {
        push_one(&c, &base, q, json!(1)).await;
    }
    let list = |path: &str, key: &'static str, name: &'static str| {
        let url = format!("{base}/api/v1/resources/{path}");
        let c = c.clone();
        async move {
            let (status, body) = get(&c, &url).await;
            assert_eq!(status, 200, "{url}: {body:?}");
            let body = body.unwrap();
            let rows: Vec<(String, u64)> = body[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r[name].as_str().unwrap().into(),
                        r["queues"].as_u64().unwrap(),
                    )
                })
                .collect();
            (rows, body["total"].as_u64().unwrap())
        }
    };
    let row = |n: &str, count: u64| (n.to_string(), count);
    assert_eq!(
        list("namespaces", "namespaces", "namespace").await,
        (vec![row("Zed", 1), row("plain", 1), row("shop", 2)], 3)
    );
    assert_eq!(
        list("tasks", "tasks", "task").await,
        (vec![row("", 1), row("orders", 2), row("refunds", 1)], 3)
    );
    assert_eq!(
        list("namespaces?limit=1&offset=2", "namespaces", "namespace").await,
        (vec![row("shop", 2)], 3)
    );
}

/// MGMT-3: a group lags on a queue while a message there waits for it at least the
/// seconds asked: never on a queue it has caught up with, even
/// when asked for 0 seconds, and not an hour behind on a message just pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_3_lagging_lists_the_queues_a_message_waits_on() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for q in ["behind", "caught"] {
        push_one(&c, &base, q, json!(1)).await;
    }
    let pop = |q: &str| format!("{base}/api/v1/pop/queue/{q}?consumerGroup=g&wait=false");
    get(&c, &pop("behind")).await;
    get(&c, &(pop("caught") + "&autoAck=true")).await;
    for (min, expected) in [(0, vec!["behind"]), (3600, vec![])] {
        let url = format!("{base}/api/v1/consumer-groups/lagging?minLagSeconds={min}");
        let (status, body) = get(&c, &url).await;
        assert_eq!(status, 200, "{body:?}");
        let body = body.unwrap();
        let queues: Vec<&str> = body["consumerGroups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["queues"].as_array().unwrap())
            .map(|q| q["queue"].as_str().unwrap())
            .collect();
        assert_eq!(queues, expected, "minLagSeconds={min}: {body}");
    }
}

/// MGMT-3: the listing finds each cursor's first unread message by an index probe when
/// the groups' cursors are few against the messages (once the planner has counted the
/// tables) and by a hash join otherwise; both answer the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_3_probe_and_hash_join_answer_alike() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let items: Vec<Value> = (0..40)
        .map(|i| json!({"queue": "pr.q", "partition": format!("p{}", i % 2), "transactionId": format!("t{i}"), "payload": i}))
        .collect();
    post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    let pop = format!(
        "{base}/api/v1/pop/queue/pr.q/partition/p0?consumerGroup=g&batch=5&wait=false&autoAck=true"
    );
    get(&c, &pop).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let listing = || async {
        let (status, body) = get(&c, &format!("{base}/api/v1/consumer-groups/g")).await;
        assert_eq!(status, 200);
        body.unwrap()
    };
    // Never analysed: the planner knows no row counts, and the listing hashes.
    let hashed = listing().await;
    sqlx::query("ANALYZE queen_messages, queen_partitions")
        .execute(app.broker().pool())
        .await
        .unwrap();
    let probed = listing().await;
    for v in [&hashed, &probed] {
        let q = &v["queues"][0];
        assert_eq!(
            (q["partitions"].as_u64(), q["lag"].as_u64()),
            (Some(2), Some(35)),
            "{v}"
        );
        assert!(q["lagSeconds"].as_u64().unwrap() >= 1, "{v}");
    }
    let without_seconds = |mut v: Value| {
        v["lagSeconds"] = Value::Null;
        v["queues"][0]["lagSeconds"] = Value::Null;
        v
    };
    assert_eq!(without_seconds(hashed), without_seconds(probed));
}

/// MGMT-13: the unfiltered count (no join) and the filtered ones (per partition, joined to
/// the queues kept) agree, bucket by bucket, for messages and dead letters alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mgmt_13_filtered_and_unfiltered_analytics_agree() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for q in ["a.one", "b.two"] {
        post(
            &c,
            &format!("{base}/api/v1/configure"),
            &json!({"queue": q, "options": {"retryLimit": 0}}),
        )
        .await;
    }
    let items: Vec<Value> = (0..5)
        .map(|i| json!({"queue": if i < 3 { "a.one" } else { "b.two" }, "partition": format!("p{i}"), "payload": i}))
        .collect();
    post(&c, &format!("{base}/api/v1/push"), &json!({"items": items})).await;
    let (_, popped) = get(
        &c,
        &format!("{base}/api/v1/pop/queue/b.two?consumerGroup=g&batch=1"),
    )
    .await;
    let m = popped.unwrap()["messages"][0].clone();
    let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "dlq", "consumerGroup": "g"});
    post(&c, &format!("{base}/api/v1/ack"), &ack).await;
    // One window for every read, so their buckets line up whatever the clock does.
    let now = chrono::Utc::now();
    let window = format!(
        "?interval=minute&from={}&to={}",
        (now - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (now + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let read = |query: String| {
        let (c, base) = (c.clone(), base.clone());
        async move {
            let (status, body) = get(&c, &format!("{base}/api/v1/status/analytics{query}")).await;
            assert_eq!(status, 200, "{query}: {body:?}");
            let body = body.unwrap();
            let series: Vec<(i64, i64)> = body["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| {
                    (
                        b["ingested"].as_i64().unwrap(),
                        b["deadLettered"].as_i64().unwrap(),
                    )
                })
                .collect();
            series
        }
    };
    let all = read(window.clone()).await;
    let (one, two) = (
        read(format!("{window}&queue=a.one")).await,
        read(format!("{window}&namespace=b")).await,
    );
    let summed: Vec<(i64, i64)> = one
        .iter()
        .zip(&two)
        .map(|(x, y)| (x.0 + y.0, x.1 + y.1))
        .collect();
    assert_eq!(all, summed, "the two queues' series add up to the broker's");
    let totals = |s: &[(i64, i64)]| s.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
    assert_eq!(
        (totals(&all), totals(&one), totals(&two)),
        ((5, 1), (3, 0), (2, 1))
    );
    assert_eq!(
        totals(&read(format!("{window}&task=nothing")).await),
        (0, 0)
    );
}
