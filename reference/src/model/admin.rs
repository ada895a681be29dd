//! Configure, queue delete, maintenance switches and the dead-letter listing
//! (PROTOCOL.md sections 6, 8, 9, 11).

use super::outcome::{DlqOut, Outcome};
use super::push::replay_spool;
use super::state::State;
use crate::choice::Ctx;
use crate::policy::ChoicePoint;
use crate::time::Stamp;
use crate::variant::Variant;
use crate::wire::{
    ConfigureRequest, ConfigureResponse, DeleteResponse, DlqQuery, EchoedOptions, QueueOptions,
    WireError, ENCRYPTION_UNAVAILABLE,
};
use std::sync::Arc;

/// CFG-1: full replace of the options (and namespace/task); creates the queue if needed.
pub(crate) fn configure(st: &mut State, req: &ConfigureRequest) -> ConfigureResponse {
    st.ensure_queue(&req.queue, QueueOptions::default());
    let q = st.queue_mut(&req.queue).expect("ensured");
    q.options = req.options;
    q.namespace = req.namespace.clone();
    q.task = req.task.clone();
    q.extra = req.extra.clone();
    ConfigureResponse {
        configured: true,
        queue: req.queue.clone(),
        namespace: req.namespace.clone(),
        task: req.task.clone(),
        options: EchoedOptions {
            known: req.options,
            extra: req.extra.clone(),
        },
    }
}

/// ENC-2: a broker without a key refuses to encrypt a queue (400, nothing changes); one
/// with a key configures it. Which broker this is, only its operator knows: both are
/// allowed.
pub(crate) fn encryption_refused(req: &ConfigureRequest, ctx: &mut Ctx) -> Option<WireError> {
    (req.options.encryption_enabled && ctx.choose(ChoicePoint::EncryptionRefused, 2) == 1)
        .then(|| WireError::bad(ENCRYPTION_UNAVAILABLE))
}

/// DEL-1: removes the queue with its partitions, messages, cursors, leases and dead
/// letters. Spooled pushes to it stay spooled (they were acknowledged, PUSH-7).
pub(crate) fn delete_queue(st: &mut State, name: &str, ctx: &mut Ctx) -> DeleteResponse {
    if st.queues.contains_key(name) && ctx.deviates(Variant::DeleteKeepsMessages) {
        return DeleteResponse {
            deleted: true,
            queue: name.to_string(),
            existed: true,
        };
    }
    // Only a queue that exists is removed: a copy-on-write map is not copied for nothing.
    let removed = st
        .queues
        .contains_key(name)
        .then(|| Arc::make_mut(&mut st.queues).remove(name))
        .flatten();
    let existed = match removed {
        None => false,
        Some(q) => {
            for ph in q.partitions.values() {
                Arc::make_mut(&mut st.partitions)[ph.0 as usize] = None;
            }
            st.dead_letters
                .retain(|d| st.partitions[d.part.0 as usize].is_some());
            true
        }
    };
    DeleteResponse {
        deleted: true,
        queue: name.to_string(),
        existed,
    }
}

/// MAINT-3: how long after push maintenance is switched off the spool's replay may run.
const REPLAY_BOUND_MS: i64 = 3_000;

/// MAINT-3: a running replay has finished once its bound has passed; before that it may
/// have finished or not (a checker keeps both until an answer decides).
pub(crate) fn settle_spool(st: &mut State, ctx: &mut Ctx) {
    let Some((from, by)) = st.replay_by else {
        return;
    };
    if st.push_maintenance {
        return;
    }
    if ctx.reached(by) || ctx.choose(ChoicePoint::SpoolReplayLate, 2) == 0 {
        st.replay_by = None;
        // The replay wrote at some moment between the switch and now (or its bound).
        let now = ctx.now;
        ctx.now = Stamp::between(from.lo, now.hi.min(by.hi));
        replay_spool(st, ctx);
        ctx.now = now;
    }
}

/// MAINT-1: switching push maintenance off replays the spool.
pub(crate) fn set_push_maintenance(st: &mut State, enabled: bool, ctx: &mut Ctx) -> Outcome {
    st.push_maintenance = enabled;
    if !enabled && ctx.exploring() && !st.spool.is_empty() {
        // MAINT-3: a broker may still be replaying for a while after it answers.
        st.replay_by = Some((ctx.now, ctx.now.plus(REPLAY_BOUND_MS)));
        settle_spool(st, ctx);
    } else if !enabled {
        st.replay_by = None;
        replay_spool(st, ctx);
    }
    push_maintenance(st)
}

/// The push maintenance answer: the switch and the spool's item count (MAINT-1).
pub fn push_maintenance(st: &State) -> Outcome {
    Outcome::Maintenance {
        enabled: st.push_maintenance,
        buffered: st.spool.len() as u64,
    }
}

/// DLQ-2: filters, in filing order, one page.
pub(crate) fn list_dlq(st: &State, q: &DlqQuery) -> DlqOut {
    let matching: Vec<usize> = st
        .dead_letters
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            let p = st
                .part(d.part)
                .expect("dead letters of deleted queues are dropped");
            q.queue.as_ref().is_none_or(|n| &p.queue == n)
                && q.partition.as_ref().is_none_or(|n| &p.name == n)
                && q.consumer_group.as_ref().is_none_or(|g| &d.group == g)
        })
        .map(|(i, _)| i)
        .collect();
    let mut gone = (0, 0);
    for &i in &matching {
        let d = &st.dead_letters[i];
        let p = st.part(d.part).expect("filtered above");
        if d.offset <= p.floor {
            gone.0 += 1;
        } else if p.deleted.contains(&d.offset) {
            gone.1 += 1;
        }
    }
    DlqOut {
        total: matching.len() as u64,
        gone,
        items: matching
            .into_iter()
            .skip(usize::try_from(q.offset).unwrap_or(usize::MAX))
            .take(q.limit as usize)
            .collect(),
        limit: q.limit,
        offset: q.offset,
    }
}
