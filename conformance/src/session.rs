//! A case's conversation with the broker: every request goes out over HTTP, its send
//! and receive times are recorded, and the answer is checked against the reference
//! model before the case sees it (PROTOCOL.md section 13).
//!
//! A [`Session`] owns one [`Checker`], so every exchange of a case is checked, in the
//! order the broker committed them. Names are unique to the session (run id + case
//! number) so that cases can share a broker and run concurrently.

use crate::database::Database;
use crate::exchange::Exchange;
use crate::failure::Failure;
use crate::health::Health;
use queen_reference::checker::{Checker, StepError};
use queen_reference::finding::{Accept, Finding, Kind};
use queen_reference::rules::{RuleId, ACK_0, POP_2};
use queen_reference::time::Millis;
use queen_reference::wire::*;
use serde_json::{json, Value};
use std::time::Duration;

/// The waits between pops asked again (see [`Session::pop`]): 3.1 s in all, the bound
/// section 13 gives an effect the spec does not time.
pub const POLL_STEPS_MS: [u64; 5] = [100, 200, 400, 800, 1600];

/// How the model is told about the broker: clock skew and the broker's limits.
#[derive(Clone, Debug)]
pub struct CheckSettings {
    /// Milliseconds the broker's clock may differ from ours.
    pub skew_ms: Millis,
    /// The broker's default long-poll `timeout` (its `DEFAULT_TIMEOUT`).
    pub default_timeout_ms: u64,
    /// The broker's body limit in bytes (413 above it, PUSH-8).
    pub body_limit: usize,
    /// Hold the broker to every PROJECT decision (`--strict`; our own tests). When
    /// false the model accepts departures on PROJECT points and the session collects
    /// them as findings for the report.
    pub strict_project: bool,
    /// An answer that differs only in what it says is a finding and the case goes on
    /// (`--keep-going`, the default against `--target`); else it ends the case.
    pub keep_going: bool,
    /// Deviations declared known (`--accept RULE-ID[:kind]`): allowed everywhere.
    pub accept: Vec<Accept>,
    /// The broker has authentication on (section 14): what each of the suite's tokens
    /// stands for. `None`: it is off and no token is sent.
    pub auth: Option<std::sync::Arc<TokenBook>>,
    /// RET-3: the broker's retention interval in ms (`--retention-interval-ms`).
    pub retention_lag_ms: Millis,
    /// How long a request may go unanswered before it is a finding of its own
    /// (`--request-timeout-s`); a long poll gets its `timeout` on top.
    pub request_timeout_ms: u64,
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            skew_ms: 5,
            default_timeout_ms: DEFAULT_POP_TIMEOUT_MS,
            body_limit: 16 << 20,
            strict_project: true,
            keep_going: false,
            accept: Vec::new(),
            auth: None,
            retention_lag_ms: queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS,
            request_timeout_ms: 15_000,
        }
    }
}

/// Where the broker is and how to talk to it; shared by every session of a run.
#[derive(Clone, Debug)]
pub struct Target {
    pub url: String,
    /// Further brokers of the same system (`--target A,B,...`): requests go round robin
    /// over `url` and these, so one session's calls reach different brokers.
    pub more: Vec<String>,
    /// The round robin's position, shared by the clones of this target.
    turn: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Every request to this one broker (its index, modulo the count) instead.
    pub pin: Option<usize>,
    pub client: reqwest::Client,
    pub settings: CheckSettings,
    /// The broker's database, when the suite may stop and start it (`database-control`).
    pub database: Option<Database>,
    /// Whether the broker still answers, shared by every session of the run.
    pub health: std::sync::Arc<Health>,
    /// The tokens the suite holds when the broker has authentication on.
    pub tokens: Option<std::sync::Arc<crate::auth::Tokens>>,
}

impl Target {
    pub fn new(url: &str, settings: CheckSettings) -> Target {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build()
            .expect("an HTTP client without TLS builds");
        let mut urls = url
            .split(',')
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        Target {
            url: urls.next().unwrap_or_default(),
            more: urls.collect(),
            turn: Default::default(),
            pin: None,
            client,
            settings,
            database: None,
            health: Default::default(),
            tokens: None,
        }
    }

    /// Every broker's base URL.
    pub fn urls(&self) -> Vec<&str> {
        std::iter::once(self.url.as_str())
            .chain(self.more.iter().map(String::as_str))
            .collect()
    }

