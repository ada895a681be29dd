//! Linearizability of a concurrent history against the reference model (Wing & Gong,
//! with Lowe's memoization): a depth-first search for an order of the calls that
//! respects real time (a call may be placed next only if no call still unplaced had
//! completed before it was invoked, nor its client's previous answered call, which the
//! clock's millisecond cannot always tell apart) and in which the model accepts every
//! answer. Each
//! call is stepped with its own [invocation, completion] interval as the broker's
//! "now". A call with an unknown answer may be placed (every allowed outcome kept) or
//! never placed, and its interval is open-ended.
//!
//! Dead ends, (set of placed calls, model states) pairs from which no order was found,
//! are remembered, so a search never explores the same situation twice. The states are
//! remembered by digest (`World::digest`), as a set and up to the model's numbering of
//! partitions, messages, writes and leases, so two orders of calls that reach one broker
//! state meet there, and the memo costs a few bytes per situation. A digest reads the
//! whole state, so it is taken only for a placed set where a dead end was met before.
//! The search has a budget of model steps: when it runs out the verdict is "unknown",
//! never a pass. Histories are checked per key (per queue), each independently.
//!
//! Relaxation: the checker does not force the "now" of successive calls to be
//! monotonic (each call's time is only bounded by its own interval), so the check
//! accepts slightly more than a strictly timed linearization would; never less.
//!
//! Unanswered calls: an unknown call may always be left unplaced, so a history in which
//! most calls went unanswered is "linearizable" while showing nothing (a dead broker's
//! history, every call unknown, trivially is). Past [`UNANSWERED_MAX_SHARE`] of the
//! calls unknown, or every call of one client, the scenario's verdict is therefore
//! "inconclusive" ([`unanswered`], [`Outcome::judge_unanswered`]), which fails the run
//! like "unknown", never "linearizable"; a violation found all the same stays one (the
//! search is sound under unknown answers).

use super::history::{Answer, History, Op};
use crate::target::CheckSettings;
use queen_reference::checker::{Checker, StepError};
use queen_reference::time::Millis;
use queen_reference::variant::{Variant, VariantSet, VARIANTS};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::time::Instant;
use xxhash_rust::xxh3::Xxh3Default;

/// The most model steps one key's search may take.
pub const DEFAULT_BUDGET: u64 = 200_000;

/// How a key's history was judged.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// A linearization exists (the order of call ids found).
    Linearizable(Vec<usize>),
    /// No order of the calls is accepted by the model.
    Violation(Violation),
    /// The search could not decide (budget exhausted, or the model was inconclusive).
    Unknown(String),
}

impl Verdict {
    /// The verdict's name: `linearizable`, `violation` or `unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Linearizable(_) => "linearizable",
            Verdict::Violation(_) => "violation",
            Verdict::Unknown(_) => "unknown",
        }
    }
}

/// Why no linearization exists: the longest prefix the search could place, and why
/// each call that could come next was refused there.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Violation {
    /// The ids of the calls of the longest linearizable prefix, in order.
    pub(crate) prefix: Vec<usize>,
    /// Each call that could come next (its id) and why the model refused it there.
    pub refused: Vec<(usize, String)>,
    /// The variant under which the history is linearizable, when one is: the cause.
    pub cause: Option<Variant>,
}

/// The largest share of a scenario's calls that may go unanswered (timeouts, dropped
/// connections, 5xx) for its history to be called linearizable: past it the verdict is
/// "inconclusive".
pub const UNANSWERED_MAX_SHARE: f64 = 0.10;

/// Why `history` shows too little to be called linearizable: more than
/// [`UNANSWERED_MAX_SHARE`] of its calls unknown, or every call of some client; `None`
/// when it shows enough.
pub fn unanswered(history: &History) -> Option<String> {
    let (n, unknown) = (history.ops.len(), history.unknown());
    if n > 0 && unknown as f64 > UNANSWERED_MAX_SHARE * n as f64 {
        return Some(format!(
            "{unknown} of {n} calls went unanswered (timeouts, dropped connections, 5xx): \
             more than {:.0}% of the calls, too few answers to call the history linearizable",
            UNANSWERED_MAX_SHARE * 100.0
        ));
    }
    let mut per_client: std::collections::BTreeMap<usize, (usize, usize)> = Default::default();
    for o in &history.ops {
        let e = per_client.entry(o.client).or_default();
        e.0 += 1;
        e.1 += usize::from(o.is_unknown());
    }
    let silent: Vec<String> = per_client
        .iter()
        .filter(|(_, (all, unknown))| all == unknown)
        .map(|(c, _)| format!("c{c}"))
        .collect();
    (!silent.is_empty()).then(|| {
        format!(
            "{unknown} of {n} calls went unanswered (timeouts, dropped connections, 5xx), \
             among them every call of client {}: too few answers to call the history \
             linearizable",
            silent.join(", ")
        )
    })
}

