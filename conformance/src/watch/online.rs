//! The online checker: each queue's calls judged by the model as they complete, in
//! bounded memory.
//!
//! A queue's calls are cut into stretches at quiescent points, moments when no call on
//! that queue is in flight. When a stretch closes, a search tries every order of its
//! calls that real time allows (a call cannot come after one that completed before it
//! was sent) and keeps the model states of every order the model accepts: the worlds
//! carried to the next stretch. Nothing else of the stretch is kept, so memory follows
//! the calls in flight and the worlds kept, not the length of the traffic. A stretch
//! whose orders pass the search's budget, or whose worlds pass the model's bound, leaves
//! its queue `undecided` from there on, with the reason; the other queues go on.

use super::attribute::{Learnt, Touch};
use super::record::Record;
use crate::exchange::curl_one;
use crate::target::CheckSettings;
use queen_reference::checker::{Checker, Divergence, StepError};
use queen_reference::finding::Finding;
use queen_reference::rules::{level_of, Level, RuleId};
use queen_reference::time::Millis;
use queen_reference::wire::{parse_pop_query, parse_request, PopQuery, RouteId, QUEUE_MODE};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// Model steps one stretch's search may take before its queue is undecided.
pub const STRETCH_BUDGET: u64 = 20_000;

/// Calls of one stretch before its queue is undecided: a queue that is never quiet
/// would otherwise keep its calls in memory without end.
pub const STRETCH_CALLS: usize = 2_000;

/// Exchanges of a queue a diagnosis may replay (the latest ones, from a quiescent point).
const DIAGNOSIS_WINDOW: usize = 400;

/// Exchanges of a queue kept for a finding's transcript (the latest ones).
const RECENT: usize = 12;

/// How a queue's traffic is judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", content = "why", rename_all = "camelCase")]
pub enum QueueVerdict {
    /// Every call so far is one the model allows (with the findings listed).
    Checked,
    /// The watcher cannot know the queue's state from some call on: not judged since.
    Unknown(String),
    /// The search could not decide a stretch: not judged since.
    Undecided(String),
    /// A call no allowed behaviour explains: not judged after it.
    Violated(String),
}

/// A departure found on watched traffic.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchFinding {
    /// The queue whose traffic shows it ("" for a request judged on its own).
    pub queue: String,
    /// The rules it breaks.
    pub rules: Vec<RuleId>,
    /// The level that decides whether it fails the watch.
    pub level: Level,
    /// `divergence` (no allowed behaviour explains a call) or the finding's kind.
    pub kind: String,
    /// One line: what the broker did.
    pub summary: String,
    /// The model's reasons, expected answers and the broker's.
    pub details: String,
    /// The queue's latest exchanges, the offending one last.
    pub exchanges: Vec<Record>,
    /// The offending request as a curl command line.
    pub curl: String,
}

/// Counts of the watched traffic.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Exchanges completed.
    pub exchanges: u64,
    /// Exchanges judged by a queue's model (or on their own, for a rejected request).
    pub checked: u64,
    /// Exchanges not judged, by reason.
    pub not_checked: BTreeMap<String, u64>,
    /// Queues deleted during the watch with nothing found on them: their models are
    /// dropped, and a queue of the same name later starts afresh.
    pub retired: u64,
}

/// One completed call of an open stretch.
#[derive(Clone)]
struct Done {
    record: Record,
    /// The answer is compared; false for a broker-wide write applied to every queue.
    compared: bool,
}

/// One watched queue.
struct Queue {
    model: Checker,
    verdict: QueueVerdict,
    in_flight: BTreeSet<u64>,
    stretch: Vec<Done>,
    reported: HashSet<Finding>,
    recent: VecDeque<Record>,
    checked: u64,
}

/// A call in flight: what it touches.
struct Call {
    touch: Touch,
}

/// Every queue's model, the calls in flight and what was learnt.
pub struct Online {
    settings: CheckSettings,
    learnt: Learnt,
    queues: BTreeMap<String, Queue>,
    calls: HashMap<u64, Call>,
    /// The latest broker-wide write of each route and path (a maintenance switch's last
    /// setting), applied to a queue's model when the queue is first seen.
    prelude: BTreeMap<(String, String), Record>,
    /// Counts of the traffic so far.
    pub counts: Counts,
    /// Findings made so far, in order.
    pub findings: Vec<WatchFinding>,
    /// The base URL curl lines name.
    base: String,
}

