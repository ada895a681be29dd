//! The two management writes: seek and group delete (PROTOCOL.md MGMT-8, MGMT-9). They
//! act on cursors only; messages and dead letters stay as they are.

use super::pop::last_before;
use super::state::{PartH, State};
use super::views::partitions_of;
use crate::choice::Ctx;
use crate::wire::{
    no_such_partition, no_such_queue, GroupDeleted, SeekResponse, SeekTo, SubscriptionResponse,
    WireError,
};

/// MGMT-8: sets the group's cursor on every partition of the queue, or on the one named
/// (creating it where there is none), releasing its lease and forgetting its retries and
/// retry wait.
pub(crate) fn seek(
    st: &mut State,
    group: &str,
    queue: &str,
    partition: Option<&str>,
    to: SeekTo,
    ctx: &mut Ctx,
) -> Result<SeekResponse, WireError> {
    let q = st.queues.get(queue).ok_or_else(|| no_such_queue(queue))?;
    if let Some(name) = partition.filter(|n| !q.partitions.contains_key(*n)) {
        return Err(no_such_partition(queue, name));
    }
    let targets: Vec<(PartH, u32)> = partitions_of(st, queue)
        .filter(|p| partition.is_none_or(|n| p.name == n))
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

/// MGMT-8: the seek to `at` on every queue the group reads or subscribed to. The time
/// it records as where the group's subscriptions start changes no later answer (a
/// partition created later starts at its beginning, POP-18), so the model keeps none.
pub(crate) fn subscription(
    st: &mut State,
    group: &str,
    at: i64,
    ctx: &mut Ctx,
) -> SubscriptionResponse {
    let queues: Vec<String> = st
        .queues
        .values()
        .filter(|q| {
            q.subscriptions.contains(group)
                || partitions_of(st, &q.name).any(|p| p.cursors.contains_key(group))
        })
        .map(|q| q.name.clone())
        .collect();
    let mut partitions = 0;
    for q in &queues {
        let sought = seek(st, group, q, None, SeekTo::Time(at), ctx).expect("the queue exists");
        partitions += sought.partitions;
    }
    SubscriptionResponse {
        success: true,
        group: group.to_string(),
        queues: queues.len() as u64,
        partitions,
    }
}

/// MGMT-9: removes the group's cursors on `queue` (every queue when `None`), and with
/// `delete_metadata` its subscriptions there.
pub(crate) fn delete_group(
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
        if delete_metadata && st.queues[q].subscriptions.contains(group) {
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
