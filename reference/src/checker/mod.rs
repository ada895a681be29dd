//! Checking a real broker's answers against the model (PROTOCOL.md section 13).
//!
//! A [`Checker`] holds every state the broker may be in given what it has answered so
//! far (a set of [`World`]s: model state plus the ids learnt). For each request it is
//! told when the request was sent and when the answer arrived; the broker's "now" lay
//! in between (widened by a skew allowance). Each world explores every outcome the
//! model allows for that time interval and the OPEN points, follows the broker's own
//! choices where the protocol lets it choose (which partitions a pop claims, POP-4;
//! which ids and timestamps it mints), and keeps the outcomes whose answer matches
//! (its `answer` module). No world left is a divergence: the broker *did* something no allowed
//! behaviour does. Nothing is ever decided by a guess about timing, so a check is never
//! flaky.
//!
//! How much an answer may differ is the [`Judge`]'s call. Strict (our own server): every
//! difference is a divergence. Lax on PROJECT points: departures from this project's
//! decisions are recorded as [`Finding`]s, answer-only ones matched loosely and the ones
//! that change state explored as alternatives (see `Ctx::project`). Keep-going (a broker
//! that is not ours): an answer that differs only in what it *says* is a finding too, the
//! check goes on from the state matching what the broker did, and of the outcomes that
//! match, those needing the fewest soft differences are kept. A route the broker
//! lacks (404, 405, 501) is a finding that leaves the state as it was, and a pop that
//! claimed less than it was allowed is read as the smaller claim it was.

mod answer;
mod diagnosis;
mod digest;

pub use answer::Judge;

use crate::choice::{explore_under, TooManyBranches};
use crate::finding::{note, Accept, Finding, Kind};
use crate::ids::IdBook;
use crate::model::*;
use crate::policy::Policy;
use crate::render::Renderer;
use crate::rules::*;
use crate::time::{format_iso, Millis, Stamp};
use crate::variant::{Variant, VariantSet};
use crate::wire::*;
use answer::{check_answer, delivered_parts, Miss};
use serde_json::Value;

/// One possible state of the broker, with the ids learnt in it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct World {
    /// The model state this world stands for.
    pub state: State,
    /// The broker's ids learnt so far in this world, tied to the model's handles.
    pub ids: IdBook,
    /// How the broker departed from the protocol on the way to this state (empty under a
    /// strict checker, where a departure is a divergence).
    pub(crate) findings: Vec<Finding>,
    /// The diagnosed causes this world plays (see [`crate::variant`]).
    pub variants: VariantSet,
}

impl World {
    /// The world an outcome of a request leads to: its state, the ids learnt so far, and
    /// the findings with the PROJECT alternatives the outcome `taken`.
    fn after(&self, state: State, taken: Vec<Finding>) -> World {
        let mut w = World {
            state,
            ids: self.ids.clone(),
            findings: self.findings.clone(),
            variants: self.variants,
        };
        for d in taken {
            note(&mut w.findings, d);
        }
        w
    }

    fn same_state(&self, other: &World) -> bool {
        self.variants == other.variants && self.state == other.state && self.ids == other.ids
    }

    /// A wide digest of everything that decides which answers the world accepts from
    /// here on, read in one canonical order (the `digest` module): two orders of the same
    /// calls that reach one state under different numberings of its partitions,
    /// messages, writes and leases have one digest.
    pub fn digest(&self) -> u128 {
        digest::digest(self)
    }

    /// A digest of the state and ids (`State::fingerprint` and how many ids are
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
            self.variants,
        )
            .hash(&mut h);
        h.finish()
    }
}

/// A world kept by a step, with what the step needed to reach it.
struct Kept {
    world: World,
    print: u64,
    /// How many soft differences the answer needed under this world.
    added: usize,
    /// The model's answer under this world, when it needed soft differences (what the
    /// broker meant, for the case reading it and for a report).
    expected: Option<HttpResponse>,
}

/// Worlds being collected by a step.
#[derive(Default)]
struct Next {
    kept: Vec<Kept>,
    /// Some world could have answered a pop with messages (it did not match).
    could_deliver: bool,
}

impl Next {
    /// Adds `k` unless a world with the same state is there; of two, the one needing
    /// fewer soft differences, then with fewer findings, is kept (the broker may still
    /// follow the protocol there).
    fn merge(&mut self, k: Kept) {
        let twin = self
            .kept
            .iter_mut()
            .find(|x| x.print == k.print && x.world.same_state(&k.world));
        match twin {
            Some(x) if (k.added, k.world.findings.len()) < (x.added, x.world.findings.len()) => {
                *x = k
            }
            Some(_) => {}
            None => self.kept.push(k),
        }
    }

    fn len(&self) -> usize {
        self.kept.len()
    }

    /// Adds `w` as another reading of the same answer: it needs as few differences as the
    /// best reading kept so far, with that reading's expected answer.
    fn merge_as_best(&mut self, w: World) {
        let best = self.kept.iter().min_by_key(|k| k.added);
        let (added, expected) = best.map_or((0, None), |k| (k.added, k.expected.clone()));
        self.merge(Kept {
            print: w.fingerprint(),
            world: w,
            added,
            expected,
        });
    }

