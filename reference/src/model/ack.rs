//! Acknowledgment (PROTOCOL.md section 4): the seven-step evaluation of one call.
//!
//! An ack is a cursor commit. Items are grouped per `(partition, group)`; within a
//! group the strongest signal per offset wins (ACK-2), at most one retry is charged,
//! exhausted failures become dead letters, and the cursor stops just below the first
//! offset that comes back.

use super::outcome::AckOut;
use super::state::{DeadLetterRec, LeaseH, PartH, State};
use crate::choice::Ctx;
use crate::policy::{BlockedCompletion, ChoicePoint};
use crate::wire::{
    AckResult, AckStatus, ERR_ALREADY_COMMITTED, ERR_INVALID_LEASE, ERR_UNRESOLVABLE,
};
use std::collections::BTreeMap;

/// A lease id as the model understands it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseRef {
    /// No `leaseId` (absent, `null` or `""`): not lease-checked (ACK-5).
    Absent,
    /// A lease the model minted.
    Known(LeaseH),
    /// An id no pop ever answered with: never the live lease.
    Unknown,
}

/// One acknowledgment with its ids resolved to handles.
#[derive(Clone, Debug, PartialEq)]
pub struct AckIn {
    pub transaction_id: String,
    /// `None`: a partitionId no pop ever answered with.
    pub part: Option<PartH>,
    pub status: AckStatus,
    pub group: String,
    pub lease: LeaseRef,
    pub error: Option<String>,
}

/// A `(partition, group)`: the unit an ack call is evaluated in.
type Pair = (PartH, String);

/// What step 1 decided for one item.
enum Step1 {
    Answered(AckResult),
    Valid { part: PartH, offset: u32 },
}

fn answer(index: usize, txn: &str, success: bool, error: Option<&str>, noop: bool) -> AckResult {
    AckResult {
        index,
        transaction_id: txn.to_string(),
        success,
        error: error.map(str::to_string),
        lease_released: false,
        dlq: false,
        noop,
    }
}

/// Evaluates one ack call (single or batch) and applies it.
pub fn ack(st: &mut State, items: &[AckIn], ctx: &mut Ctx) -> Vec<AckOut> {
    let mut out: Vec<Option<AckOut>> = vec![None; items.len()];
    // (partition, group) -> (item index, offset) of valid items, in first-appearance order.
    let mut pairs: Vec<(Pair, Vec<(usize, u32)>)> = Vec::new();

    // Step 1: resolve, ACK-3 below the cursor, ACK-5 lease check.
    for (i, it) in items.iter().enumerate() {
        match step1(st, i, it, ctx) {
            Step1::Answered(r) => {
                out[i] = Some(AckOut {
                    result: r,
                    may_fail: false,
                })
            }
            Step1::Valid { part, offset } => {
                let key = (part, it.group.clone());
                match pairs.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, v)) => v.push((i, offset)),
                    None => pairs.push((key, vec![(i, offset)])),
                }
            }
        }
    }

    for ((part, group), valid) in pairs {
        let results = evaluate(st, part, &group, &valid, items, ctx);
        for (i, r) in results {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|o| o.expect("every item answered"))
        .collect()
}

fn step1(st: &mut State, i: usize, it: &AckIn, ctx: &mut Ctx) -> Step1 {
    let txn = it.transaction_id.as_str();
    let unresolvable = || Step1::Answered(answer(i, txn, false, Some(ERR_UNRESOLVABLE), false));
    let Some(ph) = it.part else {
        return unresolvable();
    };
    let Some(p) = st.part(ph) else {
        return unresolvable();
    };
    let Some(&offset) = p.txn_index.get(txn) else {
        return unresolvable();
    };
    // ACK-8 [OPEN]: a message older than the dedup window may be unresolvable.
    let window_ms = st.queues[&p.queue].options.dedup_window_seconds as i64 * 1000;
    let created = st.created(p.at(offset));
    if ctx.reached(created.plus(window_ms)) && ctx.choose(ChoicePoint::AckBeyondDedupWindow, 2) == 1
    {
        return unresolvable();
    }
    let cursor = p.cursors.get(&it.group);
    if cursor.is_none() && it.lease == LeaseRef::Absent {
        // Step 7 [OPEN]: no cursor for this group. Ours: unresolvable; else a commit.
        if ctx.choose(ChoicePoint::AckWithoutCursor, 2) == 0 {
            return unresolvable();
        }
        st.part_mut(ph)
            .expect("exists")
            .cursors
            .entry(it.group.clone())
            .or_default();
        return Step1::Valid { part: ph, offset };
    }
    let committed = cursor.map_or(0, |c| c.committed);
    if offset <= committed {
        // ACK-3: nothing to do, and never faked.
        return Step1::Answered(if it.status == AckStatus::Completed {
            answer(i, txn, true, None, true)
        } else {
            answer(i, txn, false, Some(ERR_ALREADY_COMMITTED), false)
        });
    }
    match it.lease {
        LeaseRef::Absent => Step1::Valid { part: ph, offset },
        LeaseRef::Unknown => Step1::Answered(answer(i, txn, false, Some(ERR_INVALID_LEASE), false)),
        LeaseRef::Known(h) => {
            let live = cursor
                .and_then(|c| c.lease.as_ref())
                .filter(|l| l.id == h)
                .map(|l| (l.deadline, l.end));
            match live {
                // ACK-5 [PROJECT]: the offset must lie in the lease's span.
                Some((deadline, end)) if offset <= end && ctx.now_before(deadline) => {
                    Step1::Valid { part: ph, offset }
                }
                _ => Step1::Answered(answer(i, txn, false, Some(ERR_INVALID_LEASE), false)),
            }
        }
    }
}

