//! Checking a real broker's answers against the model (PROTOCOL.md section 12).
//!
//! A [`Checker`] holds every state the broker may be in given what it has answered so
//! far (a set of [`World`]s: model state plus the ids learnt). For each request it is
//! told when the request was sent and when the answer arrived; the broker's "now" lay
//! in between (widened by a skew allowance). Each world explores every outcome the
//! model allows for that time interval and the OPEN points, follows the broker's own
//! choices where the protocol lets it choose (which partitions a pop claims, POP-4;
//! which ids and timestamps it mints), and keeps the outcomes whose answer matches.
//! No world left is a divergence: the broker answered something no allowed behaviour
//! produces. Nothing is ever decided by a guess about timing, so a check is never flaky.
//!
//! PROJECT points (rules this project resolved where the seeds are silent) are enforced
//! only by a strict checker ([`Checker::strict_project`], the default: our own server is
//! held to every decision). A lax checker accepts a broker that decides them otherwise
//! and records each such departure on the world as a [`ProjectDiff`]: answer-only points
//! (an answer's shape or content) are matched loosely, and PROJECT points that change
//! state are explored as alternatives (see `Ctx::project`), like OPEN points.

use crate::choice::{explore_project, TooManyBranches};
use crate::ids::IdBook;
use crate::model::*;
use crate::policy::Policy;
use crate::project::{note, ProjectDiff};
use crate::render::Renderer;
use crate::time::{format_iso, is_iso_utc_z, parse_iso, Millis, Stamp};
use crate::wire::*;
use serde::Deserialize;
use serde_json::{json, Value};

/// One possible state of the broker, with the ids learnt in it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct World {
    pub state: State,
    pub ids: IdBook,
    /// The PROJECT decisions the broker departed from on the way to this state (empty
    /// under a strict checker).
    pub project: Vec<ProjectDiff>,
}

impl World {
    fn same_state(&self, other: &World) -> bool {
        self.state == other.state && self.ids == other.ids
    }

    /// A digest of the state and ids ([`State::fingerprint`] and how many ids are
    /// known): worlds with the same state have the same fingerprint, so only those are
    /// compared when looking for duplicates.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (
            self.state.fingerprint(),
            self.ids.msgs.len(),
            self.ids.parts.len(),
            self.ids.leases.len(),
        )
            .hash(&mut h);
        h.finish()
    }
}

/// Worlds being collected, each with its fingerprint.
#[derive(Default)]
struct Next {
    worlds: Vec<World>,
    prints: Vec<u64>,
}

impl Next {
    /// Adds `w` unless a world with the same state is there; of two, the one with fewer
    /// project differences is kept (the broker may still follow ours).
    fn merge(&mut self, w: World) {
        let fp = w.fingerprint();
        let twin = self
            .prints
            .iter()
            .zip(self.worlds.iter_mut())
            .find(|(p, x)| **p == fp && x.same_state(&w));
        match twin {
            Some((_, x)) if w.project.len() < x.project.len() => *x = w,
            Some(_) => {}
            None => {
                self.worlds.push(w);
                self.prints.push(fp);
            }
        }
    }
}

/// A broker answer no allowed behaviour produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    pub request: HttpRequest,
    pub actual: HttpResponse,
    /// Answers the model would accept (rendered with placeholders), one per outcome.
    pub expected: Vec<HttpResponse>,
    /// Why each expected answer did not match.
    pub reasons: Vec<String>,
    /// The rule ids this request is checked against.
    pub rules: Vec<&'static str>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} {} ({})",
            self.request.method,
            self.request.path,
            self.rules.join(", ")
        )?;
        writeln!(
            f,
            "  actual: {} {}",
            self.actual.status,
            body_text(&self.actual.body)
        )?;
        for (e, why) in self.expected.iter().zip(&self.reasons) {
            writeln!(f, "  allowed: {} {}", e.status, body_text(&e.body))?;
            writeln!(f, "    differs: {why}")?;
        }
        Ok(())
    }
}

fn body_text(b: &Option<Value>) -> String {
    b.as_ref()
        .map_or_else(|| "(no body)".to_string(), |v| v.to_string())
}

/// What a step may end with besides a divergence.
#[derive(Clone, Debug, PartialEq)]
pub enum StepError {
    Diverged(Box<Divergence>),
    /// The model could not decide (too many branches or worlds): never a pass.
    Inconclusive(String),
}