    /// Keeps only the worlds whose answer needed the fewest soft differences: an
    /// interpretation under which the broker said what the protocol says wins. Returns
    /// the worlds and the model's answer under the first, when it needed differences.
    fn fewest_differences(self) -> (Vec<World>, Option<HttpResponse>) {
        let least = self.kept.iter().map(|k| k.added).min().unwrap_or(0);
        let mut expected = None;
        let mut worlds = Vec::new();
        for k in self.kept.into_iter().filter(|k| k.added == least) {
            if expected.is_none() {
                expected = k.expected;
            }
            worlds.push(k.world);
        }
        (join_twins(worlds), expected)
    }
}

/// The worlds with every pair that differs only in one lease's deadline joined into one
/// (`State::joined`), which loses nothing and keeps calls near a deadline from
/// multiplying the worlds.
fn join_twins(worlds: Vec<World>) -> Vec<World> {
    if worlds.len() < 2 {
        return worlds;
    }
    let mut out: Vec<World> = Vec::with_capacity(worlds.len());
    'next: for w in worlds {
        for o in out.iter_mut() {
            if o.variants != w.variants || o.findings != w.findings || o.ids != w.ids {
                continue;
            }
            if let Some(state) = o.state.joined(&w.state) {
                o.state = state;
                continue 'next;
            }
        }
        out.push(w);
    }
    out
}

/// A broker answer no allowed behaviour produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// The request the broker answered.
    pub request: HttpRequest,
    /// The broker's answer.
    pub actual: HttpResponse,
    /// Answers the model would accept (rendered with placeholders), one per outcome.
    pub expected: Vec<HttpResponse>,
    /// Why each expected answer did not match.
    pub reasons: Vec<String>,
    /// The rules of the checks that failed (the route's rules when none was reached), or
    /// of the diagnosed causes.
    pub rules: Vec<RuleId>,
    /// The variants that explain this answer and everything before it, when a diagnosis
    /// found some (their rules are `rules`).
    pub(crate) causes: Vec<Variant>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules: Vec<&str> = self.rules.iter().map(|r| r.as_str()).collect();
        writeln!(
            f,
            "{} {} ({})",
            self.request.method,
            self.request.path,
            rules.join(", ")
        )?;
        writeln!(
            f,
            "  actual: {} {}",
            self.actual.status,
            body_text(&self.actual.body)
        )?;
        for v in &self.causes {
            writeln!(f, "  cause: {} ({}): {}", v.rule(), v.name(), v.def().what)?;
        }
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
    /// A broker answer no allowed behaviour produces.
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
    /// The pop `timeout` default the broker uses (its `DEFAULT_TIMEOUT`), in milliseconds.
    pub default_timeout_ms: u64,
    /// The largest body the broker accepts, in bytes (413 above).
    pub body_limit: usize,
    /// The most worlds kept before the check is inconclusive.
    pub max_worlds: usize,
    /// Hold the broker to every PROJECT decision (true: a departure is a divergence).
    /// False: accept departures on PROJECT points and record them as findings.
    pub strict_project: bool,
    /// Record an answer that differs only in what it says as a finding and go on, on
    /// any rule (a broker that is not ours). False: such an answer is a divergence.
    pub keep_going: bool,
    /// Deviations declared known (`--accept`): allowed everywhere, listed as findings.
    pub accept: Vec<Accept>,
    /// The broker has authentication on, and what the suite's tokens stand for
    /// (section 14); `None`: it is off.
    pub auth: Option<std::sync::Arc<TokenBook>>,
    /// The model's answer to the last step, when that step matched only with new
    /// findings (for a report's expected answer and diff).
    last_expected: Option<HttpResponse>,
    /// The last step was a pop followed as a smaller claim than the model allowed.
    last_claim_short: bool,
    /// The last step was a pop that delivered nothing where the model also allowed a
    /// delivery (a deadline inside the request's time interval).
    last_empty_undecided: bool,
    /// Name the cause of an answer no allowed behaviour explains, from the library of
    /// variants (a session's checker; not a linearizability search, where most orders fail).
    pub diagnose: bool,
    /// Say why an answer no allowed behaviour explains was refused: the answers the
    /// model allows and the PROJECT points that would have allowed it. A search that
    /// tries many orders, most of them refused, turns this off and asks again for the
    /// refusals it reports; whether a step is refused never depends on it.
    pub explain: bool,
    /// What diagnosis replays: every exchange checked so far, and the worlds before the first.
    history: Vec<Rec>,
    initial: Option<Vec<World>>,
    /// Every variant an exploration asked about (the candidates of a diagnosis).
    asked: VariantSet,
}

/// One exchange as checked: its answer, or `None` for a request applied unanswered.
#[derive(Clone, Debug)]
struct Rec {
    req: HttpRequest,
    sent: Millis,
    received: Millis,
    actual: Option<HttpResponse>,
}

