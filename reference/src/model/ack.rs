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
use crate::variant::Variant;
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
    /// The transactionId the ack names (ACK-8).
    pub transaction_id: String,
    /// `None`: a partitionId no pop ever answered with.
    pub part: Option<PartH>,
    /// The ack's signal.
    pub status: AckStatus,
    /// The group acked for, defaulted to `__QUEUE_MODE__`.
    pub group: String,
    /// The lease the ack carries, as the model knows it (ACK-5).
    pub lease: LeaseRef,
    /// The `error` the ack gives, kept on a dead letter (ACK-6).
    pub error: Option<String>,
}

/// A `(partition, group)`: the unit an ack call is evaluated in.
type Pair<'a> = (PartH, &'a str);

/// What step 1 decided for one item.
enum Step1 {
    Answered(AckResult),
    Valid { part: PartH, offset: u32 },
}

fn answer(index: usize, txn: &str, success: bool, error: Option<&str>, noop: bool) -> AckResult {
    AckResult::new(index, txn, success, error, noop)
}

/// Evaluates one ack call (single or batch) and applies it.
pub(crate) fn ack(st: &mut State, items: &[AckIn], ctx: &mut Ctx) -> Vec<AckOut> {
    let mut out: Vec<Option<AckOut>> = vec![None; items.len()];
    // (partition, group) -> the valid items, in first-appearance order.
    let mut pairs: Vec<(Pair, Vec<ValidAck>)> = Vec::new();

    let dropped = dropped_by_success(items, ctx);
    // Step 1: resolve, ACK-3 below the cursor, ACK-5 lease check.
    for (i, it) in items.iter().enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        match step1(st, i, it, ctx) {
            Step1::Answered(r) => {
                out[i] = Some(AckOut {
                    result: r,
                    may_fail: false,
                    released: None,
                })
            }
            Step1::Valid { part, offset } => {
                let key = (part, it.group.as_str());
                let v = ValidAck {
                    index: i,
                    offset,
                    status: it.status,
                    error: it.error.as_deref(),
                };
                match pairs.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, valid)) => valid.push(v),
                    None => pairs.push((key, vec![v])),
                }
            }
        }
    }

    for ((part, group), valid) in pairs {
        evaluate(st, part, group, &valid, items, ctx, &mut out);
    }
    for &i in &dropped {
        let released = out.iter().flatten().any(|o| o.result.lease_released);
        let mut r = answer(i, &items[i].transaction_id, true, None, false);
        r.lease_released = released;
        out[i] = Some(AckOut {
            released: None,
            result: r,
            may_fail: false,
        });
    }
    out.into_iter()
        .map(|o| o.expect("every item answered"))
        .collect()
}

/// [`Variant::FailureDroppedBySuccess`]: the items a broker ignores because the call
/// also completes something in their partition (answered as successes, unchecked).
fn dropped_by_success(items: &[AckIn], ctx: &mut Ctx) -> Vec<usize> {
    let completed = |p: Option<PartH>| {
        items
            .iter()
            .any(|x| x.part.is_some() && x.part == p && x.status == AckStatus::Completed)
    };
    let dropped: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].status != AckStatus::Completed && completed(items[i].part))
        .collect();
    match !dropped.is_empty() && ctx.deviates(Variant::FailureDroppedBySuccess) {
        true => dropped,
        false => vec![],
    }
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
    let Some(offset) = p.txn_offset(txn) else {
        return unresolvable();
    };
    // ACK-8 [OPEN]: a message older than the dedup window may be unresolvable.
    let window_ms = st.queues[&p.queue].options.dedup_window_ms();
    let created = st.created(p.at(offset));
    if ctx.reached(created.plus(window_ms)) && ctx.choose(ChoicePoint::AckBeyondDedupWindow, 2) == 1
    {
        return unresolvable();
    }
    // Variant: an ack without `leaseId` is refused as if its lease were invalid.
    if it.lease == LeaseRef::Absent && ctx.deviates(Variant::AckWithoutLeaseRefused) {
        return Step1::Answered(answer(i, txn, false, Some(ERR_INVALID_LEASE), false));
    }
    if moves_back(st, ph, it, offset, ctx) {
        return Step1::Answered(answer(i, txn, true, None, false));
    }
    let p = st.part(ph).expect("exists");
    let cursor = p.cursors.get(&it.group);
    let found = Found {
        index: i,
        transaction_id: txn,
        offset,
        status: it.status,
        committed: cursor.map(|c| c.committed),
        names_lease: it.lease != LeaseRef::Absent,
    };
    let mut facts = ModelFacts {
        lease: cursor
            .and_then(|c| c.lease.as_ref())
            .map(|l| (l.id, l.deadline, l.end)),
        named: it.lease,
        ctx,
    };
    match step_one(&found, &mut facts) {
        StepOne::Answered(r) => Step1::Answered(r),
        StepOne::Valid { creates_cursor } => {
            if creates_cursor {
                st.part_mut(ph)
                    .expect("exists")
                    .cursors
                    .entry(it.group.clone())
                    .or_default();
            }
            Step1::Valid { part: ph, offset }
        }
    }
}

