//! Invariants of a concurrent run, checked on the history and its final drain
//! ([`super::drain`]), independently of the linearizability search: a message answered
//! 201 `queued`/`buffered` is never lost (ACK-1, PUSH-7); nothing is delivered at or
//! below a cursor committed earlier; deliveries follow partition order; at most one live
//! lease per `(partition, group)` (ACK-4); every duplicate delivery has an allowed cause
//! (lease expiry ACK-7, `failed`/`retry` ACK-6, the ACK-2 clamp, an ack without lease
//! ACK-5), else it is a bad anomaly.
//!
//! Every check is sound under unknown outcomes: a push with an unknown answer may or may
//! not exist (never required, never a phantom); an ack with an unknown answer may or may
//! not have committed (it never proves a cursor, and it may explain a redelivery); only
//! what is certain from real time and the answers is flagged. An answer that does not
//! read as PROTOCOL.md words it (another 2xx, a missing key) is read leniently, and what
//! still cannot be read counts as unknown ([`crate::concurrent::answers`]). A message a
//! drained group never received while a lease may still have held its partition when the
//! drain's final empty answer came is `still-leased` (allowed), not `lost`: the broker's
//! lease may be longer than the one asked for ([`leases`]). Each anomaly is counted by
//! kind, bad or allowed; any bad one fails the run.

pub mod facts;
pub mod leases;
#[cfg(test)]
mod tests;

use super::drain::Drain;
use super::history::History;
use facts::{Delivery, Facts, Fate, MsgKey};
use leases::Leases;
use queen_reference::time::Millis;
use queen_reference::wire::AckStatus;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The kinds of anomaly, in report order.
pub const KINDS: [&str; 9] = [
    "lost",
    "still-leased",
    "phantom",
    "order",
    "past-cursor",
    "double-lease",
    "duplicate",
    "unknown-push",
    "drain-incomplete",
];

/// One anomaly found.
#[derive(Clone, Debug, PartialEq)]
pub struct Anomaly {
    /// One of [`KINDS`].
    pub kind: &'static str,
    /// Bad (fails the run) or allowed (counted only).
    pub bad: bool,
    /// The allowed cause, or why it is bad.
    pub cause: String,
    /// The calls involved (history ids).
    pub ops: Vec<usize>,
}

/// Counts of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Anomalies that break an invariant.
    pub bad: usize,
    /// Anomalies the protocol allows (reported, never failing).
    pub allowed: usize,
}

/// The result of [`check`].
#[derive(Clone, Debug, Default)]
pub struct InvariantReport {
    /// Every anomaly found, bad and allowed.
    pub anomalies: Vec<Anomaly>,
    /// Messages followed (named by a push) and deliveries seen.
    pub messages: usize,
    /// Deliveries seen (messages of pop answers).
    pub deliveries: usize,
    /// Whether the drain emptied every `(queue, group)` it was asked to.
    pub drained: bool,
}

/// Tuning of the checks.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Milliseconds the broker's clock may differ from the client's.
    pub skew_ms: Millis,
}

impl Default for Options {
    fn default() -> Self {
        Options { skew_ms: 5 }
    }
}

