//! Branching without callbacks: how one piece of operation code serves both as a
//! deterministic engine and as a checker that knows every allowed outcome.
//!
//! Operations ask a [`Ctx`] whenever the outcome is not determined: an uncertain time
//! comparison or an OPEN point. In policy mode the [`Policy`] answers and the code runs
//! once, in place. In exploring mode [`explore`] re-runs the operation (on a fresh copy
//! of the state) once per sequence of answers, odometer-style, so the caller gets every
//! outcome with the state it leads to. A comparison that is decided one way also
//! narrows what is known about "now", so later deadlines in the same operation are
//! derived from the narrowed interval.
//!
//! PROJECT points where another broker plausibly decides otherwise are asked through
//! `Ctx::project`: a policy answers them like OPEN points; an exploration branches on
//! them only when told to ([`explore_project`], a checker that is not strict), and each
//! run reports which project alternatives it took as [`Finding`]s of kind [`Kind::Alternative`].
//!
//! A [`Variant`] (a named way to break one rule) is asked the same way, through
//! `Ctx::deviates`: a policy plays the variants it lists, an exploration plays the ones
//! it is given (a world's diagnosed causes) and records every variant the operation asked
//! about, so a diagnosis tries only variants that could have changed something.

use crate::finding::{note, Finding, Kind};
use crate::policy::{ChoicePoint, Policy};
use crate::rules::RuleId;
use crate::time::{Stamp, Tri};
use crate::variant::{Variant, VariantSet};

/// The limit on branches of one operation before [`explore`] gives up.
const MAX_BRANCHES: usize = 4096;

/// What an operation consults: the time and the source of choices.
pub struct Ctx<'a> {
    /// The broker's "now" for this request, narrowed as branches are taken.
    pub(crate) now: Stamp,
    mode: Mode<'a>,
}

