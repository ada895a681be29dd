//! The seam between HTTP and storage.
//!
//! Routes parse a request with the shared wire layer, hand the validated [`Request`] to
//! a [`Broker`], and render the [`HttpResponse`] it returns. Two engines implement it:
//! PostgreSQL ([`crate::pg::PgBroker`]) and the reference model in memory
//! ([`crate::memory::MemoryBroker`]), so one HTTP layer serves both and they can be
//! compared answer for answer.

use crate::wakes::Wakes;
use async_trait::async_trait;
use queen_reference::wire::{HttpResponse, PopQuery, PopRoute, Request};
use serde_json::json;

#[async_trait]
pub trait Broker: Send + Sync + 'static {
    /// Answers one request. A pop is a single attempt: it never waits (long polling is
    /// done above, in [`crate::longpoll`]).
    async fn call(&self, req: Request) -> HttpResponse;

    /// Where pushes announce themselves to parked pops.
    fn wakes(&self) -> &Wakes;

    /// Pop maintenance is on (MAINT-2): parked pops stop waiting.
    async fn pop_paused(&self) -> bool;

    /// POP-15: how long an under-full batch on `queue` may be held back to fill.
    /// The default: never (an engine that does not implement POP-15's "may").
    async fn min_pop_wait(&self, _queue: &str) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// How many messages a pop with this query could take right now, without taking
    /// them (POP-15 decides with it whether a batch is under-full).
    async fn claimable(&self, _route: &PopRoute, _query: &PopQuery) -> u32 {
        0
    }

    /// The on-disk spool's state, for an engine that has one (HEALTH-2, metrics).
    fn spool(&self) -> Option<crate::spool::SpoolState> {
        None
    }

    /// HEALTH-3: the components that failed and were recovered within the last minute.
    fn degraded(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// Flushes what must reach disk before the process exits (the spool).
    async fn shutdown(&self) {}
}

/// A JSON answer.
pub fn json_answer(status: u16, body: serde_json::Value) -> HttpResponse {
    HttpResponse {
        status,
        body: Some(body),
    }
}

/// `{"error": message}` with a status.
pub fn error_answer(status: u16, message: impl std::fmt::Display) -> HttpResponse {
    json_answer(status, json!({ "error": message.to_string() }))
}

/// The bare 204 of POP-6.
pub fn empty_answer() -> HttpResponse {
    HttpResponse {
        status: 204,
        body: None,
    }
}
