//! Queue size (PROTOCOL.md RET-5): `maxSize` bounds a queue's unconsumed messages, and a
//! push or transaction that would take a queue past it is refused whole (PUSH-3).
//!
//! Whether a push fits depends on how many of its items are new (duplicates do not
//! count), which only writing it tells. So a push to a capped queue is written to a
//! copy of the state and the copy is kept only if every capped queue it added to still
//! fits; a push to queues without a cap writes in place, as before.

use super::outcome::PushOut;
use super::state::{Partition, State};
use crate::choice::Ctx;
use crate::policy::ChoicePoint;
use crate::rules::RET_5;
use crate::wire::{queue_full, PushItem, PushStatus, WireError};
use std::collections::BTreeMap;

/// Whether any of `items` goes to a queue with a `maxSize` (a new queue has none).
pub(crate) fn capped(st: &State, items: &[PushItem]) -> bool {
    items.iter().any(|i| {
        st.queues
            .get(&i.queue)
            .is_some_and(|q| q.options.max_size > 0)
    })
}

/// RET-5's unconsumed messages of `queue`: retained messages that some group with a
/// cursor on their partition has not committed, or whose partition has no cursor.
pub fn unconsumed(st: &State, queue: &str) -> u64 {
    let Some(q) = st.queues.get(queue) else {
        return 0;
    };
    q.partitions
        .values()
        .filter_map(|h| st.part(*h))
        .map(partition_unconsumed)
        .sum()
}

/// RET-5's unconsumed messages of one partition.
pub(crate) fn partition_unconsumed(p: &Partition) -> u64 {
    let low = p.cursors.values().map(|c| c.committed).min();
    u64::from(p.count_after(low.unwrap_or(p.floor)))
}

/// The refusal of the first capped queue that `after` (the state with the push written)
/// holds too many unconsumed messages of, among the queues the push added to.
/// [PROJECT alternative] a broker without `maxSize` writes it.
pub(crate) fn refusal(
    before: &State,
    after: &State,
    outs: &[PushOut],
    ctx: &mut Ctx,
) -> Option<WireError> {
    let mut added: BTreeMap<&str, u64> = BTreeMap::new();
    for o in outs.iter().filter(|o| o.status == PushStatus::Queued) {
        *added.entry(o.queue.as_str()).or_default() += 1;
    }
    let full = added.into_iter().find_map(|(queue, n)| {
        let max = after.queues.get(queue)?.options.max_size;
        let now = unconsumed(before, queue);
        (max > 0 && now + n > max).then(|| queue_full(queue, max, now, n))
    })?;
    let ignored = ctx.project(
        ChoicePoint::MaxSizeIgnored,
        RET_5,
        "wrote a push that takes a queue past its maxSize (ours: 429, nothing written)",
    );
    (!ignored).then_some(full)
}
