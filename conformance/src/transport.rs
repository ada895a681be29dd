//! One request over HTTP and back, unchecked: what a session, the lockstep run and the
//! concurrent clients all send through, with the deadline a request may wait and the
//! error text that tells a call that never arrived from one whose answer was lost.

use crate::target::{CheckSettings, Target};
use queen_reference::wire::*;
use serde_json::Value;
use std::time::Duration;

/// The client's wall clock in milliseconds since the epoch.
pub use queen_reference::time::wall_clock_ms as now_ms;

/// How long `req` may wait for its answer: the request timeout, and a long poll's own
/// `timeout` on top.
fn deadline_ms(req: &HttpRequest, settings: &CheckSettings) -> u64 {
    let q = |k: &str| {
        req.query
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
    };
    let parked = match q("wait") {
        Some("true") => q("timeout")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(settings.default_timeout_ms),
        _ => 0,
    };
    settings.request_timeout_ms + parked
}

/// An error with its causes ("error sending request ...: ...: Connection refused"):
/// the cause tells a call that never reached the broker from one whose answer was lost.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(&format!(": {c}"));
        cause = c.source();
    }
    s
}

/// Sends one request; never panics on a broker's misbehaviour.
pub(crate) async fn transmit(target: &Target, req: &HttpRequest) -> Result<HttpResponse, String> {
    let base = target.base();
    let mut url = reqwest::Url::parse(&format!("{base}{}", req.path))
        .map_err(|e| format!("bad URL {base}{}: {e}", req.path))?;
    if !req.query.is_empty() {
        let mut q = url.query_pairs_mut();
        for (k, v) in &req.query {
            q.append_pair(k, v);
        }
    }
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut rb = target.client.request(method, url);
    let default = target.tokens.as_ref().map(|t| t.admin.as_str());
    if let Some(t) = req.bearer.as_deref().or(default).filter(|t| !t.is_empty()) {
        rb = rb.bearer_auth(t);
    }
    if req.method == "POST" {
        rb = rb
            .header("content-type", "application/json")
            .body(req.body.clone());
    }
    // The request's own deadline; a client built with a shorter timeout keeps its own.
    let deadline = deadline_ms(req, &target.settings);
    let exchange = async {
        let resp = rb.send().await.map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| error_chain(&e))?;
        Ok::<_, String>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(Duration::from_millis(deadline), exchange)
        .await
        .map_err(|_| format!("no answer within {deadline} ms (--request-timeout-s)"))??;
    let body = if bytes.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            Value::String(format!(
                "<not JSON> {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
            ))
        }))
    };
    Ok(HttpResponse { status, body })
}
