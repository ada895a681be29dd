//! The fault scenarios' view of their history, on both sides of the checks.
//!
//! For the linearizability search: the model answers `buffered` only under push
//! maintenance; a push our server spooled because the database was away is applied at
//! replay, some time later. Its answer is therefore handed to the search as unknown
//! (applied at any time after it was invoked, or never), and "never" is ruled out by the
//! drain and its invariants (`lost`: a `buffered` item is required like a `queued` one,
//! PUSH-7). Calls refused at connect never reached the broker and are left out of both.
//!
//! For the report: a tally of the pushed items by answer, read from the same facts the
//! invariants use. (This module used to read every queue back through a fresh group
//! with `autoAck`; that read-back is now part of the drain, `DrainOptions::fresh_group`,
//! so it is checked by the same invariants as every other group.)

use crate::concurrent::invariants::facts::{Facts, Fate};
use crate::concurrent::{Answer, History};
use serde_json::Value;

/// Whether a call's error says it never reached the broker: the connection was
/// refused (a killed server's port), so the call had no effect at all.
fn never_sent(answer: &Answer) -> bool {
    matches!(answer, Answer::Unknown(why) if why.contains("Connection refused"))
}

/// The calls that reached the broker: calls refused at connect are no more than absent
/// calls (and each unknown call weakens what the checks can conclude).
pub fn reached(history: &History) -> History {
    History::new(
        history
            .ops
            .iter()
            .filter(|o| !never_sent(&o.answer))
            .cloned()
            .collect(),
    )
}

/// What the search is given: the calls that [`reached`] the broker, with pushes
/// answered `buffered` turned unknown.
pub fn for_search(history: &History) -> History {
    let mut h = reached(history);
    for o in &mut h.ops {
        if let Answer::Known(a) = &o.answer {
            if a.status == 201 && buffered_items(a.body.as_ref()) > 0 {
                o.answer = Answer::Unknown("answered buffered: replayed later (PUSH-7)".into());
            }
        }
    }
    h
}

fn buffered_items(body: Option<&Value>) -> usize {
    body.and_then(Value::as_array)
        .map(|a| a.iter().filter(|r| r["status"] == "buffered").count())
        .unwrap_or(0)
}

/// The pushed items of a history (workload and drain merged), by answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PushTally {
    /// Items answered 201 `queued` or `buffered`: each must reach every drained group.
    pub acknowledged: usize,
    /// Of those, answered `buffered` (spooled, PUSH-7).
    pub buffered: usize,
    /// Items answered 201 `duplicate` only.
    pub duplicate: usize,
    /// Items whose every push has an unknown answer: stored or not.
    pub unknown: usize,
}

impl PushTally {
    /// Counts each pushed item once, by its strongest answer.
    pub fn of(facts: &Facts) -> PushTally {
        let mut t = PushTally::default();
        for pushes in facts.pushes.values() {
            let has = |f: Fate| pushes.iter().any(|p| p.fate == f);
            if has(Fate::Queued) || has(Fate::Buffered) {
                t.acknowledged += 1;
                t.buffered += usize::from(has(Fate::Buffered));
            } else if has(Fate::Duplicate) {
                t.duplicate += 1;
            } else {
                t.unknown += 1;
            }
        }
        t
    }

    /// The audit in one line for the scenario's summary.
    pub fn summary(&self) -> String {
        format!(
            "pushed items: {} acknowledged ({} buffered), {} duplicate, {} unknown",
            self.acknowledged, self.buffered, self.duplicate, self.unknown
        )
    }
}

/// The longest time, in ms of the clients' clock, between two pushes answered 201 with
/// every item `queued`: how long the clients saw no push stored directly (a failover, a
/// cut), whatever the spool accepted meanwhile.
pub(crate) fn longest_store_gap(history: &History) -> f64 {
    let mut stored: Vec<f64> = history
        .ops
        .iter()
        .filter(|o| o.request.method == "POST" && o.request.path == "/api/v1/push")
        .filter_map(|o| match &o.answer {
            Answer::Known(a) if a.status == 201 && all_queued(a.body.as_ref()) => {
                Some(o.complete_ms as f64)
            }
            _ => None,
        })
        .collect();
    stored.sort_by(f64::total_cmp);
    stored.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max)
}

fn all_queued(body: Option<&Value>) -> bool {
    body.and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty() && a.iter().all(|r| r["status"] == "queued"))
}
