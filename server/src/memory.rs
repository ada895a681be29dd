//! `--engine memory`: the reference model behind the same routes.
//!
//! The model's deterministic [`Engine`] runs under a mutex with the system clock and
//! random UUIDv7 ids. Nothing is persisted and the spool is the model's own (in
//! memory); this engine exists so that the HTTP layer, the conformance suite and the
//! PostgreSQL engine can be compared against the model answer for answer.

use crate::broker::Broker;
use crate::wakes::Wakes;
use async_trait::async_trait;
use queen_reference::choice::Ctx;
use queen_reference::engine::{Engine, IdSource};
use queen_reference::model::{Outcome, PopRequest};
use queen_reference::policy::Policy;
use queen_reference::time::Millis;
use queen_reference::time::Stamp;
use queen_reference::wire::{HttpResponse, PopQuery, PopRoute, Request};
use std::sync::Mutex;

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

/// The wall clock in milliseconds.
pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

pub struct MemoryBroker {
    /// The model; one request at a time, as the model is a sequential state machine.
    engine: Mutex<Engine<RandomIds>>,
    wakes: Wakes,
}

impl MemoryBroker {
    pub fn new(default_timeout_ms: u64, body_limit: usize) -> MemoryBroker {
        let mut engine = Engine::new(RandomIds);
        engine.default_timeout_ms = default_timeout_ms;
        engine.body_limit = body_limit;
        MemoryBroker {
            engine: Mutex::new(engine),
            wakes: Wakes::new(),
        }
    }

    /// The same engine deciding OPEN (and modelled PROJECT) points by `policy` instead
    /// of this project's choices: test doubles of other legal brokers.
    pub fn with_policy(self, policy: Policy) -> MemoryBroker {
        self.engine.lock().expect("engine lock").policy = policy;
        self
    }
}

#[async_trait]
impl Broker for MemoryBroker {
    async fn call(&self, req: Request) -> HttpResponse {
        let answer = self
            .engine
            .lock()
            .expect("engine lock")
            .request(&req, now_ms());
        // Ring the bells of whatever may have become claimable.
        match &req {
            Request::Push(p) if answer.status == 201 => {
                for item in &p.items {
                    self.wakes.ring(&item.queue);
                }
            }
            Request::Transaction(_)
            | Request::Ack(_)
            | Request::AckBatch(_)
            | Request::SetPushMaintenance(false) => self.wakes.ring_all(),
            Request::SetPopMaintenance(false) | Request::Configure(_) => self.wakes.ring_all(),
            _ => {}
        }
        answer
    }

    fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    async fn min_pop_wait(&self, queue: &str) -> std::time::Duration {
        let e = self.engine.lock().expect("engine lock");
        let ms = e
            .state
            .queues
            .get(queue)
            .map_or(0, |q| q.options.min_pop_wait_time);
        std::time::Duration::from_millis(ms as u64)
    }

    async fn claimable(&self, route: &PopRoute, query: &PopQuery) -> u32 {
        // A pop on a copy of the state: what it would deliver, without delivering it.
        let e = self.engine.lock().expect("engine lock");
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

    async fn pop_paused(&self) -> bool {
        self.engine
            .lock()
            .expect("engine lock")
            .state
            .pop_maintenance
    }
}