/// One key's result.
#[derive(Clone, Debug)]
pub struct KeyResult {
    /// The key (queue) of the history checked.
    pub key: String,
    /// Calls on the key.
    pub ops: usize,
    /// Whether the key's calls are linearizable.
    pub verdict: Verdict,
    /// Model steps taken.
    pub steps: u64,
    /// How long the search took (ms).
    pub elapsed_ms: f64,
    /// The verdict is unknown because the search ran out of time (not of steps).
    pub(crate) timed_out: bool,
}

/// The whole history's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Each key's result.
    pub keys: Vec<KeyResult>,
    /// Calls in the history.
    pub ops: usize,
    /// Calls with no usable answer.
    pub(crate) unknown_ops: usize,
    /// How long the whole check took (ms).
    pub elapsed_ms: f64,
    /// Why the history is inconclusive whatever the search found ([`unanswered`]); set
    /// by [`Outcome::judge_unanswered`], `None` from the search alone.
    pub(crate) unanswered: Option<String>,
}

impl Outcome {
    /// The outcome with [`unanswered`] applied to the history it was searched on.
    pub fn judge_unanswered(mut self, history: &History) -> Outcome {
        self.unanswered = unanswered(history);
        self
    }

    /// Linearizable only if every key is and the history was answered enough;
    /// `violation`, `inconclusive` (too many unanswered calls), `unknown` (the search
    /// could not decide) or `linearizable`.
    pub fn verdict_name(&self) -> &'static str {
        if self
            .keys
            .iter()
            .any(|k| matches!(k.verdict, Verdict::Violation(_)))
        {
            "violation"
        } else if self.unanswered.is_some() {
            "inconclusive"
        } else if self
            .keys
            .iter()
            .any(|k| matches!(k.verdict, Verdict::Unknown(_)))
        {
            "unknown"
        } else {
            "linearizable"
        }
    }

    /// Whether the whole history is linearizable.
    pub fn passed(&self) -> bool {
        self.verdict_name() == "linearizable"
    }

    /// Calls checked per second of search.
    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed_ms <= 0.0 {
            return 0.0;
        }
        self.ops as f64 * 1000.0 / self.elapsed_ms
    }

    /// Model steps taken over all keys.
    pub fn steps(&self) -> u64 {
        self.keys.iter().map(|k| k.steps).sum()
    }
}

/// A checker configured as the target's model. PROJECT points are held strictly (the
/// search cannot list departures), but accepted deviations and, with `--keep-going`,
/// answer-only differences are let through as in the cases, which report them.
fn fresh_checker(settings: &CheckSettings) -> Checker {
    let mut c = settings.checker();
    c.strict_project = true;
    // A search tries many orders that fail; naming a cause is `cause_of`'s job.
    c.diagnose = false;
    c.explain = false;
    c
}

/// Checks every key of `history`, each with `budget` model steps.
pub fn check(history: &History, settings: &CheckSettings, budget: u64) -> Outcome {
    check_until(history, settings, budget, None)
}

