//! A broker's answer to one request, typed, before it becomes JSON.
//!
//! Engines decide answers and HTTP renders them: an [`Answer`] is what every engine
//! (the model's, the PostgreSQL one) hands back for a [`super::Request`], and
//! [`Answer::into_http`] is the one place it is turned into a status and a body. Code
//! between the two can ask what happened ("was this push stored?", "did the pop
//! deliver?") without reading status codes, and a refusal is written once, here.

use super::{
    AckResult, ConfigureResponse, DeleteResponse, DiscoveryError, DlqResponse, ExtendResponse,
    HealthResponse, HttpResponse, MaintenanceResponse, PopMaintenanceResponse, PopResponse,
    PushResult, Rejection, TxnResponse,
};
use serde_json::{json, Value};

/// Every answer of the protocol, by meaning.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// 201: one result per pushed item, in request order (PUSH-1).
    Pushed(Vec<PushResult>),
    /// 200: the claimed messages (POP-5).
    Popped(PopResponse),
    /// 204 with no body: nothing to deliver now (POP-6).
    Empty,
    /// 200: one result per acknowledgment, single or batch (section 4).
    Acked(Vec<AckResult>),
    /// 200: a lease extend (LEASE-2).
    Extended(ExtendResponse),
    /// 200: a transaction, committed or refused as a whole (TXN-3).
    Transaction(TxnResponse),
    /// 200: a queue configured (CFG-1).
    Configured(ConfigureResponse),
    /// 200: a queue deleted (DEL-1).
    Deleted(DeleteResponse),
    /// 200: a page of dead letters (DLQ-2).
    Dlq(DlqResponse),
    /// 200: the push maintenance switch (MAINT-1).
    PushMaintenance(MaintenanceResponse),
    /// 200: the pop maintenance switch (MAINT-2).
    PopMaintenance(PopMaintenanceResponse),
    /// HEALTH-1: 200 while `status` is `healthy`, 503 otherwise.
    Health(HealthResponse),
    /// `{"error": message}` with a 4xx or 5xx status.
    Error { status: u16, message: String },
    /// ERR-1: a 500 that names only the request, whose cause went to the broker's log.
    Internal { request_id: String },
    /// The exact 400 of a discovery pop without scope (POP-10).
    DiscoveryScope,
    /// 200: a management answer (section 17), one of the views of `wire::manage`.
    View(Value),
    /// An answer already written out as it goes on the wire: what a test double that
    /// departs from the protocol on purpose returns.
    Raw(HttpResponse),
}

impl Answer {
    /// `{"error": message}` with `status`.
    pub fn error(status: u16, message: impl std::fmt::Display) -> Answer {
        Answer::Error {
            status,
            message: message.to_string(),
        }
    }

    /// The answer to a request the wire layer refused (`method` and `path` name a route
    /// that does not exist).
    pub fn rejection(rejection: Rejection, method: &str, path: &str) -> Answer {
        match rejection {
            Rejection::Bad(e) => Answer::error(e.status, e.message),
            Rejection::DiscoveryScope => Answer::DiscoveryScope,
            Rejection::NotFound => Answer::error(404, format!("no route {method} {path}")),
        }
    }

    /// The HTTP status this answer goes out with.
    pub fn status(&self) -> u16 {
        match self {
            Answer::Pushed(_) => 201,
            Answer::Empty => 204,
            Answer::Health(h) if h.status != HEALTHY => 503,
            Answer::Error { status, .. } => *status,
            Answer::Internal { .. } => 500,
            Answer::DiscoveryScope => 400,
            Answer::Raw(r) => r.status,
            _ => 200,
        }
    }

    /// The answer on the wire: its status and JSON body (none for a 204).
    pub fn into_http(self) -> HttpResponse {
        let status = self.status();
        let body = match self {
            Answer::Pushed(items) => to_value(&items),
            Answer::Popped(p) => to_value(&p),
            Answer::Empty => return HttpResponse { status, body: None },
            Answer::Acked(items) => to_value(&items),
            Answer::Extended(e) => to_value(&e),
            Answer::Transaction(t) => to_value(&t),
            Answer::Configured(c) => to_value(&c),
            Answer::Deleted(d) => to_value(&d),
            Answer::Dlq(d) => to_value(&d),
            Answer::PushMaintenance(m) => to_value(&m),
            Answer::PopMaintenance(m) => to_value(&m),
            Answer::Health(h) => to_value(&h),
            Answer::Error { message, .. } => json!({ "error": message }),
            Answer::Internal { request_id } => {
                json!({ "error": "internal error", "requestId": request_id })
            }
            Answer::DiscoveryScope => to_value(&DiscoveryError::new()),
            Answer::View(v) => v,
            Answer::Raw(r) => return r,
        };
        HttpResponse {
            status,
            body: Some(body),
        }
    }
}

/// The `status` of a broker that serves (HEALTH-1).
pub const HEALTHY: &str = "healthy";

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("wire types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WireError;

    #[test]
    fn statuses_follow_the_meaning() {
        assert_eq!(
            Answer::Internal {
                request_id: "r1".into()
            }
            .status(),
            500
        );
        let raw = HttpResponse {
            status: 418,
            body: None,
        };
        assert_eq!(Answer::Raw(raw).status(), 418);
        assert_eq!(Answer::Pushed(vec![]).status(), 201);
        assert_eq!(Answer::Acked(vec![]).status(), 200);
        assert_eq!(
            Answer::Empty.into_http(),
            HttpResponse {
                status: 204,
                body: None
            }
        );
        let sick = HealthResponse::new("unhealthy", "disconnected");
        assert_eq!(Answer::Health(sick).status(), 503);
        assert_eq!(
            Answer::Health(HealthResponse::new(HEALTHY, "connected")).status(),
            200
        );
    }

    #[test]
    fn a_refusal_is_written_once() {
        let bad = Answer::rejection(Rejection::Bad(WireError::bad("no")), "POST", "/x");
        assert_eq!(bad.into_http().body, Some(json!({"error": "no"})));
        let missing = Answer::rejection(Rejection::NotFound, "GET", "/nowhere").into_http();
        assert_eq!(missing.status, 404);
        assert_eq!(
            missing.body,
            Some(json!({"error": "no route GET /nowhere"}))
        );
        let scope = Answer::rejection(Rejection::DiscoveryScope, "GET", "/").into_http();
        assert_eq!(
            (scope.status, scope.body),
            (
                400,
                Some(
                    json!({"success": false, "error": "namespace or task is required", "messages": []})
                )
            )
        );
    }
}
