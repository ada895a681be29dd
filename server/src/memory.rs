//! `--engine memory`: the reference model behind the same routes.
//!
//! The model's deterministic [`Engine`] runs under a mutex with the system clock and
//! random UUIDv7 ids. Nothing is persisted and the spool is the model's own (in
//! memory); this engine exists so that the HTTP layer, the conformance suite and the
//! PostgreSQL engine can be compared against the model answer for answer.

use crate::broker::{Broker, Popped};
use crate::clock::now_ms;
use crate::wakes::Wakes;
use async_trait::async_trait;
use queen_reference::choice::Ctx;
use queen_reference::engine::{Engine, IdSource};
use queen_reference::model::{Outcome, PopRequest};
use queen_reference::policy::Policy;
use queen_reference::time::Millis;
use queen_reference::time::Stamp;
use queen_reference::wire::{Answer, PopQuery, PopRoute, Request};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Random UUIDv7s with the given timestamp.
#[derive(Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn uuid_v7(&mut self, now: Millis) -> String {
        let ts = uuid::Timestamp::from_unix(
            uuid::NoContext,
            (now / 1000) as u64,
            ((now % 1000) * 1_000_000) as u32,
        );
        uuid::Uuid::new_v7(ts).hyphenated().to_string()
    }
}

pub struct MemoryBroker {
    /// The model; one request at a time, as the model is a sequential state machine.
    engine: Mutex<Engine<RandomIds>>,
    wakes: Wakes,
    /// Requests the model panicked on (HEALTH-3).
    recoveries: crate::recoveries::Recoveries,
}

impl MemoryBroker {
    pub fn new(default_timeout_ms: u64, body_limit: usize) -> MemoryBroker {
        let mut engine = Engine::new(RandomIds);
        engine.default_timeout_ms = default_timeout_ms;
        engine.body_limit = body_limit;
        MemoryBroker {
            engine: Mutex::new(engine),
            wakes: Wakes::new(),
            recoveries: Default::default(),
        }
    }

    /// The engine, also after a request panicked while holding it: [`guarded`] put
    /// its state back, so the lock's poison says nothing about the data.
    fn engine(&self) -> MutexGuard<'_, Engine<RandomIds>> {
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The same engine deciding OPEN (and modelled PROJECT) points by `policy` instead
    /// of this project's choices: test doubles of other legal brokers.
    pub fn with_policy(self, policy: Policy) -> MemoryBroker {
        self.engine().policy = policy;
        self
    }
}

#[async_trait]
impl Broker for MemoryBroker {
    async fn call(&self, req: Request) -> Answer {
        let answer =
            guarded(&mut self.engine(), |e| e.request(&req, now_ms())).unwrap_or_else(|| {
                tracing::error!("the model panicked on a request; its state is as before it");
                self.recoveries.record("engine");
                Answer::error(500, "the engine failed on this request")
            });
        // Ring the bells of whatever may have become claimable.
        match (&req, &answer) {
            (Request::Push(p), Answer::Pushed(_)) => {
                for item in &p.items {
                    self.wakes.ring(&item.queue);
                }
            }
            (
                Request::Transaction(_)
                | Request::Ack(_)
                | Request::AckBatch(_)
                | Request::SetPushMaintenance(false)
                | Request::SetPopMaintenance(false)
                | Request::Configure(_),
                _,
            ) => self.wakes.ring_all(),
            _ => {}
        }
        answer
    }

    fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    fn degraded(&self) -> Vec<serde_json::Value> {
        self.recoveries.degraded(std::time::Instant::now())
    }

    async fn min_pop_wait(&self, queue: &str) -> std::time::Duration {
        let e = self.engine();
        let ms = e
            .state
            .queues
            .get(queue)
            .map_or(0, |q| q.options.min_pop_wait_time);
        std::time::Duration::from_millis(ms as u64)
    }

    async fn claimable(&self, route: &PopRoute, query: &PopQuery) -> u32 {
        // A pop on a copy of the state: what it would deliver, without delivering it.
        let e = self.engine();
        let mut copy = e.state.clone();
        let mut ctx = Ctx::policy(Stamp::exact(now_ms()), &e.policy);
        let req = PopRequest {
            route: route.clone(),
            query: query.clone(),
        };
        match queen_reference::model::pop::pop(&mut copy, &req, None, &mut ctx) {
            Outcome::Pop(p) => p.messages.len() as u32,
            _ => 0,
        }
    }

    /// The model's pop answer, with "empty" and "paused" (MAINT-2) told apart.
    async fn pop(&self, route: &PopRoute, query: &PopQuery) -> Popped {
        let req = Request::Pop {
            route: route.clone(),
            query: query.clone(),
        };
        match Popped::from(self.call(req).await) {
            Popped::Empty if self.engine().state.pop_maintenance => Popped::Paused,
            popped => popped,
        }
    }

    async fn pop_paused(&self) -> bool {
        self.engine().state.pop_maintenance
    }
}

/// Runs `f` on the engine; if it panics, puts the model's state and ids back as they
/// were (copies are cheap: the state is structurally shared) and answers `None`, so one
/// failing request neither takes the engine down nor leaves half its change behind.
fn guarded<R>(e: &mut Engine<RandomIds>, f: impl FnOnce(&mut Engine<RandomIds>) -> R) -> Option<R> {
    let (state, ids) = (e.state.clone(), e.ids.clone());
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(e))) {
        Ok(r) => Some(r),
        Err(_) => {
            e.state = state;
            e.ids = ids;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_reference::wire::{parse_request, HttpRequest};
    use serde_json::json;

    fn push(b: &MemoryBroker, queue: &str) -> Request {
        let http = HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": queue}]}));
        let _ = b;
        parse_request(&http, 30_000, 1 << 20).unwrap()
    }

    /// A request that panics half-way leaves the model as it was, and the next
    /// request is served; a lock poisoned by a panicking holder is recovered.
    #[tokio::test]
    async fn the_memory_engine_survives_a_panicking_request() {
        let b = MemoryBroker::new(30_000, 1 << 20);
        assert_eq!(b.call(push(&b, "before")).await.status(), 201);
        let before = b.engine().state.clone();
        let out = guarded(&mut b.engine(), |e| {
            e.request(&push(&b, "half-way"), now_ms());
            panic!("a bug in the model");
        });
        assert!(out.is_none());
        assert!(b.engine().state == before, "the half-done push is undone");
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = b.engine.lock();
                    panic!("a panic while holding the engine");
                })
                .join();
        });
        assert!(b.engine.is_poisoned());
        assert_eq!(
            b.call(push(&b, "after")).await.status(),
            201,
            "served after both"
        );
    }
}