    /// The broker the next request goes to.
    pub fn base(&self) -> &str {
        if self.more.is_empty() {
            return &self.url;
        }
        let i = match self.pin {
            Some(k) => k,
            None => self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        match i % (self.more.len() + 1) {
            0 => &self.url,
            k => &self.more[k - 1],
        }
    }

    /// One target per broker, sharing everything else (clients of the concurrent
    /// workload each keep to one broker, spread over them).
    pub fn each(&self) -> Vec<Target> {
        self.urls()
            .into_iter()
            .map(|u| Target {
                url: u.to_string(),
                more: vec![],
                turn: Default::default(),
                pin: None,
                ..self.clone()
            })
            .collect()
    }

    /// `req` with the suite's default token (admin) when it names none and the broker
    /// has authentication on: every request the suite sends goes through here.
    pub fn authorized(&self, mut req: HttpRequest) -> HttpRequest {
        if let (None, Some(t)) = (&req.bearer, &self.tokens) {
            req.bearer = Some(t.admin.clone());
        }
        req
    }
}

/// The client's wall clock in milliseconds since the epoch.
pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// An exchange whose answer has arrived but is not yet checked (concurrent requests).
pub struct Pending {
    task: tokio::task::JoinHandle<(HttpRequest, Millis, Millis, Result<HttpResponse, String>)>,
}

/// How long `req` may wait for its answer: the request timeout, and a long poll's own
/// `timeout` on top.
pub fn deadline_ms(req: &HttpRequest, settings: &CheckSettings) -> u64 {
    let q = |k: &str| {
        req.query
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
    };
    let parked = match q("wait") {
        Some("true") => q("timeout")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(settings.default_timeout_ms),
        _ => 0,
    };
    settings.request_timeout_ms + parked
}

/// Sends one request; never panics on a broker's misbehaviour.
/// An error with its causes ("error sending request ...: ...: Connection refused"):
/// the cause tells a call that never reached the broker from one whose answer was lost.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(&format!(": {c}"));
        cause = c.source();
    }
    s
}

pub async fn transmit(target: &Target, req: &HttpRequest) -> Result<HttpResponse, String> {
    let base = target.base();
    let mut url = reqwest::Url::parse(&format!("{base}{}", req.path))
        .map_err(|e| format!("bad URL {base}{}: {e}", req.path))?;
    if !req.query.is_empty() {
        let mut q = url.query_pairs_mut();
        for (k, v) in &req.query {
            q.append_pair(k, v);
        }
    }
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut rb = target.client.request(method, url);
    let default = target.tokens.as_ref().map(|t| t.admin.as_str());
    if let Some(t) = req.bearer.as_deref().or(default).filter(|t| !t.is_empty()) {
        rb = rb.bearer_auth(t);
    }
    if req.method == "POST" {
        rb = rb
            .header("content-type", "application/json")
            .body(req.body.clone());
    }
    // The request's own deadline; a client built with a shorter timeout keeps its own.
    let deadline = deadline_ms(req, &target.settings);
    let exchange = async {
        let resp = rb.send().await.map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| error_chain(&e))?;
        Ok::<_, String>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(Duration::from_millis(deadline), exchange)
        .await
        .map_err(|_| format!("no answer within {deadline} ms (--request-timeout-s)"))??;
    let body = if bytes.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            Value::String(format!(
                "<not JSON> {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
            ))
        }))
    };
    Ok(HttpResponse { status, body })
}

/// A finding as first seen by a session: at which exchange, and the model's answer there.
#[derive(Clone, Debug)]
pub struct Seen {
    pub finding: Finding,
    /// Index of the exchange in the session's transcript.
    pub step: usize,
    /// What the model would have answered (with placeholders for what only the broker
    /// knows); `None` for a PROJECT alternative explored without an answer of its own.
    pub expected: Option<HttpResponse>,
}

/// A finding with what reproduces it: the transcript of the case (or sequence) up to and
/// including the exchange where it was first seen.
#[derive(Clone, Debug)]
pub struct Example {
    pub seen: Seen,
    /// Where it was seen: a case id, or the lockstep run.
    pub origin: String,
    /// The case's name prefix (curl scripts make it fresh).
    pub prefix: String,
    pub transcript: Vec<Exchange>,
}

impl Example {
    /// One example per finding of `seen`, cut from `transcript`.
    pub fn all(seen: &[Seen], transcript: &[Exchange], prefix: &str, origin: &str) -> Vec<Example> {
        seen.iter()
            .map(|s| Example {
                seen: s.clone(),
                origin: origin.to_string(),
                prefix: prefix.to_string(),
                transcript: transcript[..(s.step + 1).min(transcript.len())].to_vec(),
            })
            .collect()
    }
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
        let mut checker = Checker::new();
        checker.skew_ms = target.settings.skew_ms;
        checker.default_timeout_ms = target.settings.default_timeout_ms;
        checker.body_limit = target.settings.body_limit;
        checker.strict_project = target.settings.strict_project;
        checker.keep_going = target.settings.keep_going;
        checker.accept = target.settings.accept.clone();
        checker.auth = target.settings.auth.clone();
        checker.diagnose = true;
        checker.set_retention_lag(target.settings.retention_lag_ms);
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

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// How many brokers the target names (CLUSTER-1).
    pub fn brokers(&self) -> usize {
        1 + self.target.more.len()
    }

