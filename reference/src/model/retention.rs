//! Retention (PROTOCOL.md section 16): which messages a broker removes by age, when, and
//! what a removal does to the cursors, leases and retries that point at them.
//!
//! A broker removes messages in a background job the model cannot see run. What it can
//! say is when a removal is allowed and when it is certain (RET-3), so every operation
//! first `sweep`s: for each partition of a queue that retains, it walks the messages
//! above the partition's floor, oldest first; one whose removal is certain goes, one
//! inside the window may or may not have gone (a branch for a checker, the policy's
//! pick for an engine), and the first that stays ends the walk, because removal takes a
//! prefix (RET-2). Removed messages stay in the log (a dead letter still lists its own
//! copy, RET-4); the partition's floor says where its retained messages begin.

use super::state::{PartH, State};
use crate::choice::Ctx;
use crate::policy::ChoicePoint;
use crate::rules::{RET_2, RET_3};
use crate::time::Stamp;

/// RET-3: how late after a message becomes removable a broker may still hold it, unless
/// the checker is told its broker's interval. The suite's `--retention-interval-ms`.
pub const DEFAULT_RETENTION_LAG_MS: i64 = 5_000;

/// The age limits of a queue (RET-2): whatever the cursors, and once committed.
type Ages = (Option<i64>, Option<i64>);

/// Applies every removal that is certain by now, and branches on the ones inside their
/// window (RET-2, RET-3).
pub(crate) fn sweep(st: &mut State, ctx: &mut Ctx) {
    if st.retention_off {
        return;
    }
    let ungated = |o: &crate::wire::QueueOptions| crate::wire::QueueOptions {
        retention_enabled: true,
        ..*o
    };
    // Empty (and unallocated) when no queue retains, the usual case.
    let work: Vec<(PartH, Ages, Ages)> = st
        .queues
        .values()
        .filter(|q| ungated(&q.options).retains())
        .flat_map(|q| {
            let ages = (
                q.options.retention_ages_ms(),
                ungated(&q.options).retention_ages_ms(),
            );
            q.partitions.values().map(move |h| (*h, ages.0, ages.1))
        })
        .collect();
    for (h, ours, ungated) in work {
        match new_floor(st, h, (ours, ungated), ctx) {
            Walk::To(floor) => remove_through(st, h, floor),
            Walk::Stays => {}
            Walk::Ignored => {
                st.retention_off = true;
                return;
            }
        }
    }
}

/// What a walk over one partition found.
enum Walk {
    /// Nothing more is removed.
    Stays,
    /// Offsets up to this one are removed by now.
    To(u32),
    /// [PROJECT alternative] the broker does not remove what RET-3 says it must.
    Ignored,
}

/// When one message becomes removable under `ages`, and, when it is removable by age,
/// its deadline (after which, plus the broker's interval, its removal is certain).
fn removable_from(
    created: Stamp,
    committed: bool,
    (age, done): Ages,
) -> Option<(Stamp, Option<Stamp>)> {
    let by_age = age.map(|a| created.plus(a));
    let by_completion = done.filter(|_| committed).map(|a| created.plus(a));
    earliest(by_age, by_completion).map(|from| (from, by_age))
}

/// The walk over the messages above the partition's floor, oldest first, until one
/// stays (RET-2: a prefix).
fn new_floor(st: &State, h: PartH, (ours, ungated): (Ages, Ages), ctx: &mut Ctx) -> Walk {
    let Some(p) = st.part(h) else {
        return Walk::Stays;
    };
    // Completed retention needs a group with a cursor, and every such group past it.
    let low = p.cursors.values().map(|c| c.committed).min();
    let mut floor = p.floor;
    while floor < p.end() {
        let off = floor + 1;
        if p.deleted.contains(&off) {
            // A deleted offset holds nothing to keep (MGMT-11).
            floor = off;
            continue;
        }
        let created = st.created(p.at(off));
        let committed = low.is_some_and(|l| l >= off);
        let removed = match removable_from(created, committed, ours) {
            Some((from, by_age)) if ctx.reached(from) => {
                // When a completed message became removable depends on when it was
                // committed, which the model does not keep: that removal is allowed,
                // never required.
                let certain = by_age.is_some_and(|t| ctx.reached(t.plus(st.retention_lag_ms)));
                if certain
                    && ctx.project(
                        ChoicePoint::RetentionIgnored,
                        RET_3,
                        "kept a message past its age limit and the retention interval (ours: removed)",
                    )
                {
                    return Walk::Ignored;
                }
                certain || ctx.choose(ChoicePoint::RetentionLate, 2) == 0
            }
            // Kept by the gate: a broker that ignores `retentionEnabled` may remove it.
            _ if ours != ungated => removable_from(created, committed, ungated).is_some_and(
                |(from, _)| {
                    ctx.reached(from)
                        && ctx.project(
                            ChoicePoint::RetentionUngated,
                            RET_2,
                            "removed a message by retentionSeconds or completedRetentionSeconds without retentionEnabled (ours: kept)",
                        )
                },
            ),
            _ => false,
        };
        if !removed {
            break;
        }
        floor = off;
    }
    if floor > p.floor {
        Walk::To(floor)
    } else {
        Walk::Stays
    }
}

/// The earlier of two uncertain moments, where there are any.
fn earliest(a: Option<Stamp>, b: Option<Stamp>) -> Option<Stamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Stamp::between(a.lo.min(b.lo), a.hi.min(b.hi))),
        (a, b) => a.or(b),
    }
}

