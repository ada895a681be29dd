//! Naming the cause: when no allowed behaviour explains an answer, which variants do?
//!
//! A symptom often shows far from its cause: a lease that ignored `leaseSeconds` is
//! taken at one pop and shows at a later one, as a partition that stays leased. So a
//! diagnosis does not re-explore the failing step alone: it replays every exchange the
//! checker has seen, from the worlds before the first, with a broker that plays a set
//! of [`Variant`]s throughout. The smallest sets under which the whole history and the
//! failing answer are allowed are the cause; of those, the ones needing the fewest
//! other state departures (claims, missing routes) win. Candidates are only the variants
//! the explorations asked about and the readings that change a request seen, so a
//! diagnosis costs a few replays, and it runs only when a step has no match at all.

use super::{reading_part, Checker, Readings, Rec, World};
use crate::finding::{note, Finding, Kind};
use crate::model::Op;
use crate::variant::{read_as, Variant, VariantSet};
use crate::wire::*;

/// What a diagnosis found: the worlds after the failing step under the causes.
pub(super) struct Diagnosis {
    pub(crate) worlds: Vec<World>,
    pub(crate) causes: Vec<Variant>,
    /// One [`Kind::Cause`] finding per cause (already noted on every world).
    pub(crate) findings: Vec<Finding>,
    /// The model's answer to the failing step under the causes, when it needed findings.
    pub expected: Option<HttpResponse>,
}

/// The most candidates for which pairs of variants are tried.
const MAX_PAIR_CANDIDATES: usize = 12;

impl Checker {
    /// Keeps an exchange for later diagnosis (only when diagnosing).
    pub(super) fn remember(
        &mut self,
        req: &HttpRequest,
        sent: crate::time::Millis,
        received: crate::time::Millis,
        actual: Option<&HttpResponse>,
    ) {
        if !self.diagnose {
            return;
        }
        if self.initial.is_none() {
            self.initial = Some(self.worlds.clone());
        }
        self.history.push(Rec {
            req: req.clone(),
            sent,
            received,
            actual: actual.cloned(),
        });
    }

    /// `req` as read by every kind of broker among the worlds, the protocol's reading
    /// first; `None` for a route no broker has (it changes nothing).
    pub(super) fn readings(&self, req: &HttpRequest) -> Option<Readings> {
        let parse = |r: &HttpRequest| match self.parse(r) {
            Err(Rejection::NotFound) => None,
            Err(Rejection::Bad(e)) => Some(Err(Op::Rejected(e))),
            Err(Rejection::DiscoveryScope) => Some(Err(Op::DiscoveryRejected)),
            Ok(r) => Some(Ok(r)),
        };
        let mut out: Readings = vec![(VariantSet::EMPTY, parse(req)?)];
        for w in &self.worlds {
            let key = reading_part(w.variants);
            if out.iter().any(|r| r.0 == key) {
                continue;
            }
            if let Some(read) = read_as(key, req).as_ref().and_then(parse) {
                out.push((key, read));
            }
        }
        Some(out)
    }

    /// The smallest sets of further variants that explain the whole history, the failing
    /// exchange (the last one kept) included.
    pub(super) fn diagnosis(&self, req: &HttpRequest, actual: &HttpResponse) -> Option<Diagnosis> {
        let initial = self.initial.as_ref()?;
        let mut bases: Vec<VariantSet> = Vec::new();
        for w in &self.worlds {
            if !bases.contains(&w.variants) {
                bases.push(w.variants);
            }
        }
        let readings = self
            .history
            .iter()
            .flat_map(|r| Variant::all().filter(|v| v.reads(&r.req).is_some()))
            .fold(VariantSet::EMPTY, |s, v| s.with(v));
        for base in bases {
            let cands: Vec<Variant> = self
                .asked
                .union(readings)
                .iter()
                .filter(|v| !base.contains(*v))
                .collect();
            let singles = cands.iter().map(|v| vec![*v]);
            let pairs = (cands.len() <= MAX_PAIR_CANDIDATES)
                .then(|| pairs(&cands))
                .into_iter()
                .flatten();
            for size in [1usize, 2] {
                let combos: Vec<Vec<Variant>> = match size {
                    1 => singles.clone().collect(),
                    _ => pairs.clone().collect(),
                };
                let found = self.best_replays(initial, base, &combos);
                if let Some(d) = found {
                    return Some(self.named(d, req, actual));
                }
            }
        }
        None
    }