    /// Sends this session's next requests to broker `k` (modulo the count), or round
    /// robin again with `None`.
    pub fn pin_broker(&mut self, k: Option<usize>) {
        self.target.pin = k;
    }

    pub fn settings(&self) -> &CheckSettings {
        &self.target.settings
    }

    /// Everything exchanged so far.
    pub fn transcript(&self) -> &[Exchange] {
        &self.transcript
    }

    pub fn into_transcript(self) -> Vec<Exchange> {
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
    pub fn worlds(&self) -> usize {
        self.checker.worlds().len()
    }

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
    pub async fn send_unchecked(&mut self, req: HttpRequest) -> Result<HttpResponse, Failure> {
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
    pub fn assume_applied(
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
    /// run's [`Health`], which then ends the run), or a one-off transport error.
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

    // ---- helpers speaking the protocol; each answer is already checked ----

    pub async fn get(
        &mut self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::get(path, query)).await
    }

    pub async fn post(&mut self, path: &str, body: Value) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::post(path, &body)).await
    }

    pub async fn post_raw(
        &mut self,
        path: &str,
        body: impl Into<Vec<u8>>,
    ) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::post_raw(path, body)).await
    }

    /// Pushes `items` (a JSON array) and returns the 201 results.
    pub async fn push(&mut self, items: Value) -> Result<Vec<PushResult>, Failure> {
        let r = self.post("/api/v1/push", json!({ "items": items })).await?;
        decode(&r, 201, "push")
    }

    /// Pushes one message with a transactionId and payload `{"txn": txn}`.
    pub async fn push1(
        &mut self,
        queue: &str,
        partition: &str,
        txn: &str,
    ) -> Result<PushResult, Failure> {
        let mut r = self
            .push(json!([{"queue": queue, "partition": partition, "transactionId": txn, "payload": {"txn": txn}}]))
            .await?;
        Ok(r.remove(0))
    }

    /// Pushes `txns` to one partition in one call.
    pub async fn push_many(
        &mut self,
        queue: &str,
        partition: &str,
        txns: &[&str],
    ) -> Result<Vec<PushResult>, Failure> {
        let items: Vec<Value> = txns
            .iter()
            .map(|t| json!({"queue": queue, "partition": partition, "transactionId": t, "payload": {"txn": t}}))
            .collect();
        self.push(Value::Array(items)).await
    }

    /// A pop on any route: `None` for the 204. A pop without `batch` asks for the
    /// protocol's default (200) by name: a case relies on a default only where it is
    /// about it (`pop-3/defaults-...`, which sends its pops raw).
    pub async fn pop(
        &mut self,
        route: PopRoute,
        query: &[(&str, &str)],
    ) -> Result<Option<PopResponse>, Failure> {
        let mut q: Vec<(&str, &str)> = query.to_vec();
        if !q.iter().any(|(k, _)| *k == "batch") {
            q.push(("batch", "200"));
        }
        let (ns, task);
        if let PopRoute::Discovery { namespace, task: t } = &route {
            if let Some(n) = namespace {
                ns = n.clone();
                q.push(("namespace", &ns));
            }
            if let Some(t) = t {
                task = t.clone();
                q.push(("task", &task));
            }
        }
        // A broker that claimed nothing although messages were claimable (a finding,
        // POP-2), one with a diagnosed cause (a lease kept too long), or one that may not
        // yet deliver what the spec does not time (a retry delay ending inside the
        // request's interval) is asked again for up to `POLL_MS`, as a client would, so
        // that the case goes on to check its own rules.
        let mut r = self.get(&route.path(), &q).await?;
        for wait_ms in POLL_STEPS_MS {
            let kept = self.seen.iter().any(|s| s.finding.kind == Kind::Cause);
            let undecided = self.checker.last_empty_undecided();
            if r.status != 204 || !(self.checker.last_claim_short() || kept || undecided) {
                break;
            }
            sleep_ms(wait_ms).await;
            r = self.get(&route.path(), &q).await?;
        }
        if r.status == 204 {
            return Ok(None);
        }
        decode(&r, 200, "pop").map(Some)
    }

    /// A queue-route pop.
    pub async fn pop_q(
        &mut self,
        queue: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<PopResponse>, Failure> {
        self.pop(PopRoute::Queue(queue.into()), query).await
    }

    /// A queue-route pop that must deliver.
    pub async fn pop_some(
        &mut self,
        queue: &str,
        query: &[(&str, &str)],
    ) -> Result<PopResponse, Failure> {
        self.pop_q(queue, query).await?.ok_or_else(|| {
            fail(
                "the pop answered 204 where messages were expected",
                &[POP_2],
            )
        })
    }

    /// `POST /api/v1/ack/batch`.
    pub async fn ack_batch(
        &mut self,
        group: Option<&str>,
        acks: Vec<Value>,
    ) -> Result<Vec<AckResult>, Failure> {
        let mut body = json!({ "acknowledgments": acks });
        if let Some(g) = group {
            body["consumerGroup"] = json!(g);
        }
        let r = self.post("/api/v1/ack/batch", body).await?;
        decode(&r, 200, "ack")
    }

    /// `POST /api/v1/ack` with one acknowledgment.
    pub async fn ack(&mut self, body: Value) -> Result<AckResult, Failure> {
        let r = self.post("/api/v1/ack", body).await?;
        let mut v: Vec<AckResult> = decode(&r, 200, "ack")?;
        if v.len() != 1 {
            return Err(fail("a single ack must answer one result", &[ACK_0]));
        }
        Ok(v.remove(0))
    }

    /// `POST /api/v1/configure`.
    pub async fn configure(
        &mut self,
        queue: &str,
        options: Value,
    ) -> Result<ConfigureResponse, Failure> {
        let r = self
            .post(
                "/api/v1/configure",
                json!({"queue": queue, "options": options}),
            )
            .await?;
        decode(&r, 200, "configure")
    }

    /// `POST /api/v1/lease/{id}/extend` with an optional `seconds`.
    pub async fn extend(
        &mut self,
        lease: &str,
        seconds: Option<u32>,
    ) -> Result<ExtendResponse, Failure> {
        let body = seconds.map_or(vec![], |s| format!("{{\"seconds\":{s}}}").into_bytes());
        let r = self
            .post_raw(
                &format!("/api/v1/lease/{}/extend", encode_segment(lease)),
                body,
            )
            .await?;
        decode(&r, 200, "extend")
    }

    /// `GET /api/v1/dlq` with filters.
    pub async fn dlq(&mut self, query: &[(&str, &str)]) -> Result<DlqResponse, Failure> {
        let r = self.get("/api/v1/dlq", query).await?;
        decode(&r, 200, "dlq")
    }

    /// `DELETE /api/v1/resources/queues/{queue}`.
    pub async fn delete(&mut self, queue: &str) -> Result<DeleteResponse, Failure> {
        let r = self
            .send(HttpRequest::delete(format!(
                "/api/v1/resources/queues/{}",
                encode_segment(queue)
            )))
            .await?;
        decode(&r, 200, "delete")
    }

    /// `POST /api/v1/transaction`.
    pub async fn transaction(&mut self, body: Value) -> Result<TxnResponse, Failure> {
        let r = self.post("/api/v1/transaction", body).await?;
        decode(&r, 200, "transaction")
    }

    /// Sends a request that must be rejected with `status` (400 or 413), checked by the
    /// model (which also proves nothing changed: later answers are judged on the
    /// unchanged state).
    pub async fn rejected(
        &mut self,
        req: HttpRequest,
        status: u16,
    ) -> Result<HttpResponse, Failure> {
        let what = format!("{} {}", req.method, req.path);
        let r = self.send(req).await?;
        if r.status != status {
            // The case that sends it names the rules; the model has judged the answer.
            return Err(fail(
                format!("{what} answered {} where {status} is expected", r.status),
                &[],
            ));
        }
        Ok(r)
    }
}

