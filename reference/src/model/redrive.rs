//! A dead letter's retry (PROTOCOL.md MGMT-12): its message goes back into its
//! partition's flow as a new message at the end, and its dead letters are gone.
//!
//! A partition is a log whose cursors only say "up to here": a single message behind a
//! cursor cannot be handed to one group again without handing it everything after. So
//! the retry writes the message again, as a push would, with a transactionId of its own
//! (the old one would deduplicate), and every group reading the partition sees it.

use super::capacity;
use super::outcome::PushOut;
use super::push::{push, PushKind, TxnMinter};
use super::state::{Data, PartH, State, Trace};
use crate::choice::Ctx;
use crate::wire::{no_dead_letter, Payload, PushItem, PushStatus, WireError};

/// Why a retry is refused while pushes are spooled: it writes now or not at all.
pub const RETRY_UNDER_MAINTENANCE: &str =
    "push maintenance is on: a dead letter is retried only when pushes are written";

/// The retry of the newest dead-lettered message with `txn` in partition `part`; the
/// push result of the new message and how many dead letters went.
pub(crate) fn retry(
    st: &mut State,
    part: Option<PartH>,
    partition_id: &str,
    txn: &str,
    minter: &mut dyn TxnMinter,
    ctx: &mut Ctx,
) -> Result<(PushOut, u64), WireError> {
    let missing = || no_dead_letter(partition_id, txn);
    let h = part.ok_or_else(missing)?;
    let p = st.part(h).ok_or_else(missing)?;
    let offset = st
        .dead_letters
        .iter()
        .filter(|d| d.part == h && p.at(d.offset).transaction_id == txn)
        .map(|d| d.offset)
        .max()
        .ok_or_else(missing)?;
    if st.push_maintenance {
        return Err(WireError {
            rule: None,
            status: 503,
            message: RETRY_UNDER_MAINTENANCE.into(),
        });
    }
    let m = p.at(offset);
    // A message retention removed, or an operator deleted, is retried from its dead
    // letter's copy, which keeps the payload only.
    let removed = offset <= p.floor || p.deleted.contains(&offset);
    let item = PushItem {
        queue: p.queue.clone(),
        partition: p.name.clone(),
        payload: match &m.data {
            Data::Value(v) => Payload::Given(v.clone()),
            Data::Absent => Payload::Absent,
        },
        transaction_id: None,
        trace_id: match &m.trace {
            Trace::Kept(t) | Trace::Either(t) if !removed => Some(t.clone()),
            _ => None,
        },
        producer_sub: m
            .producer_sub
            .as_deref()
            .filter(|_| !removed)
            .map(str::to_string),
    };
    let items = [item];
    let mut work = st.clone();
    let out = push(&mut work, &items, PushKind::Transaction, minter, ctx);
    if capacity::capped(st, &items) {
        if let Some(e) = capacity::refusal(st, &work, &out, ctx) {
            return Err(e);
        }
    }
    *st = work;
    let before = st.dead_letters.len();
    st.dead_letters
        .retain(|d| !(d.part == h && d.offset == offset));
    let retried = (before - st.dead_letters.len()) as u64;
    let pushed = out.into_iter().next().expect("one item pushed");
    debug_assert_eq!(pushed.status, PushStatus::Queued);
    Ok((pushed, retried))
}