/// What exploring a step found: the worlds kept, (up to 8) outcomes that did not match
/// with why, and the variants the operation asked about.
type Explored = (Next, Vec<(HttpResponse, Miss)>, VariantSet);

/// The request as each kind of broker reads it: per set of reading variants.
type Readings = Vec<(VariantSet, Result<Request, Op>)>;

/// The request as `w`'s broker reads it (the protocol's reading when it plays none).
fn reading_for<'r>(readings: &'r Readings, w: &World) -> &'r Result<Request, Op> {
    let key = reading_part(w.variants);
    &readings
        .iter()
        .find(|r| r.0 == key)
        .unwrap_or(&readings[0])
        .1
}

/// The reading variants of `set` (the ones that change how a request is parsed).
fn reading_part(set: VariantSet) -> VariantSet {
    VariantSet::of(&set.iter().filter(|v| v.is_reading()).collect::<Vec<_>>())
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

impl Checker {
    /// A checker of one fresh broker: one world, the default timeout and limits, strict on PROJECT
    /// points.
    pub fn new() -> Checker {
        Checker {
            worlds: vec![World::default()],
            skew_ms: 5,
            default_timeout_ms: DEFAULT_POP_TIMEOUT_MS,
            body_limit: 16 << 20,
            max_worlds: 256,
            strict_project: true,
            keep_going: false,
            accept: Vec::new(),
            auth: None,
            last_expected: None,
            last_claim_short: false,
            last_empty_undecided: false,
            diagnose: false,
            explain: true,
            history: Vec::new(),
            initial: None,
            asked: VariantSet::EMPTY,
        }
    }

    /// Every world plays the variants `set` from now on (a search for the cause of a
    /// concurrent history's violation).
    pub fn play(&mut self, set: VariantSet) {
        for w in &mut self.worlds {
            w.variants = set;
        }
    }

    /// RET-3: the broker's retention interval, how late after becoming removable a
    /// message may still be delivered (the suite's `--retention-interval-ms`).
    pub fn set_retention_lag(&mut self, ms: Millis) {
        for w in &mut self.worlds {
            w.state.retention_lag_ms = ms;
        }
    }

    /// The request as the broker sees it: admitted or refused (AUTH-4), parsed, and
    /// with its caller's `sub` on what it pushes (AUTH-2).
    fn parse(&self, req: &HttpRequest) -> Result<Request, Rejection> {
        let none: &[String] = &[];
        let (caller, public) = match &self.auth {
            None => (Caller::Open, none),
            Some(book) => (book.caller(req.bearer.as_deref()), &book.public[..]),
        };
        parse_as(
            req,
            caller,
            public,
            self.default_timeout_ms,
            self.body_limit,
        )
    }

    fn judge(&self) -> Judge<'_> {
        Judge {
            strict_project: self.strict_project,
            keep_going: self.keep_going,
            accept: &self.accept,
        }
    }

    /// The departures the broker has certainly made so far: those of the remaining
    /// world with the fewest (empty when some world follows the protocol throughout); of
    /// equals, one with a diagnosed cause, which names more than a generic departure.
    pub fn findings(&self) -> Vec<Finding> {
        self.worlds
            .iter()
            .min_by_key(|w| {
                let caused = w.findings.iter().any(|f| f.kind == Kind::Cause);
                (w.findings.len(), !caused)
            })
            .map(|w| w.findings.clone())
            .unwrap_or_default()
    }

    /// The model's answer to the last step when matching it needed new findings.
    pub fn last_expected(&self) -> Option<&HttpResponse> {
        self.last_expected.as_ref()
    }

    /// Whether the last step was a pop that claimed less than it could (followed as such
    /// in keep-going mode): a client that needs the messages may ask again.
    pub fn last_claim_short(&self) -> bool {
        self.last_claim_short
    }

    /// Whether the last step was a pop that delivered nothing where the model also
    /// allowed a delivery: a client waiting for a message the spec does not time asks again.
    pub fn last_empty_undecided(&self) -> bool {
        self.last_empty_undecided
    }

    /// The states still possible.
    pub fn worlds(&self) -> &[World] {
        &self.worlds
    }

    /// Adds the states `other` holds and this one does not: after two orders of the same
    /// calls, the broker may be in a state of either (a watcher's search over a stretch
    /// of overlapping calls keeps every order the model accepts). As within a step, the
    /// readings under which the broker departed least win: of twin states the one with
    /// fewer findings is kept, and worlds with more findings than the fewest are dropped.
    /// Returns how many states remain possible; past `max_worlds` the check is
    /// inconclusive.
    pub fn absorb(&mut self, other: Checker) -> Result<usize, StepError> {
        for w in other.worlds {
            let print = w.fingerprint();
            let twin = self
                .worlds
                .iter_mut()
                .find(|x| x.fingerprint() == print && x.same_state(&w));
            match twin {
                Some(x) if w.findings.len() < x.findings.len() => *x = w,
                Some(_) => {}
                None => self.worlds.push(w),
            }
        }
        let least = self
            .worlds
            .iter()
            .map(|w| w.findings.len())
            .min()
            .unwrap_or(0);
        self.worlds.retain(|w| w.findings.len() == least);
        if self.worlds.len() > self.max_worlds {
            return Err(StepError::Inconclusive(format!(
                "more than {} possible states",
                self.max_worlds
            )));
        }
        Ok(self.worlds.len())
    }

    /// Forgets, for diagnosis, the exchanges before now once more than `keep` are
    /// remembered: a later diagnosis replays from the states possible now. Memory then
    /// follows `keep`, not the traffic, at the price of causes further back than that.
    pub fn forget_history_beyond(&mut self, keep: usize) {
        if self.history.len() > keep {
            self.initial = Some(self.worlds.clone());
            self.history.clear();
        }
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
        self.last_expected = None;
        self.last_claim_short = false;
        self.last_empty_undecided = false;
        let now = Stamp::between(sent - self.skew_ms, received + self.skew_ms);
        self.remember(req, sent, received, Some(actual));
        let Some(readings) = self.readings(req) else {
            return Ok(self.worlds.len());
        };
        let op_in = |w: &World| match reading_for(&readings, w) {
            Ok(r) => w.ids.resolve(r),
            Err(op) => op.clone(),
        };
        let parsed = &readings[0].1;
        if let Some(n) = self.route_missing(req, parsed, actual) {
            return Ok(n);
        }
        let (mut next, mut misses, asked) = self.explore(req, now, actual, &op_in)?;
        self.asked = self.asked.union(asked);
        self.last_empty_undecided = !next.kept.is_empty()
            && next.could_deliver
            && delivered_parts(actual).is_some_and(|p| p.is_empty());
        let mut causes = Vec::new();
        let mut followed = None;
        // Strictness decides whether a PROJECT departure fails, never what caused it: an
        // answer the lax checker allows with PROJECT findings is named by those, not by a
        // variant that would explain it away (a peek that misreports a retry count is
        // MGMT-6's departure, not proof that failures go uncharged). A cause the run
        // accepts is still followed.
        let explained = if next.kept.is_empty() && self.explains() {
            self.project_explanation(req, now, actual, &op_in)
        } else {
            Vec::new()
        };
        if next.kept.is_empty() && self.diagnose {
            if let Some(d) = self.diagnosis(req, actual) {
                if self.keep_going || d.findings.iter().all(|f| self.judge().allows(f)) {
                    followed = Some(d);
                } else if explained.is_empty() {
                    causes = d.causes;
                }
            }
        }
        if next.kept.is_empty() {
            if let Some(smaller) = self.smaller_claim(req, now, actual, &op_in)? {
                next = smaller;
                self.last_claim_short = true;
            }
        }
        // A cause and a smaller claim may both explain the answer (a lease kept too long,
        // or a stale read): both readings are kept, and later answers decide.
        if let Some(d) = followed {
            let claimed = !next.kept.is_empty();
            for w in d.worlds {
                next.merge_as_best(w);
            }
            if !claimed {
                self.last_expected = d.expected;
                self.worlds = next.fewest_differences().0;
                return Ok(self.worlds.len());
            }
        }
        if next.kept.is_empty() {
            let op = op_in(&self.worlds[0]);
            let mut rules: Vec<RuleId> = Vec::new();
            for m in &misses {
                if !rules.contains(&m.1.rule) {
                    rules.push(m.1.rule);
                }
            }
            if rules.is_empty() {
                rules = rules_for(&op);
            }
            // A strict checker's divergence that PROJECT findings explain is named by their
            // rules alone: the broker decided or answered a PROJECT point otherwise,
            // whatever SEED check the answer failed under our decision.
            if !explained.is_empty() {
                rules = explained;
            }
            if !causes.is_empty() {
                rules = causes.iter().map(|v| v.rule()).collect();
                rules.dedup();
            }
            if causes.is_empty() && self.state_accepted(&rules) {
                return Ok(self.resync(req, sent, received, &rules));
            }
            let (expected, reasons) = misses
                .drain(..)
                .map(|(e, m)| (e, format!("{} ({})", m.why, m.rule)))
                .unzip();
            return Err(StepError::Diverged(Box::new(Divergence {
                request: req.clone(),
                actual: actual.clone(),
                expected,
                reasons,
                rules,
                causes,
            })));
        }
        if !self.last_claim_short {
            self.unseen_empty_pop(&op_in, actual, &mut next);
        }
        let (worlds, expected) = next.fewest_differences();
        self.last_expected = expected;
        self.worlds = worlds;
        Ok(self.worlds.len())
    }

    /// Whether a refusal is explained: when asked to, and whenever a state divergence
    /// is accepted, since the rules the explanation names decide whether it is.
    fn explains(&self) -> bool {
        self.explain
            || self
                .accept
                .iter()
                .any(|a| a.variant.is_none() && a.kind.is_none_or(|k| k == Kind::State))
    }

    /// The rules of the PROJECT findings (alternatives taken, answer-only differences)
    /// with which `actual` would have been allowed, when this checker is strict (empty
    /// otherwise, or when none would).
    fn project_explanation(
        &self,
        req: &HttpRequest,
        now: Stamp,
        actual: &HttpResponse,
        op_in: &dyn Fn(&World) -> Op,
    ) -> Vec<RuleId> {
        if !self.strict_project {
            return Vec::new();
        }
        let mut lax = self.clone();
        lax.strict_project = false;
        let Ok((next, _, _)) = lax.explore(req, now, actual, op_in) else {
            return Vec::new();
        };
        let before: Vec<&Finding> = self.worlds.iter().flat_map(|w| &w.findings).collect();
        // A PROJECT point decided otherwise explains the answer; differences in the answer
        // alone name it only when no such point does.
        let (mut decided, mut answered) = (Vec::new(), Vec::new());
        for k in &next.kept {
            for f in &k.world.findings {
                if f.level != Level::Project || before.contains(&f) {
                    continue;
                }
                let rules = if f.kind == Kind::Alternative {
                    &mut decided
                } else {
                    &mut answered
                };
                if !rules.contains(&f.rule) {
                    rules.push(f.rule);
                }
            }
        }
        if decided.is_empty() {
            answered
        } else {
            decided
        }
    }

    /// Every world's outcomes that match `actual`, and (up to 8) the ones that did not
    /// with why.
    fn explore(
        &self,
        req: &HttpRequest,
        now: Stamp,
        actual: &HttpResponse,
        op_in: &dyn Fn(&World) -> Op,
    ) -> Result<Explored, StepError> {
        let mut next = Next::default();
        let mut asked = VariantSet::EMPTY;
        let mut misses: Vec<(HttpResponse, Miss)> = Vec::new();
        let judge = self.judge();
        let explain = self.explains();
        // A pop answer is read once, not once per world.
        let parts = delivered_parts(actual);
        for world in &self.worlds {
            let op = op_in(world);
            for order in pop_orders(world, &op, parts.as_deref()) {
                let (branches, more) = outcomes(
                    world,
                    &op,
                    now,
                    order.as_deref(),
                    !judge.strict_project,
                    |i| minted_txn(&op, actual, i),
                )
                .map_err(too_many(req))?;
                asked = asked.union(more);
                for (out, st, taken) in branches {
                    let mut w = world.after(st, taken);
                    match check_answer(&out, actual, &mut w, &world.state, &req.path, judge) {
                        Ok(added) => next.merge(Kept {
                            print: w.fingerprint(),
                            expected: (added > 0).then(|| describe(&out, &w)),
                            world: w,
                            added,
                        }),
                        Err(miss) => {
                            // With the order observed (none), a delivery shows as an illegal claim.
                            next.could_deliver |=
                                matches!(out, Outcome::Pop(_) | Outcome::PopIllegal(..));
                            if misses.len() < 8 && explain {
                                let shown = match out {
                                    // Show what the model would have delivered instead.
                                    Outcome::PopIllegal(..) => {
                                        policy_pop(world, &op, now).unwrap_or((out, w))
                                    }
                                    _ => (out, w),
                                };
                                misses.push((describe(&shown.0, &shown.1), miss));
                            }
                        }
                    }
                }
            }
            if next.len() > self.max_worlds {
                return Err(StepError::Inconclusive(format!(
                    "more than {} possible states",
                    self.max_worlds
                )));
            }
        }
        Ok((next, misses, asked))
    }

    /// Whether the user accepted state divergences at every one of `rules`
    /// (`--accept RULE:state` or `--accept RULE`).
    fn state_accepted(&self, rules: &[RuleId]) -> bool {
        !rules.is_empty()
            && rules.iter().all(|r| {
                self.accept.iter().any(|a| {
                    a.rule == *r && a.variant.is_none() && a.kind.is_none_or(|k| k == Kind::State)
                })
            })
    }

    /// An accepted state divergence: the broker did something the model cannot name, so
    /// the request is taken as applied with any outcome the model allows, or not at all
    /// (as an unanswered one), with a [`Kind::State`] finding; checking goes on.
    fn resync(
        &mut self,
        req: &HttpRequest,
        sent: Millis,
        until: Millis,
        rules: &[RuleId],
    ) -> usize {
        let before = self.worlds.clone();
        let diagnose = std::mem::replace(&mut self.diagnose, false);
        let applied = self.step_unknown(req, sent, until).is_ok();
        self.diagnose = diagnose;
        let f = Finding::new(
            rules[0],
            Kind::State,
            format!(
                "{} {} did what no allowed behaviour does",
                req.method,
                route_of(req)
            ),
        );
        let mut next = Next::default();
        let after = if applied { self.worlds.clone() } else { vec![] };
        for mut w in before.into_iter().chain(after) {
            note(&mut w.findings, f.clone());
            next.merge(Kept {
                print: w.fingerprint(),
                world: w,
                added: 0,
                expected: None,
            });
        }
        self.worlds = next.fewest_differences().0;
        self.worlds.len()
    }

    /// A route the broker lacks (404, 405, 501 where the model answers): in keep-going
    /// mode a finding on every world, whose state stays as it was (nothing was done).
    fn route_missing(
        &mut self,
        req: &HttpRequest,
        parsed: &Result<Request, Op>,
        actual: &HttpResponse,
    ) -> Option<usize> {
        let Ok(r) = parsed else { return None };
        if !self.keep_going || !matches!(actual.status, 404 | 405 | 501) {
            return None;
        }
        // Management routes answer 404 for what they name and do not find (MGMT-1): the
        // model judges those. A broker without any of them is found before the run.
        if matches!(r, Request::Manage(_)) {
            return None;
        }
        let route = r.route().route();
        let f = Finding::new(
            route.rule,
            Kind::RouteMissing,
            format!("{} {} answers {}", req.method, route.path, actual.status),
        )
        .example(format!(
            "{} {} -> {} {}",
            req.method,
            req.path,
            actual.status,
            body_text(&actual.body)
        ));
        for w in &mut self.worlds {
            note(&mut w.findings, f.clone());
        }
        Some(self.worlds.len())
    }

    /// A pop answered with nothing may have done nothing at all, in keep-going mode: a
    /// broker reading a stale view, or one that records no queue row (POP-8) or group
    /// subscription (POP-13 [PROJECT]) for a pop that finds nothing. The state before
    /// it stays possible, with a finding that shows once the model's own reading is
    /// ruled out by a later answer.
    fn unseen_empty_pop(
        &self,
        op_in: &dyn Fn(&World) -> Op,
        actual: &HttpResponse,
        next: &mut Next,
    ) {
        let empty = delivered_parts(actual).is_some_and(|p| p.is_empty());
        if !self.keep_going || !empty {
            return;
        }
        for w in &self.worlds {
            let Op::Pop(p) = op_in(w) else { return };
            let queue = match &p.route {
                PopRoute::Queue(q) | PopRoute::Partition(q, _) => Some(q.clone()),
                PopRoute::Discovery { .. } => None,
            };
            let f = match queue {
                Some(q) if !w.state.queues.contains_key(&q) => Finding::new(
                    POP_8,
                    Kind::Claim,
                    "a pop on an unknown queue that answered nothing did not create its row",
                ),
                _ => Finding::new(
                    POP_18,
                    Kind::Claim,
                    "a pop that answered nothing did not record the group's subscription",
                ),
            };
            let mut unchanged = w.clone();
            note(&mut unchanged.findings, f);
            next.merge_as_best(unchanged);
        }
    }

    /// A pop that delivered fewer messages (or partitions) than the model allows, or
    /// nothing at all: in keep-going mode, the same pop with `batch` and `partitions` set
    /// to what it claimed; when that matches, the broker is followed with a
    /// [`Kind::Claim`] finding (POP-3 for a smaller claim, POP-2 for none: what it did is
    /// known, and a message it did not deliver is still owed to later pops).
    fn smaller_claim(
        &self,
        req: &HttpRequest,
        now: Stamp,
        actual: &HttpResponse,
        op_in: &dyn Fn(&World) -> Op,
    ) -> Result<Option<Next>, StepError> {
        let Some(parts) = delivered_parts(actual) else {
            return Ok(None);
        };
        if !self.keep_going {
            return Ok(None);
        }
        let mut claimed: Vec<&str> = parts.iter().map(|(id, _)| id.as_str()).collect();
        let n = claimed.len() as u32;
        claimed.dedup();
        let k = claimed.len() as u32;
        let smaller = |w: &World| match op_in(w) {
            Op::Pop(mut p) if p.query.batch > n || p.query.partitions.is_none_or(|c| c > k) => {
                // A budget of nothing claims nothing on any route.
                p.query.batch = n;
                if n > 0 {
                    p.query.partitions = Some(k);
                }
                Op::Pop(p)
            }
            other => other,
        };
        if !matches!(smaller(&self.worlds[0]), Op::Pop(p) if p.query.batch == n) {
            return Ok(None);
        }
        let (mut next, _, _) = self.explore(req, now, actual, &smaller)?;
        let asked = match op_in(&self.worlds[0]) {
            Op::Pop(p) => format!(
                "batch {}, partitions {}",
                p.query.batch,
                p.query
                    .partitions
                    .map_or("no cap".into(), |c| c.to_string())
            ),
            _ => String::new(),
        };
        let f = if n == 0 {
            Finding::new(POP_2, Kind::Claim, "a pop answers nothing while messages are claimable")
        } else {
            Finding::new(
                POP_3,
                Kind::Claim,
                "a pop claims fewer messages or partitions than the request allows and are claimable",
            )
        }
        .example(format!(
            "{} {} ({asked}) claimed {n} message(s) in {k} partition(s)",
            req.method, req.path
        ));
        if n == 0 {
            // A pop that saw nothing may not have seen the queue at all (a stale read):
            // its side effects (a queue row, a subscription, POP-8, POP-13) may be
            // missing too, so the state before it stays possible.
            for w in &self.worlds {
                next.merge_as_best(w.clone());
            }
        }
        for k in &mut next.kept {
            note(&mut k.world.findings, f.clone());
        }
        Ok((!next.kept.is_empty()).then_some(next))
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
        self.remember(req, sent, until, None);
        let Some(readings) = self.readings(req) else {
            return Ok(self.worlds.len());
        };
        let mut next = Next::default();
        for world in &self.worlds {
            // Rejections change nothing.
            let Ok(parsed) = reading_for(&readings, world) else {
                continue;
            };
            let op = world.ids.resolve(parsed);
            let allow = !self.strict_project;
            let (branches, _) = outcomes(world, &op, now, None, allow, |i| format!("<lost {i}>"))
                .map_err(too_many(req))?;
            for (out, st, taken) in branches {
                if matches!(out, Outcome::PopIllegal(..)) {
                    continue;
                }
                let w = world.after(st, taken);
                next.merge(Kept {
                    print: w.fingerprint(),
                    world: w,
                    added: 0,
                    expected: None,
                });
            }
            if next.len() > self.max_worlds {
                return Err(StepError::Inconclusive(format!(
                    "more than {} possible states",
                    self.max_worlds
                )));
            }
        }
        if next.kept.is_empty() && readings.iter().all(|r| r.1.is_err()) {
            return Ok(self.worlds.len());
        }
        if next.kept.is_empty() {
            return Err(StepError::Inconclusive(format!(
                "no outcome for the unanswered {} {}",
                req.method, req.path
            )));
        }
        self.worlds = next.fewest_differences().0;
        Ok(self.worlds.len())
    }
}