/// An explicit assertion failure naming rules.
pub fn fail(message: impl Into<String>, rules: &[RuleId]) -> Failure {
    Failure::Assertion {
        message: message.into(),
        rules: rules.to_vec(),
    }
}

/// The answer's body as `T`, after checking its status (the model has already
/// accepted the answer, so this fails only when the case's scenario went elsewhere).
pub fn decode<T: serde::de::DeserializeOwned>(
    r: &HttpResponse,
    status: u16,
    what: &str,
) -> Result<T, Failure> {
    // The model has judged the exact status already; a case reads any answer of the class.
    if r.status / 100 != status / 100 {
        return Err(fail(
            format!(
                "{what} answered {} where {status} is expected: {}",
                r.status,
                r.body
                    .as_ref()
                    .map_or("(no body)".into(), |b| b.to_string())
            ),
            &[],
        ));
    }
    serde_json::from_value(r.body.clone().unwrap_or(Value::Null))
        .map_err(|e| fail(format!("{what} answer does not parse: {e}"), &[]))
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

/// Acknowledgments for every message of a pop, with its lease, all with `status`.
pub fn acks_for(p: &PopResponse, status: &str) -> Vec<Value> {
    p.messages
        .iter()
        .map(|m| {
            json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": status})
        })
        .collect()
}

/// The transactionIds of a pop's messages, in order.
pub fn txns(p: &Option<PopResponse>) -> Vec<String> {
    p.as_ref()
        .map(|p| {
            p.messages
                .iter()
                .map(|m| m.transaction_id.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Sleeps `ms` milliseconds.
pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