    /// Of the combinations that replay the history, the ones needing the fewest other
    /// state departures, their worlds merged.
    fn best_replays(
        &self,
        initial: &[World],
        base: VariantSet,
        combos: &[Vec<Variant>],
    ) -> Option<Diagnosis> {
        // A variant explains only what it explains by itself: a replay that needs more
        // claims or missing routes than the run so far did is the checker's fallbacks
        // explaining the answer, not the variant.
        let before = departures(&self.worlds);
        let mut best: Option<(usize, Diagnosis)> = None;
        for combo in combos {
            let set = combo.iter().fold(base, |s, v| s.with(*v));
            let Some((worlds, expected)) = self.replay(initial, set) else {
                continue;
            };
            let score = departures(&worlds);
            if score > before {
                continue;
            }
            let d = Diagnosis {
                worlds,
                causes: set.iter().collect(),
                findings: vec![],
                expected,
            };
            match &mut best {
                Some((s, _)) if score > *s => {}
                Some((s, b)) if score == *s => {
                    b.worlds.extend(d.worlds);
                    for c in d.causes {
                        if !b.causes.contains(&c) {
                            b.causes.push(c);
                        }
                    }
                }
                _ => best = Some((score, d)),
            }
        }
        best.map(|(_, d)| d)
    }

    /// The history replayed by a broker playing `set` from the start: the worlds after
    /// it, or `None` when some exchange is not allowed even so.
    fn replay(
        &self,
        initial: &[World],
        set: VariantSet,
    ) -> Option<(Vec<World>, Option<HttpResponse>)> {
        let mut c = self.clone();
        c.diagnose = false;
        c.explain = false;
        c.history = Vec::new();
        c.initial = None;
        c.worlds = initial
            .iter()
            .map(|w| World {
                variants: set,
                ..w.clone()
            })
            .collect();
        for r in &self.history {
            let ok = match &r.actual {
                Some(a) => c.step(&r.req, r.sent, r.received, a),
                None => c.step_unknown(&r.req, r.sent, r.received),
            };
            ok.ok()?;
        }
        let expected = c.last_expected.clone();
        Some((c.worlds, expected))
    }

    /// `d` with one cause finding per variant, noted on every world.
    fn named(&self, mut d: Diagnosis, req: &HttpRequest, actual: &HttpResponse) -> Diagnosis {
        let seen = format!(
            "seen as: {} {} answered {}",
            req.method, req.path, actual.status
        );
        d.findings = d
            .causes
            .iter()
            .map(|v| {
                Finding::new(
                    v.rule(),
                    Kind::Cause,
                    format!("{} ({})", v.def().what, v.name()),
                )
                .example(seen.clone())
            })
            .collect();
        for w in &mut d.worlds {
            for f in &d.findings {
                if w.variants.contains(variant_of(f)) {
                    note(&mut w.findings, f.clone());
                }
            }
        }
        d
    }
}

/// The fewest state departures other than causes (claims, missing routes, PROJECT
/// alternatives) any of `worlds` needed.
fn departures(worlds: &[World]) -> usize {
    worlds
        .iter()
        .map(|w| {
            w.findings
                .iter()
                .filter(|f| !f.kind.answer_only() && f.kind != Kind::Cause)
                .count()
        })
        .min()
        .unwrap_or(usize::MAX)
}

/// The variant a cause finding names (its text ends with the variant's name).
fn variant_of(f: &Finding) -> Variant {
    Variant::all()
        .find(|v| crate::finding::names(f, *v))
        .expect("a cause finding names its variant")
}

fn pairs(cands: &[Variant]) -> Vec<Vec<Variant>> {
    let mut out = Vec::new();
    for (i, a) in cands.iter().enumerate() {
        for b in &cands[i + 1..] {
            out.push(vec![*a, *b]);
        }
    }
    out
}
