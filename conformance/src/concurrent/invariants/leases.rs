//! Whether a lease may still hold a partition for a group at some moment: the question
//! behind `lost`. A message answered 201 that a drained group never received is lost
//! only if the drain's final empty answer came when no lease on its partition could
//! still be live for that group (a live lease makes the partition unclaimable, POP-2).
//! The broker decides how long its leases last, so "could" is judged from what it
//! observably applies, never from the `leaseSeconds` the clients asked for: a broker
//! that ignores `leaseSeconds` and leases for 300 s once had every message its clients
//! still held counted lost.
//!
//! The evidence, per lease the history names (a delivery's lease id, on that
//! delivery's (partition, group)):
//! - gone, from the completion of an extend answered `success:false` (a lease that is
//!   gone is never revived, LEASE-1), of an ack item carrying it answered `success` and
//!   `leaseReleased`, or of a later pop that got the partition for the group (invoked
//!   after the lease's pop completed: a live lease makes a partition unclaimable; a
//!   broker breaking that is a `double-lease`);
//! - else, after an extend answered live until E: live at most until E (the deadline
//!   was E then, and only an extend moves it, every extend being recorded; one whose
//!   answer is lost may have moved it to its completion plus its `seconds`);
//! - else, after an extend whose answer did not read: the broker did not say, so live
//!   for as long as anyone waits (`unobserved-lease`);
//! - else (never asked): live at most until its pop completed plus the longest lease
//!   the broker observably applies: the pop's `leaseSeconds` (the push-created queue's
//!   60 s when absent, POP-9), or longer when an extend showed a lease live past its pop
//!   by more (E minus the pop's invocation). The drain asks about every lease on a
//!   partition a message is missing from, so this bound judges only a history whose
//!   drain did not ask (the measured duration still bounds the pops below).
//!
//! A pop whose answer the history cannot read (unknown, unreadable) may hold any
//! partition of its queue for its group, under a lease nobody can name or ask about:
//! from its completion (an unknown one from the workload's last completion, the moment
//! the drain already takes every workload call to have acted by) for that observed
//! duration, unless a later pop got the partition. Broker deadlines are compared with
//! client times with twice the skew allowance; client times with each other, without.

use super::facts::{Delivery, Facts, MsgKey};
use crate::concurrent::answers::ExtendRead;
use queen_reference::time::Millis;
use std::collections::BTreeMap;

/// A pop's lease when it names no `leaseSeconds`: a push-created queue's `leaseTime`.
const DEFAULT_LEASE_MS: Millis = 60_000;

/// How long a lease may live when the broker would not say (its extend answer did not
/// read): for as long as anyone waits.
const UNOBSERVED: Millis = Millis::MAX / 4;

/// A lease that may still hold a message's partition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hold {
    /// `live-lease` (an extend showed it live), `unobserved-lease` (an extend answer that
    /// did not read), `lease-bound` (never asked: within the observed lease duration) or
    /// `unseen-lease` (a pop whose answer names no lease).
    pub cause: &'static str,
    /// The latest it may be live until (ms; client clock, skew not added).
    pub until: Millis,
    /// The pop (and extends) that show it.
    pub ops: Vec<usize>,
}

/// The leases of a history, with the evidence on each.
pub(crate) struct Leases<'a> {
    f: &'a Facts,
    skew: Millis,
    horizon: Millis,
    observed: Millis,
}

/// One lease id on one (partition, group): the deliveries that carry it.
struct Named<'a> {
    lease: &'a str,
    pops: Vec<&'a Delivery>,
}