/// The model's view of one broker under test (cloned per branch by a linearizability
/// search over a concurrent history).
#[derive(Clone)]
pub struct Checker {
    worlds: Vec<World>,
    /// Milliseconds the broker's clock may differ from the client's.
    pub skew_ms: Millis,
    pub default_timeout_ms: u64,
    pub body_limit: usize,
    /// The most worlds kept before the check is inconclusive.
    pub max_worlds: usize,
    /// Hold the broker to every PROJECT decision (true: a departure is a divergence).
    /// False: accept departures on PROJECT points and record them on the worlds
    /// ([`Checker::project_differences`]).
    pub strict_project: bool,
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

impl Checker {
    pub fn new() -> Checker {
        Checker {
            worlds: vec![World::default()],
            skew_ms: 5,
            default_timeout_ms: DEFAULT_POP_TIMEOUT_MS,
            body_limit: 16 << 20,
            max_worlds: 256,
            strict_project: true,
        }
    }

    /// The PROJECT decisions the broker has certainly departed from so far: those of the
    /// remaining world with the fewest (empty when some world follows every decision).
    pub fn project_differences(&self) -> Vec<ProjectDiff> {
        self.worlds
            .iter()
            .min_by_key(|w| w.project.len())
            .map(|w| w.project.clone())
            .unwrap_or_default()
    }

    /// The states still possible.
    pub fn worlds(&self) -> &[World] {
        &self.worlds
    }

    /// Checks one exchange: `req` sent at `sent`, `actual` read at `received`. On
    /// success returns how many states remain possible.
    pub fn step(
        &mut self,
        req: &HttpRequest,
        sent: Millis,
        received: Millis,
        actual: &HttpResponse,
    ) -> Result<usize, StepError> {
        let now = Stamp::between(sent - self.skew_ms, received + self.skew_ms);
        let parsed = match parse_request(req, self.default_timeout_ms, self.body_limit) {
            Err(Rejection::NotFound) => return Ok(self.worlds.len()),
            Err(Rejection::Bad(e)) => Err(Op::Rejected(e)),
            Err(Rejection::DiscoveryScope) => Err(Op::DiscoveryRejected),
            Ok(r) => Ok(r),
        };
        let mut next = Next::default();
        let mut misses: Vec<(HttpResponse, String)> = Vec::new();
        let strict = self.strict_project;
        // A pop answer is read once, not once per world.
        let popped = match &parsed {
            Ok(Request::Pop { .. }) if actual.status != 204 => actual
                .body
                .as_ref()
                .and_then(|b| PopResponse::deserialize(b).ok()),
            _ => None,
        };
        for world in &self.worlds {
            let op = match &parsed {
                Ok(r) => world.ids.resolve(r),
                Err(op) => op.clone(),
            };
            for order in pop_orders(world, &op, actual.status, popped.as_ref()) {
                let branches = outcomes(world, &op, now, order.as_deref(), !strict, |i| {
                    minted_txn(&op, actual, i)
                })
                .map_err(too_many(req))?;
                for (out, st, taken) in branches {
                    let mut w = World {
                        state: st,
                        ids: world.ids.clone(),
                        project: world.project.clone(),
                    };
                    for d in taken {
                        note(&mut w.project, d);
                    }
                    match check_with(&out, actual, &mut w, &req.path, strict) {
                        Ok(()) => next.merge(w),
                        Err(why) => {
                            if misses.len() < 8 {
                                let shown = match out {
                                    // Show what the model would have delivered instead.
                                    Outcome::PopIllegal(_) => {
                                        policy_pop(world, &op, now).unwrap_or((out, w))
                                    }
                                    _ => (out, w),
                                };
                                misses.push((describe(&shown.0, &shown.1), why));
                            }
                        }
                    }
                }
            }
            if next.worlds.len() > self.max_worlds {
                return Err(StepError::Inconclusive(format!(
                    "more than {} possible states",
                    self.max_worlds
                )));
            }
        }
        if next.worlds.is_empty() {
            let op = match &parsed {
                Ok(r) => self.worlds[0].ids.resolve(r),
                Err(op) => op.clone(),
            };
            let (expected, reasons) = misses.into_iter().unzip();
            return Err(StepError::Diverged(Box::new(Divergence {
                request: req.clone(),
                actual: actual.clone(),
                expected,
                reasons,
                rules: rules_for(&op),
            })));
        }
        self.worlds = next.worlds;
        Ok(self.worlds.len())
    }
}

impl Checker {
    /// Applies a request whose answer is unknown (a timeout, a 5xx, a dropped
    /// connection), sent at `sent` and possibly applied any time up to `until`: every
    /// outcome the model allows is kept, whatever it would have answered. Ids minted in
    /// the lost answer stay unlearnt (they are learnt when a later answer shows them).
    /// Whether the request took effect at all is the caller's choice: not calling this
    /// is the "not applied" branch. Returns how many states remain possible.
    pub fn step_unknown(
        &mut self,
        req: &HttpRequest,
        sent: Millis,
        until: Millis,
    ) -> Result<usize, StepError> {
        let now = Stamp::between(sent - self.skew_ms, until + self.skew_ms);
        let parsed = match parse_request(req, self.default_timeout_ms, self.body_limit) {
            Ok(r) => r,
            // Rejections and unknown routes change nothing.
            Err(_) => return Ok(self.worlds.len()),
        };
        let mut next = Next::default();
        for world in &self.worlds {
            let op = world.ids.resolve(&parsed);
            let allow = !self.strict_project;
            let branches = outcomes(world, &op, now, None, allow, |i| format!("<lost {i}>"))
                .map_err(too_many(req))?;
            for (out, st, taken) in branches {
                if matches!(out, Outcome::PopIllegal(_)) {
                    continue;
                }
                let mut w = World {
                    state: st,
                    ids: world.ids.clone(),
                    project: world.project.clone(),
                };
                for d in taken {
                    note(&mut w.project, d);
                }
                next.merge(w);
            }
            if next.worlds.len() > self.max_worlds {
                return Err(StepError::Inconclusive(format!(
                    "more than {} possible states",
                    self.max_worlds
                )));
            }
        }
        if next.worlds.is_empty() {
            return Err(StepError::Inconclusive(format!(
                "no outcome for the unanswered {} {}",
                req.method, req.path
            )));
        }
        self.worlds = next.worlds;
        Ok(self.worlds.len())
    }
}

/// Every outcome the model allows for `op` in `world` at `now`, with the state each
/// leads to. `order` is a pop's observed partition order (POP-4); `minter` names the
/// transactionIds the broker minted. With `allow_project`, PROJECT alternatives are
/// explored too; each outcome comes with the ones it took.
type Branch = (Outcome, State, Vec<ProjectDiff>);

fn outcomes(
    world: &World,
    op: &Op,
    now: Stamp,
    order: Option<&[PartH]>,
    allow_project: bool,
    minter: impl Fn(usize) -> String,
) -> Result<Vec<Branch>, TooManyBranches> {
    explore_project(now, allow_project, |ctx| {
        let mut st = world.state.clone();
        let mut mint = |i: usize| minter(i);
        let out = apply(
            &mut st,
            op,
            &mut Hints {
                minter: &mut mint,
                pop_order: order,
            },
            ctx,
        );
        (out, st)
    })
    .map(|v| {
        v.into_iter()
            .map(|((out, st), _, taken)| (out, st, taken))
            .collect()
    })
}

/// The error of a request with more outcomes than the model explores.
fn too_many(req: &HttpRequest) -> impl FnOnce(TooManyBranches) -> StepError + '_ {
    move |TooManyBranches(n)| {
        StepError::Inconclusive(format!(
            "more than {n} outcomes for {} {}",
            req.method, req.path
        ))
    }
}