/// [`check`] that also gives up (verdict unknown) at `deadline`: a model step can be
/// costly when many unknown calls keep many states possible, so a step budget alone
/// does not bound the time. Each key first gets an equal share of the time left, so
/// one hard key cannot leave the others unsearched; a key stopped by its share alone
/// is searched again with whatever time the others left.
pub(crate) fn check_until(
    history: &History,
    settings: &CheckSettings,
    budget: u64,
    deadline: Option<Instant>,
) -> Outcome {
    let t0 = Instant::now();
    let parts: Vec<(String, Vec<Op>)> = history.partitions().into_iter().collect();
    let mut keys = Vec::with_capacity(parts.len());
    for (n, (key, ops)) in parts.iter().enumerate() {
        let share = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Instant::now() + left / (parts.len() - n) as u32
        });
        keys.push(check_key_until(
            key,
            ops,
            fresh_checker(settings),
            budget,
            share,
        ));
    }
    for (k, (key, ops)) in keys.iter_mut().zip(&parts) {
        if k.timed_out && deadline.is_some_and(|d| Instant::now() < d) {
            let again = check_key_until(key, ops, fresh_checker(settings), budget, deadline);
            let (steps, ms) = (k.steps + again.steps, k.elapsed_ms + again.elapsed_ms);
            *k = KeyResult {
                steps,
                elapsed_ms: ms,
                ..again
            };
        }
    }
    Outcome {
        keys,
        ops: history.ops.len(),
        unknown_ops: history.unknown(),
        elapsed_ms: t0.elapsed().as_secs_f64() * 1000.0,
        unanswered: None,
    }
}

/// Checks the calls of one key (in invocation order) from the state `start`.
pub fn check_key(key: &str, ops: &[Op], start: Checker, budget: u64) -> KeyResult {
    check_key_until(key, ops, start, budget, None)
}

/// [`check_key`] that gives up at `deadline` too. The search first leaves out every
/// unanswered call other than a push (each such call may never have taken effect, so
/// an order found without them is a linearization of the whole history) and searches
/// the whole history only when that finds none: an unanswered pop placed at some point
/// keeps its lease's expiry uncertain for the rest of the search, which multiplies the
/// states every later step carries.
fn check_key_until(
    key: &str,
    ops: &[Op],
    start: Checker,
    budget: u64,
    deadline: Option<Instant>,
) -> KeyResult {
    let t0 = Instant::now();
    let answered: Vec<Op> = ops
        .iter()
        .filter(|o| !o.is_unknown() || is_push(o))
        .cloned()
        .collect();
    let mut steps = 0;
    if answered.len() < ops.len() {
        let first = search_key(&answered, start.clone(), budget / 4, deadline);
        steps = first.steps;
        if let Verdict::Linearizable(_) = first.verdict {
            return KeyResult {
                key: key.to_string(),
                ops: ops.len(),
                elapsed_ms: t0.elapsed().as_secs_f64() * 1000.0,
                ..first
            };
        }
    }
    // The protocol's search gets half the time left; the search for a cause, the rest.
    let half = deadline.map(|d| Instant::now() + d.saturating_duration_since(Instant::now()) / 2);
    let mut whole = search_key(ops, start.clone(), budget.saturating_sub(steps), half);
    match &mut whole.verdict {
        Verdict::Violation(v) => {
            let (cause, _, spent) = cause_of(ops, &start, budget / 4, deadline);
            v.cause = cause;
            whole.steps += spent;
        }
        Verdict::Unknown(_) => {
            let (cause, order, spent) = cause_of(ops, &start, budget / 4, deadline);
            whole.steps += spent;
            if let (Some(v), Some(order)) = (cause, order) {
                whole.verdict = decided(ops, &start, v, order);
                whole.timed_out = false;
            } else {
                whole.timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            }
        }
        _ => {}
    }
    KeyResult {
        key: key.to_string(),
        ops: ops.len(),
        steps: steps + whole.steps,
        elapsed_ms: t0.elapsed().as_secs_f64() * 1000.0,
        ..whole
    }
}

/// The variant under which `ops` are linearizable, searched with a share of `budget`
/// each (the cases' diagnosis, for a history instead of a sequence), with the order
/// found; and the steps spent.
fn cause_of(
    ops: &[Op],
    start: &Checker,
    budget: u64,
    deadline: Option<Instant>,
) -> (Option<Variant>, Option<Vec<usize>>, u64) {
    // Out of the budget, never beyond it: a budget too small to share is no search.
    let share = budget / VARIANTS.len() as u64;
    if share < 100 {
        return (None, None, 0);
    }
    let mut spent = 0;
    for v in Variant::all() {
        let mut c = start.clone();
        c.play(VariantSet::of(&[v]));
        let r = search_key(ops, c, share, deadline);
        spent += r.steps;
        if let Verdict::Linearizable(order) = r.verdict {
            return (Some(v), Some(order), spent);
        }
    }
    (None, None, spent)
}

