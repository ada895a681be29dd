//! The watcher's HTTP/1.1 proxy: any client pointed at it reaches the broker as before.
//!
//! Each request is read whole, timed, forwarded to the target with its method, path,
//! query, headers and body as they came, and the broker's status, headers and body go
//! back the same way (only hop-by-hop headers, which belong to one connection, are
//! not passed on). Long polls simply take as long as the broker does. When the target
//! cannot be reached or drops the connection, the client gets a 502 with a JSON error,
//! and the checker records the call as unknown: it may or may not have taken effect.

use super::online::Online;
use super::record::{query_pairs, response_body, Record};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName};
use hyper::{Request, Response, StatusCode};
use queen_reference::time::wall_clock_ms;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// Queue names whose first-sight answer is remembered; past it they are asked again.
const PROBES_KEPT: usize = 100_000;

/// What every connection's handler shares.
pub struct Shared {
    /// The checker of the traffic.
    pub online: Mutex<Online>,
    /// `--record`: every exchange as a JSON line.
    pub record: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
    /// Called with each finding as it is made (the terminal, `--findings`).
    pub on_finding: Box<dyn Fn(&super::online::WatchFinding) + Send + Sync>,
    target: String,
    client: reqwest::Client,
    next_id: AtomicU64,
    /// Whether each queue first seen existed at the broker before (asked once).
    probes: Mutex<HashMap<String, Arc<OnceCell<bool>>>>,
}

impl Shared {
    /// Handlers forwarding to `target`, checked by `online`.
    pub fn new(
        target: &str,
        online: Online,
        record: Option<std::fs::File>,
        on_finding: Box<dyn Fn(&super::online::WatchFinding) + Send + Sync>,
    ) -> Shared {
        // Idle connections are dropped well before a broker would close them (hyper's
        // servers close an idle keep-alive connection once its header timeout passes,
        // ours after 10 s), so that a request is rarely sent on a connection the broker
        // is closing at that moment.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .build()
            .expect("a client without TLS builds");
        Shared {
            online: Mutex::new(online),
            record: record.map(|f| Mutex::new(std::io::BufWriter::new(f))),
            on_finding,
            target: target.trim_end_matches('/').to_string(),
            client,
            next_id: AtomicU64::new(1),
            probes: Mutex::new(HashMap::new()),
        }
    }

    /// The checker. A panic while it was held (a bug, never a client's input) leaves
    /// it as it was: the watcher goes on forwarding and judging.
    pub fn checker(&self) -> std::sync::MutexGuard<'_, Online> {
        self.online.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Flushes the recorded history.
    pub fn flush(&self) {
        if let Some(r) = &self.record {
            let _ = r.lock().unwrap_or_else(|e| e.into_inner()).flush();
        }
    }
}

/// Headers that belong to one connection, not to the message (RFC 9110 section 7.6.1),
/// and the framing the proxy sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from {
        if !hop_by_hop(k) {
            to.append(k.clone(), v.clone());
        }
    }
}

/// Handles one request: forward, time, record, check.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (parts, body) = req.into_parts();
    let invoke_ms = wall_clock_ms();
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => return Ok(gateway_error(&format!("could not read the request: {e}"))),
    };
    let mut record = Record {
        id: shared.next_id.fetch_add(1, Ordering::Relaxed),
        method: parts.method.as_str().to_ascii_uppercase(),
        path: parts.uri.path().to_string(),
        query: query_pairs(parts.uri.query()),
        body: None,
        body_base64: None,
        invoke_ms,
        complete_ms: invoke_ms,
        status: None,
        response: None,
        unknown: None,
        existed: vec![],
        token: parts.headers.contains_key(hyper::header::AUTHORIZATION),
    };
    record.set_body(&bytes);
    record.existed = first_sight(&shared, &record, &parts.headers).await;
    shared.checker().invoke(&record, &record.existed);
    let mut pending = InFlight {
        shared: shared.clone(),
        record: Some(record),
    };
    let answer = forward(&shared, &parts, bytes).await;
    let mut record = pending.record.take().unwrap_or_default();
    record.complete_ms = wall_clock_ms();
    let response = match answer {
        Ok((status, headers, body)) => {
            record.status = Some(status.as_u16());
            record.response = response_body(&body);
            let mut r = Response::new(Full::new(body));
            *r.status_mut() = status;
            copy_headers(&headers, r.headers_mut());
            r
        }
        Err(why) => {
            let r = gateway_error(&why);
            record.unknown = Some(why);
            r
        }
    };
    finish(&shared, &record);
    Ok(response)
}