impl Online {
    /// A checker of a broker reached at `base`, judged as `settings` says.
    pub fn new(settings: CheckSettings, base: &str) -> Online {
        Online {
            settings,
            learnt: Learnt::default(),
            queues: BTreeMap::new(),
            calls: HashMap::new(),
            prelude: BTreeMap::new(),
            counts: Counts::default(),
            findings: Vec::new(),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The queues a request would see for the first time (to ask the broker whether
    /// they existed before the watcher did).
    pub fn unseen(&self, req: &queen_reference::wire::HttpRequest) -> Vec<String> {
        let named = match self.learnt.touch(req) {
            Touch::Queue(q) => vec![q],
            Touch::Many { queues, .. }
            | Touch::Discovery { queues }
            | Touch::Push { queues }
            | Touch::Transaction { queues }
            | Touch::AckBatch { queues } => queues.into_iter().collect(),
            _ => vec![],
        };
        named
            .into_iter()
            .filter(|q| !self.queues.contains_key(q))
            .collect()
    }

    /// Each queue's verdict.
    pub fn verdicts(&self) -> Vec<(String, QueueVerdict, u64)> {
        self.queues
            .iter()
            .map(|(n, q)| (n.clone(), q.verdict.clone(), q.checked))
            .collect()
    }

    /// A call reached the watcher (`record` without its answer); `existed`: the queues
    /// first seen with it that the broker already had.
    pub fn invoke(&mut self, record: &Record, existed: &[String]) {
        for q in existed {
            self.queue(q);
            let why = "it existed before the watcher started: its contents are unknown";
            self.forget(q, why.to_string());
        }
        let touch = self.learnt.touch(&record.request());
        match &touch {
            Touch::Queue(q) => {
                self.queue(q).in_flight.insert(record.id);
            }
            Touch::Many { queues, why } => {
                for q in queues.clone() {
                    self.queue(&q);
                    self.forget(&q, format!("{why} (call #{})", record.id));
                }
            }
            Touch::Discovery { queues }
            | Touch::Push { queues }
            | Touch::Transaction { queues }
            | Touch::AckBatch { queues } => {
                for q in queues {
                    self.queue(q).in_flight.insert(record.id);
                }
            }
            Touch::Broker => {
                for q in self.queues.values_mut() {
                    q.in_flight.insert(record.id);
                }
            }
            Touch::Nothing(_) => {}
        }
        self.calls.insert(record.id, Call { touch });
    }

    /// The call's answer came (or it never will): judges what can be judged. Returns how
    /// many findings were added.
    pub fn complete(&mut self, record: &Record) -> usize {
        let before = self.findings.len();
        self.counts.exchanges += 1;
        let Some(call) = self.calls.remove(&record.id) else {
            self.skip("an answer to a call the watcher did not see sent");
            return 0;
        };
        if refused_by_auth(record) && self.settings.auth.is_none() {
            self.release(record.id, &call.touch);
            self.skip("refused by authentication (401/403), which the watcher does not model");
            return 0;
        }
        let writes = matches!(
            call.touch,
            Touch::Queue(_) | Touch::Push { .. } | Touch::Transaction { .. }
        );
        if writes && writes_with_token(record) && self.settings.auth.is_none() {
            self.token_write(record, &call.touch);
            return 0;
        }
        match call.touch {
            Touch::Queue(q) => {
                self.learn(&q, record);
                self.add(&q, record, true);
                self.retire_if_deleted(&q, record);
            }
            Touch::Broker => {
                let key = (record.method.clone(), record.path.clone());
                self.prelude.insert(key, record.clone());
                let names: Vec<String> = self.queues.keys().cloned().collect();
                for q in names {
                    self.add(&q, record, false);
                }
            }
            Touch::Discovery { queues } => self.discovery_done(record, &queues),
            Touch::Push { queues } => self.push_done(record, &queues),
            Touch::Transaction { queues } => self.transaction_done(record, &queues),
            Touch::AckBatch { queues } => self.acks_done(record, &queues),
            Touch::Nothing(why) => self.alone(record, why),
            _ if self.answered_outside_any_state(record) => self.status_outside_any_state(record),
            Touch::Many { why, .. } => self.alone(record, why),
        }
        self.findings.len() - before
    }

    /// A write under a token: a broker with authentication on stamps its messages with
    /// the token's `sub` (AUTH-2), which the watcher cannot read, so every queue it writes
    /// becomes unknown.
    fn token_write(&mut self, record: &Record, touch: &Touch) {
        let why = "a push with a token: its messages carry the token's sub (AUTH-2), which the watcher does not know";
        self.release(record.id, touch);
        let written: Vec<String> = match touch {
            Touch::Queue(q) => vec![q.clone()],
            Touch::Push { queues } | Touch::Transaction { queues } => {
                queues.iter().cloned().collect()
            }
            _ => return,
        };
        for q in written {
            self.forget(&q, format!("{why} (call #{})", record.id));
        }
        self.skip(why);
    }

    /// Removes a call from every queue it was in flight on.
    fn release(&mut self, id: u64, touch: &Touch) {
        let names: Vec<String> = match touch {
            Touch::Queue(q) => vec![q.clone()],
            Touch::Discovery { queues }
            | Touch::Push { queues }
            | Touch::Transaction { queues }
            | Touch::AckBatch { queues } => queues.iter().cloned().collect(),
            Touch::Broker => self.queues.keys().cloned().collect(),
            _ => vec![],
        };
        for n in names {
            if let Some(q) = self.queues.get_mut(&n) {
                q.in_flight.remove(&id);
            }
            self.settle_if_quiet(&n);
        }
    }

    /// After a queue's deletion was answered (DEL-1) and judged, with no call on it in
    /// flight and nothing found on it, the queue's model is dropped: traffic that makes
    /// and deletes queues keeps the watcher's memory flat.
    fn retire_if_deleted(&mut self, name: &str, record: &Record) {
        let deleted = record.method == "DELETE"
            && record.status == Some(200)
            && record.path.starts_with("/api/v1/resources/queues/");
        let Some(q) = self.queues.get(name) else {
            return;
        };
        let quiet = q.in_flight.is_empty() && q.stretch.is_empty();
        let clean = q.verdict == QueueVerdict::Checked && q.reported.is_empty();
        if deleted && quiet && clean {
            self.queues.remove(name);
            self.learnt.forget(name);
            self.counts.retired += 1;
        }
    }

    fn learn(&mut self, queue: &str, record: &Record) {
        let req = record.request();
        if req.method == "POST" && req.path == "/api/v1/configure" {
            self.learnt.configured(&req);
        }
        let pop = matches!(
            queen_reference::wire::find(&req.method, &segments(&req.path)).map(|r| r.0.id),
            Some(RouteId::PopQueue | RouteId::PopPartition)
        );
        if let (true, Some(answer)) = (pop, record.answer()) {
            if answer.status == 200 {
                self.learnt.pop_answer(queue, &answer);
            }
        }
        let push = req.method == "POST" && req.path == "/api/v1/push";
        if let (true, Some(answer)) = (push, record.answer()) {
            if answer.status == 201 {
                self.learnt.push_answer(queue, &answer);
            }
        }
    }

    /// The watched queue `name`, created on first sight with the broker-wide writes
    /// seen so far applied to its model.
    fn queue(&mut self, name: &str) -> &mut Queue {
        if !self.queues.contains_key(name) {
            self.learnt.saw(name);
            let mut model = self.settings.checker();
            let mut verdict = QueueVerdict::Checked;
            for r in self.prelude.values() {
                if let Err(e) = model.step_unknown(&r.request(), r.invoke_ms, r.complete_ms) {
                    verdict = QueueVerdict::Undecided(step_error_text(&e));
                }
            }
            let q = Queue {
                model,
                verdict,
                in_flight: BTreeSet::new(),
                stretch: Vec::new(),
                reported: HashSet::new(),
                recent: VecDeque::new(),
                checked: 0,
            };
            self.queues.insert(name.to_string(), q);
        }
        self.queues.get_mut(name).expect("just inserted")
    }

    /// The queue is no longer judged: its state cannot be known from here on.
    fn forget(&mut self, name: &str, why: String) {
        if let Some(q) = self.queues.get_mut(name) {
            if q.verdict == QueueVerdict::Checked {
                q.verdict = QueueVerdict::Unknown(why);
            }
            q.stretch.clear();
        }
    }

    fn skip(&mut self, why: &str) {
        *self.counts.not_checked.entry(why.to_string()).or_default() += 1;
    }

    /// Adds a completed call to `name`'s open stretch; settles it when the queue is quiet.
    fn add(&mut self, name: &str, record: &Record, compared: bool) {
        let Some(q) = self.queues.get_mut(name) else {
            return;
        };
        q.in_flight.remove(&record.id);
        q.recent.push_back(record.clone());
        if q.recent.len() > RECENT {
            q.recent.pop_front();
        }
        if q.verdict != QueueVerdict::Checked {
            if compared {
                self.skip("its queue is no longer judged (unknown, undecided or violated)");
            }
            return;
        }
        if q.stretch.len() >= STRETCH_CALLS {
            q.verdict = QueueVerdict::Undecided(format!(
                "{STRETCH_CALLS} calls without a moment when none was in flight"
            ));
            q.stretch.clear();
            return;
        }
        q.stretch.push(Done {
            record: record.clone(),
            compared: compared && answered(record),
        });
        if compared && !answered(record) {
            self.skip("answered 5xx or not at all: taken as applied or not");
        }
        self.settle_if_quiet(name);
    }

    fn settle_if_quiet(&mut self, name: &str) {
        let Some(q) = self.queues.get_mut(name) else {
            return;
        };
        if !q.in_flight.is_empty() || q.stretch.is_empty() {
            return;
        }
        let stretch = std::mem::take(&mut q.stretch);
        // The model is put back on success; after an error the queue is judged no more.
        let outcome = search(std::mem::take(&mut q.model), &stretch);
        let compared = stretch.iter().filter(|d| d.compared).count() as u64;
        match outcome {
            Ok(mut model) => {
                model.forget_history_beyond(DIAGNOSIS_WINDOW);
                q.model = model;
                q.checked += compared;
                self.counts.checked += compared;
                self.report_findings(name);
            }
            Err(Settle::Undecided(why)) => {
                q.verdict = QueueVerdict::Undecided(why);
            }
            Err(Settle::Violation(d, at)) => {
                let record = stretch[at].record.clone();
                self.counts.checked += compared;
                self.violation(name, &d, &record);
            }
        }
    }

    /// Reports the findings the queue's model holds that were not reported yet.
    fn report_findings(&mut self, name: &str) {
        let Some(q) = self.queues.get_mut(name) else {
            return;
        };
        let new: Vec<Finding> = q
            .model
            .findings()
            .into_iter()
            .filter(|f| !q.reported.contains(f))
            .collect();
        if new.is_empty() {
            return;
        }
        let exchanges: Vec<Record> = q.recent.iter().cloned().collect();
        let curl = exchanges
            .last()
            .map(|r| curl_one(&self.base, &r.request()))
            .unwrap_or_default();
        for f in new {
            q.reported.insert(f.clone());
            let w = of_finding(name, &f, exchanges.clone(), curl.clone());
            self.findings.push(w);
        }
    }

    fn violation(&mut self, name: &str, d: &Divergence, record: &Record) {
        let Some(q) = self.queues.get_mut(name) else {
            return;
        };
        let exchanges: Vec<Record> = q.recent.iter().cloned().collect();
        let w = of_divergence(name, d, exchanges, curl_one(&self.base, &record.request()));
        q.verdict = QueueVerdict::Violated(w.summary.clone());
        self.findings.push(w);
    }

    /// A call that touches no watched queue: a request the model rejects is judged on
    /// its own (a rejection depends on the request alone), and so is the health probe
    /// (its answer depends on no queue); any other is not judged.
    fn alone(&mut self, record: &Record, why: &'static str) {
        let req = record.request();
        let s = &self.settings;
        let parsed = parse_request(&req, s.default_timeout_ms, s.body_limit).is_ok();
        if parsed && !is_route(record, RouteId::Health) {
            return self.skip(why);
        }
        if parsed && says_unhealthy(record) {
            return self.skip("the broker says it is unhealthy (HEALTH-1's 503): the watcher cannot know its database");
        }
        let Some(answer) = record.answer() else {
            return self.skip(why);
        };
        self.counts.checked += 1;
        let mut model = self.settings.checker();
        let curl = curl_one(&self.base, &req);
        let seen = vec![record.clone()];
        match model.step(&req, record.invoke_ms, record.complete_ms, &answer) {
            Ok(_) => {
                for f in model.findings() {
                    let w = of_finding("", &f, seen.clone(), curl.clone());
                    self.findings.push(w);
                }
            }
            Err(StepError::Diverged(d)) => self.findings.push(of_divergence("", &d, seen, curl)),
            Err(StepError::Inconclusive(_)) => {
                self.skip("a malformed request the model could not decide")
            }
        }
    }
}

impl Online {
    /// A discovery pop's answer came. Each queue it delivered from judges the part of
    /// the pop that claimed there ([`narrowed`]). A queue of its scope it delivered
    /// nothing from is as it was, in queue mode; a named group's pop may have recorded
    /// its subscription there or seeded cursors (POP-13, POP-18), so that queue is no
    /// longer judged. A pop the model refuses, refused with a 4xx, changed nothing. A pop
    /// whose deliveries cannot all be placed, or that got no answer, leaves every queue
    /// of its scope unknown.
    fn discovery_done(&mut self, record: &Record, scope: &BTreeSet<String>) {
        const WHY: &str = "a pop by namespace or task may have claimed from it";
        let query = parse_pop_query(&record.query, self.settings.default_timeout_ms).ok();
        let answer = record.answer();
        let parses = query.is_some() && self.parses(record);
        if !parses && answer.as_ref().is_some_and(|a| a.status / 100 == 4) {
            // Refused as the model refuses it: nothing changed on any queue.
            for q in scope {
                self.release(record.id, &Touch::Queue(q.clone()));
            }
            return self.alone(record, WHY);
        }
        let placed = match &answer {
            Some(a) if parses && a.status == 200 => self.learnt.delivered(a),
            Some(a) if parses && a.status == 204 => Some(BTreeMap::new()),
            _ => None,
        };
        let (Some(placed), Some(query)) = (placed, query) else {
            for q in scope {
                self.release(record.id, &Touch::Queue(q.clone()));
                self.forget(q, format!("{WHY} (call #{})", record.id));
            }
            return if self.answered_outside_any_state(record) {
                self.status_outside_any_state(record)
            } else {
                self.alone(record, WHY)
            };
        };
        let queue_mode = query.consumer_group == QUEUE_MODE;
        let reached: BTreeSet<&String> = scope.iter().chain(placed.keys()).collect();
        for q in reached {
            if let Some(indices) = placed.get(q) {
                self.queue(q);
                self.add(q, &narrowed(record, &query, indices), true);
            } else if queue_mode {
                self.release(record.id, &Touch::Queue(q.clone()));
            } else {
                self.release(record.id, &Touch::Queue(q.clone()));
                let why = "a named group's pop by namespace or task may have seeded its cursors here (POP-18)";
                self.forget(q, format!("{why} (call #{})", record.id));
            }
        }
        if placed.is_empty() {
            self.skip("a pop by namespace or task that delivered nothing (not judged without every queue it reaches)");
        }
    }

    /// A transaction over several queues was answered. Committed (TXN-1: all of it
    /// applied), each queue judges its own part, with the answer's results for it. One
    /// that was refused, or whose parts cannot be placed, leaves every queue it names
    /// unknown: a broker that is not atomic would have applied some of it, and the
    /// queues' models cannot tell which part a refusal came from.
    fn transaction_done(&mut self, record: &Record, queues: &BTreeSet<String>) {
        const WHY: &str = "a transaction across queues";
        let body = record.json_body();
        let committed = record.status == Some(200)
            && record
                .response
                .as_ref()
                .is_some_and(|a| a["success"] == true)
            && self.parses(record);
        let parts = match (committed, &body, &record.response) {
            (true, Some(b), Some(a)) => self.learnt.split_transaction(b, a),
            _ => None,
        };
        if let (Some(_), Some(body)) = (&parts, &body) {
            let results = record
                .response
                .as_ref()
                .and_then(|a| a["results"].as_array());
            self.learn_pushes(record, body, results);
        }
        self.judge_parts(record, queues, parts, WHY);
    }

    /// A push to several queues was answered. Accepted (PUSH-3: every item written), each
    /// queue judges its own items and their results. Refused as input that does not parse
    /// (PUSH-8: nothing written), the refusal is judged alone and every queue stays as it
    /// was. Anything else (a refusal the queues' state decides, a 5xx, no answer) leaves
    /// its queues unknown.
    fn push_done(&mut self, record: &Record, queues: &BTreeSet<String>) {
        const WHY: &str = "a push to several queues";
        let parses = self.parses(record);
        if !parses && matches!(record.status, Some(400..=499)) {
            for q in queues {
                self.release(record.id, &Touch::Queue(q.clone()));
            }
            return self.alone(record, WHY);
        }
        let parts = match (record.status, &record.json_body(), &record.response) {
            (Some(201), Some(body), Some(answer)) if parses => {
                let parts = Learnt::split_push(body, answer);
                if parts.is_some() {
                    self.learn_pushes(record, body, answer.as_array());
                }
                parts
            }
            _ => None,
        };
        self.judge_parts(record, queues, parts, WHY);
    }

    /// A batch ack over several queues was answered: each queue judges its items. One
    /// refused whole (a 4xx, a 5xx, no answer) or whose items cannot be placed leaves its
    /// queues unknown.
    fn acks_done(&mut self, record: &Record, queues: &BTreeSet<String>) {
        let body = record.json_body();
        let parts = match (record.status, &body, &record.response) {
            (Some(200), Some(b), Some(a)) if self.parses(record) => self.learnt.split_acks(b, a),
            _ => None,
        };
        self.judge_parts(record, queues, parts, "an ack batch across queues");
    }

    /// Each queue's part of a call over several queues, judged on that queue; without
    /// parts, each queue the call names becomes unknown.
    fn judge_parts(
        &mut self,
        record: &Record,
        queues: &BTreeSet<String>,
        parts: Option<BTreeMap<String, (serde_json::Value, serde_json::Value)>>,
        why: &'static str,
    ) {
        let Some(parts) = parts else {
            for q in queues {
                self.release(record.id, &Touch::Queue(q.clone()));
                self.forget(q, format!("{why} (call #{})", record.id));
            }
            return self.alone(record, why);
        };
        for (q, (part_body, part_answer)) in parts {
            let mut part = record.clone();
            part.body = None;
            part.body_base64 = None;
            part.set_body(part_body.to_string().as_bytes());
            part.response = Some(part_answer);
            self.queue(&q);
            self.add(&q, &part, true);
        }
        for q in queues {
            self.release(record.id, &Touch::Queue(q.clone()));
        }
    }

    /// Learns the message ids a push to several queues, or a committed transaction, was
    /// answered with, for the discovery pops that deliver them.
    fn learn_pushes(
        &mut self,
        record: &Record,
        body: &serde_json::Value,
        results: Option<&Vec<serde_json::Value>>,
    ) {
        let applied = matches!(record.status, Some(200 | 201));
        if let (true, Some(results)) = (applied, results) {
            self.learnt.pushes_answer(body, results);
        }
    }

    fn parses(&self, r: &Record) -> bool {
        let s = &self.settings;
        parse_request(&r.request(), s.default_timeout_ms, s.body_limit).is_ok()
    }

    /// A discovery pop whose status no state of its queues allows: a request that
    /// parses is answered 200 or 204 in every state (one that does not parse is judged on
    /// its own, and a 5xx or no answer is not judged), so any other status is judged
    /// without knowing them.
    fn answered_outside_any_state(&self, r: &Record) -> bool {
        is_route(r, RouteId::PopDiscovery)
            && answered(r)
            && !matches!(r.status, Some(200 | 204 | 401 | 403))
            && self.parses(r)
    }

    /// A discovery pop answered with a status no state of its queues allows: found
    /// under the route's rule, without knowing the queues it reaches.
    fn status_outside_any_state(&mut self, record: &Record) {
        let segments = segments(&record.path);
        let Some((route, _)) = queen_reference::wire::find(&record.method, &segments) else {
            return self.skip("not a route of the protocol");
        };
        self.counts.checked += 1;
        let status = record.status.unwrap_or_default();
        let summary = format!(
            "a pop by namespace or task is answered 200 or 204 whatever its queues hold; this one got {status} ({})",
            route.rule
        );
        let body = record
            .response
            .as_ref()
            .map(|b| b.to_string())
            .unwrap_or_default();
        self.findings.push(WatchFinding {
            queue: String::new(),
            rules: vec![route.rule],
            level: level_of(&[route.rule]),
            kind: "divergence".into(),
            details: format!(
                "{} {} ({})\n  actual: {status} {body}\n  allowed: 200 or 204\n",
                record.method, record.path, route.rule
            ),
            summary,
            exchanges: vec![record.clone()],
            curl: curl_one(&self.base, &record.request()),
        });
    }
}

/// A finding of a queue's model as reported.
fn of_finding(queue: &str, f: &Finding, exchanges: Vec<Record>, curl: String) -> WatchFinding {
    WatchFinding {
        queue: queue.to_string(),
        rules: vec![f.rule],
        level: f.level,
        kind: f.kind.as_str().to_string(),
        summary: f.what.clone(),
        details: f.example.clone().unwrap_or_default(),
        exchanges,
        curl,
    }
}

/// A divergence as reported.
fn of_divergence(
    queue: &str,
    d: &Divergence,
    exchanges: Vec<Record>,
    curl: String,
) -> WatchFinding {
    WatchFinding {
        queue: queue.to_string(),
        rules: d.rules.clone(),
        level: level_of(&d.rules),
        kind: "divergence".into(),
        summary: d
            .reasons
            .first()
            .cloned()
            .unwrap_or_else(|| "no allowed answer".into()),
        details: d.to_string(),
        exchanges,
        curl,
    }
}

/// Why a stretch could not be carried.
enum Settle {
    /// The search could not decide (budget, or too many states).
    Undecided(String),
    /// No order is accepted: the divergence at the deepest call reached, and its index.
    Violation(Box<Divergence>, usize),
}

/// The model after `stretch`: every state some order of its calls allowed by real time
/// leads to, when the model accepts at least one order.
fn search(start: Checker, stretch: &[Done]) -> Result<Checker, Settle> {
    if let [only] = stretch {
        if only.compared {
            return step_alone(start, &only.record);
        }
    }
    let mut s = Search {
        stretch,
        steps: 0,
        found: None,
        deepest: None,
        undecided: None,
    };
    s.place(start, &mut vec![false; stretch.len()], 0);
    if let Some(model) = s.found {
        return Ok(model);
    }
    if let Some(why) = s.undecided {
        return Err(Settle::Undecided(why));
    }
    match s.deepest {
        Some((_, d, at)) => Err(Settle::Violation(d, at)),
        None => Err(Settle::Undecided(
            "no order of the stretch was tried".into(),
        )),
    }
}

/// A stretch of one answered call: the model steps in place, with no copy of it.
fn step_alone(mut model: Checker, r: &Record) -> Result<Checker, Settle> {
    let Some(answer) = r.answer() else {
        return Err(Settle::Undecided(
            "an answered call without its answer".into(),
        ));
    };
    match model.step(&r.request(), r.invoke_ms, r.complete_ms, &answer) {
        Ok(_) => Ok(model),
        Err(StepError::Diverged(d)) => Err(Settle::Violation(d, 0)),
        Err(e) => Err(Settle::Undecided(step_error_text(&e))),
    }
}

struct Search<'a> {
    stretch: &'a [Done],
    steps: u64,
    /// The union of the models every accepted order ends in.
    found: Option<Checker>,
    /// The refusal at the most calls placed: (placed, divergence, call index).
    deepest: Option<(usize, Box<Divergence>, usize)>,
    undecided: Option<String>,
}

impl Search<'_> {
    fn place(&mut self, model: Checker, placed: &mut Vec<bool>, depth: usize) {
        if self.undecided.is_some() {
            return;
        }
        if depth == self.stretch.len() {
            return self.accept(model);
        }
        for i in 0..self.stretch.len() {
            if placed[i] || !self.may_come_next(placed, i) {
                continue;
            }
            self.steps += 1;
            if self.steps > STRETCH_BUDGET {
                self.undecided = Some(format!(
                    "{} overlapping calls have more orders than the search's budget of {STRETCH_BUDGET} model steps",
                    self.stretch.len()
                ));
                return;
            }
            let d = &self.stretch[i];
            let r = &d.record;
            placed[i] = true;
            // Without an answer, or with a 5xx, the call may never have taken effect.
            let maybe_not = !answered(r);
            let answer = d.compared.then(|| r.answer()).flatten();
            let mut next = model.clone();
            let stepped = match &answer {
                Some(a) => next.step(&r.request(), r.invoke_ms, r.complete_ms, a),
                None => next.step_unknown(&r.request(), r.invoke_ms, r.complete_ms),
            };
            match stepped {
                Ok(_) => self.place(next, placed, depth + 1),
                Err(StepError::Diverged(div)) => {
                    if self.deepest.as_ref().is_none_or(|(n, ..)| depth > *n) {
                        self.deepest = Some((depth, div, i));
                    }
                }
                Err(StepError::Inconclusive(why)) => self.undecided = Some(why),
            }
            if maybe_not {
                self.place(model.clone(), placed, depth + 1);
            }
            placed[i] = false;
        }
    }

    /// Whether call `i` may be placed next: no other unplaced call completed before it
    /// was sent.
    fn may_come_next(&self, placed: &[bool], i: usize) -> bool {
        let sent = self.stretch[i].record.invoke_ms;
        !self
            .stretch
            .iter()
            .enumerate()
            .any(|(j, d)| j != i && !placed[j] && d.record.complete_ms < sent)
    }

    fn accept(&mut self, model: Checker) {
        match &mut self.found {
            None => self.found = Some(model),
            Some(all) => {
                if let Err(e) = all.absorb(model) {
                    self.undecided = Some(step_error_text(&e));
                }
            }
        }
    }
}

fn step_error_text(e: &StepError) -> String {
    match e {
        StepError::Diverged(d) => d.to_string(),
        StepError::Inconclusive(w) => format!("the model could not decide: {w}"),
    }
}

/// Whether a call writes messages under a token: a broker with authentication on stamps
/// them with the token's `sub` (AUTH-2), which the watcher cannot read from the token.
fn writes_with_token(r: &Record) -> bool {
    r.token
        && r.method == "POST"
        && matches!(r.path.as_str(), "/api/v1/push" | "/api/v1/transaction")
}

/// The part of a discovery pop that claimed in one queue, as that queue's model reads
/// it: the messages it delivered there (`indices` into the answer), with `batch` and
/// `partitions` narrowed to what it took there. The pop's budget and cap are shared by
/// every queue it reaches (POP-3), so what one queue got depends on the others; within
/// the narrowed budget and cap the model still judges which messages and partitions it
/// took. A queue that got more than the whole pop allowed keeps the pop's own figures,
/// and the model judges that too.
fn narrowed(record: &Record, query: &PopQuery, indices: &[usize]) -> Record {
    let mut r = record.clone();
    let Some(body) = r.response.as_mut() else {
        return r;
    };
    let all = body["messages"].as_array().cloned().unwrap_or_default();
    let mine: Vec<serde_json::Value> = indices
        .iter()
        .filter_map(|i| all.get(*i).cloned())
        .collect();
    let mut partitions: Vec<&serde_json::Value> = Vec::new();
    for m in &mine {
        if !partitions.contains(&&m["partitionId"]) {
            partitions.push(&m["partitionId"]);
        }
    }
    let (n, k) = (mine.len() as u32, partitions.len() as u32);
    let mut set = |key: &str, v: u32| {
        r.query.retain(|(k, _)| k != key);
        r.query.push((key.to_string(), v.to_string()));
    };
    if n <= query.batch {
        set("batch", n);
    }
    if query.partitions.is_none_or(|cap| k <= cap) {
        set("partitions", k);
    }
    // Only what the broker sent is narrowed: a field it left out stays out, to be judged.
    if let (Some(first), Some(top)) = (mine.first(), body.as_object_mut()) {
        for key in ["partition", "partitionId"] {
            if let Some(v) = top.get_mut(key) {
                *v = first[key].clone();
            }
        }
        if let Some(v) = top.get_mut("partitionsClaimed") {
            *v = serde_json::json!(k);
        }
    }
    body["messages"] = serde_json::Value::Array(mine);
    r
}

/// Whether the call went to the protocol's route `id`.
fn is_route(r: &Record, id: RouteId) -> bool {
    queen_reference::wire::find(&r.method, &segments(&r.path))
        .is_some_and(|(route, _)| route.id == id)
}

/// A health answer 503 `{"status":"unhealthy"}`: what a broker whose database is down
/// says (HEALTH-1), which the watcher cannot see.
fn says_unhealthy(r: &Record) -> bool {
    r.status == Some(503)
        && r.response
            .as_ref()
            .is_some_and(|b| b["status"] == "unhealthy")
}

/// Whether the broker's answer says what it did (not lost, not a 5xx).
fn answered(r: &Record) -> bool {
    r.status.is_some_and(|s| s < 500)
}

fn refused_by_auth(r: &Record) -> bool {
    matches!(r.status, Some(401 | 403))
}

fn segments(path: &str) -> Vec<&str> {
    path.trim_end_matches('/').split('/').skip(1).collect()
}

/// Replays a recorded history through a fresh online checker, in the order the calls
/// were sent and answered.
pub fn replay(records: &[Record], settings: CheckSettings, base: &str) -> Online {
    // At one instant, answers (0) before new calls (1): a call sent as another's answer
    // arrived may come after it; a call answered at the instant it was sent, after its
    // own sending (2).
    let mut events: Vec<(Millis, u8, usize)> = Vec::with_capacity(records.len() * 2);
    for (i, r) in records.iter().enumerate() {
        let end = r.complete_ms.max(r.invoke_ms);
        events.push((r.invoke_ms, 1, i));
        events.push((end, if end == r.invoke_ms { 2 } else { 0 }, i));
    }
    events.sort_unstable();
    let mut online = Online::new(settings, base);
    for (_, phase, i) in events {
        let r = &records[i];
        if phase == 1 {
            online.invoke(r, &r.existed);
        } else {
            online.complete(r);
        }
    }
    online
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: u64, method: &str, path: &str, body: serde_json::Value, at: Millis) -> Record {
        let mut r = Record {
            id,
            method: method.into(),
            path: path.into(),
            query: vec![],
            body: None,
            body_base64: None,
            invoke_ms: at,
            complete_ms: at + 1,
            status: None,
            response: None,
            unknown: None,
            existed: vec![],
            token: false,
        };
        if !body.is_null() {
            r.set_body(body.to_string().as_bytes());
        }
        r
    }