/// [`Variant::FailureBelowCursorMovesBack`]: a failure signal at or below the cursor is
/// taken as valid and puts the cursor back before its message.
fn moves_back(st: &mut State, ph: PartH, it: &AckIn, offset: u32, ctx: &mut Ctx) -> bool {
    let committed = st
        .part(ph)
        .and_then(|p| p.cursors.get(&it.group))
        .map(|c| c.committed);
    let below = committed.is_some_and(|c| offset <= c);
    if !below || it.status == AckStatus::Completed {
        return false;
    }
    if !ctx.deviates(Variant::FailureBelowCursorMovesBack) {
        return false;
    }
    let cursor = st.cursor_mut(ph, &it.group);
    cursor.committed = offset - 1;
    cursor.lease = None;
    true
}

/// An ack item whose message step 1 found: what the rest of step 1 needs to know.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    /// The item's place in the call (`index`).
    pub index: usize,
    /// The transactionId the item named.
    pub transaction_id: &'a str,
    /// The offset it resolved to (ACK-8).
    pub offset: u32,
    /// The item's signal.
    pub status: AckStatus,
    /// The group's committed offset on the partition; `None`: the group has no cursor.
    pub committed: Option<u32>,
    /// The item carries a `leaseId` (ACK-5 checks it).
    pub names_lease: bool,
}

/// The facts and choices step 1 asks for only when it reaches them, so that an engine
/// answers from its rows and a checker explores only the branches that matter.
pub trait StepOneFacts {
    /// The end of the item's lease span when the lease it names is the pair's live one.
    fn live_lease_end(&mut self) -> Option<u32>;
    /// Step 7 \[OPEN\]: an ack with no lease for a group without a cursor commits (ours:
    /// it is unresolvable).
    fn commit_without_cursor(&mut self) -> bool;
    /// ACK-5 \[PROJECT\]: an offset outside the live lease's span is accepted (ours: no).
    fn accept_outside_span(&mut self) -> bool;
}

/// What step 1 decided for one found item.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOne {
    /// The item is answered now.
    Answered(AckResult),
    /// The item goes on to steps 2–6; `creates_cursor`: it commits for a group that had
    /// no cursor (step 7's alternative).
    Valid {
        /// The item commits for a group that had no cursor (step 7's alternative).
        creates_cursor: bool,
    },
}

/// Step 1 after resolution, for both engines: step 7 for a group without a cursor,
/// ACK-3 at or below the cursor (never faked), ACK-5's lease check.
pub fn step_one(item: &Found, facts: &mut impl StepOneFacts) -> StepOne {
    let (i, txn) = (item.index, item.transaction_id);
    let refuse = |error| StepOne::Answered(answer(i, txn, false, Some(error), false));
    if item.committed.is_none() && !item.names_lease {
        if facts.commit_without_cursor() {
            return StepOne::Valid {
                creates_cursor: true,
            };
        }
        return refuse(ERR_UNRESOLVABLE);
    }
    if item.offset <= item.committed.unwrap_or(0) {
        return StepOne::Answered(if item.status == AckStatus::Completed {
            answer(i, txn, true, None, true)
        } else {
            answer(i, txn, false, Some(ERR_ALREADY_COMMITTED), false)
        });
    }
    if !item.names_lease {
        return StepOne::Valid {
            creates_cursor: false,
        };
    }
    match facts.live_lease_end() {
        Some(end) if item.offset <= end || facts.accept_outside_span() => StepOne::Valid {
            creates_cursor: false,
        },
        _ => refuse(ERR_INVALID_LEASE),
    }
}

/// Step 1's facts in the model: the pair's lease, the named one, and the choices asked
/// of the context.
struct ModelFacts<'c, 'p> {
    lease: Option<(LeaseH, crate::time::Stamp, u32)>,
    named: LeaseRef,
    ctx: &'c mut Ctx<'p>,
}

