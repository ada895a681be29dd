//! A broker that differs from this project only on PROJECT points passes without
//! `--strict`, listed as "differs on project-resolved points" with the rule ids, and
//! fails with it (PROTOCOL.md preamble). The double is our memory engine deciding the
//! modelled PROJECT choice points the other way (ACK-5 outside the span accepted, every
//! failure charged, leases released on partial commits, failed acks kept in
//! transactions, per-partition subscription seeding), answering duplicates with a fresh
//! `message_id` (PUSH-13), behind an HTTP proxy that rewrites every rejection body to
//! `{"message": ...}` (PUSH-8, ACK-9, ...; a pop's POP-10 answer is SEED and kept).
//! It also has no `maxSize` (RET-5), removes nothing by age (RET-3) and has no
//! management routes at all (section 17): the suite finds that out and skips their
//! cases instead of failing each.

mod common;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::*;
use queen_conformance::report::{Report, Verdict};
use queen_conformance::rules::*;
use queen_reference::policy::Policy;
use queen_reference::wire::*;
use queen_server::broker::Broker;
use queen_server::memory::MemoryBroker;
use queen_server::wakes::Wakes;
use serde_json::Value;
use std::sync::Arc;

/// The memory engine with the PROJECT alternatives, duplicates carrying fresh ids.
struct OtherProjectDecisions {
    inner: MemoryBroker,
}

#[async_trait]
impl Broker for OtherProjectDecisions {
    async fn call(&self, req: Request) -> Answer {
        if let Request::Manage(_) = req {
            return Answer::error(404, "no such route");
        }
        let mut a = self.inner.call(req).await;
        if let Answer::Pushed(items) = &mut a {
            for i in items
                .iter_mut()
                .filter(|i| i.status == PushStatus::Duplicate)
            {
                i.message_id = uuid::Uuid::now_v7().hyphenated().to_string();
            }
        }
        a
    }

    fn wakes(&self) -> &Wakes {
        self.inner.wakes()
    }

    async fn pop_paused(&self) -> bool {
        self.inner.pop_paused().await
    }
}

#[derive(Clone)]
struct Upstream {
    url: String,
    client: reqwest::Client,
}

/// Forwards a request; a 4xx `{"error": e}` outside the pop routes becomes `{"message": e}`.
async fn forward(State(up): State<Upstream>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).expect("a method");
    let sent = up
        .client
        .request(method, format!("{}{path}", up.url))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await;
    let Ok(resp) = sent else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = resp.status().as_u16();
    let mut bytes = resp.bytes().await.unwrap_or_default().to_vec();
    if (400..500).contains(&status) && !uri.path().starts_with("/api/v1/pop") {
        if let Ok(Value::Object(mut o)) = serde_json::from_slice::<Value>(&bytes) {
            if let Some(e) = o.remove("error") {
                o.insert("message".into(), e);
                bytes = serde_json::to_vec(&o).expect("serializes");
            }
        }
    }
    let mut r = Response::new(axum::body::Body::from(bytes.clone()));
    *r.status_mut() = StatusCode::from_u16(status).expect("a status");
    if !bytes.is_empty() {
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
    }
    r
}

/// The double: (its URL, the server behind the proxy).
async fn double() -> (String, queen_server::app::Running) {
    let server = serve(Arc::new(OtherProjectDecisions {
        inner: memory().with_policy(Policy::project_alternative()),
    }))
    .await;
    let up = Upstream {
        url: server.url(),
        client: reqwest::Client::new(),
    };
    let app = axum::Router::new()
        .fallback(forward)
        .layer(DefaultBodyLimit::disable())
        .with_state(up);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, server)
}

fn differing(r: &Report) -> Vec<(&str, Vec<RuleId>)> {
    r.entries
        .iter()
        .filter(|e| e.verdict == Verdict::Failed)
        .map(|e| (e.id.as_str(), e.failure.as_ref().unwrap().rules()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_differing_only_on_project_points_passes_unless_strict() {
    let (url, server) = double().await;
    let opts = options(&url, &[], Some((5, 48, 30)));
    let lax = run(&opts).await;
    let text = queen_conformance::report::terminal::render(&lax, false);
    println!("{text}");
    assert!(lax.passed(), "without --strict the run passes:\n{text}");
    for e in lax.entries.iter().filter(|e| e.verdict == Verdict::Failed) {
        assert_eq!(e.level, Level::Project, "{} is listed as PROJECT", e.id);
        assert!(!e.fails_run);
    }
    let listed: Vec<RuleId> = differing(&lax).into_iter().flat_map(|(_, r)| r).collect();
    for rule in [PUSH_13, PUSH_8, ACK_9, ACK_10, RET_3, RET_5] {
        assert!(listed.contains(&rule), "{rule} is listed: {listed:?}");
    }
    // A SEED case that only meets a PROJECT point on its way is a project difference
    // naming that point, not a failure.
    let dup = lax
        .entries
        .iter()
        .find(|e| e.id == "push-5/same-id-twice-in-one-request")
        .unwrap();
    assert_eq!(dup.verdict, Verdict::Failed);
    assert_eq!(dup.failure.as_ref().unwrap().kind(), "project-difference");
    assert_eq!(dup.failure.as_ref().unwrap().rules(), vec![PUSH_13]);
    // The lockstep run does not stop at a PROJECT point: it goes on to the deep
    // outcomes of section 4 that only longer sequences reach.
    let cov = &lax.lockstep.as_ref().expect("a lockstep run").coverage;
    let missing = cov.missing();
    for deep in [
        "ack noop (already committed)",
        "ack clamp (completion blocked by a lower failure)",
        "ack dead letter",
        "ack invalid or expired lease",
        "ack unresolvable",
    ] {
        assert!(
            !missing.contains(&deep),
            "lockstep never reached {deep}: {missing:?}"
        );
    }
    assert!(
        text.contains("Differs on project-resolved points"),
        "{text}"
    );
    assert!(text.contains("RESULT: PASS"), "{text}");
    let json = queen_conformance::report::json::render(&lax);
    common::assert_valid_report(&json);
    assert_eq!(json["passed"], true);
    assert!(json["cases"].as_array().unwrap().iter().any(|c| {
        c["failure"]["kind"] == "project-difference"
            && c["failure"]["findings"][0]["rule"].is_string()
    }));
    // No management routes: their cases are skipped, each saying why.
    let skipped: Vec<_> = lax
        .entries
        .iter()
        .filter(|c| c.id.starts_with("mgmt-"))
        .collect();
    assert!(!skipped.is_empty());
    for c in skipped {
        assert_eq!(c.verdict, Verdict::Skipped, "{}", c.id);
        assert!(text.contains("needs management"), "{text}");
    }
    let xml = queen_conformance::report::junit::render(&lax);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(doc.root_element().attribute("failures"), Some("0"));
    assert!(xml.contains("differs on a PROJECT point"));

    let strict = run_strict(&opts).await;
    let text = queen_conformance::report::terminal::render(&strict, false);
    assert!(!strict.passed(), "with --strict it fails:\n{text}");
    assert!(
        text.contains("Failures on project-resolved points (--strict)"),
        "{text}"
    );
    server.stop().await.unwrap();
}