impl<'a> Leases<'a> {
    /// `horizon`: the last completion of the workload (before the drain).
    pub fn new(f: &'a Facts, skew: Millis, horizon: Millis) -> Leases<'a> {
        let observed = f
            .extends
            .iter()
            .filter_map(|e| match e.read {
                ExtendRead::Live(until) => f
                    .deliveries
                    .iter()
                    .filter(|d| d.lease == e.lease)
                    .map(|d| until - d.invoke_ms)
                    .max(),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Leases {
            f,
            skew,
            horizon,
            observed,
        }
    }

    fn duration(&self, requested: Option<Millis>) -> Millis {
        requested.unwrap_or(DEFAULT_LEASE_MS).max(self.observed)
    }

    /// The leases the history names on `msg`'s partition for `group`, granted by pops
    /// invoked at or before `at`.
    fn named(&self, group: &str, msg: &MsgKey, at: Millis) -> Vec<Named<'a>> {
        let mut m: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
        for d in &self.f.deliveries {
            let here = d
                .msgs
                .first()
                .is_some_and(|x| x.queue == msg.queue && x.partition == msg.partition);
            if here && d.group == group && !d.auto_ack && !d.lease.is_empty() && d.invoke_ms <= at {
                m.entry(d.lease.as_str()).or_default().push(d);
            }
        }
        m.into_iter()
            .map(|(lease, pops)| Named { lease, pops })
            .collect()
    }

    /// Lease ids on `msg`'s partition for `group` that no extend has asked about yet:
    /// what the drain probes before it trusts an empty answer. Leases known gone (an ack
    /// released them, a later pop got the partition) need no asking.
    pub(crate) fn unprobed(&self, group: &str, msg: &MsgKey) -> Vec<String> {
        self.named(group, msg, Millis::MAX)
            .into_iter()
            .filter(|n| !self.f.extends.iter().any(|e| e.lease == n.lease))
            .filter(|n| self.gone_at(n, group, msg).is_none())
            .map(|n| n.lease.to_string())
            .collect()
    }

    /// When `n` was certainly gone, if it was: an extend answered `success:false`, an
    /// ack item carrying it answered `success` and `leaseReleased`, or a later pop got
    /// its partition.
    fn gone_at(&self, n: &Named<'_>, group: &str, msg: &MsgKey) -> Option<Millis> {
        let granted = n.pops.iter().map(|d| d.complete_ms).max().unwrap_or(0);
        let refused = self
            .f
            .extends
            .iter()
            .filter(|e| e.lease == n.lease && e.read == ExtendRead::Gone)
            .map(|e| e.complete_ms);
        let released = self
            .f
            .acks
            .iter()
            .filter(|a| a.group == group && a.lease.as_deref() == Some(n.lease))
            .filter(|a| n.pops.iter().any(|d| d.partition_id == a.partition_id))
            .filter(|a| {
                a.result
                    .as_ref()
                    .is_some_and(|r| r.success && r.lease_released == Some(true))
            })
            .map(|a| a.complete_ms);
        refused
            .chain(released)
            .chain(self.claimed_after(group, msg, granted))
            .min()
    }

    /// A lease that may be live at `at` on `msg`'s partition for `group` (the one that
    /// may last longest), or `None` when every lease on it had certainly ended.
    pub fn holding(&self, group: &str, msg: &MsgKey, at: Millis) -> Option<Hold> {
        let named = self
            .named(group, msg, at)
            .into_iter()
            .filter_map(|n| self.named_hold(&n, group, msg, at));
        let blind = self
            .f
            .blind_pops
            .iter()
            .filter(|b| {
                b.group == group
                    && b.invoke_ms <= at
                    && b.queue.as_ref().is_none_or(|q| *q == msg.queue)
                    && b.partition.as_ref().is_none_or(|p| *p == msg.partition)
            })
            .filter_map(|b| {
                let from = if b.unknown {
                    b.complete_ms.max(self.horizon)
                } else {
                    b.complete_ms
                };
                let until = from + self.duration(b.lease_min_ms);
                ended(self.claimed_after(group, msg, from), at, until).map(|until| Hold {
                    cause: "unseen-lease",
                    until,
                    ops: vec![b.op],
                })
            });
        named
            .chain(blind)
            .filter(|h| h.until + 2 * self.skew >= at)
            .max_by_key(|h| h.until)
    }

    /// When a pop invoked after `after` certainly got `msg`'s partition for `group`:
    /// every lease on it granted by then was gone by that pop's completion (a live lease
    /// makes a partition unclaimable, POP-2; a broker that breaks it is a
    /// `double-lease`).
    fn claimed_after(&self, group: &str, msg: &MsgKey, after: Millis) -> Option<Millis> {
        self.f
            .deliveries
            .iter()
            .filter(|d| d.group == group && d.invoke_ms > after)
            .filter(|d| {
                d.msgs
                    .first()
                    .is_some_and(|x| x.queue == msg.queue && x.partition == msg.partition)
            })
            .map(|d| d.complete_ms)
            .min()
    }

    /// How long one named lease may live: until an extend showed it gone or a later pop
    /// claimed its partition, else until the deadline an extend showed, else (no extend)
    /// for the observed duration from its pop. An extend whose answer did not read
    /// observed nothing: the lease may live on ([`UNOBSERVED`]).
    fn named_hold(&self, n: &Named<'_>, group: &str, msg: &MsgKey, at: Millis) -> Option<Hold> {
        let extends: Vec<_> = self
            .f
            .extends
            .iter()
            .filter(|e| e.lease == n.lease)
            .collect();
        let granted = n.pops.iter().map(|d| d.complete_ms).max().unwrap_or(0);
        let gone_at = self.gone_at(n, group, msg);
        let requested = n.pops.iter().filter_map(|d| d.lease_min_ms).max();
        let live = extends
            .iter()
            .filter_map(|e| match e.read {
                ExtendRead::Live(until) => Some(until),
                _ => None,
            })
            .max();
        let unread = extends.iter().filter(|e| e.read == ExtendRead::Unknown);
        let (cause, until) = match live {
            // An unread extend after the one that read may have moved the deadline on,
            // by its `seconds`.
            Some(until) => (
                "live-lease",
                unread
                    .map(|e| {
                        let s = e
                            .seconds
                            .map_or(self.duration(requested), |s| Millis::from(s) * 1000);
                        e.complete_ms + s
                    })
                    .fold(until, Millis::max),
            ),
            None if unread.count() > 0 => ("unobserved-lease", UNOBSERVED),
            None => ("lease-bound", granted + self.duration(requested)),
        };
        let mut ops: Vec<usize> = n.pops.iter().map(|d| d.op).collect();
        ops.extend(extends.iter().map(|e| e.op));
        ended(gone_at, at, until).map(|until| Hold { cause, until, ops })
    }
}

/// A lease's `until`, unless it was certainly gone before `at`: `gone_at` is a client
/// time (an answer completed), so no skew applies to it; a call completed in the
/// millisecond `at` names may lie after it.
fn ended(gone_at: Option<Millis>, at: Millis, until: Millis) -> Option<Millis> {
    match gone_at {
        Some(g) if g < at => None,
        Some(g) => Some(g.min(until)),
        None => Some(until),
    }
}