/// A search that ran out of budget, decided by the order a variant's search found: the
/// protocol accepts that order (linearizable after all), or it refuses it at some call,
/// which only the variant explains (a violation whose cause is named; the protocol's
/// own search found no order either, within its budget).
fn decided(ops: &[Op], start: &Checker, v: Variant, order: Vec<usize>) -> Verdict {
    let horizon = ops.iter().map(|o| o.complete_ms).max().unwrap_or(0);
    let mut model = start.clone();
    model.explain = true;
    for (n, id) in order.iter().enumerate() {
        let Some(o) = ops.iter().find(|o| o.id == *id) else {
            return Verdict::Unknown(format!(
                "the order found names call {id}, not in the history"
            ));
        };
        let r = match &o.answer {
            Answer::Known(a) => model.step(&o.request, o.invoke_ms, o.complete_ms, a),
            Answer::Unknown(_) => model.step_unknown(&o.request, o.invoke_ms, horizon),
        };
        if let Err(e) = r {
            let why = match e {
                StepError::Diverged(d) => d.to_string(),
                StepError::Inconclusive(w) => format!("inconclusive: {w}"),
            };
            return Verdict::Violation(Violation {
                prefix: order[..n].to_vec(),
                refused: vec![(
                    *id,
                    format!(
                        "the protocol's search found no order within its budget; in the order \
                         linearizable under {v} this call is refused:\n{why}"
                    ),
                )],
                cause: Some(v),
            });
        }
    }
    Verdict::Linearizable(order)
}

fn is_push(o: &Op) -> bool {
    o.request.method == "POST" && o.request.path == "/api/v1/push"
}

/// One depth-first search over `ops` (the key and the calls' count are the caller's).
fn search_key(ops: &[Op], start: Checker, budget: u64, deadline: Option<Instant>) -> KeyResult {
    let horizon = ops.iter().map(|o| o.complete_ms).max().unwrap_or(0);
    let mut s = Search {
        ops,
        after: client_order(ops),
        horizon,
        memo: HashSet::new(),
        failed_placements: HashSet::new(),
        steps: 0,
        budget,
        deadline,
        exhausted: false,
        inconclusive: None,
        order: Vec::new(),
        best: None,
    };
    let mut placed = vec![0u64; ops.len().div_ceil(64)];
    let found = s.dfs(&mut placed, &start);
    let timed_out = !found && s.exhausted && s.deadline.is_some_and(|d| Instant::now() >= d);
    let verdict = if found {
        Verdict::Linearizable(s.order.iter().map(|&i| ops[i].id).collect())
    } else if timed_out {
        Verdict::Unknown(format!(
            "search time limit reached after {} model steps ({} calls)",
            s.steps,
            ops.len()
        ))
    } else if s.exhausted {
        Verdict::Unknown(format!(
            "search budget of {budget} model steps exhausted ({} calls)",
            ops.len()
        ))
    } else if let Some(why) = s.inconclusive {
        Verdict::Unknown(format!("the model could not decide: {why}"))
    } else {
        let best = s.best.take();
        Verdict::Violation(best.map_or_else(Violation::default, |b| b.explained(&s)))
    };
    KeyResult {
        key: String::new(),
        ops: ops.len(),
        verdict,
        steps: s.steps,
        elapsed_ms: 0.0,
        timed_out,
    }
}

/// The depth-first search for an order of the calls the model accepts, with its memo,
/// budget and the deepest dead end it met.
struct Search<'a> {
    ops: &'a [Op],
    /// For each call, the answered call its client made last before it, which must be
    /// placed first ([`client_order`]).
    after: Vec<Option<usize>>,
    horizon: Millis,
    /// The dead ends met: a digest of the placed set and of the set of the model
    /// states' digests. At most one per model step, so the budget bounds it.
    memo: HashSet<u128>,
    /// The digests of the placed sets among [`Search::memo`]'s dead ends: a world's
    /// digest reads its whole state, so it is taken only where a dead end may match.
    failed_placements: HashSet<u128>,
    steps: u64,
    budget: u64,
    /// When to give up, whatever the steps left.
    deadline: Option<Instant>,
    exhausted: bool,
    inconclusive: Option<String>,
    /// Indices placed so far, in order.
    order: Vec<usize>,
    /// The deepest dead end met.
    best: Option<DeadEnd>,
}