/// Steps 2–6 for one `(partition, group)`.
fn evaluate(
    st: &mut State,
    ph: PartH,
    group: &str,
    valid: &[(usize, u32)],
    items: &[AckIn],
    ctx: &mut Ctx,
) -> Vec<(usize, AckOut)> {
    let p = st.part(ph).expect("resolved");
    let opts = st.queues[&p.queue].options;
    let cursor = p.cursors.get(group).cloned().unwrap_or_default();
    let c = cursor.committed;

    // Step 2: the strongest signal per offset, and the error text that came with it.
    let mut signal: BTreeMap<u32, (AckStatus, Option<String>)> = BTreeMap::new();
    for &(i, off) in valid {
        let it = &items[i];
        let e = signal.entry(off).or_insert((it.status, it.error.clone()));
        if it.status > e.0 {
            *e = (it.status, it.error.clone());
        }
    }

    // Step 3: walk failed offsets upward; charge at most one retry.
    let mut charged: Option<u32> = None;
    let mut dead: Vec<u32> = Vec::new();
    let mut comes_back: Vec<u32> = Vec::new();
    let mut failed_back = false;
    for (&off, (status, _)) in &signal {
        match status {
            AckStatus::Failed => {
                let count = cursor.retries.get(&off).copied().unwrap_or(0);
                if charged.is_some() {
                    comes_back.push(off);
                    failed_back = true;
                } else if count < opts.retry_limit {
                    charged = Some(off);
                    comes_back.push(off);
                    failed_back = true;
                } else {
                    dead.push(off); // DLQ-1: the budget is spent
                }
            }
            AckStatus::Retry => comes_back.push(off),
            AckStatus::Dlq => dead.push(off),
            AckStatus::Completed => {}
        }
    }

    // Step 4: the cursor stops at the first message that comes back.
    let first_back = comes_back.iter().min().copied();
    let highest_terminal = signal
        .iter()
        .filter(|(o, (s, _))| *s == AckStatus::Completed || dead.contains(o))
        .map(|(o, _)| *o)
        .max()
        .unwrap_or(c);
    let new_cursor = match first_back {
        Some(f) => c.max(highest_terminal.min(f - 1)),
        None => c.max(highest_terminal),
    };

    // Step 5: release the lease when something comes back or the span is done.
    let live_lease = cursor
        .lease
        .as_ref()
        .map(|l| (l.end, ctx.now_before(l.deadline)));
    let release = match live_lease {
        Some((end, _)) => first_back.is_some() || new_cursor >= end,
        None => false,
    };
    let released_live = release && live_lease.is_some_and(|(_, live)| live);

    // Apply.
    let now = ctx.now;
    if release {
        st.release_lease(ph, group);
    }
    let retry_delay = opts.retry_delay as i64;
    {
        let cur = st.cursor_mut(ph, group);
        if let Some(off) = charged {
            *cur.retries.entry(off).or_insert(0) += 1;
        }
        cur.committed = new_cursor;
        cur.retries = cur.retries.split_off(&(new_cursor + 1));
        if failed_back {
            cur.not_before = Some(now.plus(retry_delay));
        }
        if let Some(l) = &cur.lease {
            if l.end <= new_cursor {
                cur.lease = None;
            }
        }
    }
    for &off in &dead {
        let (_, err) = signal[&off].clone();
        let retry_count = cursor.retries.get(&off).copied().unwrap_or(0);
        let filed = st
            .dead_letters
            .iter()
            .any(|d| d.part == ph && d.offset == off && d.group == group);
        if !filed {
            st.dead_letters.push(DeadLetterRec {
                part: ph,
                offset: off,
                group: group.to_string(),
                error: err,
                retry_count,
                failed_at: now,
            });
        }
    }

    // Step 6: report.
    valid
        .iter()
        .map(|&(i, off)| {
            let it = &items[i];
            let mut r = answer(i, &it.transaction_id, true, None, false);
            r.lease_released = released_live;
            r.dlq = dead.contains(&off);
            let blocked = it.status == AckStatus::Completed && off > new_cursor;
            let may_fail = blocked && ctx.exploring();
            if blocked && !ctx.exploring() && ctx_policy_fails(ctx) {
                r.success = false;
                r.error = Some("blocked by an earlier failure in the same call".into());
            }
            (
                i,
                AckOut {
                    result: r,
                    may_fail,
                },
            )
        })
        .collect()
}

fn ctx_policy_fails(ctx: &Ctx) -> bool {
    ctx.policy_ref()
        .is_some_and(|p| p.blocked_completion == BlockedCompletion::Failure)
}
