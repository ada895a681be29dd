//! The model as a deterministic broker: requests in, concrete answers out.
//!
//! An [`Engine`] owns a [`State`], follows a [`Policy`] at every OPEN point and mints
//! real UUIDv7 ids from an [`IdSource`]. Time is still an input: the caller passes
//! "now" with every request (the server's memory engine passes the system clock, tests
//! pass whatever they like).

use crate::choice::Ctx;
use crate::ids::IdBook;
use crate::model::{apply, Hints, State};
use crate::policy::Policy;
use crate::render::Renderer;
use crate::time::{format_iso, Millis, Stamp};
use crate::wire::{
    parse_request, Answer, HttpRequest, HttpResponse, Request, DEFAULT_POP_TIMEOUT_MS,
};

/// Where an engine gets new ids.
pub trait IdSource {
    /// A fresh UUIDv7 string for a moment `now`.
    fn uuid_v7(&mut self, now: Millis) -> String;
}

/// Deterministic UUIDv7s: the timestamp from `now`, the rest from a counter.
#[derive(Clone, Debug, Default)]
pub struct SeqIds {
    next: u64,
}

impl IdSource for SeqIds {
    fn uuid_v7(&mut self, now: Millis) -> String {
        self.next += 1;
        let mut rand = [0u8; 10];
        rand[2..].copy_from_slice(&self.next.to_be_bytes());
        uuid::Builder::from_unix_timestamp_millis(now.max(0) as u64, &rand)
            .into_uuid()
            .hyphenated()
            .to_string()
    }
}

/// A deterministic broker over the reference model.
pub struct Engine<I: IdSource = SeqIds> {
    /// The model state the engine has reached.
    pub state: State,
    /// The ids the engine has minted, tied to the model's handles.
    pub ids: IdBook,
    /// How the engine answers the points the spec leaves open.
    pub policy: Policy,
    /// Where the engine's minted ids come from.
    pub source: I,
    /// The pop `timeout` default (the broker's `DEFAULT_TIMEOUT`).
    pub default_timeout_ms: u64,
    /// The largest body accepted (413 above).
    pub body_limit: usize,
}

impl Default for Engine<SeqIds> {
    fn default() -> Self {
        Engine::new(SeqIds::default())
    }
}

impl<I: IdSource> Engine<I> {
    /// An empty broker minting ids from `source`, with the default policy, timeout and body limit.
    pub fn new(source: I) -> Engine<I> {
        Engine {
            state: State::new(),
            ids: IdBook::default(),
            policy: Policy::default(),
            source,
            default_timeout_ms: DEFAULT_POP_TIMEOUT_MS,
            body_limit: 16 << 20,
        }
    }

    /// Answers a raw HTTP request at time `now`.
    pub fn handle(&mut self, req: &HttpRequest, now: Millis) -> HttpResponse {
        // A policy playing a reading variant reads the request as such a broker would.
        let read = crate::variant::read_as(self.policy.variants, req);
        let req = read.as_ref().unwrap_or(req);
        match parse_request(req, self.default_timeout_ms, self.body_limit) {
            Ok(r) => self.request(&r, now).into_http(),
            Err(rejection) => Answer::rejection(rejection, &req.method, &req.path).into_http(),
        }
    }

    /// Answers a validated request at time `now`.
    pub fn request(&mut self, req: &Request, now: Millis) -> Answer {
        let op = self.ids.resolve(req);
        let source = &mut self.source;
        let mut minter = |_i: usize| source.uuid_v7(now);
        let mut ctx = Ctx::policy(Stamp::exact(now), &self.policy);
        let out = apply(
            &mut self.state,
            &op,
            &mut Hints {
                minter: &mut minter,
                pop_order: None,
            },
            &mut ctx,
        );
        let source = &mut self.source;
        let mut mint = |_kind: &str, _h: u32| source.uuid_v7(now);
        Renderer {
            state: &self.state,
            ids: &mut self.ids,
            policy: &self.policy,
            mint: &mut mint,
            time: &|t: Stamp| format_iso(t.lo),
        }
        .answer(&out)
    }
}
