//! The HTTP layer: one handler for every route of the protocol.
//!
//! Admission and routing and validation are the shared wire layer's (`admit`,
//! `parse_request`), so the server refuses and rejects exactly what the model does. The
//! handler admits the caller by its token (401/403 before anything else, AUTH-4), reads
//! the body (413 over the limit), parses, stamps the caller's `sub` on what it pushes
//! (AUTH-2), hands the request to the broker (pops through the long-poll loop), and
//! renders the answer: JSON with its status, or a bare 204.

use crate::broker::Broker;
use crate::config::Backoff;
use crate::longpoll;
use axum::body::{to_bytes, Body};
use axum::extract::{Request as AxumRequest, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use queen_reference::wire::{
    admit, parse_request, required, Answer, HttpRequest, ManageRequest, Request, View,
};
use std::sync::Arc;

/// What every request needs.
#[derive(Clone)]
pub struct AppState {
    pub broker: Arc<dyn Broker>,
    /// Section 14: verifies bearer tokens; `None` when authentication is off.
    pub auth: Option<Arc<crate::auth::Authenticator>>,
    pub body_limit: usize,
    pub default_timeout_ms: u64,
    pub backoff: Backoff,
    /// LIMIT-1: the most items a request carries.
    pub max_items: usize,
    /// CONN-1: how long a body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// STOP-1: turns true when the server begins to shut down; parked pops answer then.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// Operational counters and the spool's gauges (`/metrics/prometheus`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// How many queues and (group, queue) pairs get series of their own (MGMT-10).
    pub metrics_top: usize,
    /// STOP-1: requests being handled; shutdown waits for these, not for connections
    /// that are idle or still sending a head.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts one request as in flight for as long as it lives.
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn enter(n: &Arc<std::sync::atomic::AtomicUsize>) -> InFlight {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(n.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The router: every path goes to one handler, which reads the route table.
pub fn router(state: AppState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

async fn handle(State(app): State<AppState>, req: AxumRequest) -> Response {
    let _counted = InFlight::enter(&app.in_flight);
    if let Some(refusal) = oversized_head(&req) {
        return render(refusal);
    }
    let verified = match admitted(&app, &req) {
        Ok(v) => v,
        Err(refusal) => return render(Answer::error(refusal.status, refusal.message)),
    };
    if req.method() == axum::http::Method::GET && req.uri().path() == METRICS_PATH {
        return metrics_answer(&app).await;
    }
    if req.method() == axum::http::Method::GET && req.uri().path() == METRICS_JSON_PATH {
        return render(Answer::View(View::Metrics(app.metrics.json())));
    }
    let started = std::time::Instant::now();
    if req.method() == axum::http::Method::GET && req.uri().path() == OPENAPI_PATH {
        return openapi_answer();
    }
    // Everything taken from the request but its id is dropped before the broker is
    // called: a parked long poll then holds only its parsed pop, not the request's
    // headers, nor the connection's read buffer they point into.
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let mut parsed = parse(&app, req).await;
    if let (Ok(r), crate::auth::Verified::Token(p)) = (&mut parsed, &verified) {
        r.stamp_producer(p.sub.as_deref());
    }
    let op = parsed.as_ref().map_or("other", |r| r.name());
    let answer = match parsed {
        Ok(Request::Pop { route, query }) => {
            app.metrics.parked.inc();
            let answer = longpoll::pop(
                app.broker.as_ref(),
                route,
                query,
                app.backoff,
                app.stopping.clone(),
            )
            .await;
            app.metrics.parked.dec();
            answer
        }
        Ok(Request::Health) => match app.broker.call(Request::Health).await {
            Answer::Health(mut health) => {
                health.degraded = Some(app.broker.degraded());
                // HEALTH-4.
                health.version = Some(env!("CARGO_PKG_VERSION").to_string());
                health.uptime_seconds = Some(app.metrics.started.elapsed().as_secs());
                Answer::Health(health)
            }
            other => other,
        },
        Ok(req) => app.broker.call(req).await,
        Err(answer) => *answer,
    };
    if answer.status() == 500 {
        app.metrics.internal_errors.inc();
    }
    app.metrics.answered(op, answer.status(), started.elapsed());
    app.metrics.outcome(&answer);
    render(scrub_internal_error(answer, &request_id))
}

/// CONN-1: the most bytes of header lines a request may carry; a larger head is 431
/// with a JSON error, so a large token still reaches AUTH-4 below this.
pub const HEADER_LIMIT: usize = 32 * 1024;

/// The 431 for a request whose header lines pass [`HEADER_LIMIT`].
fn oversized_head(req: &AxumRequest) -> Option<Answer> {
    let bytes: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (bytes > HEADER_LIMIT).then(|| {
        Answer::error(
            431,
            format!("the request's headers hold {bytes} bytes; at most {HEADER_LIMIT} are read"),
        )
    })
}

/// AUTH-4: the request's caller, or the 401/403 to answer before the body is read.
fn admitted(
    app: &AppState,
    req: &AxumRequest,
) -> Result<crate::auth::Verified, queen_reference::wire::WireError> {
    let Some(auth) = &app.auth else {
        return Ok(crate::auth::Verified::Open);
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let verified = auth.verify(header);
    let need = required(req.method().as_str(), req.uri().path(), &auth.public);
    match admit(need, verified.caller()) {
        Ok(()) => Ok(verified),
        Err(e) => {
            match e.status {
                401 => app.metrics.unauthenticated.inc(),
                _ => app.metrics.forbidden.inc(),
            };
            Err(e)
        }
    }
}

/// Reads the body (413 over the limit, 408 when it does not arrive in time, 400 when it
/// cannot be read) and parses the request with the shared wire layer, within the item
/// limit (LIMIT-1); a refusal is the answer to send.
async fn parse(app: &AppState, req: AxumRequest) -> Result<Request, Box<Answer>> {
    let (parts, body) = req.into_parts();
    let body = match tokio::time::timeout(app.body_timeout, to_bytes(body, app.body_limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return Err(Box::new(unreadable_body(e, app.body_limit))),
        Err(_) => {
            return Err(Box::new(Answer::error(
                408,
                format!(
                    "the request body did not arrive within {} ms",
                    app.body_timeout.as_millis()
                ),
            )))
        }
    };
    let query = match parts
        .uri
        .query()
        .map(queen_reference::wire::decode_query)
        .transpose()
    {
        Ok(pairs) => pairs.unwrap_or_default(),
        Err(e) => return Err(Box::new(Answer::error(e.status, e.message))),
    };
    let http = HttpRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query,
        body: body.to_vec(),
        bearer: None,
    };
    parse_request(&http, app.default_timeout_ms, app.body_limit)
        .map_err(|e| Box::new(Answer::rejection(e, &http.method, &http.path)))
        .and_then(|req| {
            within_item_limit(req, app.max_items).inspect_err(|_| {
                app.metrics.over_item_limit.inc();
            })
        })
}

/// Where the Prometheus text exposition is served.
const METRICS_PATH: &str = "/metrics/prometheus";
/// Where the JSON metrics are served (MGMT-10).
const METRICS_JSON_PATH: &str = "/metrics";

/// The metrics, in the OpenMetrics text format Prometheus scrapes, with the deepest
/// queues and the most lagging groups read from the broker's own management views.
async fn metrics_answer(app: &AppState) -> Response {
    if let Some(pool) = app.broker.pool_stats() {
        app.metrics.set_pool(pool);
    }
    let first = queen_reference::wire::Page {
        limit: queen_reference::wire::MAX_PAGE_LIMIT,
        offset: 0,
    };
    let queues = app
        .broker
        .call(Request::Manage(ManageRequest::Queues {
            namespace: None,
            task: None,
            page: first,
        }))
        .await;
    let groups = app
        .broker
        .call(Request::Manage(ManageRequest::Groups(first)))
        .await;
    let queues = match queues {
        Answer::View(View::Queues(page)) => Some(page),
        _ => None,
    };
    let groups = match groups {
        Answer::View(View::Groups(page)) => Some(page),
        _ => None,
    };
    app.metrics.set_backlogs(queues, groups, app.metrics_top);
    let text = app
        .metrics
        .render(app.broker.spool(), app.broker.set_aside());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Where the OpenAPI document of the protocol is served.
const OPENAPI_PATH: &str = "/openapi.json";

/// The OpenAPI 3.1 document of the protocol this broker speaks, built once.
fn openapi_answer() -> Response {
    static DOC: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        queen_reference::wire::openapi::text(queen_reference::SPEC_VERSION)
    });
    ([(header::CONTENT_TYPE, "application/json")], DOC.as_str()).into_response()
}

/// ERR-1: the cause of a 500 goes to the log under the request's id, and the client
/// gets only that id, never database internals.
fn scrub_internal_error(answer: Answer, request_id: &str) -> Answer {
    if answer.status() != 500 {
        return answer;
    }
    // ENC-3: an undecryptable message is named, never sent as garbage; the text says
    // nothing of the database.
    if matches!(&answer, Answer::Error { message, .. } if message == crate::seal::UNSEALABLE) {
        tracing::error!(request_id, "{}", crate::seal::UNSEALABLE);
        return answer;
    }
    match &answer {
        Answer::Error { message, .. } => tracing::error!(request_id, "internal error: {message}"),
        other => tracing::error!(request_id, "internal error: {other:?}"),
    }
    Answer::Internal {
        request_id: request_id.to_string(),
    }
}

/// LIMIT-1: a request with more items than the limit is refused whole (413), before
/// anything is written, so one request cannot hold a writer or a transaction for long.
fn within_item_limit(req: Request, max: usize) -> Result<Request, Box<Answer>> {
    let (n, what) = match &req {
        Request::Push(p) => (p.items.len(), "push items"),
        Request::AckBatch(list) => (list.len(), "acknowledgments"),
        Request::Transaction(t) => (
            t.operations
                .iter()
                .map(|op| match op {
                    queen_reference::wire::TxnOp::Push(items) => items.len(),
                    queen_reference::wire::TxnOp::Ack(_) => 1,
                })
                .sum(),
            "transaction operations (each pushed item counted)",
        ),
        _ => return Ok(req),
    };
    if n > max {
        return Err(Box::new(Answer::error(
            413,
            format!("the request carries {n} {what}; at most {max} are allowed per request"),
        )));
    }
    Ok(req)
}

/// 413 for a body over the limit; 400 for one that could not be read at all (a
/// malformed chunked encoding, a connection cut mid-body).
fn unreadable_body(e: axum::Error, limit: usize) -> Answer {
    match e
        .into_inner()
        .downcast::<http_body_util::LengthLimitError>()
    {
        Ok(_) => Answer::error(413, format!("body exceeds the limit of {limit} bytes")),
        Err(e) => Answer::error(400, format!("the request body could not be read: {e}")),
    }
}

/// Turns an answer into an HTTP response: JSON, or nothing at all for a 204. A 503 says
/// when to try again (PUSH-10, TXN-4: the broker refuses for now, not for good).
pub fn render(answer: Answer) -> Response {
    let (status, body) = answer.into_bytes();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match body {
        None => status.into_response(),
        Some(bytes) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(bytes),
        )
            .into_response(),
    };
    // PUSH-10, TXN-4 and RET-5 refuse for now: say when to try again.
    if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}