/// A call sent on and not answered yet. When the client goes away first, hyper drops the
/// handler: the call is then completed as unknown (the broker may or may not have done
/// it), so that its queue does not wait for it forever.
struct InFlight {
    shared: Arc<Shared>,
    record: Option<Record>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(mut r) = self.record.take() {
            r.complete_ms = wall_clock_ms();
            r.unknown = Some("the client went away before the answer".into());
            finish(&self.shared, &r);
        }
    }
}

/// Checks the completed call, reports its findings and records it.
fn finish(shared: &Shared, record: &Record) {
    let found = {
        let mut online = shared.checker();
        let n = online.complete(record);
        online.findings[online.findings.len() - n..].to_vec()
    };
    for f in &found {
        (shared.on_finding)(f);
    }
    if let Some(w) = &shared.record {
        let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
        let _ = serde_json::to_writer(&mut *w, record);
        let _ = w.write_all(b"\n");
    }
}

/// Sends the request on to the target: its status, headers and body, or why none came.
async fn forward(
    shared: &Shared,
    parts: &hyper::http::request::Parts,
    body: Bytes,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{pq}", shared.target);
    let mut headers = HeaderMap::new();
    copy_headers(&parts.headers, &mut headers);
    let resp = shared
        .client
        .request(parts.method.clone(), &url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|e| format!("the broker could not be reached: {}", chain(&e)))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("the broker's answer was cut off: {}", chain(&e)))?;
    Ok((status, headers, body))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// A 502 with a JSON error, as a client of an unreachable broker behind a gateway gets.
fn gateway_error(why: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "error": format!("queen-conformance watch: {why}") });
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = StatusCode::BAD_GATEWAY;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The queues this call names for the first time that the broker already had: asked
/// once per queue (`GET /api/v1/resources/queues/{queue}`, MGMT-4), with the caller's
/// own credentials. Anything but a 404 counts as "existed": the watcher then does not
/// judge the queue rather than judge it from a state it may not know.
async fn first_sight(shared: &Arc<Shared>, record: &Record, headers: &HeaderMap) -> Vec<String> {
    let unseen = shared.checker().unseen(&record.request());
    let mut existed = Vec::new();
    for q in unseen {
        let cell = {
            let mut probes = shared.probes.lock().unwrap_or_else(|e| e.into_inner());
            if probes.len() >= PROBES_KEPT {
                // Forgetting an answer only means asking the broker again.
                probes.clear();
            }
            probes.entry(q.clone()).or_default().clone()
        };
        let had = *cell.get_or_init(|| probe(shared, &q, headers)).await;
        if had {
            existed.push(q);
        }
    }
    existed
}

async fn probe(shared: &Shared, queue: &str, headers: &HeaderMap) -> bool {
    let name: String = url::form_urlencoded::byte_serialize(queue.as_bytes()).collect();
    let url = format!(
        "{}/api/v1/resources/queues/{}",
        shared.target,
        name.replace('+', "%20")
    );
    let mut rb = shared.client.get(url);
    if let Some(auth) = headers.get(hyper::header::AUTHORIZATION) {
        rb = rb.header(hyper::header::AUTHORIZATION, auth.clone());
    }
    !matches!(rb.send().await, Ok(r) if r.status() == StatusCode::NOT_FOUND)
}
