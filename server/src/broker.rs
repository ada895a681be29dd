//! The seam between HTTP and storage.
//!
//! Routes parse a request with the shared wire layer, hand the validated [`Request`] to
//! a [`Broker`], and render the typed [`Answer`] it returns; a pop attempt answers a
//! [`Popped`] (messages, empty, paused), which the long poll reads. Two engines
//! implement it:
//! PostgreSQL ([`crate::pg::PgBroker`]) and the reference model in memory
//! ([`crate::memory::MemoryBroker`]), so one HTTP layer serves both and they can be
//! compared answer for answer.

use crate::wakes::Wakes;
use async_trait::async_trait;
use queen_reference::wire::{Answer, PopQuery, PopResponse, PopRoute, Request};

#[async_trait]
pub trait Broker: Send + Sync + 'static {
    /// Answers one request. A pop is a single attempt: it never waits (long polling is
    /// done above, in [`crate::longpoll`]).
    async fn call(&self, req: Request) -> Answer;

    /// One pop attempt, typed, so that a long poll tells "nothing yet" from "pop
    /// maintenance is on" without asking again. The engines answer it directly; the
    /// default goes through [`Broker::call`] (so a wrapper that rewrites pop answers there
    /// keeps working) and asks [`Broker::pop_paused`] after an empty answer.
    async fn pop(&self, route: &PopRoute, query: &PopQuery) -> Popped {
        let answer = self
            .call(Request::Pop {
                route: route.clone(),
                query: query.clone(),
            })
            .await;
        match Popped::from(answer) {
            Popped::Empty if self.pop_paused().await => Popped::Paused,
            popped => popped,
        }
    }

    /// Where pushes announce themselves to parked pops.
    fn wakes(&self) -> &Wakes;

    /// Pop maintenance is on (MAINT-2), for the default [`Broker::pop`]; an engine whose
    /// pop answers [`Popped::Paused`] itself never needs it.
    async fn pop_paused(&self) -> bool {
        false
    }

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

    /// Stored messages set aside since start because no consumer could read them
    /// (POP-16); an engine that stores only what it accepted has none.
    fn set_aside(&self) -> u64 {
        0
    }

    /// The database pool's connections and its queue, for an engine that has one.
    fn pool_stats(&self) -> Option<PoolStats> {
        None
    }

    /// HEALTH-3: the components that failed and were recovered within the last minute.
    fn degraded(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// Flushes what must reach disk before the process exits (the spool).
    async fn shutdown(&self) {}
}

/// What one pop attempt found.
#[derive(Debug)]
pub enum Popped {
    /// POP-5: the claimed messages.
    Messages(PopResponse),
    /// POP-6: nothing to deliver now.
    Empty,
    /// MAINT-2: pop maintenance is on; a parked pop stops waiting.
    Paused,
    /// Any other answer: a 503 while the database is away, a 500, or what a wrapper
    /// wrote instead.
    Other(Answer),
}

impl From<Answer> for Popped {
    /// A pop's answer read back: an empty one is `Empty` (the caller knows whether pop
    /// maintenance made it `Paused`).
    fn from(answer: Answer) -> Popped {
        match answer {
            Answer::Empty => Popped::Empty,
            Answer::Popped(messages) => Popped::Messages(messages),
            other => Popped::Other(other),
        }
    }
}

impl Popped {
    /// The answer: the messages, or a bare 204 when empty or paused.
    pub fn into_answer(self) -> Answer {
        match self {
            Popped::Messages(m) => Answer::Popped(m),
            Popped::Empty | Popped::Paused => Answer::Empty,
            Popped::Other(answer) => answer,
        }
    }
}

/// A database pool as an operator watches it (MGMT-10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections open, busy or idle.
    pub open: u32,
    /// Open connections no request holds.
    pub idle: u32,
    /// Requests queued for a connection: above zero, the pool is what they wait on.
    pub waiting: u32,
}
