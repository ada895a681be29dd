//! A case's conversation with the broker: every request goes out over HTTP, its send
//! and receive times are recorded, and the answer is checked against the reference
//! model before the case sees it (PROTOCOL.md section 13).
//!
//! A [`Session`] owns one [`Checker`], so every exchange of a case is checked, in the
//! order the broker committed them. Names are unique to the session (run id + case
//! number) so that cases can share a broker and run concurrently.
//!
//! The request itself goes out through [`crate::transport`]; the protocol's calls a case
//! makes on a session are in [`crate::calls`].

use crate::database::Database;
use crate::exchange::Exchange;
use crate::failure::{fail, Failure};
use crate::findings::Seen;
use crate::transport::{now_ms, transmit};
use queen_reference::checker::{Checker, StepError};
use queen_reference::time::Millis;
use queen_reference::wire::*;
use serde_json::Value;

// The crate's users (its tests and our own) reach a session's target here.
pub use crate::target::{CheckSettings, Target};

/// An exchange whose answer has arrived but is not yet checked (concurrent requests).
pub struct Pending {
    task: tokio::task::JoinHandle<(HttpRequest, Millis, Millis, Result<HttpResponse, String>)>,
}

/// A case's connection to the broker and its model.
pub struct Session {
    target: Target,
    checker: Checker,
    prefix: String,
    /// What the session is running, for a report that the broker stopped answering.
    label: String,
    transcript: Vec<Exchange>,
    seen: Vec<Seen>,
}

