//! Every payload a push accepts can be delivered (PUSH-11), on both engines and through
//! every path that takes one: a push, a transaction's push and the spool. What cannot be
//! delivered is refused at the door with a 400 and nothing written; what is accepted comes
//! back from a pop as POP-5 says. The round trip is also a property over generated JSON
//! texts: deep nesting on both sides of the limit, every escape, lone and paired
//! surrogates, huge and tiny numbers, long strings and every Unicode plane. On the way
//! out, a stored payload no consumer could read is set aside (POP-16), and a spooled push
//! the database refuses for good is quarantined (PUSH-12).

mod common;
use common::*;
use proptest::prelude::*;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A broker under test: its name, its URL and what keeps it running.
struct Target {
    name: &'static str,
    base: String,
    _server: TestServer,
}

async fn memory() -> Target {
    let server = queen_server::testing::memory_server().await;
    Target {
        name: "memory",
        base: server.url(),
        _server: server,
    }
}

async fn postgres() -> Target {
    let server = pg_server().await;
    Target {
        name: "postgres",
        base: server.url(),
        _server: server,
    }
}

/// Sends `body` as it is: the status and the answer's text.
async fn send(c: &reqwest::Client, url: &str, body: String) -> (u16, String) {
    let r = c
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the broker answers");
    (r.status().as_u16(), r.text().await.unwrap())
}