impl StepOneFacts for ModelFacts<'_, '_> {
    fn live_lease_end(&mut self) -> Option<u32> {
        let LeaseRef::Known(h) = self.named else {
            return None;
        };
        let (_, deadline, end) = self.lease.filter(|l| l.0 == h)?;
        (self.ctx.now_before(deadline) || self.ctx.deviates(Variant::ExpiredLeaseAccepted))
            .then_some(end)
    }

    fn commit_without_cursor(&mut self) -> bool {
        self.ctx.choose(ChoicePoint::AckWithoutCursor, 2) == 1
    }

    fn accept_outside_span(&mut self) -> bool {
        self.ctx.project(
            ChoicePoint::AckOutsideSpan,
            crate::rules::ACK_10,
            "accepted an ack carrying the live lease id for an offset outside the lease's span (ours: invalid or expired lease)",
        )
    }
}

/// What one `(partition, group)` looks like to an ack call (after step 1).
#[derive(Clone, Debug)]
pub struct PairView<'a> {
    /// The pair's committed offset before the call (`c` of the evaluation).
    pub committed: u32,
    /// Charged retries per offset above the cursor.
    pub retries: &'a BTreeMap<u32, u32>,
    /// The lease on the span, if any: its end and whether it is still live.
    pub lease: Option<(u32, bool)>,
    /// The queue's `retryLimit` (DLQ-1).
    pub retry_limit: u32,
}

/// One valid acknowledgment of the pair (step 1 passed).
#[derive(Clone, Debug)]
pub struct ValidAck<'a> {
    /// The item's place in the call.
    pub index: usize,
    /// The offset it resolved to.
    pub offset: u32,
    /// The item's signal.
    pub status: AckStatus,
    /// The `error` the item gives, kept on a dead letter (ACK-6).
    pub error: Option<&'a str>,
}

/// Departures from this project's decisions in steps 3 and 5 \[PROJECT\] that another
/// broker plausibly makes; all false is ours. Only a checker that is not strict uses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct StepAlternatives {
    /// Step 3: every failed offset with budget left is charged one retry.
    charge_every_failure: bool,
    /// Step 5: any accepted ack releases the lease, even a partial commit.
    release_on_partial_commit: bool,
    /// [`Variant::EveryFailureDeadLettered`]: failed offsets after the charged one are
    /// dead letters.
    dead_letter_rest: bool,
    /// [`Variant::FailureNotClamping`]: the cursor moves to the highest terminal offset
    /// whatever comes back.
    no_clamp: bool,
    /// [`Variant::FailureNeverCharged`]: a failure comes back uncharged, never dead.
    never_charge: bool,
    /// [`Variant::CompletionKeepsLease`]: only something coming back releases the lease.
    keep_on_completion: bool,
    /// [`Variant::FailureKeepsLease`]: neither something coming back nor a failure
    /// releases the lease.
    keep_on_back: bool,
}

/// What steps 2–6 decide for one `(partition, group)`. Pure data: the model applies it
/// to its state, the server applies it with SQL, so both follow the same rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The pair's cursor after the call: `max(c, min(T, F - 1))` (ACK step 4).
    pub new_cursor: u32,
    /// The offset charged one retry (at most one per call).
    charged: Option<u32>,
    /// Further offsets charged one retry: only under
    /// [`StepAlternatives::charge_every_failure`] (never by our server).
    also_charged: Vec<u32>,
    /// How many `failed` signals survived step 2 (whether step 3's one-retry rule mattered).
    failed_signals: usize,
    /// Offsets filed as dead letters: (offset, error text, retries spent on it).
    pub dead: Vec<(u32, Option<String>, u32)>,
    /// A `failed` offset comes back: the span waits `retryDelay`.
    pub failed_back: bool,
    /// The lease (live or not) is dropped.
    pub release: bool,
    /// A live lease was released: what `leaseReleased` reports.
    released_live: bool,
    /// Per valid item: (index, dlq, blocked completion above the new cursor).
    pub items: Vec<(usize, bool, bool)>,
}

impl Decision {
    /// The pair's retries after this decision (DLQ-1): the charged offsets count one
    /// more, and those at or below the new cursor are forgotten.
    pub fn retries_after(&self, before: &BTreeMap<u32, u32>) -> BTreeMap<u32, u32> {
        let mut retries = before.clone();
        for off in self.charged.iter().chain(&self.also_charged) {
            *retries.entry(*off).or_insert(0) += 1;
        }
        retries.split_off(&(self.new_cursor + 1))
    }
}