enum Mode<'a> {
    Policy(&'a Policy),
    Explore(&'a mut Script),
}

/// The answers given so far in one exploring run, and how many each point allowed.
#[derive(Default)]
struct Script {
    picks: Vec<u32>,
    arities: Vec<u32>,
    pos: usize,
    /// Whether PROJECT points branch (a checker that is not strict).
    allow_project: bool,
    /// The project alternatives taken in the current run.
    taken: Vec<Finding>,
    /// The variants every run plays (a world's diagnosed causes).
    active: VariantSet,
    /// Every variant asked about in any run.
    asked: VariantSet,
}

impl<'a> Ctx<'a> {
    /// A context that follows `policy` (time should be exact).
    pub fn policy(now: Stamp, policy: &'a Policy) -> Ctx<'a> {
        Ctx {
            now,
            mode: Mode::Policy(policy),
        }
    }

    /// Whether this context enumerates alternatives (a checker) rather than following a policy.
    pub(crate) fn exploring(&self) -> bool {
        matches!(self.mode, Mode::Explore(_))
    }

    /// The policy followed, when not exploring.
    pub(crate) fn policy_ref(&self) -> Option<&Policy> {
        match &self.mode {
            Mode::Policy(p) => Some(p),
            Mode::Explore(_) => None,
        }
    }

    /// Picks one of `arity` alternatives at `point`.
    pub(crate) fn choose(&mut self, point: ChoicePoint, arity: u32) -> u32 {
        debug_assert!(arity >= 1);
        match &mut self.mode {
            Mode::Policy(p) => p.pick(point).min(arity - 1),
            Mode::Explore(s) => {
                let i = s.pos;
                s.pos += 1;
                if i < s.picks.len() {
                    s.arities[i] = arity;
                    s.picks[i].min(arity - 1)
                } else {
                    s.picks.push(0);
                    s.arities.push(arity);
                    0
                }
            }
        }
    }

    /// Whether to take the alternative to this project's decision at the PROJECT point
    /// `point` (decided by `rule`; `what` says what the alternative does). A policy
    /// answers it; an exploration branches only when project alternatives are allowed,
    /// and records the difference on the branch that takes the alternative.
    pub(crate) fn project(&mut self, point: ChoicePoint, rule: RuleId, what: &str) -> bool {
        match &self.mode {
            Mode::Policy(p) => p.pick(point) == 1,
            Mode::Explore(s) if !s.allow_project => false,
            Mode::Explore(_) => {
                let alt = self.choose(point, 2) == 1;
                if alt {
                    if let Mode::Explore(s) = &mut self.mode {
                        note(&mut s.taken, Finding::new(rule, Kind::Alternative, what));
                    }
                }
                alt
            }
        }
    }

    /// Whether the broker plays the variant `v` here: a policy's listed variants, an
    /// exploration's given ones. Never a branch: a broker with a variant has it always.
    pub(crate) fn deviates(&mut self, v: Variant) -> bool {
        match &mut self.mode {
            Mode::Policy(p) => p.variants.contains(v),
            Mode::Explore(s) => {
                s.asked = s.asked.with(v);
                s.active.contains(v)
            }
        }
    }

    /// Whether now is strictly before `t` (a deadline not reached yet).
    pub(crate) fn now_before(&mut self, t: Stamp) -> bool {
        match self.now.before(&t) {
            Tri::Yes => true,
            Tri::No => false,
            Tri::Maybe => {
                if self.choose(ChoicePoint::Time, 2) == 0 {
                    self.now = self.now.intersect(&Stamp::between(self.now.lo, t.hi - 1));
                    true
                } else {
                    self.now = self.now.intersect(&Stamp::between(t.lo, self.now.hi));
                    false
                }
            }
        }
    }

    /// Whether the deadline `t` has passed (now >= t).
    pub(crate) fn reached(&mut self, t: Stamp) -> bool {
        !self.now_before(t)
    }
}

/// Too many branches: the request's time interval is too wide for the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("more than {0} possible outcomes for one request; narrow the time interval")]
pub struct TooManyBranches(pub usize);

/// Runs `op` once per combination of choices, returning every result with the
/// narrowed "now" it was computed under. `op` must start from a fresh copy of its
/// state each time it is called.
pub fn explore<T>(
    now: Stamp,
    op: impl FnMut(&mut Ctx) -> T,
) -> Result<Vec<(T, Stamp)>, TooManyBranches> {
    explore_project(now, false, op).map(|v| v.into_iter().map(|(r, n, _)| (r, n)).collect())
}

/// [`explore`], also branching on PROJECT points when `allow_project`: each result
/// comes with the project alternatives its run took (empty: this project's decisions).
pub fn explore_project<T>(
    now: Stamp,
    allow_project: bool,
    op: impl FnMut(&mut Ctx) -> T,
) -> Result<Vec<(T, Stamp, Vec<Finding>)>, TooManyBranches> {
    explore_under(now, allow_project, VariantSet::EMPTY, op).map(|(v, _)| v)
}

/// Every outcome of an exploration and the variants it asked about.
type Explored<T> = (Vec<(T, Stamp, Vec<Finding>)>, VariantSet);

/// [`explore_project`] for a broker that plays the variants `active`; also returns every
/// variant the operation asked about.
pub(crate) fn explore_under<T>(
    now: Stamp,
    allow_project: bool,
    active: VariantSet,
    mut op: impl FnMut(&mut Ctx) -> T,
) -> Result<Explored<T>, TooManyBranches> {
    let mut script = Script {
        allow_project,
        active,
        ..Script::default()
    };
    let mut out = Vec::new();
    loop {
        script.pos = 0;
        script.taken.clear();
        let (result, narrowed) = {
            let mut ctx = Ctx {
                now,
                mode: Mode::Explore(&mut script),
            };
            let r = op(&mut ctx);
            (r, ctx.now)
        };
        out.push((result, narrowed, std::mem::take(&mut script.taken)));
        if out.len() > MAX_BRANCHES {
            return Err(TooManyBranches(MAX_BRANCHES));
        }
        // Drop answers the run did not reach, then advance the odometer.
        script.picks.truncate(script.pos);
        script.arities.truncate(script.pos);
        loop {
            match script.picks.last_mut() {
                None => return Ok((out, script.asked)),
                Some(p) => {
                    let arity = *script.arities.last().unwrap();
                    if *p + 1 < arity {
                        *p += 1;
                        break;
                    }
                    script.picks.pop();
                    script.arities.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::ACK_5;

    #[test]
    fn a_policys_pick_is_clamped_to_the_alternatives_there_are() {
        let policy = Policy {
            ack_without_cursor: 1,
            ..Policy::default()
        };
        let mut ctx = Ctx::policy(Stamp::exact(0), &policy);
        assert_eq!(ctx.choose(ChoicePoint::AckWithoutCursor, 1), 0);
        assert_eq!(ctx.choose(ChoicePoint::AckWithoutCursor, 2), 1);
    }

    #[test]
    fn exactly_max_branches_is_allowed_and_one_more_is_too_many() {
        let binary = |n: u32| {
            move |ctx: &mut Ctx| {
                (0..n)
                    .map(|_| ctx.choose(ChoicePoint::Time, 2))
                    .sum::<u32>()
            }
        };
        assert_eq!(1 << 12, MAX_BRANCHES);
        assert_eq!(
            explore(Stamp::exact(0), binary(12)).unwrap().len(),
            MAX_BRANCHES
        );
        assert!(explore(Stamp::exact(0), binary(13)).is_err());
    }

    #[test]
    fn explore_enumerates_every_combination_once() {
        let r = explore(Stamp::exact(0), |ctx| {
            let a = ctx.choose(ChoicePoint::AckWithoutCursor, 2);
            let b = if a == 1 {
                ctx.choose(ChoicePoint::Time, 3)
            } else {
                9
            };
            (a, b)
        })
        .unwrap();
        let got: Vec<_> = r.into_iter().map(|(x, _)| x).collect();
        assert_eq!(got, vec![(0, 9), (1, 0), (1, 1), (1, 2)]);
    }

    #[test]
    fn uncertain_deadline_branches_and_narrows_now() {
        let r = explore(Stamp::between(100, 200), |ctx| {
            ctx.now_before(Stamp::exact(150))
        })
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], (true, Stamp::between(100, 149)));
        assert_eq!(r[1], (false, Stamp::between(150, 200)));
        let policy = Policy::default();
        let mut ctx = Ctx::policy(Stamp::exact(150), &policy);
        assert!(!ctx.now_before(Stamp::exact(150)));
    }

    #[test]
    fn project_points_branch_only_when_allowed_and_record_the_alternative() {
        let run = |ctx: &mut Ctx| ctx.project(ChoicePoint::AckOutsideSpan, ACK_5, "accepted");
        let strict = explore_project(Stamp::exact(0), false, run).unwrap();
        assert_eq!(strict.len(), 1);
        assert!(!strict[0].0 && strict[0].2.is_empty());
        let lax = explore_project(Stamp::exact(0), true, run).unwrap();
        assert_eq!(lax.len(), 2);
        assert!(!lax[0].0 && lax[0].2.is_empty());
        assert!(lax[1].0);
        assert_eq!(
            lax[1].2,
            vec![Finding::new(ACK_5, Kind::Alternative, "accepted")]
        );
        let mut p = Policy::default();
        assert!(!Ctx::policy(Stamp::exact(0), &p).project(ChoicePoint::AckOutsideSpan, ACK_5, ""));
        p.ack_outside_span = 1;
        assert!(Ctx::policy(Stamp::exact(0), &p).project(ChoicePoint::AckOutsideSpan, ACK_5, ""));
    }
}