    fn answered(mut r: Record, status: u16, body: serde_json::Value) -> Record {
        r.status = Some(status);
        r.response = (!body.is_null()).then_some(body);
        r
    }

    #[test]
    fn queues_the_watcher_cannot_know_are_not_judged() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let push = rec(
            1,
            "POST",
            "/api/v1/push",
            json!({"items": [{"queue": "old"}]}),
            1000,
        );
        o.invoke(&push, &["old".to_string()]);
        let push = answered(push, 500, json!({"error": "x"}));
        o.complete(&push);
        let two = json!({"items": [{"queue": "a"}, {"queue": "b"}]});
        let both = rec(2, "POST", "/api/v1/push", two, 1010);
        o.invoke(&both, &[]);
        o.complete(&answered(both, 201, json!([])));
        let v: BTreeMap<String, QueueVerdict> =
            o.verdicts().into_iter().map(|(n, v, _)| (n, v)).collect();
        assert!(matches!(&v["old"], QueueVerdict::Unknown(w) if w.contains("existed")));
        assert!(matches!(&v["a"], QueueVerdict::Unknown(w) if w.contains("several")));
        assert!(o.findings.is_empty());
        assert_eq!(o.counts.checked, 0);
    }

    #[test]
    fn a_push_with_a_token_makes_its_queue_unknown() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let mut push = rec(
            1,
            "POST",
            "/api/v1/push",
            json!({"items": [{"queue": "q"}]}),
            1000,
        );
        push.token = true;
        o.invoke(&push, &[]);
        o.complete(&answered(push, 201, json!([])));
        let v = o.verdicts();
        assert!(matches!(&v[0].1, QueueVerdict::Unknown(w) if w.contains("AUTH-2")));
        assert!(o.findings.is_empty());
    }

    #[test]
    fn a_malformed_request_is_judged_on_its_own() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let mut bad = rec(1, "POST", "/api/v1/push", serde_json::Value::Null, 1000);
        bad.body = Some("{not json".into());
        o.invoke(&bad, &[]);
        o.complete(&answered(bad.clone(), 201, json!([])));
        assert_eq!(o.counts.checked, 1);
        assert_eq!(o.findings.len(), 1, "a 201 to a body that is not JSON");
        assert!(o.findings[0].curl.contains("--data-binary"));
    }
    #[test]
    fn the_health_probe_is_judged_on_its_own() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let good = json!({"status": "healthy", "database": "connected"});
        let ok = json!({"status": "ok", "database": "connected"});
        let down = json!({"status": "unhealthy", "database": "disconnected"});
        for (id, status, body) in [(1, 200, good), (2, 200, ok), (3, 503, down)] {
            let probe = rec(id, "GET", "/health", serde_json::Value::Null, 1000);
            o.invoke(&probe, &[]);
            o.complete(&answered(probe, status, body));
        }
        assert_eq!(
            o.counts.checked, 2,
            "the 503 of a broker whose database is down is not judged"
        );
        assert_eq!(o.findings.len(), 1, "{:?}", o.findings);
        assert_eq!(o.findings[0].rules, vec![queen_reference::rules::HEALTH_1]);
    }

    #[test]
    fn a_discovery_pop_is_judged_by_what_no_state_allows() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let push = rec(
            1,
            "POST",
            "/api/v1/push",
            json!({"items": [{"queue": "ns.q"}]}),
            1000,
        );
        o.invoke(&push, &[]);
        o.complete(&answered(push, 500, json!({"error": "internal error"})));
        for (id, status) in [(2, 204), (3, 404)] {
            let mut pop = rec(id, "GET", "/api/v1/pop", serde_json::Value::Null, 1010);
            pop.query = vec![("namespace".into(), "ns".into())];
            o.invoke(&pop, &[]);
            o.complete(&answered(pop, status, json!({"error": "not found"})));
        }
        assert_eq!(o.findings.len(), 1, "only the 404: {:?}", o.findings);
        assert_eq!(o.findings[0].rules, vec![queen_reference::rules::POP_10]);
        assert!(
            o.findings[0].summary.contains("got 404"),
            "{:?}",
            o.findings
        );
        let v = o.verdicts();
        assert!(matches!(&v[0].1, QueueVerdict::Unknown(w) if w.contains("namespace")));
    }

    /// POP-10: `?task=` names no scope, so the model wants a 400 and nothing changed. A
    /// 400 leaves every queue judged; a broker that read the empty task as a filter and
    /// delivered is found, and the queues it may have claimed from are no longer judged.
    #[test]
    fn a_discovery_pop_refused_for_want_of_a_scope_leaves_its_queues_judged() {
        let run = |status: u16, answer: serde_json::Value| {
            let mut o = Online::new(CheckSettings::default(), "http://b");
            let push = rec(
                1,
                "POST",
                "/api/v1/push",
                json!({"items": [{"queue": "q", "transactionId": "t", "payload": 1}]}),
                1000,
            );
            o.invoke(&push, &[]);
            let id = "019a0000-0000-7000-8000-000000000001";
            let result = json!([{"index": 0, "status": "queued", "message_id": id,
                "transaction_id": "t", "queueName": "q"}]);
            o.complete(&answered(push, 201, result));
            let mut pop = rec(2, "GET", "/api/v1/pop", serde_json::Value::Null, 1010);
            pop.query = vec![("task".into(), "".into()), ("batch".into(), "5".into())];
            o.invoke(&pop, &[]);
            o.complete(&answered(pop, status, answer));
            o
        };
        let refused = run(
            400,
            json!({"success": false, "error": "namespace or task is required", "messages": []}),
        );
        assert!(refused.findings.is_empty(), "{:?}", refused.findings);
        assert_eq!(refused.verdicts()[0].1, QueueVerdict::Checked);
        assert_eq!(refused.counts.checked, 2);
        let delivered = run(204, serde_json::Value::Null);
        assert_eq!(delivered.findings.len(), 1, "{:?}", delivered.findings);
        assert_eq!(
            delivered.findings[0].rules,
            vec![queen_reference::rules::POP_10]
        );
        assert!(matches!(
            &delivered.verdicts()[0].1,
            QueueVerdict::Unknown(_)
        ));
    }

    fn pushed(id: u64, items: serde_json::Value, at: Millis) -> Record {
        rec(id, "POST", "/api/v1/push", json!({ "items": items }), at)
    }

    fn queued(index: u64, n: u64, tx: &str, queue: &str) -> serde_json::Value {
        json!({"index": index, "status": "queued", "transaction_id": tx, "queueName": queue,
               "message_id": format!("019a0000-0000-7000-8000-00000000000{n}")})
    }

    /// PUSH-1, PUSH-3: an accepted push to several queues is judged on each queue, by
    /// the items and results that are its own; a wrong result is found on its queue.
    #[test]
    fn a_push_to_several_queues_is_judged_on_each() {
        let run = |b_status: &str| {
            let mut o = Online::new(CheckSettings::default(), "http://b");
            let items = json!([{"queue": "a", "transactionId": "ta", "payload": 1},
                               {"queue": "b", "transactionId": "tb", "payload": 2},
                               {"queue": "a", "transactionId": "tc", "payload": 3}]);
            let push = pushed(1, items, 1000);
            o.invoke(&push, &[]);
            let mut b = queued(1, 2, "tb", "b");
            b["status"] = json!(b_status);
            let answer = json!([queued(0, 1, "ta", "a"), b, queued(2, 3, "tc", "a")]);
            o.complete(&answered(push, 201, answer));
            o
        };
        let right = run("queued");
        assert!(right.findings.is_empty(), "{:?}", right.findings);
        let v: Vec<(String, QueueVerdict)> = right
            .verdicts()
            .into_iter()
            .map(|(n, v, _)| (n, v))
            .collect();
        assert_eq!(
            v,
            vec![
                ("a".to_string(), QueueVerdict::Checked),
                ("b".to_string(), QueueVerdict::Checked)
            ]
        );
        let wrong = run("duplicate");
        assert_eq!(wrong.findings.len(), 1, "{:?}", wrong.findings);
        assert_eq!(wrong.findings[0].queue, "b", "{:?}", wrong.findings[0]);
        let v = wrong.verdicts();
        assert_eq!(v[0].1, QueueVerdict::Checked, "a's part was right");
        assert!(matches!(v[1].1, QueueVerdict::Violated(_)), "{v:?}");
    }

    /// PUSH-8: a push to several queues refused as bad input changed nothing, so its
    /// queues stay judged; accepting it is found.
    #[test]
    fn a_malformed_push_to_several_queues_is_judged_alone() {
        let run = |status: u16, answer: serde_json::Value| {
            let mut o = Online::new(CheckSettings::default(), "http://b");
            let first = pushed(1, json!([{"queue": "a", "transactionId": "ta"}]), 1000);
            o.invoke(&first, &[]);
            o.complete(&answered(first, 201, json!([queued(0, 1, "ta", "a")])));
            let bad = pushed(
                2,
                json!([{"queue": "a"}, {"queue": "b", "partition": 5}]),
                1010,
            );
            o.invoke(&bad, &[]);
            o.complete(&answered(bad, status, answer));
            o
        };
        let refused = run(400, json!({"error": "partition must be a string"}));
        assert!(refused.findings.is_empty(), "{:?}", refused.findings);
        assert!(refused
            .verdicts()
            .iter()
            .all(|(_, v, _)| *v == QueueVerdict::Checked));
        let accepted = run(201, json!([]));
        assert_eq!(accepted.findings.len(), 1, "{:?}", accepted.findings);
        assert!(accepted
            .verdicts()
            .iter()
            .all(|(_, v, _)| matches!(v, QueueVerdict::Unknown(_))));
    }

    /// AUTH-2: a transaction under a token writes messages stamped with its `sub`, on
    /// every queue it pushes to.
    #[test]
    fn a_transaction_with_a_token_makes_its_queues_unknown() {
        let mut o = Online::new(CheckSettings::default(), "http://b");
        let body = json!({"operations": [{"type": "push", "items": [
            {"queue": "a", "transactionId": "ta"}, {"queue": "b", "transactionId": "tb"}]}]});
        let mut txn = rec(1, "POST", "/api/v1/transaction", body, 1000);
        txn.token = true;
        o.invoke(&txn, &[]);
        let results = json!([queued(0, 1, "ta", "a"), queued(1, 2, "tb", "b")]);
        let answer = json!({"success": true, "results": results});
        o.complete(&answered(txn, 200, answer));
        assert!(o.findings.is_empty(), "{:?}", o.findings);
        let v = o.verdicts();
        assert_eq!(v.len(), 2);
        assert!(v
            .iter()
            .all(|(_, v, _)| matches!(v, QueueVerdict::Unknown(w) if w.contains("AUTH-2"))));
    }
}