/// A dead end: the calls placed (indices into `ops`), the model after them, and the
/// calls it refused next. Why each was refused is asked again only for the deepest
/// one reported, since the search refuses far more calls than it reports.
struct DeadEnd {
    prefix: Vec<usize>,
    model: Checker,
    /// Each refused call, with why when the model could not decide.
    refused: Vec<(usize, Option<String>)>,
}

impl DeadEnd {
    /// The violation this dead end shows, with the model's reasons for each refusal.
    fn explained(self, s: &Search) -> Violation {
        let refused = self
            .refused
            .into_iter()
            .map(|(i, why)| {
                let why = why.unwrap_or_else(|| {
                    let mut model = self.model.clone();
                    model.explain = true;
                    match s.apply(&mut model, i) {
                        Err(StepError::Diverged(d)) => d.to_string(),
                        Err(StepError::Inconclusive(w)) => format!("inconclusive: {w}"),
                        Ok(_) => "refused without an explanation".to_string(),
                    }
                });
                (s.ops[i].id, why)
            })
            .collect();
        Violation {
            prefix: self.prefix.iter().map(|&i| s.ops[i].id).collect(),
            refused,
            cause: None,
        }
    }
}

/// For each call, the answered call of the same client invoked last before it. A client
/// sends a call only once the previous one is answered, so the answered one took effect
/// first, even when the clock's millisecond cannot tell the two apart; a call left
/// unanswered may still take effect after its client's next calls, so it binds nothing.
fn client_order(ops: &[Op]) -> Vec<Option<usize>> {
    let mut last: HashMap<usize, usize> = HashMap::new();
    ops.iter()
        .enumerate()
        .map(|(i, o)| {
            let before = last.get(&o.client).copied();
            if !o.is_unknown() {
                last.insert(o.client, i);
            }
            before
        })
        .collect()
}