fn push_body(queue: &str, payload: &str) -> String {
    format!(r#"{{"items":[{{"queue":"{queue}","payload":{payload}}}]}}"#)
}

fn txn_body(queue: &str, payload: &str) -> String {
    format!(
        r#"{{"operations":[{{"type":"push","items":[{{"queue":"{queue}","payload":{payload}}}]}}]}}"#
    )
}

/// The `data` of every message of `queue`, in order, each as its JSON text once parsed
/// (numbers keep their digits, objects their key order).
async fn drain(c: &reqwest::Client, base: &str, queue: &str) -> Vec<String> {
    let mut out = vec![];
    loop {
        let r = c
            .get(format!(
                "{base}/api/v1/pop/queue/{queue}?batch=100&autoAck=true"
            ))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        if status == 204 {
            return out;
        }
        assert_eq!(status, 200, "{text}");
        let body: Value = serde_json::from_str(&text).expect("a pop answer parses");
        for m in body["messages"].as_array().unwrap() {
            out.push(m["data"].to_string());
        }
    }
}

/// What POP-5 says a payload comes back as: the same value, keys in order, numbers with
/// their digits (only whitespace and the spelling of escapes may differ).
fn canonical(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .expect("an accepted payload parses")
        .to_string()
}

async fn maintenance(c: &reqwest::Client, base: &str, on: bool) {
    let (s, _) = send(
        c,
        &format!("{base}/api/v1/system/maintenance"),
        format!(r#"{{"enabled":{on}}}"#),
    )
    .await;
    assert_eq!(s, 200);
}

fn nested(levels: usize) -> String {
    format!("{}0{}", "[".repeat(levels), "]".repeat(levels))
}

/// Payloads no consumer could read back: each is refused.
fn refused() -> Vec<(&'static str, String)> {
    vec![
        ("65 levels", nested(65)),
        ("128 levels", nested(128)),
        ("100,000 levels", nested(100_000)),
        ("a lone high surrogate", r#""\ud800""#.into()),
        ("a lone low surrogate", r#""\udc00""#.into()),
        ("a high surrogate before a letter", r#"["x\ud83dy"]"#.into()),
        (
            "a pair in the wrong order",
            r#"{"k":"\ude00\ud83d"}"#.into(),
        ),
        ("a lone surrogate in a key", r#"{"\ud800":1}"#.into()),
    ]
}

/// Payloads at and around the edges that are deliverable: each comes back.
fn delivered() -> Vec<(&'static str, String)> {
    vec![
        ("64 levels", nested(64)),
        (
            "64 levels of objects",
            format!("{}1{}", r#"{"a":"#.repeat(64), "}".repeat(64)),
        ),
        ("a surrogate pair", r#""\ud83d\ude00""#.into()),
        ("an escaped backslash before u", r#""\\ud800""#.into()),
        ("a huge exponent", "1e1000000".into()),
        ("a tiny exponent", "-1e-20000".into()),
        ("digits past u64", "18446744073709551616123".into()),
        ("minus zero and a trailing zero", "[-0,0.10,1E2]".into()),
        ("every escape", r#""\"\\\/\b\f\n\r\t\u0041\u00e9""#.into()),
        (
            "every plane",
            "\"a\u{e9}\u{4e2d}\u{1f600}\u{10fffd}\"".into(),
        ),
        ("a long string", format!("\"{}\"", "x".repeat(200_000))),
    ]
}

static QUEUES: AtomicUsize = AtomicUsize::new(0);

fn fresh_queue(tag: &str) -> String {
    format!("{tag}-{}", QUEUES.fetch_add(1, Ordering::SeqCst))
}

/// PUSH-11 at the door, on both engines, through a push, a transaction and the spool: a
/// payload no consumer could read is a 400 naming why and nothing is written; every
/// edge case on the right side of the limit comes back as it went in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_11_undeliverable_payloads_are_400_everywhere_and_the_rest_come_back() {
    let c = reqwest::Client::new();
    for t in [memory().await, postgres().await] {
        let base = &t.base;
        for (what, payload) in refused() {
            for (path, body) in [
                ("push", push_body("refused", &payload)),
                ("transaction", txn_body("refused", &payload)),
            ] {
                let (s, answer) = send(&c, &format!("{base}/api/v1/{path}"), body).await;
                assert_eq!(s, 400, "{}: {path} of {what}: {answer:.300}", t.name);
                let error: Value = serde_json::from_str(&answer).unwrap();
                let error = error["error"].as_str().unwrap();
                assert!(
                    error.contains("nested") || error.contains("surrogate"),
                    "{}: {path} of {what}: {error}",
                    t.name
                );
            }
            // Under maintenance a push goes to the spool: refused all the same.
            maintenance(&c, base, true).await;
            let body = push_body("refused", &payload);
            let (s, _) = send(&c, &format!("{base}/api/v1/push"), body).await;
            maintenance(&c, base, false).await;
            assert_eq!(s, 400, "{}: spooled push of {what}", t.name);
        }
        let none: Vec<String> = vec![];
        assert_eq!(drain(&c, base, "refused").await, none, "{}", t.name);

        let texts: Vec<String> = delivered().into_iter().map(|(_, p)| p).collect();
        let want: Vec<String> = texts.iter().map(|p| canonical(p)).collect();
        for p in &texts {
            let (s, a) = send(&c, &format!("{base}/api/v1/push"), push_body("pushed", p)).await;
            assert_eq!(s, 201, "{}: {a:.300}", t.name);
            let (s, a) = send(
                &c,
                &format!("{base}/api/v1/transaction"),
                txn_body("txn", p),
            )
            .await;
            assert_eq!(s, 200, "{}: {a:.300}", t.name);
        }
        maintenance(&c, base, true).await;
        for p in &texts {
            let (s, a) = send(&c, &format!("{base}/api/v1/push"), push_body("spooled", p)).await;
            assert_eq!(s, 201, "{}: {a:.300}", t.name);
            assert!(a.contains("buffered"), "{}: {a:.300}", t.name);
        }
        maintenance(&c, base, false).await;
        for queue in ["pushed", "txn", "spooled"] {
            assert_eq!(drain(&c, base, queue).await, want, "{}: {queue}", t.name);
        }
    }
}

/// A JSON text, with its nesting depth and whether it holds what no payload may: a lone
/// surrogate escape (PUSH-11) or a NUL (PUSH-8).
#[derive(Clone, Debug)]
struct Text {
    json: String,
    depth: usize,
    forbidden: bool,
}

fn leaf() -> impl Strategy<Value = Text> {
    let plain = |s: &str| Text {
        json: s.to_string(),
        depth: 0,
        forbidden: false,
    };
    prop_oneof![
        prop_oneof![
            Just("0"),
            Just("-0"),
            Just("0.10"),
            Just("1E2"),
            Just("1e1000000"),
            Just("-1e-20000"),
            Just("-1e131073"),
            Just("18446744073709551616"),
            Just("true"),
            Just("null"),
        ]
        .prop_map(plain),
        any::<i64>().prop_map(move |n| plain(&n.to_string())),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(move |f| plain(&f.to_string())),
        // Strings of characters from every plane, written as they are or escaped.
        proptest::collection::vec((any::<char>(), any::<bool>()), 0..12).prop_map(|cs| {
            let nul = cs.iter().any(|(c, _)| *c == '\0');
            let mut s = String::from("\"");
            for (ch, escape) in cs {
                match ch {
                    '"' => s.push_str("\\\""),
                    '\\' => s.push_str("\\\\"),
                    c if (c as u32) < 0x20 || escape => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            s.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                    c => s.push(c),
                }
            }
            s.push('"');
            Text {
                json: s,
                depth: 0,
                forbidden: nul,
            }
        }),
        // A lone surrogate, high or low, somewhere in a string.
        (0xd800u32..0xe000, "[a-z]{0,3}").prop_map(|(u, tail)| Text {
            json: format!("\"\\u{u:04x}{tail}\""),
            depth: 0,
            forbidden: true,
        }),
        "[ -~]{100,2000}".prop_map(|s| Text {
            json: serde_json::to_string(&s).unwrap(),
            depth: 0,
            forbidden: false,
        }),
    ]
}

fn text() -> impl Strategy<Value = Text> {
    let tree = leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|xs| Text {
                json: format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| x.json.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                depth: 1 + xs.iter().map(|x| x.depth).max().unwrap_or(0),
                forbidden: xs.iter().any(|x| x.forbidden),
            }),
            proptest::collection::vec(("[a-zA-Z\u{e9}\u{1f600}]{0,4}", inner), 0..4).prop_map(
                |kv| Text {
                    json: format!(
                        "{{{}}}",
                        kv.iter()
                            .map(|(k, v)| format!(
                                "{}:{}",
                                serde_json::to_string(k).unwrap(),
                                v.json
                            ))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    depth: 1 + kv.iter().map(|(_, v)| v.depth).max().unwrap_or(0),
                    forbidden: kv.iter().any(|(_, v)| v.forbidden),
                }
            ),
        ]
    });
    // Wrapped in extra levels, on both sides of the limit.
    (tree, prop_oneof![Just(0usize), 55usize..75, Just(200)]).prop_map(|(t, wrap)| Text {
        json: format!("{}{}{}", "[".repeat(wrap), t.json, "]".repeat(wrap)),
        depth: t.depth + wrap,
        forbidden: t.forbidden,
    })
}

/// Pushes each text to a fresh queue of `base` (under push maintenance when `spooled`):
/// every refusal must be a 400 the spec calls for, every acceptance must come back from
/// the pops exactly, in order.
async fn round_trip(c: &reqwest::Client, t: &Target, texts: &[Text], spooled: bool) {
    let base = &t.base;
    let queue = fresh_queue("prop");
    if spooled {
        maintenance(c, base, true).await;
    }
    let mut want = vec![];
    for x in texts {
        let (s, a) = send(
            c,
            &format!("{base}/api/v1/push"),
            push_body(&queue, &x.json),
        )
        .await;
        let undeliverable = x.depth > 64 || x.forbidden;
        match s {
            201 if !undeliverable => want.push(canonical(&x.json)),
            400 if undeliverable => {}
            _ => panic!(
                "{}: push of {:.200} (depth {}, forbidden text {}) answered {s}: {a:.300}",
                t.name, x.json, x.depth, x.forbidden
            ),
        }
    }
    if spooled {
        maintenance(c, base, false).await;
    }
    assert_eq!(drain(c, base, &queue).await, want, "{}", t.name);
}

/// PUSH-11 and POP-5 as a property on both engines, through a push and through the
/// spool: whatever is accepted comes back exactly; whatever is refused is a 400 for the
/// reason the spec gives, with nothing written (the drain finds only the accepted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_11_accepted_payloads_round_trip_on_both_engines_and_through_the_spool() {
    let targets = [memory().await, postgres().await];
    let c = reqwest::Client::new();
    let rt = tokio::runtime::Handle::current();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = tokio::task::block_in_place(|| {
        runner.run(
            &(proptest::collection::vec(text(), 1..8), any::<bool>()),
            |(texts, spooled)| {
                rt.block_on(async {
                    for t in &targets {
                        round_trip(&c, t, &texts, spooled).await;
                    }
                });
                Ok(())
            },
        )
    });
    result.unwrap();
}

/// Pushes `(transactionId, payload)` items to `queue`.
async fn push_items(c: &reqwest::Client, base: &str, queue: &str, items: &[(&str, &str)]) {
    let items: Vec<String> = items
        .iter()
        .map(|(t, p)| format!(r#"{{"queue":"{queue}","transactionId":"{t}","payload":{p}}}"#))
        .collect();
    let body = format!(r#"{{"items":[{}]}}"#, items.join(","));
    let (s, a) = send(c, &format!("{base}/api/v1/push"), body).await;
    assert_eq!(s, 201, "{a}");
}

/// Writes `text` as the stored payload of message `txn` straight into the table, as an
/// older version (or a damaged disk) could have left it: the partition id.
async fn damage(app: &TestServer, txn: &str, text: &str) -> String {
    let pid: uuid::Uuid = sqlx::query_scalar(
        "UPDATE queen_messages SET data = $2::text::json WHERE transaction_id = $1
         RETURNING partition_id",
    )
    .bind(txn)
    .bind(text)
    .fetch_one(app.broker().pool())
    .await
    .unwrap();
    pid.to_string()
}

/// A pop of `queue` for `group` (`extra` query parameters): the status and the body.
async fn pop(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    group: &str,
    extra: &str,
) -> (u16, Value) {
    let url = format!("{base}/api/v1/pop/queue/{queue}?batch=10&consumerGroup={group}{extra}");
    let (s, b) = get(c, &url).await;
    (s, b.unwrap_or(Value::Null))
}

fn datas(popped: &Value) -> Vec<Value> {
    popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect()
}

/// POP-16: a stored payload no consumer could read (nested 200 deep, or a lone
/// surrogate, as an older version could have written) is set aside when a pop meets it:
/// filed as the group's dead letter with why, removed for every group, counted; the
/// pop delivers the rest of its claim, an autoAck pop loses nothing it did not answer,
/// and a leased batch without it acks as usual. Peek and the one-message read show such
/// a message as `data: null` with `dataError`, never a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_16_an_undeliverable_stored_message_is_set_aside_and_the_partition_goes_on() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    for (queue, bad) in [("deep", nested(200)), ("lone", r#""\ud800""#.to_string())] {
        push_items(&c, &base, queue, &[("a", "1"), ("b", "2"), ("c", "3")]).await;
        damage(&app, "b", &bad).await;
        // An autoAck pop answers what it claimed but b, and commits nothing it did not answer.
        let (s, first) = pop(&c, &base, queue, "g1", "&autoAck=true").await;
        assert_eq!(s, 200, "{queue}: {first}");
        assert_eq!(datas(&first), [1, 3], "{queue}");
        assert_eq!(pop(&c, &base, queue, "g1", "&autoAck=true").await.0, 204);
        let (_, dlq) = get(
            &c,
            &format!("{base}/api/v1/dlq?queue={queue}&consumerGroup=g1"),
        )
        .await;
        let dlq = dlq.unwrap();
        let letter = &dlq["messages"][0];
        assert_eq!(
            (dlq["total"].as_u64(), &letter["transactionId"]),
            (Some(1), &Value::from("b"))
        );
        assert_eq!(letter["data"], Value::Null, "{dlq}");
        let why = letter["dataError"].as_str().unwrap();
        assert!(why.contains("nested") || why.contains("surrogate"), "{why}");
        assert!(letter["errorMessage"]
            .as_str()
            .unwrap()
            .contains("cannot be delivered"));
        // Another group, leased: b is gone for every group; the batch acks as usual.
        let (s, second) = pop(&c, &base, queue, "g2", "").await;
        assert_eq!(
            (s, datas(&second)),
            (200, vec![Value::from(1), Value::from(3)])
        );
        let last = &second["messages"][1];
        let ack = serde_json::json!({"transactionId": "c", "partitionId": last["partitionId"],
            "leaseId": last["leaseId"], "status": "completed", "consumerGroup": "g2"});
        let (s, acked) = post(&c, &format!("{base}/api/v1/ack"), &ack).await;
        assert_eq!(
            (s, &acked.unwrap()[0]["success"]),
            (200, &Value::Bool(true))
        );
        assert_eq!(pop(&c, &base, queue, "g2", "").await.0, 204);
    }
    assert_eq!(metric(&base, "queen_messages_set_aside_total").await, 2.0);

    // A claim that holds nothing deliverable claims again at once, for a pop that waits
    // and for one that does not: the next message comes (`batch=1`, the last given, wins
    // over the helper's 10, so the first claim holds only the damaged message).
    for (queue, wait) in [
        ("head", "&batch=1&wait=true&timeout=2000"),
        ("nowait", "&batch=1"),
    ] {
        let bad = format!("{queue}-p");
        push_items(&c, &base, queue, &[(&bad, "1"), ("q", "2")]).await;
        damage(&app, &bad, &nested(300)).await;
        let (s, popped) = pop(&c, &base, queue, "g", wait).await;
        assert_eq!(s, 200, "{queue}: the pop did not claim again: {popped}");
        assert_eq!(datas(&popped), [2], "{queue}");
    }

    // Reads that show payloads show the damage instead of failing.
    push_items(&c, &base, "peek", &[("x", "1")]).await;
    let pid = damage(&app, "x", r#"{"k":"\udc00"}"#).await;
    let (s, page) = get(&c, &format!("{base}/api/v1/messages?queue=peek")).await;
    let row = &page.as_ref().unwrap()["messages"][0];
    assert_eq!((s, &row["data"]), (200, &Value::Null), "{page:?}");
    assert!(row["dataError"].as_str().unwrap().contains("surrogate"));
    let (s, one) = get(&c, &format!("{base}/api/v1/messages/{pid}/x")).await;
    let one = one.unwrap();
    assert_eq!(s, 200, "{one}");
    assert!(one.to_string().contains("dataError"), "{one}");
    app.server.stop().await.unwrap();
}

/// PUSH-12: a spool written by an older broker holds a push the database refuses for
/// good (a NUL in a queue name, refused as a data error) between two good ones. The
/// broker that adopts it quarantines that push and delivers the ones behind it; the
/// quarantine is counted in `/health` and the metrics and survives a restart; moved
/// back under a `spool-` name it is adopted again, refused again and quarantined again,
/// while nothing else is replayed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_12_a_refused_spooled_push_is_quarantined_and_the_rest_is_delivered() {
    let app = pg_server().await;
    let (c, base) = (reqwest::Client::new(), app.server.url());
    let line = |queue: &str, txn: &str| {
        let item = serde_json::json!({"queue": queue, "partition": "Default", "data": {"n": txn},
            "transaction_id": txn, "minted": false, "trace_id": null,
            "message_id": uuid::Uuid::now_v7()});
        format!("1\t[{item}]\n")
    };
    let old = format!(
        "{}{}{}",
        line("qq", "g1"),
        line("bad\u{0}queue", "p"),
        line("qq", "g2")
    );
    std::fs::write(app.dir.join("spool-older.jsonl"), old).unwrap();
    let health = wait_for(&c, &base, |h| {
        h["spool"]["quarantined"] == 1 && h["spool"]["items"] == 0
    })
    .await;
    assert_eq!(health["spool"]["replay"], "idle", "{health}");
    assert_eq!(
        drain(&c, &base, "qq").await,
        [r#"{"n":"g1"}"#, r#"{"n":"g2"}"#]
    );
    assert_eq!(metric(&base, "queen_spool_quarantined_items").await, 1.0);
    let quarantines = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("quarantine-")
            })
            .collect()
    };
    let kept = quarantines(&app.dir);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let text = std::fs::read_to_string(&kept[0]).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains(r"bad\u0000queue"), "{text}");

    // A restart keeps the count; nothing is replayed twice.
    let app = app.restart().await;
    let base = app.server.url();
    let (_, h) = get(&c, &format!("{base}/health")).await;
    assert_eq!(h.unwrap()["spool"]["quarantined"], 1);
    // Re-admitted, it is refused again and quarantined again: nothing lost or doubled.
    std::fs::rename(&kept[0], app.dir.join("spool-readmitted.jsonl")).unwrap();
    wait_for(&c, &base, |h| {
        h["spool"]["quarantined"] == 1 && h["spool"]["items"] == 0
    })
    .await;
    assert_eq!(quarantines(&app.dir).len(), 1);
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_messages")
        .fetch_one(app.broker().pool())
        .await
        .unwrap();
    assert_eq!(stored, 2, "the two good pushes, once each");
    app.server.stop().await.unwrap();
}

/// Polls `/health` (up to 20 s) until `done` holds for its body: the body.
async fn wait_for(c: &reqwest::Client, base: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        let (_, b) = get(c, &format!("{base}/health")).await;
        last = b.unwrap_or_default();
        if done(&last) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("/health never showed what was awaited: {last}");
}