/// RET-4: offsets up to `floor` are gone. Cursors below it move up to it and forget the
/// retries of removed offsets; a lease over nothing but removed messages is released.
fn remove_through(st: &mut State, h: PartH, floor: u32) {
    let Some(p) = st.part_mut(h) else { return };
    p.floor = p.floor.max(floor);
    p.deleted = p.deleted.split_off(&(p.floor + 1));
    for c in p.cursors.values_mut().filter(|c| c.committed < floor) {
        c.committed = floor;
        c.retries = c.retries.split_off(&(floor + 1));
        if c.lease.as_ref().is_some_and(|l| l.end <= floor) {
            c.lease = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Lease;
    use crate::policy::Policy;
    use crate::wire::QueueOptions;

    /// A queue `q` with one partition holding messages `t0`, `t1`, ... pushed at `times`.
    fn state(options: QueueOptions, times: &[i64]) -> (State, PartH) {
        let mut st = State::new();
        st.ensure_queue("q", options);
        let h = st.ensure_partition("q", "p");
        let policy = Policy::default();
        for (i, t) in times.iter().enumerate() {
            let item = crate::wire::PushItem {
                queue: "q".into(),
                partition: "p".into(),
                payload: crate::wire::Payload::Absent,
                transaction_id: Some(format!("t{i}")),
                trace_id: None,
                producer_sub: None,
            };
            let mut ctx = Ctx::policy(Stamp::exact(*t), &policy);
            let mut mint = |_: usize| String::new();
            crate::model::push::push(
                &mut st,
                &[item],
                crate::model::PushKind::Plain,
                &mut mint,
                &mut ctx,
            );
        }
        (st, h)
    }

    fn aged(secs: u32) -> QueueOptions {
        QueueOptions {
            retention_enabled: true,
            retention_seconds: secs,
            ..QueueOptions::default()
        }
    }

    fn swept_at(st: &mut State, t: i64, policy: &Policy) {
        let mut ctx = Ctx::policy(Stamp::exact(t), policy);
        sweep(st, &mut ctx);
    }

    #[test]
    fn ret_2_without_the_gate_retention_seconds_removes_nothing() {
        let options = QueueOptions {
            retention_seconds: 1,
            ..QueueOptions::default()
        };
        let (mut st, h) = state(options, &[0, 0]);
        swept_at(&mut st, 1_000_000, &Policy::default());
        assert_eq!(st.part(h).unwrap().floor, 0);
    }

    #[test]
    fn ret_3_removal_is_allowed_from_the_deadline_and_certain_after_the_lag() {
        let (mut st, h) = state(aged(1), &[0, 500, 5_000]);
        let late = Policy {
            retention_late: 1,
            ..Policy::default()
        };
        swept_at(&mut st, 999, &Policy::default());
        assert_eq!(st.part(h).unwrap().floor, 0, "not removable yet");
        swept_at(&mut st, 1_600, &late);
        assert_eq!(st.part(h).unwrap().floor, 0, "a late broker may keep them");
        swept_at(&mut st, 1_600, &Policy::default());
        assert_eq!(st.part(h).unwrap().floor, 2, "a prompt one removes both");
        let (mut st, h) = state(aged(1), &[0, 500, 5_000]);
        swept_at(&mut st, 1_000 + DEFAULT_RETENTION_LAG_MS, &late);
        assert_eq!(st.part(h).unwrap().floor, 1, "certain for the first only");
        let r = crate::choice::explore(Stamp::exact(1_600), |ctx| {
            let mut st = st.clone();
            sweep(&mut st, ctx);
            st.part(h).unwrap().floor
        })
        .unwrap();
        let floors: Vec<u32> = r.into_iter().map(|(f, _)| f).collect();
        assert_eq!(floors, [2, 1], "a checker keeps both");
    }

    #[test]
    fn ret_2_completed_retention_needs_every_cursor_past_the_message() {
        let options = QueueOptions {
            retention_enabled: true,
            completed_retention_seconds: 1,
            ..QueueOptions::default()
        };
        let (mut st, h) = state(options, &[0, 0, 0]);
        swept_at(&mut st, 10_000, &Policy::default());
        assert_eq!(
            st.part(h).unwrap().floor,
            0,
            "no cursor: nothing is completed"
        );
        st.cursor_mut(h, "a").committed = 2;
        st.cursor_mut(h, "b").committed = 1;
        swept_at(&mut st, 10_000, &Policy::default());
        assert_eq!(st.part(h).unwrap().floor, 1);
    }

    #[test]
    fn ret_4_cursors_move_up_and_a_lease_over_removed_messages_is_released() {
        let (mut st, h) = state(aged(1), &[0, 0, 5_000]);
        let c = st.cursor_mut(h, "g");
        c.retries.insert(1, 1);
        c.lease = Some(Lease {
            id: crate::model::LeaseH(0),
            end: 2,
            deadline: Stamp::exact(100_000),
            duration_ms: 1000,
        });
        st.cursor_mut(h, "k").lease = Some(Lease {
            id: crate::model::LeaseH(1),
            end: 3,
            deadline: Stamp::exact(100_000),
            duration_ms: 1000,
        });
        swept_at(&mut st, 2_000, &Policy::default());
        let p = st.part(h).unwrap();
        assert_eq!(p.floor, 2);
        assert_eq!(p.cursors["g"].committed, 2);
        assert!(p.cursors["g"].lease.is_none() && p.cursors["g"].retries.is_empty());
        assert_eq!(
            p.cursors["k"].lease.as_ref().map(|l| l.end),
            Some(3),
            "shrunk, kept"
        );
        assert_eq!(
            p.txn_offset("t0"),
            None,
            "a removed message no longer deduplicates"
        );
        assert_eq!(p.txn_offset("t2"), Some(3));
    }
}
