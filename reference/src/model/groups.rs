//! The two management writes: seek and group delete (PROTOCOL.md MGMT-8, MGMT-9). They
//! act on cursors only; messages and dead letters stay as they are.

use super::pop::last_before;
use super::state::{PartH, State};
use super::views::partitions_of;
use crate::choice::Ctx;
use crate::wire::{no_such_queue, GroupDeleted, SeekResponse, SeekTo, WireError};

/// MGMT-8: sets the group's cursor on every partition of the queue (creating it where
/// there is none), releasing its lease and forgetting its retries and retry wait.
pub fn seek(
    st: &mut State,
    group: &str,
    queue: &str,
    to: SeekTo,
    ctx: &mut Ctx,
) -> Result<SeekResponse, WireError> {
    if !st.queues.contains_key(queue) {
        return Err(no_such_queue(queue));
    }
    let targets: Vec<(PartH, u32)> = partitions_of(st, queue)
        .map(|p| {
            let at = match to {
                SeekTo::End => p.end(),
                SeekTo::Time(t) => last_before(st, p, t, ctx),
            };
            (p.handle, at.max(p.floor))
        })
        .collect();
    for &(h, at) in &targets {
        let c = st.cursor_mut(h, group);
        c.committed = at;
        c.lease = None;
        c.retries.clear();
        c.not_before = None;
    }
    Ok(SeekResponse {
        success: true,
        group: group.to_string(),
        queue: queue.to_string(),
        partitions: targets.len() as u64,
    })
}

/// MGMT-9: removes the group's cursors on `queue` (every queue when `None`), and with
/// `delete_metadata` its subscriptions there.
pub fn delete_group(
    st: &mut State,
    group: &str,
    queue: Option<&str>,
    delete_metadata: bool,
) -> GroupDeleted {
    let queues: Vec<String> = st
        .queues
        .keys()
        .filter(|q| queue.is_none_or(|n| n == q.as_str()))
        .cloned()
        .collect();
    let mut deleted = 0;
    for q in &queues {
        let hs: Vec<PartH> = st.queues[q].partitions.values().copied().collect();
        for h in hs {
            if st.part(h).is_some_and(|p| p.cursors.contains_key(group)) {
                st.part_mut(h).expect("live").cursors.remove(group);
                deleted += 1;
            }
        }
        if delete_metadata && st.queues[q].subscriptions.contains_key(group) {
            st.queue_mut(q).expect("listed").subscriptions.remove(group);
        }
    }
    GroupDeleted {
        success: true,
        group: group.to_string(),
        queue: queue.map(str::to_string),
        deleted,
    }
}