impl Session {
    /// A session whose names all start with `prefix` (letters and digits only).
    pub fn new(target: &Target, prefix: String) -> Session {
        let checker = target.settings.checker();
        Session {
            target: target.clone(),
            checker,
            label: prefix.clone(),
            prefix,
            transcript: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Names what this session runs (a case id) in reports.
    pub fn labelled(mut self, label: &str) -> Session {
        self.label = label.to_string();
        self
    }

    /// A queue (or group, partition) name unique to this session: `<prefix>-<label>`.
    pub fn name(&self, label: &str) -> String {
        format!("{}-{label}", self.prefix)
    }

    /// A discovery namespace only this session's queues use: queues named
    /// `<namespace>.<task>` belong to it (CFG-3 derivation).
    pub fn namespace(&self) -> String {
        self.prefix.clone()
    }

    /// The prefix of the session's queue names.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The broker the session talks to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// How many brokers the target names (CLUSTER-1).
    pub fn brokers(&self) -> usize {
        1 + self.target.more.len()
    }

    /// Sends this session's next requests to broker `k` (modulo the count), or round
    /// robin again with `None`.
    pub(crate) fn pin_broker(&mut self, k: Option<usize>) {
        self.target.pin = k;
    }

    /// The settings the answers are checked with.
    pub fn settings(&self) -> &CheckSettings {
        &self.target.settings
    }

    /// Everything exchanged so far.
    pub fn transcript(&self) -> &[Exchange] {
        &self.transcript
    }

    /// The exchanges so far.
    pub(crate) fn into_transcript(self) -> Vec<Exchange> {
        self.transcript
    }

    /// The transcript and the findings that still stand: a reading a later answer ruled
    /// out (a cause diagnosed for what turned out to be a stale read) is dropped.
    pub fn into_parts(self) -> (Vec<Exchange>, Vec<Seen>) {
        let standing = self.checker.findings();
        let seen = self
            .seen
            .into_iter()
            .filter(|s| standing.iter().any(|f| f.key() == s.finding.key()))
            .collect();
        (self.transcript, seen)
    }

    /// States of the model still consistent with every answer.
    pub(crate) fn worlds(&self) -> usize {
        self.checker.worlds().len()
    }

    /// The model checking the answers.
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// Every finding so far, each with the exchange where it was first seen.
    pub fn findings(&self) -> &[Seen] {
        &self.seen
    }

    /// Sends a request whose answer the model cannot judge (the broker's database is
    /// down: the model has no such input) and records it in the transcript unchecked;
    /// the case asserts what the spec says about it.
    pub(crate) async fn send_unchecked(
        &mut self,
        req: HttpRequest,
    ) -> Result<HttpResponse, Failure> {
        let req = self.target.authorized(req);
        let sent = now_ms();
        let answer = transmit(&self.target, &req).await;
        let received = now_ms();
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return Err(self.transport_failure(&req, e).await),
        };
        self.transcript.push(Exchange {
            request: req,
            response: answer.clone(),
            sent_ms: sent,
            received_ms: received,
            worlds: self.worlds(),
        });
        Ok(answer)
    }

    /// Tells the model that `req` (sent at `sent`, answered unchecked) took effect at
    /// some moment before `until`, with any outcome the model allows (a spooled push
    /// replayed later, PUSH-7). Later answers are checked against that.
    pub(crate) fn assume_applied(
        &mut self,
        req: &HttpRequest,
        sent: Millis,
        until: Millis,
    ) -> Result<(), Failure> {
        let step = self.transcript.len().saturating_sub(1);
        let req = self.target.authorized(req.clone());
        self.checker
            .step_unknown(&req, sent, until)
            .map(|_| ())
            .map_err(|e| Failure::Inconclusive {
                step,
                why: match e {
                    StepError::Inconclusive(why) => why,
                    StepError::Diverged(d) => d.to_string(),
                },
            })
    }

    /// The target's database control (`database-control`).
    pub fn database(&self) -> Result<Database, Failure> {
        self.target.database.clone().ok_or_else(|| {
            fail(
                "this target offers no database control (capability database-control)",
                &[],
            )
        })
    }

    /// Sends a request and checks the answer against the model.
    pub async fn send(&mut self, req: HttpRequest) -> Result<HttpResponse, Failure> {
        let req = self.target.authorized(req);
        let sent = now_ms();
        let noted = self.target.health.sent(&self.label, &req);
        let answer = transmit(&self.target, &req).await;
        let received = now_ms();
        match answer {
            Ok(a) => {
                self.target.health.answered(noted);
                self.record(req, sent, received, a)
            }
            Err(e) => {
                self.target.health.failed(noted, &e);
                self.unanswered(&req, sent, received, &e);
                Err(self.transport_failure(&req, e).await)
            }
        }
    }

    /// Sends a request without waiting for its answer (a parked long poll, POP-11).
    /// The answer is checked by [`Session::finish`]; exchanges are checked in the order
    /// `send`/`finish` are called, which must be an order the broker could have
    /// committed them in.
    pub fn start(&self, req: HttpRequest) -> Pending {
        let req = self.target.authorized(req);
        let target = self.target.clone();
        let task = tokio::spawn(async move {
            let sent = now_ms();
            let answer = transmit(&target, &req).await;
            (req, sent, now_ms(), answer)
        });
        Pending { task }
    }

    /// Waits for a started request and checks its answer. Returns the answer and the
    /// client time it arrived.
    pub async fn finish(&mut self, p: Pending) -> Result<(HttpResponse, Millis), Failure> {
        let (req, sent, received, answer) = p
            .task
            .await
            .map_err(|e| Failure::Transport(format!("request task failed: {e}")))?;
        match answer {
            Ok(a) => self.record(req, sent, received, a).map(|r| (r, received)),
            Err(e) => Err(self.transport_failure(&req, e).await),
        }
    }

    /// Keeps a request that got no answer in the transcript (status 0), so that the case's
    /// repro ends with it.
    fn unanswered(&mut self, req: &HttpRequest, sent: Millis, received: Millis, e: &str) {
        self.transcript.push(Exchange {
            request: req.clone(),
            response: HttpResponse {
                status: 0,
                body: Some(Value::String(format!(
                    "<no answer after {} ms: {e}>",
                    received - sent
                ))),
            },
            sent_ms: sent,
            received_ms: received,
            worlds: self.worlds(),
        });
    }

    /// A request that got no answer: the broker stopped answering (confirmed by the
    /// run's [`Health`](crate::health::Health), which then ends the run), or a one-off
    /// transport error.
    async fn transport_failure(&self, req: &HttpRequest, e: String) -> Failure {
        let what = format!("{} {}: {e}", req.method, req.path);
        match self
            .target
            .health
            .confirm_down(
                &self.target.client,
                &self.target.urls(),
                &self.label,
                req,
                &e,
            )
            .await
        {
            Some(down) => Failure::TargetDown(down),
            None => Failure::Transport(what),
        }
    }

    fn record(
        &mut self,
        req: HttpRequest,
        sent: Millis,
        received: Millis,
        answer: HttpResponse,
    ) -> Result<HttpResponse, Failure> {
        let step = self.transcript.len();
        let verdict = self.checker.step(&req, sent, received, &answer);
        self.transcript.push(Exchange {
            request: req,
            response: answer.clone(),
            sent_ms: sent,
            received_ms: received,
            worlds: *verdict.as_ref().unwrap_or(&0),
        });
        let expected = self.checker.last_expected().cloned();
        for f in self.checker.findings() {
            if !self.seen.iter().any(|s| s.finding.key() == f.key()) {
                self.seen.push(Seen {
                    finding: f,
                    step,
                    expected: expected.clone(),
                });
            }
        }
        match verdict {
            // The case goes on with what the broker meant: the model's answer, with the
            // broker's own ids and times.
            Ok(_) => Ok(expected.map_or(answer.clone(), |e| meant(&e, &answer))),
            Err(StepError::Diverged(d)) => Err(Failure::Diverged {
                step,
                divergence: d,
            }),
            Err(StepError::Inconclusive(why)) => Err(Failure::Inconclusive { step, why }),
        }
    }
}

/// What the broker meant by an answer the model accepted with findings: the model's own
/// answer `expected`, with each placeholder (an id or time only the broker knows) taken
/// from `actual` at the same place. A case then reads the protocol's answer whatever
/// the broker's wording, so one answer-only difference does not end every case.
fn meant(expected: &HttpResponse, actual: &HttpResponse) -> HttpResponse {
    fn fill(e: &Value, a: Option<&Value>) -> Value {
        match (e, a) {
            (Value::String(s), Some(a)) if s.starts_with('<') && s.ends_with('>') => a.clone(),
            (Value::Object(eo), Some(Value::Object(ao))) => Value::Object(
                eo.iter()
                    .map(|(k, v)| (k.clone(), fill(v, ao.get(k))))
                    .collect(),
            ),
            // An answer wrapped in a one-element array (LEASE-2 shape findings).
            (Value::Object(_), Some(Value::Array(aa))) if aa.len() == 1 => fill(e, aa.first()),
            (Value::Array(ea), Some(Value::Array(aa))) => Value::Array(
                ea.iter()
                    .enumerate()
                    .map(|(i, v)| fill(v, aa.get(i)))
                    .collect(),
            ),
            (e, _) => e.clone(),
        }
    }
    HttpResponse {
        status: expected.status,
        body: expected
            .body
            .as_ref()
            .map(|e| fill(e, actual.body.as_ref())),
    }
}
