//! Push (PROTOCOL.md section 2): queue and partition creation, dedup, offsets, the
//! spool under maintenance.

use super::outcome::PushOut;
use super::state::{Data, Message, PartH, SpooledItem, State, Trace};
use crate::choice::Ctx;
use crate::policy::ChoicePoint;
use crate::variant::Variant;
use crate::wire::{Payload, PushItem, PushStatus};
use std::sync::Arc;

/// Where a push comes from: it decides what happens to a `traceId` (PUSH-9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushKind {
    /// `POST /api/v1/push`.
    Plain,
    /// A push operation inside a transaction: the `traceId` is kept.
    Transaction,
    /// Replay of the spool: like a plain push.
    Replay,
}

/// Mints transactionIds for items that have none (PUSH-4). An engine mints UUIDv7s;
/// a checker takes the ones the broker answered with.
pub trait TxnMinter {
    /// The transactionId of the request's item `index`, which came without one.
    fn mint_txn(&mut self, index: usize) -> String;
}

impl<F: FnMut(usize) -> String> TxnMinter for F {
    fn mint_txn(&mut self, index: usize) -> String {
        self(index)
    }
}

/// Pushes `items` atomically (PUSH-3). With push maintenance on, every item goes to
/// the spool and answers `buffered` (PUSH-7).
pub(crate) fn push(
    st: &mut State,
    items: &[PushItem],
    kind: PushKind,
    minter: &mut dyn TxnMinter,
    ctx: &mut Ctx,
) -> Vec<PushOut> {
    if st.push_maintenance
        && kind == PushKind::Plain
        && !ctx.deviates(crate::variant::Variant::PushMaintenanceIgnored)
    {
        return items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                let (transaction_id, minted_txn) = txn_of(item, index, minter);
                st.spool.push_back(SpooledItem {
                    item: item.clone(),
                    transaction_id: transaction_id.clone(),
                    minted_txn,
                });
                PushOut {
                    index,
                    msg: None,
                    transaction_id,
                    minted_txn,
                    queue: item.queue.clone(),
                    status: PushStatus::Buffered,
                }
            })
            .collect();
    }
    let write = st.writes.len() as u32;
    st.writes.push_back(ctx.now);
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let (transaction_id, minted_txn) = txn_of(item, index, minter);
            write_one(
                st,
                item,
                transaction_id,
                minted_txn,
                kind,
                write,
                index,
                ctx,
            )
        })
        .collect()
}

/// Replays the spool in order, subject to dedup, as one write (PUSH-7, MAINT-1).
pub(crate) fn replay_spool(st: &mut State, ctx: &mut Ctx) {
    let spooled = std::mem::take(&mut st.spool);
    if spooled.is_empty() {
        return;
    }
    let write = st.writes.len() as u32;
    st.writes.push_back(ctx.now);
    for (index, s) in spooled.into_iter().enumerate() {
        write_one(
            st,
            &s.item,
            s.transaction_id,
            s.minted_txn,
            PushKind::Replay,
            write,
            index,
            ctx,
        );
    }
}

fn txn_of(item: &PushItem, index: usize, minter: &mut dyn TxnMinter) -> (String, bool) {
    match &item.transaction_id {
        Some(t) => (t.clone(), false),
        None => (minter.mint_txn(index), true),
    }
}

/// The item's partition and its queue's dedup window (ms), created when missing.
fn target(st: &mut State, item: &PushItem, ctx: &mut Ctx) -> (PartH, i64) {
    // Both exist (nearly always): one lookup of each.
    if let Some(q) = st.queues.get(&item.queue) {
        if let Some(&h) = q.partitions.get(&item.partition) {
            return (h, q.options.dedup_window_ms());
        }
    }
    // PUSH-2: an unknown queue is created with leaseTime 60 and defaults otherwise.
    super::pop::ensure_implicit(st, &item.queue, ctx);
    let window_ms = st.queues[&item.queue].options.dedup_window_ms();
    // PUSH-3: so is an unknown partition.
    (st.ensure_partition(&item.queue, &item.partition), window_ms)
}

/// PUSH-5, for both engines: an item duplicates `newest`, the newest message of its
/// partition with its transactionId (`M`, created at `T`), when the client gave the id
/// (a minted one cannot repeat), the queue has a window, and `within(created, window_ms)`
/// says the window since `created` still runs.
pub fn duplicate_of<M, T>(
    minted: bool,
    window_ms: i64,
    newest: Option<(M, T)>,
    within: impl FnOnce(T, i64) -> bool,
) -> Option<M> {
    if minted || window_ms <= 0 {
        return None;
    }
    let (msg, created) = newest?;
    within(created, window_ms).then_some(msg)
}

#[allow(clippy::too_many_arguments)]
fn write_one(
    st: &mut State,
    item: &PushItem,
    transaction_id: String,
    minted_txn: bool,
    kind: PushKind,
    write: u32,
    index: usize,
    ctx: &mut Ctx,
) -> PushOut {
    let (ph, window_ms) = target(st, item, ctx);
    let part = st.part(ph).expect("just ensured");
    let probe = part.txn_index.probe(&transaction_id, &part.messages);
    // PUSH-5: the same transactionId in the same partition within the window, among
    // the retained messages (RET-4 [PROJECT]: another broker may still deduplicate
    // against a removed one).
    let removed = probe.found.is_some_and(|off| off <= part.floor);
    let newest = match removed {
        // MGMT-11: a deleted message is not retained either, and never deduplicates.
        false => part.newest_retained(probe.found, &transaction_id),
        true => probe.found,
    };
    let newest = newest.filter(|_| {
        !removed
            || ctx.project(
                ChoicePoint::DedupRemoved,
                crate::rules::RET_4,
                "deduplicated a push against a message retention had removed (ours: a new message)",
            )
    });
    let newest = newest.map(|off| {
        let orig = part.at(off);
        (orig.msg, st.created(orig))
    });
    // PUSH-5 variants: a window never applied, or no dedup at all.
    let newest = newest.filter(|_| window_ms <= 0 || !ctx.deviates(Variant::DedupIgnored));
    let forever = window_ms > 0 && newest.is_some() && ctx.deviates(Variant::DedupWithoutWindow);
    let within =
        |created: crate::time::Stamp, window: i64| forever || ctx.now_before(created.plus(window));
    if let Some(orig_msg) = duplicate_of(minted_txn, window_ms, newest, within) {
        return PushOut {
            index,
            msg: Some(orig_msg),
            transaction_id,
            minted_txn,
            queue: item.queue.clone(),
            status: PushStatus::Duplicate,
        };
    }
    let msg = st.mint_msg();
    let trace = match (&item.trace_id, kind) {
        (None, _) => Trace::None,
        (Some(t), PushKind::Transaction) => Trace::Kept(t.clone()),
        (Some(t), _) => Trace::Either(t.clone()),
    };
    let data = match &item.payload {
        Payload::Absent => Data::Absent,
        Payload::Given(v) => Data::Value(v.compact()),
    };
    let part = st.part_mut(ph).expect("just ensured");
    part.messages.push_back(Message {
        msg,
        transaction_id: transaction_id.clone(),
        minted_txn,
        trace,
        data,
        write,
        producer_sub: item.producer_sub.as_deref().map(Arc::from),
    });
    let off = part.end();
    part.txn_index.record(&transaction_id, probe, off);
    part.last_write = Some(write);
    PushOut {
        index,
        msg: Some(msg),
        transaction_id,
        minted_txn,
        queue: item.queue.clone(),
        status: PushStatus::Queued,
    }
}