fn is_set(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

fn flip(bits: &mut [u64], i: usize) {
    bits[i / 64] ^= 1 << (i % 64);
}

impl Search<'_> {
    /// The digest of a placed set.
    fn placement(placed: &[u64]) -> u128 {
        let mut h = Xxh3Default::new();
        placed.hash(&mut h);
        h.digest128()
    }

    /// The digest of a placed set with the set of the model's states.
    fn situation(placed: &[u64], model: &Checker) -> u128 {
        let mut worlds: Vec<u128> = model.worlds().iter().map(|w| w.digest()).collect();
        worlds.sort_unstable();
        worlds.dedup();
        let mut h = Xxh3Default::new();
        (placed, worlds).hash(&mut h);
        h.digest128()
    }

    /// The situation's digest when this placed set has met a dead end before (`None`
    /// otherwise: none can match), and whether it is one of them.
    fn dead_end(&self, placed: &[u64], model: &Checker) -> (Option<u128>, bool) {
        if !self.failed_placements.contains(&Self::placement(placed)) {
            return (None, false);
        }
        let situation = Self::situation(placed, model);
        (Some(situation), self.memo.contains(&situation))
    }

    /// Remembers that no order is found from this placed set with these model states
    /// (`situation`: their digest, when already taken).
    fn remember_dead_end(&mut self, placed: &[u64], model: &Checker, situation: Option<u128>) {
        self.failed_placements.insert(Self::placement(placed));
        let situation = situation.unwrap_or_else(|| Self::situation(placed, model));
        self.memo.insert(situation);
    }

    /// The calls that may come next, most likely first: by the midpoint of their
    /// interval (an unknown call's interval is open-ended: last).
    fn candidates(&self, placed: &[u64], min_complete: Millis) -> Vec<usize> {
        let ops = self.ops;
        let mut cands: Vec<usize> = ops
            .iter()
            .enumerate()
            .take_while(|(_, o)| o.invoke_ms <= min_complete)
            .filter(|(i, _)| !is_set(placed, *i))
            .filter(|(i, _)| self.after[*i].is_none_or(|j| is_set(placed, j)))
            .map(|(i, _)| i)
            .collect();
        cands.sort_by_key(|&i| {
            let o = &ops[i];
            let end = if o.is_unknown() {
                self.horizon
            } else {
                o.complete_ms
            };
            (o.is_unknown(), o.invoke_ms + end, i)
        });
        cands
    }

    /// Steps `model` through call `i` with its answer, or as unanswered.
    fn apply(&self, model: &mut Checker, i: usize) -> Result<usize, StepError> {
        let o = &self.ops[i];
        match &o.answer {
            Answer::Known(a) => model.step(&o.request, o.invoke_ms, o.complete_ms, a),
            Answer::Unknown(_) => model.step_unknown(&o.request, o.invoke_ms, self.horizon),
        }
    }

    /// Places calls one by one while the model accepts them: true once every answered
    /// call is placed.
    fn dfs(&mut self, placed: &mut Vec<u64>, model: &Checker) -> bool {
        let ops = self.ops;
        let mut min_complete = Millis::MAX;
        let mut all_known_placed = true;
        for (i, o) in ops.iter().enumerate() {
            if !is_set(placed, i) && !o.is_unknown() {
                all_known_placed = false;
                min_complete = min_complete.min(o.complete_ms);
            }
        }
        if all_known_placed {
            return true;
        }
        let (situation, seen) = self.dead_end(placed, model);
        if seen {
            return false;
        }
        let mut refused = Vec::new();
        for i in self.candidates(placed, min_complete) {
            let late =
                self.steps.is_multiple_of(64) && self.deadline.is_some_and(|d| Instant::now() >= d);
            if self.steps >= self.budget || late {
                self.exhausted = true;
                return false;
            }
            self.steps += 1;
            let mut next = model.clone();
            match self.apply(&mut next, i) {
                Ok(_) => {
                    flip(placed, i);
                    self.order.push(i);
                    if self.dfs(placed, &next) {
                        return true;
                    }
                    self.order.pop();
                    flip(placed, i);
                    if self.exhausted {
                        return false;
                    }
                }
                Err(StepError::Diverged(_)) => refused.push((i, None)),
                Err(StepError::Inconclusive(why)) => {
                    refused.push((i, Some(format!("inconclusive: {why}"))));
                    self.inconclusive.get_or_insert(why);
                }
            }
        }
        let deeper = self
            .best
            .as_ref()
            .is_none_or(|b| self.order.len() >= b.prefix.len());
        if deeper && !refused.is_empty() {
            self.best = Some(DeadEnd {
                prefix: self.order.clone(),
                model: model.clone(),
                refused,
            });
        }
        self.remember_dead_end(placed, model, situation);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_reference::wire::{HttpRequest, HttpResponse};
    use serde_json::json;

    const T: Millis = 1_700_000_000_000;
    const LEASE: &str = "0190f0d0-0000-7000-8000-000000000001";
    const LEASE2: &str = "0190f0d0-0000-7000-8000-000000000002";
    const PART: &str = "0190f0d0-0000-7000-8000-0000000000aa";
    const MSG: &str = "0190f0d0-0000-7000-8000-0000000000b1";

    fn op(client: usize, req: HttpRequest, at: (Millis, Millis), answer: Answer) -> Op {
        Op {
            id: 0,
            client,
            key: "q".into(),
            request: req,
            invoke_ms: T + at.0,
            complete_ms: T + at.1,
            answer,
        }
    }

    fn push() -> HttpRequest {
        HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "partition": "p", "transactionId": "t1", "payload": {"n": 1}}]}),
        )
    }

    fn pushed() -> Answer {
        Answer::Known(HttpResponse {
            status: 201,
            body: Some(json!([{"index": 0, "status": "queued", "queueName": "q",
                "transaction_id": "t1", "message_id": MSG}])),
        })
    }

    fn pop() -> HttpRequest {
        HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g")])
    }

    fn popped(lease: &str) -> Answer {
        Answer::Known(HttpResponse {
            status: 200,
            body: Some(json!({
                "success": true, "queue": "q", "partition": "p", "partitionId": PART,
                "leaseId": lease, "consumerGroup": "g", "partitionsClaimed": 1,
                "messages": [{"id": MSG, "transactionId": "t1", "partition": "p",
                    "partitionId": PART, "leaseId": lease, "consumerGroup": "g",
                    "data": {"n": 1}, "createdAt": "2023-11-14T22:13:20.005Z",
                    "producerSub": null, "traceId": null}]
            })),
        })
    }

    fn empty() -> Answer {
        Answer::Known(HttpResponse {
            status: 204,
            body: None,
        })
    }

    fn settings() -> CheckSettings {
        CheckSettings::default()
    }

    #[test]
    fn overlapping_pops_one_delivering_is_linearizable_in_either_order() {
        // Client 1's pop is invoked first but answers 204: it must be placed before the
        // push completed, or after client 2's pop took the lease.
        let h = History::new(vec![
            op(0, push(), (0, 10), pushed()),
            op(1, pop(), (2, 30), empty()),
            op(2, pop(), (3, 20), popped(LEASE)),
        ]);
        let out = check(&h, &settings(), 1000);
        assert!(out.passed(), "{:?}", out.keys);
    }

    #[test]
    fn double_lease_on_one_span_is_a_violation() {
        let h = History::new(vec![
            op(0, push(), (0, 10), pushed()),
            op(1, pop(), (12, 30), popped(LEASE)),
            op(2, pop(), (13, 31), popped(LEASE2)),
        ]);
        let out = check(&h, &settings(), 1000);
        assert_eq!(out.verdict_name(), "violation", "{:?}", out.keys);
        let Verdict::Violation(v) = &out.keys[0].verdict else {
            unreachable!()
        };
        assert_eq!(v.prefix.len(), 2);
        assert_eq!(v.refused.len(), 1);
        // The search refuses without explaining; the refusal it reports is explained.
        let why = &v.refused[0].1;
        assert!(why.starts_with("GET /api/v1/pop/queue/q"), "{why}");
        assert!(why.contains("allowed:"), "{why}");
    }

    #[test]
    fn real_time_order_is_respected() {
        // The pop completed before the push was invoked: it cannot see the message.
        let h = History::new(vec![
            op(1, pop(), (0, 5), popped(LEASE)),
            op(0, push(), (10, 20), pushed()),
        ]);
        assert_eq!(check(&h, &settings(), 1000).verdict_name(), "violation");
    }

    #[test]
    fn one_clients_calls_keep_their_order_within_a_millisecond() {
        // Client 0 pushed, then popped, both in one millisecond: the clock cannot order
        // them, but the client sent its pop only once the push was answered, so a 204 is
        // a missed message, not a pop that went first.
        let h = History::new(vec![
            op(0, push(), (10, 10), pushed()),
            op(0, pop(), (10, 10), empty()),
        ]);
        assert_eq!(check(&h, &settings(), 1000).verdict_name(), "violation");
        // Another client's pop in that millisecond may have gone first.
        let other = History::new(vec![
            op(0, push(), (10, 10), pushed()),
            op(1, pop(), (10, 10), empty()),
        ]);
        assert!(check(&other, &settings(), 1000).passed());
    }

    #[test]
    fn a_call_left_unanswered_does_not_order_its_clients_next_calls() {
        // The push timed out and may take effect after its client's next call.
        let h = History::new(vec![
            op(0, push(), (10, 10), Answer::Unknown("timeout".into())),
            op(0, pop(), (11, 12), empty()),
            op(1, pop(), (20, 30), popped(LEASE)),
        ]);
        assert!(check(&h, &settings(), 1000).passed());
    }

    #[test]
    fn an_unknown_push_may_or_may_not_have_happened() {
        let lost = Answer::Unknown("timeout".into());
        let seen = History::new(vec![
            op(0, push(), (0, 10), lost.clone()),
            op(1, pop(), (20, 30), popped(LEASE)),
        ]);
        assert!(check(&seen, &settings(), 1000).passed());
        let unseen = History::new(vec![
            op(0, push(), (0, 10), lost),
            op(1, pop(), (20, 30), empty()),
        ]);
        assert!(check(&unseen, &settings(), 1000).passed());
    }

    #[test]
    fn a_tiny_budget_is_unknown_never_a_pass() {
        let h = History::new(vec![
            op(0, push(), (0, 10), pushed()),
            op(1, pop(), (12, 30), popped(LEASE)),
        ]);
        let out = check(&h, &settings(), 1);
        assert_eq!(out.verdict_name(), "unknown");
        assert!(!out.passed());
    }
}