/// The pop the model itself would answer (policy order), for a report.
fn policy_pop(world: &World, op: &Op, now: Stamp) -> Option<(Outcome, World)> {
    let branches = outcomes(world, op, now, None, false, |i| format!("<minted {i}>")).ok()?;
    let (out, state, _) = branches.into_iter().next()?;
    Some((
        out,
        World {
            state,
            ids: world.ids.clone(),
            project: world.project.clone(),
        },
    ))
}

/// The rule ids a request is judged by, for reports.
pub fn rules_for(op: &Op) -> Vec<&'static str> {
    match op {
        Op::Rejected(_) => vec!["PUSH-8", "POP-10", "ACK-0", "LEASE-3", "CFG-3", "TXN-3"],
        Op::DiscoveryRejected => vec!["POP-10"],
        Op::Push(_) => vec![
            "PUSH-1", "PUSH-2", "PUSH-3", "PUSH-4", "PUSH-5", "PUSH-6", "PUSH-7",
        ],
        Op::Pop(_) => vec![
            "POP-1", "POP-2", "POP-3", "POP-4", "POP-5", "POP-6", "POP-7", "POP-9", "POP-12",
            "POP-13", "POP-14", "ACK-4", "ACK-7",
        ],
        Op::Ack(_) => vec![
            "ACK-1", "ACK-2", "ACK-3", "ACK-5", "ACK-6", "ACK-8", "DLQ-1",
        ],
        Op::Extend { .. } => vec!["LEASE-1", "LEASE-2", "LEASE-3"],
        Op::Txn { .. } => vec!["TXN-1", "TXN-2", "TXN-3"],
        Op::Configure(_) => vec!["CFG-1", "CFG-2", "CFG-3"],
        Op::Delete(_) => vec!["DEL-1"],
        Op::Dlq(_) => vec!["DLQ-2"],
        Op::SetPushMaintenance(_) | Op::GetPushMaintenance => vec!["MAINT-1", "PUSH-7"],
        Op::SetPopMaintenance(_) | Op::GetPopMaintenance => vec!["MAINT-2"],
        Op::Health => vec!["HEALTH-1"],
    }
}