impl InvariantReport {
    /// Counts per kind (every kind of [`KINDS`] present).
    pub fn counts(&self) -> BTreeMap<&'static str, Count> {
        let mut m: BTreeMap<&'static str, Count> =
            KINDS.iter().map(|k| (*k, Count::default())).collect();
        for a in &self.anomalies {
            let c = m.entry(a.kind).or_default();
            if a.bad {
                c.bad += 1;
            } else {
                c.allowed += 1;
            }
        }
        m
    }

    /// Allowed anomalies per `kind/cause`.
    fn allowed_causes(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for a in self.anomalies.iter().filter(|a| !a.bad) {
            *m.entry(format!("{}/{}", a.kind, a.cause)).or_default() += 1;
        }
        m
    }

    /// How many anomalies break an invariant.
    pub fn bad(&self) -> usize {
        self.anomalies.iter().filter(|a| a.bad).count()
    }

    /// Whether no anomaly breaks an invariant.
    pub fn passed(&self) -> bool {
        self.bad() == 0
    }

    /// Terminal lines: counts, then up to `limit` bad anomalies.
    pub fn summary(&self, history: &History, limit: usize) -> String {
        let mut s = format!(
            "invariants after the drain: {} messages, {} deliveries, drain {}: {}\n",
            self.messages,
            self.deliveries,
            if self.drained {
                "complete"
            } else {
                "INCOMPLETE"
            },
            if self.passed() { "ok" } else { "BAD ANOMALIES" }
        );
        for (k, c) in self.counts() {
            s.push_str(&format!(
                "  {k:<17} bad {:>4}  allowed {:>4}\n",
                c.bad, c.allowed
            ));
        }
        let causes = self.allowed_causes();
        if !causes.is_empty() {
            let list: Vec<String> = causes.iter().map(|(k, n)| format!("{k} {n}")).collect();
            s.push_str(&format!("  allowed causes: {}\n", list.join(", ")));
        }
        for a in self.anomalies.iter().filter(|a| a.bad).take(limit) {
            s.push_str(&format!("  BAD {}: {}\n", a.kind, a.cause));
            for id in &a.ops {
                if let Some(op) = history.ops.get(*id) {
                    s.push_str(&format!("    {}\n", op.label()));
                }
            }
        }
        if self.bad() > limit {
            s.push_str(&format!(
                "  ... {} more bad anomalies\n",
                self.bad() - limit
            ));
        }
        s
    }

    /// The report as JSON, for the run's JSON report.
    pub fn to_json(&self) -> Value {
        let counts: serde_json::Map<String, Value> = self
            .counts()
            .into_iter()
            .map(|(k, c)| (k.to_string(), json!({"bad": c.bad, "allowed": c.allowed})))
            .collect();
        json!({
            "passed": self.passed(),
            "drained": self.drained,
            "messages": self.messages,
            "deliveries": self.deliveries,
            "counts": counts,
            "allowedCauses": self.allowed_causes(),
            // The first 100 bad anomalies (the counts have them all).
            "bad": self.anomalies.iter().filter(|a| a.bad).take(100).map(|a| json!({
                "kind": a.kind, "why": a.cause, "ops": a.ops,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Checks `history` (the workload's calls) and `drain` with default options.
pub fn check(history: &History, drain: &Drain) -> InvariantReport {
    check_with(history, drain, &Options::default())
}

/// Checks the workload's calls and the drain's together; anomalies name calls by their
/// id in [`merged`]`(history, drain)`.
pub(crate) fn check_with(history: &History, drain: &Drain, opts: &Options) -> InvariantReport {
    let all = merged(history, drain);
    let f = Facts::read(&all);
    let mut out = InvariantReport {
        messages: f.pushes.len(),
        deliveries: f.deliveries.len(),
        drained: drain.complete(),
        ..InvariantReport::default()
    };
    for d in drain.unfinished() {
        out.anomalies.push(Anomaly {
            kind: "drain-incomplete",
            bad: true,
            cause: format!("{d}: not emptied within the drain's time"),
            ops: vec![],
        });
    }
    let horizon = history.ops.iter().map(|o| o.complete_ms).max().unwrap_or(0);
    lost(&f, drain, &Leases::new(&f, opts.skew_ms, horizon), &mut out);
    phantom_and_order(&f, &mut out);
    past_cursor(&f, &mut out);
    double_lease(&f, opts, &mut out);
    duplicates(&f, opts, &mut out);
    out
}

/// The workload's calls and the drain's, as one history (ids renumbered by invocation).
pub fn merged(history: &History, drain: &Drain) -> History {
    let mut ops = history.ops.clone();
    ops.extend(drain.ops.iter().cloned());
    History::new(ops)
}

/// Deliveries by (partitionId, group), each list in invocation order.
fn by_cursor(f: &Facts) -> HashMap<(&str, &str), Vec<&Delivery>> {
    let mut m: HashMap<(&str, &str), Vec<&Delivery>> = HashMap::new();
    for d in &f.deliveries {
        m.entry((d.partition_id.as_str(), d.group.as_str()))
            .or_default()
            .push(d);
    }
    for v in m.values_mut() {
        v.sort_by_key(|d| (d.invoke_ms, d.op));
    }
    m
}

/// No message answered 201 `queued`/`buffered` is missing: each was delivered to every
/// drained group of its queue at some point, or is a dead letter of that group, or a
/// lease may still have held its partition when the drain's final empty answer came
/// (`still-leased`, allowed).
fn lost(f: &Facts, drain: &Drain, leases: &Leases, out: &mut InvariantReport) {
    let delivered: HashSet<(&str, &MsgKey)> = f
        .deliveries
        .iter()
        .flat_map(|d| d.msgs.iter().map(move |m| (d.group.as_str(), m)))
        .collect();
    for (key, pushes) in &f.pushes {
        let required = f.required(key);
        let delivered_to = |g: &str| {
            delivered.contains(&(g, key)) || f.dead.contains(&(g.to_string(), key.clone()))
        };
        if required.is_empty() {
            if pushes.iter().any(|p| p.fate == Fate::Unknown) {
                let seen = delivered.iter().any(|(_, m)| *m == key);
                out.anomalies.push(Anomaly {
                    kind: "unknown-push",
                    bad: false,
                    cause: if seen { "applied" } else { "absent" }.into(),
                    ops: pushes.iter().map(|p| p.op).collect(),
                });
            }
            continue;
        }
        let drained = drain
            .targets
            .iter()
            .filter(|t| t.emptied && t.queue == key.queue);
        for t in drained.filter(|t| !delivered_to(&t.group)) {
            let g = &t.group;
            let at = t.empty_at.unwrap_or(Millis::MAX);
            out.anomalies.push(match leases.holding(g, key, at) {
                Some(h) => Anomaly {
                    kind: "still-leased",
                    bad: false,
                    cause: h.cause.into(),
                    ops: required.iter().copied().chain(h.ops).collect(),
                },
                None => Anomaly {
                    kind: "lost",
                    bad: true,
                    cause: format!(
                        "{key} was answered 201 but never delivered to group {g} (drained)"
                    ),
                    ops: required.clone(),
                },
            });
        }
    }
}

/// Every delivered message was pushed; within one delivery, messages are distinct and
/// in partition order; a later delivery never brings back a message that an earlier
/// delivery of the same group skipped (it was at or below the cursor then).
fn phantom_and_order(f: &Facts, out: &mut InvariantReport) {
    for d in &f.deliveries {
        for (i, x) in d.msgs.iter().enumerate() {
            if !f.pushed(x) {
                out.anomalies.push(Anomaly {
                    kind: "phantom",
                    bad: true,
                    cause: format!("{x} was delivered but never pushed"),
                    ops: vec![d.op],
                });
            }
            for y in &d.msgs[i + 1..] {
                if x == y || f.before(y, x) {
                    out.anomalies.push(Anomaly {
                        kind: "order",
                        bad: true,
                        cause: format!("one delivery returned {x} before {y}"),
                        ops: vec![d.op],
                    });
                }
            }
        }
    }
    for list in by_cursor(f).values() {
        for (i, d1) in list.iter().enumerate() {
            for d2 in list[i + 1..]
                .iter()
                .filter(|d2| d2.invoke_ms > d1.complete_ms)
            {
                for x in d2.msgs.iter().filter(|x| !d1.msgs.contains(x)) {
                    if let Some(y) = d1.msgs.iter().find(|y| f.before(x, y)) {
                        out.anomalies.push(Anomaly {
                            kind: "order",
                            bad: true,
                            cause: format!(
                                "{x} was delivered to group {} after an earlier delivery \
                                 began past it (at {y})",
                                d1.group
                            ),
                            ops: vec![d1.op, d2.op],
                        });
                    }
                }
            }
        }
    }
}

/// The message up to which each successful ack call certainly committed, per
/// (partitionId, group), and when (its completion).
fn commits(f: &Facts) -> Vec<(usize, &str, &str, &MsgKey, Millis)> {
    let mut out = Vec::new();
    for a in &f.acks {
        let (Some(r), Some(x)) = (&a.result, &a.msg) else {
            continue;
        };
        // An answer without `noop` may have been one: it proves no commit of its own.
        if a.status != AckStatus::Completed || !r.success || r.noop != Some(false) {
            continue;
        }
        // A failure in the same call at or below x clamps the cursor (ACK-2): x is
        // committed only if every such failure is certainly above it.
        let clamped = f.acks.iter().any(|b| {
            b.op == a.op
                && b.partition_id == a.partition_id
                && b.group == a.group
                && b.maybe_comes_back()
                && !b.msg.as_ref().is_some_and(|y| f.before(x, y))
        });
        if !clamped {
            out.push((
                a.op,
                a.partition_id.as_str(),
                a.group.as_str(),
                x,
                a.complete_ms,
            ));
        }
    }
    out
}

/// Nothing is delivered at or below a cursor committed before the pop was invoked.
fn past_cursor(f: &Facts, out: &mut InvariantReport) {
    let lists = by_cursor(f);
    for (ack_op, pid, group, x, at) in commits(f) {
        let list = lists.get(&(pid, group)).map_or(&[][..], |v| v.as_slice());
        for d in list.iter().filter(|d| d.invoke_ms > at) {
            if let Some(z) = d.msgs.iter().find(|z| *z == x || f.before(z, x)) {
                out.anomalies.push(Anomaly {
                    kind: "past-cursor",
                    bad: true,
                    cause: format!(
                        "{z} was delivered to group {group} after the cursor was committed \
                         through {x}"
                    ),
                    ops: vec![ack_op, d.op],
                });
            }
        }
    }
}

/// Whether a call other than the pops may have released `d1`'s lease before `until`:
/// an ack of that (partition, group) carrying its lease or none, a transaction, a delete.
///
/// Times are whole milliseconds (truncated), so a call invoked in the very millisecond
/// `until` names may still have acted before it: `<=`, not `<`. (With `<`, an ack
/// releasing d1's lease invoked in the millisecond the next pop completed was missed,
/// and a clean memory-engine run reported `double-lease`; that is why the check once
/// only counted second claims of the same span.)
fn maybe_released(f: &Facts, d1: &Delivery, until: Millis) -> bool {
    f.acks.iter().any(|a| {
        a.partition_id == d1.partition_id
            && a.group == d1.group
            && a.invoke_ms <= until
            && a.lease.as_ref().is_none_or(|l| *l == d1.lease)
    }) || f.other_writers.iter().any(|(_, q, at)| {
        *at <= until
            && q.as_ref()
                .is_none_or(|q| d1.msgs.iter().any(|m| m.queue == *q))
    })
}

/// Whether `d1`'s lease may have expired by the time `d2` claimed (broker clocks within
/// `skew` of the client's on both ends).
fn maybe_expired(d1: &Delivery, d2: &Delivery, skew: Millis) -> bool {
    match d1.lease_min_ms {
        Some(l) => d2.complete_ms + 2 * skew >= d1.invoke_ms + l,
        None => true,
    }
}

/// At most one live lease per (partition, group): a pop that claimed the partition for
/// the group while an earlier lease on it was certainly granted, unexpired and
/// unreleased is bad (ACK-4), whichever messages it got.
fn double_lease(f: &Facts, opts: &Options, out: &mut InvariantReport) {
    for list in by_cursor(f).values() {
        for (i, d1) in list.iter().enumerate() {
            if d1.auto_ack || d1.lease.is_empty() {
                continue;
            }
            for d2 in &list[i + 1..] {
                // d2 claimed the same (partition, group) after d1's lease was granted:
                // whatever span it got, d1's lease must have expired or been released
                // by then (a later span too: only a release moves the cursor past a
                // live lease's span, ACK-1, ACK-4).
                if d2.invoke_ms <= d1.complete_ms || d2.op == d1.op {
                    continue;
                }
                if !maybe_expired(d1, d2, opts.skew_ms) && !maybe_released(f, d1, d2.complete_ms) {
                    out.anomalies.push(Anomaly {
                        kind: "double-lease",
                        bad: true,
                        cause: format!(
                            "partition {} group {}: lease {} was live when lease {} was granted",
                            d1.partition_id, d1.group, d1.lease, d2.lease
                        ),
                        ops: vec![d1.op, d2.op],
                    });
                }
            }
        }
    }
}

/// Every second delivery of a message to one group has an allowed cause between the two.
fn duplicates(f: &Facts, opts: &Options, out: &mut InvariantReport) {
    for list in by_cursor(f).values() {
        let mut seen: HashMap<&MsgKey, &Delivery> = HashMap::new();
        for d2 in list {
            for x in &d2.msgs {
                let Some(d1) = seen.insert(x, d2) else {
                    continue;
                };
                if d1.op == d2.op {
                    continue; // twice in one delivery: an order anomaly already
                }
                // Overlapping pops may have claimed in either order.
                let overlap = d2.invoke_ms <= d1.complete_ms;
                let cause = duplicate_cause(f, d1, d2, x, opts).or_else(|| {
                    overlap
                        .then(|| duplicate_cause(f, d2, d1, x, opts))
                        .flatten()
                });
                out.anomalies.push(Anomaly {
                    kind: "duplicate",
                    bad: cause.is_none(),
                    cause: cause.map(str::to_string).unwrap_or_else(|| {
                        format!(
                            "{x} delivered twice to group {} with no expiry, failure or \
                             release between",
                            d1.group
                        )
                    }),
                    ops: vec![d1.op, d2.op],
                });
            }
        }
    }
}

/// The allowed cause of `x` coming back in `d2` after `d1`, if any.
fn duplicate_cause(
    f: &Facts,
    d1: &Delivery,
    d2: &Delivery,
    x: &MsgKey,
    opts: &Options,
) -> Option<&'static str> {
    if d1.auto_ack {
        return None;
    }
    // Acks of this (partition, group) that may have acted between the two deliveries
    // (whole milliseconds: a call sharing a millisecond with a bound may lie either side).
    let between: Vec<&facts::Acked> = f
        .acks
        .iter()
        .filter(|a| {
            a.partition_id == d1.partition_id
                && a.group == d1.group
                && a.invoke_ms <= d2.complete_ms
                && a.complete_ms >= d1.invoke_ms
        })
        .collect();
    // A failure at or below x (not certainly above it) makes x come back.
    let failing = |a: &&&facts::Acked| {
        a.maybe_comes_back() && !a.msg.as_ref().is_some_and(|y| f.before(x, y))
    };
    for a in between.iter().filter(failing) {
        let completed_x = between
            .iter()
            .any(|b| b.op == a.op && b.status == AckStatus::Completed && b.msg.as_ref() == Some(x));
        if completed_x {
            return Some("ack2-clamp");
        }
    }
    if between.iter().any(|a| failing(&a)) {
        return Some("failed-retry");
    }
    if between
        .iter()
        .any(|a| a.lease.is_none() && a.maybe_effective())
    {
        return Some("ack-without-lease");
    }
    if maybe_expired(d1, d2, opts.skew_ms) {
        return Some("lease-expiry");
    }
    None
}