/// Every outcome the model allows for `op` in `world` at `now`, with the state each
/// leads to. `order` is a pop's observed partition order (POP-4); `minter` names the
/// transactionIds the broker minted. With `allow_project`, PROJECT alternatives are
/// explored too; each outcome comes with the ones it took.
type Branch = (Outcome, State, Vec<Finding>);

fn outcomes(
    world: &World,
    op: &Op,
    now: Stamp,
    order: Option<&[PartH]>,
    allow_project: bool,
    minter: impl Fn(usize) -> String,
) -> Result<(Vec<Branch>, VariantSet), TooManyBranches> {
    explore_under(now, allow_project, world.variants, |ctx| {
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
    .map(|(v, asked)| {
        let branches = v
            .into_iter()
            .map(|((out, st), _, taken)| (out, st, taken))
            .collect();
        (branches, asked)
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
    let (branches, _) = outcomes(world, op, now, None, false, |i| format!("<minted {i}>")).ok()?;
    let (out, state, _) = branches.into_iter().next()?;
    Some((
        out,
        World {
            state,
            ids: world.ids.clone(),
            findings: world.findings.clone(),
            variants: world.variants,
        },
    ))
}

/// The route pattern `req` matches (`/api/v1/pop/queue/{queue}`), else its path.
fn route_of(req: &HttpRequest) -> String {
    let segments: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    crate::wire::find(&req.method, &segments)
        .map_or_else(|| req.path.clone(), |(r, _)| r.path.to_string())
}

/// Every rule a request is judged by (a divergence names the ones whose checks failed).
fn rules_for(op: &Op) -> Vec<RuleId> {
    match op {
        Op::Rejected(_) => vec![PUSH_8, POP_10, ACK_0, LEASE_3, CFG_3, TXN_3],
        Op::DiscoveryRejected => vec![POP_10],
        Op::Push(_) => vec![PUSH_1, PUSH_2, PUSH_3, PUSH_4, PUSH_5, PUSH_6, PUSH_7],
        Op::Pop(_) => vec![
            POP_1, POP_2, POP_3, POP_4, POP_5, POP_6, POP_7, POP_9, POP_12, POP_13, POP_14, ACK_4,
            ACK_7,
        ],
        Op::Ack(_) => vec![ACK_1, ACK_2, ACK_3, ACK_5, ACK_6, ACK_8, DLQ_1],
        Op::Extend { .. } => vec![LEASE_1, LEASE_2, LEASE_3],
        Op::Txn { .. } => vec![TXN_1, TXN_2, TXN_3, TXN_6],
        Op::Configure(_) => vec![CFG_1, CFG_2, CFG_3, CFG_4, RET_2],
        Op::Delete(_) => vec![DEL_1],
        Op::Dlq(_) => vec![DLQ_2],
        Op::SetPushMaintenance(_) | Op::GetPushMaintenance => vec![MAINT_1, PUSH_7],
        Op::SetPopMaintenance(_) | Op::GetPopMaintenance => vec![MAINT_2],
        Op::Health => vec![HEALTH_1],
        Op::Manage { req, .. } => vec![req.rule(), MGMT_1, MGMT_2],
    }
}

/// The transactionId the broker minted for the `i`-th pushed item of `op`, read from
/// its answer (a placeholder when the answer has none; matching then fails).
fn minted_txn(op: &Op, actual: &HttpResponse, i: usize) -> String {
    let from = match (op, &actual.body) {
        (Op::Push(_), Some(Value::Array(items))) => items.get(i),
        // MGMT-12: a retry answers the transactionId it minted.
        (Op::Manage { .. }, Some(body)) => Some(body),
        (Op::Txn { .. }, Some(body)) => {
            body.get("results").and_then(Value::as_array).and_then(|r| {
                r.iter()
                    .filter(|x| x.get("transaction_id").is_some())
                    .nth(i)
            })
        }
        _ => None,
    };
    from.and_then(|x| {
        x.get("transaction_id")
            .or_else(|| answer::loose(x, "transaction_id").map(|(_, v)| v))
    })
    .and_then(Value::as_str)
    .map_or_else(|| format!("<minted {i}>"), str::to_string)
}

/// The partition orders a pop answer may stand for, from the `(partitionId, partition)`
/// of its messages (`parts`: `None` when the answer cannot be read as a delivery, empty
/// when it delivered nothing): partitionIds in order of first appearance, each mapped to
/// a model partition (bound, or by name when the id is new; several candidates when the
/// name is ambiguous across queues).
fn pop_orders(
    world: &World,
    op: &Op,
    parts: Option<&[(String, String)]>,
) -> Vec<Option<Vec<PartH>>> {
    let Op::Pop(req) = op else { return vec![None] };
    let Some(parts) = parts else {
        return vec![None];
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (id, name) in parts {
        if !seen.iter().any(|(i, _)| *i == id) {
            seen.push((id, name));
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
            None => {
                // By queue, not by handle: which orders are kept below must not depend
                // on the order the partitions were created in.
                let mut by_queue: Vec<&Partition> = st
                    .live_partitions()
                    .filter(|p| p.name == name && in_scope(p))
                    .filter(|p| world.ids.parts.id(p.handle).is_none())
                    .collect();
                by_queue.sort_by(|a, b| a.queue.cmp(&b.queue));
                by_queue.iter().map(|p| p.handle).collect()
            }
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

#[cfg(test)]
mod tests {
    //! The rules by which a step collapses worlds that reached the same state.
    use super::*;

    fn kept(world: World, added: usize) -> Kept {
        Kept {
            print: world.fingerprint(),
            world,
            added,
            expected: None,
        }
    }

    fn with_finding(mut w: World) -> World {
        w.findings.push(Finding::new(
            ACK_5,
            Kind::Alternative,
            "acked outside its span",
        ));
        w
    }

    /// A world that knows one message, under the broker id `id`.
    fn knowing(id: &str) -> World {
        let mut w = World::default();
        w.ids.msgs.bind("message", MsgH(0), id).unwrap();
        w
    }

    #[test]
    fn twins_are_one_world_and_distinct_states_stay_apart() {
        let mut next = Next::default();
        next.merge(kept(World::default(), 0));
        next.merge(kept(World::default(), 0));
        assert_eq!(next.len(), 1, "the same state twice is one world");
        next.merge(kept(knowing("m1"), 0));
        assert_eq!(next.len(), 2, "different ids are different worlds");
        next.merge(kept(knowing("m2"), 0));
        assert_eq!(
            next.len(),
            3,
            "so are the same number of ids bound otherwise"
        );
        assert_eq!(next.kept[1].print, next.kept[2].print);
    }

    #[test]
    fn of_two_twins_the_one_with_fewer_differences_is_kept_in_either_order() {
        for (first, second) in [(0, 2), (2, 0)] {
            let mut next = Next::default();
            next.merge(kept(World::default(), first));
            next.merge(kept(World::default(), second));
            let (worlds, _) = next.fewest_differences();
            assert_eq!(worlds.len(), 1);
            let mut next = Next::default();
            next.merge(kept(World::default(), first));
            next.merge(kept(World::default(), second));
            assert_eq!(next.kept[0].added, 0, "order {first},{second}");
        }
    }

    #[test]
    fn of_two_equally_close_twins_the_one_with_fewer_findings_is_kept() {
        let plain = World::default();
        let found = with_finding(World::default());
        for order in [[plain.clone(), found.clone()], [found, plain]] {
            let mut next = Next::default();
            for w in order {
                next.merge(kept(w, 1));
            }
            assert_eq!(next.len(), 1);
            assert!(next.kept[0].world.findings.is_empty());
        }
    }

    #[test]
    fn a_divergence_reads_as_request_rules_actual_and_each_allowed_answer_with_why() {
        let d = Divergence {
            request: HttpRequest::get("/api/v1/pop/queue/q", &[]),
            actual: HttpResponse {
                status: 200,
                body: Some(serde_json::json!({"messages": []})),
            },
            expected: vec![HttpResponse {
                status: 204,
                body: None,
            }],
            reasons: vec!["status 200, expected 204".into()],
            rules: vec![POP_1, POP_2],
            causes: vec![],
        };
        assert_eq!(
            d.to_string(),
            "GET /api/v1/pop/queue/q (POP-1, POP-2)\n  actual: 200 {\"messages\":[]}\n  \
             allowed: 204 (no body)\n    differs: status 200, expected 204\n"
        );
    }
}