/// The transactionId the broker minted for the `i`-th pushed item of `op`, read from
/// its answer (a placeholder when the answer has none; matching then fails).
fn minted_txn(op: &Op, actual: &HttpResponse, i: usize) -> String {
    let from = match (op, &actual.body) {
        (Op::Push(_), Some(Value::Array(items))) => items.get(i),
        (Op::Txn { .. }, Some(body)) => {
            body.get("results").and_then(Value::as_array).and_then(|r| {
                r.iter()
                    .filter(|x| x.get("transaction_id").is_some())
                    .nth(i)
            })
        }
        _ => None,
    };
    from.and_then(|x| x.get("transaction_id"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("<minted {i}>"), str::to_string)
}

/// The partition orders a pop answer (`status`, and its body when it parses) may stand
/// for: its partitionIds in order of first appearance, each mapped to a model partition
/// (bound, or by name when the id is new; several candidates when the name is ambiguous
/// across queues).
fn pop_orders(
    world: &World,
    op: &Op,
    status: u16,
    resp: Option<&PopResponse>,
) -> Vec<Option<Vec<PartH>>> {
    let Op::Pop(req) = op else { return vec![None] };
    if status == 204 {
        return vec![Some(vec![])];
    }
    let Some(resp) = resp else {
        return vec![None];
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for m in &resp.messages {
        if !seen.iter().any(|(id, _)| *id == m.partition_id) {
            seen.push((&m.partition_id, &m.partition));
        }
    }
    let st = &world.state;
    let in_scope = |p: &Partition| match &req.route {
        PopRoute::Queue(q) => &p.queue == q,
        PopRoute::Partition(q, n) => &p.queue == q && &p.name == n,
        PopRoute::Discovery { namespace, task } => st.queues.get(&p.queue).is_some_and(|q| {
            namespace.as_ref().is_none_or(|n| &q.namespace == n)
                && task.as_ref().is_none_or(|t| &q.task == t)
        }),
    };
    let mut orders: Vec<Vec<PartH>> = vec![vec![]];
    for (id, name) in seen {
        let cands: Vec<PartH> = match world.ids.parts.handle(id) {
            Some(h) => vec![h],
            None => st
                .partitions
                .iter()
                .flatten()
                .filter(|p| p.name == name && in_scope(p) && world.ids.parts.id(p.handle).is_none())
                .map(|p| p.handle)
                .collect(),
        };
        if cands.is_empty() {
            return vec![None];
        }
        let mut grown = Vec::new();
        for o in &orders {
            for c in cands.iter().filter(|c| !o.contains(c)) {
                if grown.len() < 64 {
                    let mut o = o.clone();
                    o.push(*c);
                    grown.push(o);
                }
            }
        }
        orders = grown;
    }
    if orders.is_empty() {
        return vec![None];
    }
    orders.into_iter().map(Some).collect()
}

/// Renders an outcome with placeholders for a report.
fn describe(out: &Outcome, world: &World) -> HttpResponse {
    let mut ids = world.ids.clone();
    let mut mint = |kind: &str, h: u32| format!("<{kind} {h}>");
    let time = |s: Stamp| {
        if s.is_exact() {
            format_iso(s.lo)
        } else {
            format!("<between {} and {}>", format_iso(s.lo), format_iso(s.hi))
        }
    };
    Renderer {
        state: &world.state,
        ids: &mut ids,
        policy: &Policy::default(),
        mint: &mut mint,
        time: &time,
    }
    .render(out)
}

type Check = Result<(), String>;

fn ensure(cond: bool, why: impl FnOnce() -> String) -> Check {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

/// An answer-only PROJECT point: `ours` says whether the answer follows this project's
/// decision. Strict: a departure fails the check; lax: it is recorded on `w` under `rule`
/// as `what` (one text per kind of departure) with `example` (this instance).
fn project_point(
    w: &mut World,
    strict: bool,
    rule: &'static str,
    ours: bool,
    what: &str,
    example: impl FnOnce() -> String,
) -> Check {
    if ours {
        return Ok(());
    }
    let example = example();
    if strict {
        Err(format!("{what}: {example} ({rule} [PROJECT])"))
    } else {
        note(
            &mut w.project,
            ProjectDiff::new(rule, what).example(example),
        );
        Ok(())
    }
}

/// Runs an answer-only PROJECT check that may bind ids on a copy of `w`: kept when it
/// passes; when it fails, strict fails and lax records the departure under `rule`
/// (nothing learnt from that part of the answer).
fn project_part(
    w: &mut World,
    strict: bool,
    rule: &'static str,
    what: &str,
    part: impl FnOnce(&mut World) -> Check,
) -> Check {
    let mut trial = w.clone();
    match part(&mut trial) {
        Ok(()) => {
            *w = trial;
            Ok(())
        }
        Err(why) => project_point(w, strict, rule, false, what, || why),
    }
}

/// The PROJECT rule that decides the answer to a rejected request on `path` (its status
/// beyond "some 4xx" and its body shape).
fn rejection_rule(path: &str) -> &'static str {
    let route = path.strip_prefix("/api/v1/").unwrap_or(path);
    match route.split('/').next().unwrap_or("") {
        "ack" => "ACK-0",
        "lease" => "LEASE-3",
        "configure" => "CFG-3",
        "transaction" => "TXN-3",
        "dlq" => "DLQ-2",
        "pop" => "POP-10",
        _ => "PUSH-8",
    }
}

/// Whether `actual` is an answer the model allows for `out`, learning ids and
/// narrowing uncertain times and OPEN values in `w` as it goes. Strict on every
/// PROJECT point; see [`check_with`].
pub fn check(out: &Outcome, actual: &HttpResponse, w: &mut World) -> Check {
    check_with(out, actual, w, "", true)
}

/// [`check`] for a request on `path`; unless `strict`, departures on answer-only
/// PROJECT points are recorded on `w` instead of failing.
pub fn check_with(
    out: &Outcome,
    actual: &HttpResponse,
    w: &mut World,
    path: &str,
    strict: bool,
) -> Check {
    let status = out.status();
    if let Outcome::PopIllegal(why) = out {
        return Err(why.clone());
    }
    let body = actual.body.as_ref();
    if let Outcome::Rejected(_) = out {
        // PUSH-8, ACK-0, LEASE-3, CFG-3, TXN-3 [PROJECT]: 400 `{"error": "..."}`. Lax: any
        // 4xx with a body. A pop's unparseable parameter is 400 by the seeds (POP-10).
        let rule = rejection_rule(path);
        if rule == "POP-10" || strict {
            ensure(actual.status == status, || {
                format!("status {} where {status} is expected", actual.status)
            })?;
        } else {
            ensure((400..500).contains(&actual.status), || {
                format!(
                    "status {} where a rejection (4xx, ours {status}) is expected",
                    actual.status
                )
            })?;
            project_point(
                w,
                strict,
                rule,
                actual.status == status,
                "rejects bad input with another 4xx status",
                || format!("{} where ours is {status}", actual.status),
            )?;
        }
        let e = body.and_then(|b| b.get("error")).and_then(Value::as_str);
        if !strict {
            ensure(body.is_some_and(|b| !b.is_null()), || {
                "a rejection must say what is wrong".into()
            })?;
        }
        return project_point(
            w,
            strict,
            rule,
            e.is_some_and(|s| !s.is_empty()),
            "a rejection without {\"error\": \"...\"}",
            || body_text(&actual.body),
        );
    }
    if let (Outcome::Delete(_), false) = (out, strict) {
        // DEL-1 [PROJECT] is the whole answer: any 2xx is accepted, its shape recorded.
        ensure((200..300).contains(&actual.status), || {
            format!("status {} where a 2xx is expected (DEL-1)", actual.status)
        })?;
        project_point(
            w,
            strict,
            "DEL-1",
            actual.status == status,
            "answers a delete with another 2xx status",
            || format!("{} where ours is {status}", actual.status),
        )?;
    } else {
        ensure(actual.status == status, || {
            format!("status {} where {status} is expected", actual.status)
        })?;
    }
    match out {
        Outcome::PopEmpty => ensure(body.is_none(), || {
            "a 204 must have no body at all (POP-6)".into()
        }),
        Outcome::Rejected(_) => unreachable!("handled above"),
        Outcome::DiscoveryRejected => subset(&to_value(&DiscoveryError::new()), body, "body"),
        Outcome::Push(items) => {
            let arr = body
                .and_then(Value::as_array)
                .ok_or("push answer must be a JSON array (PUSH-1)")?;
            ensure(arr.len() == items.len(), || {
                format!("{} results for {} items (PUSH-1)", arr.len(), items.len())
            })?;
            for (o, a) in items.iter().zip(arr) {
                check_push_item(o, a, w, strict)?;
            }
            Ok(())
        }
        Outcome::Pop(p) => check_pop(p, body, w),
        Outcome::Ack(items) => {
            let arr = body
                .and_then(Value::as_array)
                .ok_or("ack answer must be a JSON array")?;
            ensure(arr.len() == items.len(), || {
                format!("{} results for {} acknowledgments", arr.len(), items.len())
            })?;
            for (o, a) in items.iter().zip(arr) {
                check_ack_item(o, a)?;
            }
            Ok(())
        }
        Outcome::Extend(e) => {
            let r: ExtendResponse = parse(body, "extend answer (LEASE-2)")?;
            ensure(r.lease_id == e.lease_id, || {
                format!("leaseId {} for {}", r.lease_id, e.lease_id)
            })?;
            ensure(r.renewed == e.renewed, || {
                format!(
                    "renewed {} where {} live leases have that id (LEASE-1)",
                    r.renewed, e.renewed
                )
            })?;
            ensure(r.success == (e.renewed > 0), || {
                "success must say whether anything was renewed (LEASE-2)".into()
            })?;
            match (&r.expires_at, e.expires_at) {
                (None, None) => Ok(()),
                (Some(t), Some(s)) => check_time(t, s, "expiresAt"),
                (a, _) => Err(format!(
                    "expiresAt {a:?} where the model expects {:?}",
                    e.expires_at.map(|s| format_iso(s.lo))
                )),
            }?;
            if r.success {
                Ok(())
            } else {
                ensure(r.error.as_deref().is_some_and(|s| !s.is_empty()), || {
                    "a failed extend must carry an error".into()
                })
            }
        }
        Outcome::Txn(t) => {
            let b = body.ok_or("transaction answer has no body")?;
            // TXN-1 (all or nothing) is SEED: `success` must say which happened.
            ensure(b.get("success") == Some(&json!(t.success)), || {
                format!("success must be {} (TXN-1, TXN-2)", t.success)
            })?;
            // TXN-3 [PROJECT]: the rest of the answer's shape.
            project_part(
                w,
                strict,
                "TXN-3",
                "the transaction answer's shape differs",
                |w| {
                    let id = b.get("transactionId").and_then(Value::as_str).unwrap_or("");
                    ensure(is_uuid(id), || {
                        format!("transactionId {id:?} is not a UUID")
                    })?;
                    if !t.success {
                        let e = b.get("error").and_then(Value::as_str);
                        return ensure(e.is_some_and(|s| !s.is_empty()), || {
                            "an aborted transaction must say why in \"error\"".into()
                        });
                    }
                    let res = b
                        .get("results")
                        .and_then(Value::as_array)
                        .ok_or("results must be an array")?;
                    ensure(res.len() == t.results.len(), || {
                        format!(
                            "{} results where {} are expected",
                            res.len(),
                            t.results.len()
                        )
                    })?;
                    for (o, a) in t.results.iter().zip(res) {
                        match o {
                            TxnItemOut::Push(p) => check_push_item(p, a, w, true)?,
                            TxnItemOut::Ack(x) => check_ack_item(x, a)?,
                        }
                    }
                    Ok(())
                },
            )
        }
        // DLQ-2 [PROJECT]: the listing's shape and content.
        Outcome::Dlq(d) => {
            project_part(w, strict, "DLQ-2", "the dead-letter listing differs", |w| {
                check_dlq(d, body, w)
            })
        }
        Outcome::Delete(_) | Outcome::Health => {
            let rule = if matches!(out, Outcome::Health) {
                "HEALTH-1"
            } else {
                "DEL-1"
            };
            let expected = describe(out, w).body.expect("these answers have bodies");
            project_part(w, strict, rule, "the answer's body differs", |_| {
                subset(&expected, body, "body")
            })
        }
        Outcome::Configure(_) | Outcome::Maintenance { .. } | Outcome::PopMaintenance { .. } => {
            let expected = describe(out, w).body.expect("these answers have bodies");
            subset(&expected, body, "body")
        }
        Outcome::PopIllegal(_) => unreachable!("handled above"),
    }
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("serializes")
}

fn parse<T: serde::de::DeserializeOwned>(body: Option<&Value>, what: &str) -> Result<T, String> {
    let b = body.ok_or_else(|| format!("{what}: no body"))?;
    T::deserialize(b).map_err(|e| format!("{what}: {e}"))
}

/// Every key of `expected` is in `actual` with an equal value (extra keys allowed).
fn subset(expected: &Value, actual: Option<&Value>, path: &str) -> Check {
    let a = actual.ok_or_else(|| format!("{path} is missing"))?;
    match (expected, a) {
        (Value::Object(e), Value::Object(o)) => {
            for (k, v) in e {
                subset(v, o.get(k), &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        _ => ensure(expected == a, || {
            format!("{path} is {a} where {expected} is expected")
        }),
    }
}

fn check_time(actual: &str, s: Stamp, what: &str) -> Check {
    ensure(is_iso_utc_z(actual), || {
        format!("{what} {actual:?} is not ISO-8601 UTC with Z (POP-12)")
    })?;
    let t = parse_iso(actual).expect("checked");
    ensure(s.admits(t, 1), || {
        format!(
            "{what} {actual} is outside [{}, {}]",
            format_iso(s.lo),
            format_iso(s.hi)
        )
    })
}

fn check_push_item(o: &PushOut, a: &Value, w: &mut World, strict: bool) -> Check {
    let r: PushResult = parse(Some(a), "push result (PUSH-1)")?;
    ensure(r.index == o.index, || {
        format!("index {} where {} is expected", r.index, o.index)
    })?;
    ensure(r.status == o.status, || {
        format!(
            "item {}: status {:?} where {:?} is expected (PUSH-5, PUSH-7)",
            o.index, r.status, o.status
        )
    })?;
    ensure(r.queue_name == o.queue, || {
        format!("queueName {} where {} is expected", r.queue_name, o.queue)
    })?;
    ensure(r.transaction_id == o.transaction_id, || {
        format!(
            "transaction_id {} where {} is expected",
            r.transaction_id, o.transaction_id
        )
    })?;
    if o.minted_txn {
        ensure(is_uuid(&r.transaction_id), || {
            format!(
                "minted transaction_id {} is not a UUID (PUSH-4)",
                r.transaction_id
            )
        })?;
    }
    ensure(is_uuid_v7(&r.message_id), || {
        format!("message_id {} is not a UUIDv7", r.message_id)
    })?;
    match o.msg {
        // PUSH-5 [PROJECT]: a duplicate carries the original message's id. Lax: another
        // id is recorded; the original's id is then learnt from a later answer.
        Some(h) if !strict && r.status == PushStatus::Duplicate => {
            let original = w.ids.msgs.id(h).map(str::to_string);
            if let Some(id) = original {
                project_point(
                    w,
                    strict,
                    "PUSH-5",
                    id == r.message_id,
                    "a duplicate item carries another message_id than the original's",
                    || {
                        format!(
                            "item {}: {} where the original is {id}",
                            o.index, r.message_id
                        )
                    },
                )?;
            }
        }
        Some(h) => w
            .ids
            .msgs
            .bind("message", h, &r.message_id)
            .map_err(|e| format!("{e} (PUSH-5: a duplicate carries the original id)"))?,
        None => {}
    }
    Ok(())
}

fn check_ack_item(o: &AckOut, a: &Value) -> Check {
    let r: AckResult = parse(Some(a), "ack result")?;
    let e = &o.result;
    if o.may_fail && !r.success {
        // ACK step 6 [OPEN]: a blocked completion may be refused with an error.
        return ensure(
            r.error.as_deref().is_some_and(|s| !s.is_empty()) && r.index == e.index,
            || "a refused blocked completion must carry an error".into(),
        );
    }
    let same = r.index == e.index
        && r.transaction_id == e.transaction_id
        && r.success == e.success
        && r.error == e.error
        && r.lease_released == e.lease_released
        && r.dlq == e.dlq
        && r.noop == e.noop;
    ensure(same, || {
        format!(
            "ack item {} is {} where {} is expected",
            e.index,
            to_value(&r),
            to_value(e)
        )
    })
}

fn check_pop(p: &PopOut, body: Option<&Value>, w: &mut World) -> Check {
    let r: PopResponse = parse(body, "pop answer (POP-5)")?;
    ensure(r.success, || "success must be true on a 200 (POP-5)".into())?;
    ensure(r.queue == p.queue, || {
        format!(
            "queue {:?} where {:?} is expected (POP-5)",
            r.queue, p.queue
        )
    })?;
    ensure(r.consumer_group == p.group, || {
        format!(
            "consumerGroup {} where {} is expected",
            r.consumer_group, p.group
        )
    })?;
    ensure(r.partitions_claimed == p.partitions_claimed, || {
        format!(
            "partitionsClaimed {} where {} is expected (POP-3)",
            r.partitions_claimed, p.partitions_claimed
        )
    })?;
    match p.lease {
        None => ensure(r.lease_id.is_empty(), || {
            "autoAck answers leaseId \"\" (POP-7)".into()
        })?,
        Some(h) => {
            ensure(is_uuid(&r.lease_id), || {
                format!("leaseId {:?} is not a UUID", r.lease_id)
            })?;
            w.ids
                .leases
                .bind("lease", h, &r.lease_id)
                .map_err(|e| format!("{e}: a pop mints a fresh lease id"))?;
        }
    }
    ensure(r.messages.len() == p.messages.len(), || {
        format!(
            "{} messages where {} are expected (POP-1, POP-3, POP-14)",
            r.messages.len(),
            p.messages.len()
        )
    })?;
    let first = w
        .state
        .part(p.first)
        .ok_or("claimed partition vanished")?
        .name
        .clone();
    ensure(r.partition == first, || {
        format!(
            "top-level partition {} where {} (the first claimed) is expected",
            r.partition, first
        )
    })?;
    w.ids.parts.bind("partition", p.first, &r.partition_id)?;
    for (i, (m, &(ph, off))) in r.messages.iter().zip(&p.messages).enumerate() {
        let ctx = |s: String| format!("messages[{i}]: {s}");
        ensure(is_uuid(&m.partition_id), || {
            ctx(format!("partitionId {} is not a UUID", m.partition_id))
        })?;
        w.ids
            .parts
            .bind("partition", ph, &m.partition_id)
            .map_err(ctx)?;
        let part = w.state.part(ph).ok_or("delivered partition vanished")?;
        let msg = part.at(off).clone();
        let pname = part.name.clone();
        ensure(m.partition == pname, || {
            ctx(format!(
                "partition {} where {pname} is expected",
                m.partition
            ))
        })?;
        ensure(m.transaction_id == msg.transaction_id, || {
            ctx(format!(
                "transactionId {} where {} is expected (POP-1 offset order)",
                m.transaction_id, msg.transaction_id
            ))
        })?;
        ensure(is_uuid_v7(&m.id), || {
            ctx(format!("id {} is not a UUIDv7", m.id))
        })?;
        w.ids.msgs.bind("message", msg.msg, &m.id).map_err(ctx)?;
        ensure(m.lease_id == r.lease_id, || {
            ctx("leaseId differs from the top-level leaseId".into())
        })?;
        ensure(m.consumer_group == p.group, || {
            ctx("consumerGroup differs".into())
        })?;
        ensure(m.producer_sub.is_none(), || {
            ctx("producerSub must be null without authentication".into())
        })?;
        let created = w.state.created(&msg);
        check_time(&m.created_at, created, "createdAt").map_err(ctx)?;
        let t = parse_iso(&m.created_at).expect("checked");
        let write = msg.write as usize;
        w.state.writes[write] = w.state.writes[write].intersect(&Stamp::between(t, t + 1));
        let slot = w
            .state
            .part_mut(ph)
            .expect("exists")
            .messages
            .get_mut(off as usize - 1)
            .expect("exists");
        match (&slot.trace, &m.trace_id) {
            (Trace::None, None) => {}
            (Trace::Kept(t), Some(a)) if t == a => {}
            (Trace::Either(t), Some(a)) if t == a => slot.trace = Trace::Kept(t.clone()),
            (Trace::Either(_), None) => slot.trace = Trace::None,
            (e, a) => {
                return Err(ctx(format!(
                    "traceId {a:?} where {e:?} is expected (PUSH-9)"
                )))
            }
        }
        match &slot.data {
            Data::Value(v) => ensure(**v == m.data, || {
                ctx(format!("data {} where {} is expected", m.data, v))
            })?,
            Data::Absent => {
                ensure(m.data.is_null() || m.data == json!({}), || {
                    ctx(format!("data {} for an absent payload (PUSH-9)", m.data))
                })?;
                slot.data = Data::Value(std::sync::Arc::new(m.data.clone()));
            }
        }
    }
    Ok(())
}

fn check_dlq(d: &DlqOut, body: Option<&Value>, w: &mut World) -> Check {
    let r: DlqResponse = parse(body, "dead-letter listing (DLQ-2)")?;
    ensure(
        r.total == d.total && r.limit == d.limit && r.offset == d.offset,
        || {
            format!(
                "total/limit/offset {}/{}/{} where {}/{}/{} are expected",
                r.total, r.limit, r.offset, d.total, d.limit, d.offset
            )
        },
    )?;
    ensure(r.messages.len() == d.items.len(), || {
        format!(
            "{} dead letters where {} are expected",
            r.messages.len(),
            d.items.len()
        )
    })?;
    for (a, &i) in r.messages.iter().zip(&d.items) {
        let rec = w.state.dead_letters[i].clone();
        let part = w
            .state
            .part(rec.part)
            .ok_or("dead letter of a deleted partition")?;
        let msg = part.at(rec.offset).clone();
        let (pname, qname) = (part.name.clone(), part.queue.clone());
        w.ids.msgs.bind("message", msg.msg, &a.id)?;
        w.ids.parts.bind("partition", rec.part, &a.partition_id)?;
        let same = a.transaction_id == msg.transaction_id
            && a.partition == pname
            && a.queue == qname
            && a.consumer_group == rec.group
            && a.error_message == rec.error
            && a.retry_count == rec.retry_count;
        ensure(same, || {
            format!(
                "dead letter {} differs from the model's {:?}",
                to_value(a),
                rec
            )
        })?;
        check_time(&a.created_at, w.state.created(&msg), "createdAt")?;
        check_time(&a.failed_at, rec.failed_at, "failedAt")?;
        match &msg.data {
            Data::Value(v) => ensure(**v == a.data, || {
                format!("dead letter data {} where {v} is expected", a.data)
            })?,
            Data::Absent => ensure(a.data.is_null() || a.data == json!({}), || {
                "absent payload shown wrongly".into()
            })?,
        }
    }
    Ok(())
}
