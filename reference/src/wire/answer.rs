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
    PushResult, Rejection, TxnResponse, View,
};
use serde_json::json;

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
    Error {
        /// The HTTP status, 4xx or 5xx.
        status: u16,
        /// The `error` text of the body.
        message: String,
    },
    /// ERR-1: a 500 that names only the request, whose cause went to the broker's log.
    Internal {
        /// The `requestId` the body carries and the broker's log names the cause under.
        request_id: String,
    },
    /// The exact 400 of a discovery pop without scope (POP-10).
    DiscoveryScope,
    /// 200: a management answer (section 17), typed by route.
    View(View),
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
    pub(crate) fn into_http(self) -> HttpResponse {
        let status = self.status();
        let body = match self {
            Answer::Empty => None,
            Answer::Raw(r) => return r,
            a => Some(serde_json::to_value(Body(&a)).expect("wire types serialize")),
        };
        HttpResponse { status, body }
    }

    /// The answer as it is sent: its status and the body's bytes (none for a 204),
    /// written straight from the typed answer, so a payload's text goes out as it came
    /// in (POP-5) and no tree of it is ever built.
    pub fn into_bytes(self) -> (u16, Option<Vec<u8>>) {
        let status = self.status();
        let body = match self {
            Answer::Empty => None,
            Answer::Raw(r) => r.body.as_ref().map(to_bytes),
            a => Some(to_bytes(&Body(&a))),
        };
        (status, body)
    }
}

fn to_bytes<T: serde::Serialize>(t: &T) -> Vec<u8> {
    serde_json::to_vec(t).expect("wire types serialize")
}

/// The JSON body of an answer that has one.
struct Body<'a>(&'a Answer);

impl serde::Serialize for Body<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Answer::Pushed(items) => items.serialize(s),
            Answer::Popped(p) => p.serialize(s),
            Answer::Acked(items) => items.serialize(s),
            Answer::Extended(e) => e.serialize(s),
            Answer::Transaction(t) => t.serialize(s),
            Answer::Configured(c) => c.serialize(s),
            Answer::Deleted(d) => d.serialize(s),
            Answer::Dlq(d) => d.serialize(s),
            Answer::PushMaintenance(m) => m.serialize(s),
            Answer::PopMaintenance(m) => m.serialize(s),
            Answer::Health(h) => h.serialize(s),
            Answer::Error { message, .. } => json!({ "error": message }).serialize(s),
            Answer::Internal { request_id } => {
                json!({ "error": "internal error", "requestId": request_id }).serialize(s)
            }
            Answer::DiscoveryScope => DiscoveryError::new().serialize(s),
            Answer::View(v) => v.serialize(s),
            Answer::Raw(r) => r.body.serialize(s),
            Answer::Empty => s.serialize_unit(),
        }
    }
}

/// The `status` of a broker that serves (HEALTH-1).
pub const HEALTHY: &str = "healthy";

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
