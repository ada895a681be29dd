//! Shared helpers for the workspace-level integration tests in `tests/`: the server's
//! test harness (`queen_server::testing`: our server on a fresh PostgreSQL database or
//! the memory engine), and an HTTP client that speaks
//! the reference model's `HttpRequest`/`HttpResponse`, timing each exchange so the
//! checker knows the interval the broker's "now" lay in.

pub mod python;

use queen_reference::time::Millis;
use queen_reference::wire::{HttpRequest, HttpResponse};

pub use queen_server::clock::now_ms;
pub use queen_server::testing::{
    memory_server, memory_server_with, pg_server, pg_server_with, TempDir, TestServer,
};

/// Sends `req` to `base` and returns the answer with the send and receive times.
pub async fn send(
    client: &reqwest::Client,
    base: &str,
    req: &HttpRequest,
) -> (HttpResponse, Millis, Millis) {
    let mut url = reqwest::Url::parse(&format!("{base}{}", req.path)).expect("url");
    if !req.query.is_empty() {
        url.query_pairs_mut().extend_pairs(req.query.iter());
    }
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).expect("method");
    let sent = now_ms();
    let r = client
        .request(method, url)
        .header("content-type", "application/json")
        .body(req.body.clone())
        .send()
        .await
        .expect("the server answers");
    let status = r.status().as_u16();
    let bytes = r.bytes().await.expect("body");
    let received = now_ms();
    let body = if bytes.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        }))
    };
    (HttpResponse { status, body }, sent, received)
}