/// Steps 2–6 of section 4 for one `(partition, group)`.
pub fn decide(view: &PairView, valid: &[ValidAck]) -> Decision {
    decide_with(view, valid, StepAlternatives::default())
}

/// [`decide`] with departures from the project's decisions in steps 3 and 5.
fn decide_with(view: &PairView, valid: &[ValidAck], alt: StepAlternatives) -> Decision {
    let c = view.committed;
    // Step 2: the strongest signal per offset, and the error text that came with it
    // (the first item with that signal), by ascending offset.
    let signal = strongest_signals(valid);
    // Step 3: walk failed offsets upward; charge at most one retry.
    let mut charged: Option<u32> = None;
    let mut also_charged: Vec<u32> = Vec::new();
    let mut dead: Vec<(u32, Option<String>, u32)> = Vec::new();
    let mut first_back: Option<u32> = None;
    let mut failed_back = false;
    for &(off, _, status, err) in &signal {
        let back = match status {
            AckStatus::Failed => {
                let count = view.retries.get(&off).copied().unwrap_or(0);
                if alt.never_charge {
                    true
                } else if alt.dead_letter_rest && charged.is_some() {
                    dead.push((off, err.map(str::to_string), count));
                    false
                } else if alt.charge_every_failure && charged.is_some() && count < view.retry_limit
                {
                    also_charged.push(off);
                    true
                } else if charged.is_some() && !alt.charge_every_failure {
                    true
                } else if count < view.retry_limit && charged.is_none() {
                    charged = Some(off);
                    true
                } else {
                    dead.push((off, err.map(str::to_string), count)); // DLQ-1: budget spent
                    false
                }
            }
            AckStatus::Retry => true,
            AckStatus::Dlq => {
                dead.push((
                    off,
                    err.map(str::to_string),
                    view.retries.get(&off).copied().unwrap_or(0),
                ));
                false
            }
            AckStatus::Completed => false,
        };
        if back {
            failed_back |= status == AckStatus::Failed;
            first_back = Some(first_back.map_or(off, |f: u32| f.min(off)));
        }
    }
    // Step 4: the cursor stops at the first message that comes back.
    let highest_terminal = signal
        .iter()
        .filter(|(o, _, s, _)| *s == AckStatus::Completed || dead.iter().any(|d| d.0 == *o))
        .map(|(o, _, _, _)| *o)
        .max()
        .unwrap_or(c);
    let new_cursor = match first_back {
        Some(f) if !alt.no_clamp => c.max(highest_terminal.min(f - 1)),
        _ => c.max(highest_terminal),
    };
    let failed_signals = signal
        .iter()
        .filter(|(_, _, s, _)| *s == AckStatus::Failed)
        .count();
    // Step 5: release the lease when something comes back, when a message failed (ACK-6:
    // `failed` releases the lease even when its budget is spent and it becomes a dead
    // letter, so the rest of the batch comes back), or when the span is done.
    let release = view.lease.is_some_and(|(end, _)| {
        ((first_back.is_some() || failed_signals > 0) && !alt.keep_on_back)
            || (new_cursor >= end && !alt.keep_on_completion)
            || (alt.release_on_partial_commit && !valid.is_empty())
    });
    let released_live = release && view.lease.is_some_and(|(_, live)| live);
    // Step 6: per item, whether it became a dead letter and whether it is a blocked completion.
    let items = valid
        .iter()
        .map(|v| {
            let dlq = dead.iter().any(|d| d.0 == v.offset);
            (
                v.index,
                dlq,
                v.status == AckStatus::Completed && v.offset > new_cursor,
            )
        })
        .collect();
    Decision {
        new_cursor,
        charged,
        also_charged,
        failed_signals,
        dead,
        failed_back,
        release,
        released_live,
        items,
    }
}

/// One offset's signal after step 2: `(offset, position in the call, status, error)`.
type Signal<'a> = (u32, usize, AckStatus, Option<&'a str>);

/// Step 2: per offset, the first item with the strongest status, by ascending offset.
fn strongest_signals<'a>(valid: &[ValidAck<'a>]) -> Vec<Signal<'a>> {
    let mut signal: Vec<Signal<'a>> = valid
        .iter()
        .enumerate()
        .map(|(k, v)| (v.offset, k, v.status, v.error))
        .collect();
    // (offset, position) is unique, so an unstable sort keeps call order per offset.
    signal.sort_unstable_by_key(|&(off, k, _, _)| (off, k));
    let mut kept = 0;
    for r in 0..signal.len() {
        let s = signal[r];
        if kept > 0 && signal[kept - 1].0 == s.0 {
            if s.2 > signal[kept - 1].2 {
                signal[kept - 1] = s;
            }
        } else {
            signal[kept] = s;
            kept += 1;
        }
    }
    signal.truncate(kept);
    signal
}

/// Steps 2–6 for one `(partition, group)`, applied to the model; each valid item's
/// answer goes to its place in `out`.
fn evaluate(
    st: &mut State,
    ph: PartH,
    group: &str,
    valid: &[ValidAck],
    items: &[AckIn],
    ctx: &mut Ctx,
    out: &mut [Option<AckOut>],
) {
    let p = st.part(ph).expect("resolved");
    let options = &st.queues[&p.queue].options;
    let retry_limit = options.retry_limit;
    let retry_delay = options.retry_delay as i64;
    let default = p.fresh_cursor();
    let cursor = p.cursors.get(group).unwrap_or(&default);
    let lease = cursor
        .lease
        .as_ref()
        .map(|l| (l.end, ctx.now_before(l.deadline)));
    let has = |s: AckStatus| valid.iter().any(|v| v.status == s);
    let failed = has(AckStatus::Failed);
    let retry_limit = match failed && ctx.deviates(Variant::RetryLimitOffByOne) {
        true => retry_limit + 1,
        false => retry_limit,
    };
    let view = PairView {
        committed: cursor.committed,
        retries: &cursor.retries,
        lease,
        retry_limit,
    };
    // Variants that read a status as another one.
    let read_as = |from: AckStatus, to: AckStatus, v: Variant, ctx: &mut Ctx| {
        (has(from) && ctx.deviates(v)).then_some((from, to))
    };
    let renamed: Vec<(AckStatus, AckStatus)> = [
        read_as(
            AckStatus::Retry,
            AckStatus::Failed,
            Variant::RetryCharged,
            ctx,
        ),
        read_as(
            AckStatus::Dlq,
            AckStatus::Completed,
            Variant::DlqStatusCommits,
            ctx,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let owned: Vec<ValidAck> = valid
        .iter()
        .map(|v| {
            let status = renamed
                .iter()
                .find(|r| r.0 == v.status)
                .map_or(v.status, |r| r.1);
            ValidAck {
                status,
                ..v.clone()
            }
        })
        .collect();
    let valid = &owned[..];
    let mut alt = StepAlternatives {
        dead_letter_rest: valid
            .iter()
            .filter(|v| v.status == AckStatus::Failed)
            .count()
            > 1
            && ctx.deviates(Variant::EveryFailureDeadLettered),
        never_charge: failed && ctx.deviates(Variant::FailureNeverCharged),
        no_clamp: (failed || has(AckStatus::Retry))
            && valid.len() > 1
            && ctx.deviates(Variant::FailureNotClamping),
        keep_on_completion: lease.is_some() && ctx.deviates(Variant::CompletionKeepsLease),
        keep_on_back: lease.is_some()
            && (failed || has(AckStatus::Retry))
            && ctx.deviates(Variant::FailureKeepsLease),
        ..StepAlternatives::default()
    };
    let mut d = decide_with(&view, valid, alt);
    // Steps 3 and 5 [PROJECT]: another broker may charge every failure, or release the
    // lease on a partial commit. Asked only where the alternative changes something.
    let variants = alt;
    if d.failed_signals > 1
        && ctx.project(
            ChoicePoint::AckChargesEveryFailure,
            crate::rules::ACK_STEP_3,
            "charged a retry to every failed offset of one call (ours, section 4 step 3: at most one per call)",
        )
    {
        alt.charge_every_failure = true;
    }
    if view.lease.is_some()
        && !d.release
        && ctx.project(
            ChoicePoint::AckReleasesOnPartialCommit,
            crate::rules::ACK_STEP_5,
            "released the lease on a partial commit (ours, section 4 step 5: kept until the span is committed or something comes back)",
        )
    {
        alt.release_on_partial_commit = true;
    }
    if alt != variants {
        d = decide_with(&view, valid, alt);
    }

    let now = ctx.now;
    let kept = !d.release && (alt.keep_on_completion || alt.keep_on_back) && {
        let protocol = StepAlternatives {
            keep_on_completion: false,
            keep_on_back: false,
            ..alt
        };
        decide_with(&view, valid, protocol).release
    };
    let cur = st.cursor_mut(ph, group);
    if d.release {
        cur.lease = None;
    }
    if let Some(l) = cur.lease.as_mut().filter(|_| kept) {
        // Kept by a broker that lets go when it likes: any moment up to the deadline.
        l.deadline = crate::time::Stamp::between(now.lo, l.deadline.hi);
    }
    cur.retries = d.retries_after(&cur.retries);
    cur.committed = d.new_cursor;
    if d.failed_back && !ctx.deviates(Variant::RetryDelayIgnored) {
        st.cursor_mut(ph, group).not_before = Some(now.plus(retry_delay));
    }
    for (off, error, retry_count) in &d.dead {
        let filed = st
            .dead_letters
            .iter()
            .any(|x| x.part == ph && x.offset == *off && x.group == group);
        if !filed {
            st.dead_letters.push_back(DeadLetterRec {
                part: ph,
                offset: *off,
                group: group.to_string(),
                error: error.clone(),
                retry_count: *retry_count,
                failed_at: now,
            });
        }
    }
    let refuse_blocked = ctx
        .policy_ref()
        .is_some_and(|p| p.blocked_completion == BlockedCompletion::Failure);
    for &(i, dlq, blocked) in &d.items {
        let r = d.answer(i, &items[i].transaction_id, dlq, blocked && refuse_blocked);
        // ACK step 6 [OPEN]: a checker also accepts a refusal of a blocked completion.
        out[i] = Some(AckOut {
            released: d.released_live.then(|| (ph, group.to_string())),
            result: r,
            may_fail: blocked && ctx.exploring(),
        });
    }
}

impl Decision {
    /// The answer to valid item `index` after steps 2–6: success with the pair's lease
    /// release and its dead-letter flag, or, when `refuse` (a policy's choice at ACK
    /// step 6 \[OPEN\] for a completion blocked by an earlier failure), a refusal.
    pub fn answer(&self, index: usize, transaction_id: &str, dlq: bool, refuse: bool) -> AckResult {
        let mut r = answer(index, transaction_id, true, None, false);
        r.lease_released = self.released_live;
        r.dlq = dlq;
        if refuse {
            r.success = false;
            r.error = Some(ERR_BLOCKED.into());
        }
        r
    }
}

/// The error text when a policy refuses a completion blocked by an earlier failure.
pub const ERR_BLOCKED: &str = "blocked by an earlier failure in the same call";

#[cfg(test)]
mod tests {
    use super::*;

    fn v(index: usize, offset: u32, status: AckStatus, error: Option<&str>) -> ValidAck<'_> {
        ValidAck {
            index,
            offset,
            status,
            error,
        }
    }

    #[test]
    fn ack_2_the_first_item_with_the_strongest_signal_speaks_for_its_offset() {
        let valid = [
            v(0, 7, AckStatus::Retry, Some("r1")),
            v(1, 5, AckStatus::Completed, None),
            v(2, 7, AckStatus::Failed, Some("f1")),
            v(3, 7, AckStatus::Failed, Some("f2")),
            v(4, 7, AckStatus::Completed, None),
            v(5, 5, AckStatus::Completed, Some("c2")),
        ];
        let s: Vec<_> = strongest_signals(&valid)
            .into_iter()
            .map(|(off, _, status, err)| (off, status, err))
            .collect();
        assert_eq!(
            s,
            vec![
                (5, AckStatus::Completed, None),
                (7, AckStatus::Failed, Some("f1")),
            ]
        );
    }

    #[test]
    fn ack_6_a_failure_that_dead_letters_releases_the_lease_and_moves_the_cursor() {
        let retries = BTreeMap::new();
        let view = PairView {
            committed: 0,
            retries: &retries,
            lease: Some((3, true)),
            retry_limit: 0,
        };
        let d = decide(&view, &[v(0, 1, AckStatus::Failed, Some("boom"))]);
        assert_eq!(d.dead, vec![(1, Some("boom".to_string()), 0)]);
        assert_eq!(d.new_cursor, 1);
        assert!(d.release && d.released_live, "{d:?}");
        // A completion of part of the span keeps it (step 5).
        let d = decide(&view, &[v(0, 1, AckStatus::Completed, None)]);
        assert!(!d.release, "{d:?}");
    }
}
