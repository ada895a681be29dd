//! The model's state: queues, partitions as append-only logs, cursors, leases, dead
//! letters, the push spool and the maintenance switches.
//!
//! Everything here is plain data. Messages, partitions and leases are named by
//! handles the model mints itself ([`MsgH`], [`PartH`], [`LeaseH`]); which real UUID a
//! broker gave each one is not state but knowledge, kept in an [`crate::ids::IdBook`].
//! Times are [`Stamp`]s: exact for an engine, intervals for a checker.
//!
//! A checker copies a state for every branch it explores, and a copy must not cost the
//! history. What grows with it (each partition's messages and transactionId index, the
//! writes, dead letters and the spool) is held in persistent containers
//! ([`crate::shared`]; the transactionId index is its own, [`super::txn_index`]); the queues, the list of partitions and each partition sit behind
//! an [`Arc`] copied on write (they are few, and read far more often than changed).

use super::txn_index::TxnIndex;
use crate::shared::{same_arc, same_log, Log};
use crate::time::Stamp;
use crate::wire::QueueOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A message, by the model's own numbering (global, never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgH(pub u32);
/// A partition, by the model's own numbering (index into [`State::partitions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartH(pub u32);
/// A lease id minted by one pop (shared by every partition it claimed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseH(pub u32);

/// The whole broker as the model sees it. A clone shares everything with the original
/// (O(1)); changes copy only what they touch.
#[derive(Clone, Debug)]
pub struct State {
    /// Queues by name (change them through `State::queue_mut`).
    pub queues: Arc<BTreeMap<String, Queue>>,
    /// Partitions by handle; `None` once its queue was deleted (handles are never reused).
    /// Each is shared between copies of the state until one of them changes it
    /// (`State::part_mut`).
    pub partitions: Arc<Vec<Option<Arc<Partition>>>>,
    /// The `createdAt` of each write, by write number: messages of one push call share it (POP-12).
    pub(crate) writes: Log<Stamp>,
    /// The next message handle to mint.
    next_msg: u32,
    /// The next lease handle to mint.
    next_lease: u32,
    /// Dead letters in filing order (DLQ-2).
    pub dead_letters: Log<DeadLetterRec>,
    /// Pushes accepted as `buffered`, waiting for replay (PUSH-7).
    pub spool: Log<SpooledItem>,
    /// MAINT-3: a replay started by switching push maintenance off: when it started and
    /// the moment by which it has certainly finished (`None`: no replay is running).
    pub(crate) replay_by: Option<(Stamp, Stamp)>,
    /// Push maintenance (MAINT-1).
    pub push_maintenance: bool,
    /// Pop maintenance (MAINT-2).
    pub pop_maintenance: bool,
    /// RET-3: how late after becoming removable a message is certainly removed (the
    /// broker's retention interval). Not state but a setting, the same in every copy.
    pub(crate) retention_lag_ms: i64,
    /// [PROJECT alternative, RET-3] the broker was seen keeping what retention must
    /// have removed: from then on the model removes nothing (a checker that is not
    /// strict follows such a broker and reports it).
    pub(crate) retention_off: bool,
}

impl Default for State {
    fn default() -> State {
        State {
            queues: Default::default(),
            partitions: Default::default(),
            writes: Default::default(),
            next_msg: 0,
            next_lease: 0,
            dead_letters: Default::default(),
            spool: Default::default(),
            replay_by: None,
            push_maintenance: false,
            pop_maintenance: false,
            retention_lag_ms: super::retention::DEFAULT_RETENTION_LAG_MS,
            retention_off: false,
        }
    }
}

/// Equality by content, skipping whatever two states share (a checker compares the
/// states it keeps, and they mostly descend from one another).
impl PartialEq for State {
    fn eq(&self, other: &State) -> bool {
        let State {
            queues,
            partitions,
            writes,
            next_msg,
            next_lease,
            dead_letters,
            spool,
            replay_by,
            push_maintenance,
            pop_maintenance,
            retention_lag_ms: _,
            retention_off,
        } = self;
        *next_msg == other.next_msg
            && *replay_by == other.replay_by
            && *retention_off == other.retention_off
            && *next_lease == other.next_lease
            && *push_maintenance == other.push_maintenance
            && *pop_maintenance == other.pop_maintenance
            && same_log(writes, &other.writes, PartialEq::eq)
            && (Arc::ptr_eq(partitions, &other.partitions)
                || partitions.len() == other.partitions.len()
                    && partitions
                        .iter()
                        .zip(other.partitions.iter())
                        .all(|(a, b)| match (a, b) {
                            (Some(a), Some(b)) => same_arc(a, b),
                            (a, b) => a.is_none() && b.is_none(),
                        }))
            && same_log(dead_letters, &other.dead_letters, PartialEq::eq)
            && same_log(spool, &other.spool, PartialEq::eq)
            && same_arc(queues, &other.queues)
    }
}

/// One queue's configuration row and its partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    /// The queue's name.
    pub name: String,
    /// The queue's namespace, configured or derived from its name (CFG-3).
    pub namespace: String,
    /// The queue's task, configured or derived from its name (CFG-3).
    pub task: String,
    /// The queue's known options, as the last configure set them or their defaults (CFG-1, CFG-2).
    pub options: QueueOptions,
    /// Partition names to handles, in creation order of handles.
    pub partitions: BTreeMap<String, PartH>,
    /// The named groups subscribed to the queue (POP-13, POP-18 \[PROJECT\]). Only
    /// whether a group is subscribed is ever read: a subscription's parameters act once,
    /// at its first pop, so keeping them (or when that pop ran) would only tell apart
    /// states that accept the same answers.
    pub(crate) subscriptions: BTreeSet<String>,
    /// Option keys stored without acting on them, as the last configure sent them (CFG-4).
    pub extra: crate::wire::ExtraOptions,
}

/// An ordered, append-only log with a cursor per group.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The partition's model handle, which the broker's `partitionId` maps to.
    pub handle: PartH,
    /// The name of the queue the partition belongs to.
    pub queue: String,
    /// The partition's name (`Default` when a push names none).
    pub name: String,
    /// The message at offset `n` is `messages[n - 1]`.
    pub messages: Log<Message>,
    /// transactionId -> newest offset with it (PUSH-5, ACK-8); read it through
    /// [`Partition::txn_offset`].
    pub(crate) txn_index: TxnIndex,
    /// Cursors by group name.
    pub cursors: BTreeMap<String, Cursor>,
    /// The write that last added a message here (POP-14 `windowBuffer`).
    pub(crate) last_write: Option<u32>,
    /// Offsets up to this one were removed by retention (RET-2: a prefix); 0 when none.
    pub(crate) floor: u32,
    /// Offsets above the floor whose message an operator deleted (MGMT-11): they stay
    /// used, and hold no retained message.
    pub deleted: BTreeSet<u32>,
}

/// Equality by content, skipping the messages two copies share.
impl PartialEq for Partition {
    fn eq(&self, other: &Partition) -> bool {
        let Partition {
            handle,
            queue,
            name,
            messages,
            txn_index,
            cursors,
            last_write,
            floor,
            deleted,
        } = self;
        *handle == other.handle
            && *last_write == other.last_write
            && *floor == other.floor
            && *deleted == other.deleted
            && *queue == other.queue
            && *name == other.name
            && *cursors == other.cursors
            && same_log(messages, &other.messages, PartialEq::eq)
            && *txn_index == other.txn_index
    }
}

impl Partition {
    /// The highest offset written (0 when empty).
    pub(crate) fn end(&self) -> u32 {
        self.messages.len() as u32
    }

    /// The message at `offset` (1-based).
    pub fn at(&self, offset: u32) -> &Message {
        &self.messages[offset as usize - 1]
    }

    /// The newest retained offset written with transactionId `txn` (PUSH-5, ACK-8;
    /// RET-4, MGMT-11: a removed or deleted message is neither a duplicate nor
    /// acknowledgeable).
    pub fn txn_offset(&self, txn: &str) -> Option<u32> {
        self.newest_retained(self.txn_index.get(txn, &self.messages), txn)
    }

    /// The newest retained offset with `txn`, given `newest`, the newest offset ever
    /// written with it: an older one counts only when a delete took the newer ones.
    pub(crate) fn newest_retained(&self, newest: Option<u32>, txn: &str) -> Option<u32> {
        let newest = newest.filter(|o| *o > self.floor)?;
        if !self.deleted.contains(&newest) {
            return Some(newest);
        }
        (self.floor + 1..newest)
            .rev()
            .find(|o| !self.deleted.contains(o) && self.at(*o).transaction_id == txn)
    }

    /// The offsets of the retained messages above `from`, in order.
    pub(crate) fn retained_after(&self, from: u32) -> impl Iterator<Item = u32> + '_ {
        (from.max(self.floor) + 1..=self.end()).filter(|o| !self.deleted.contains(o))
    }

    /// How many retained messages lie above offset `from`: the figures of section 17
    /// and RET-5 count these.
    pub(crate) fn count_after(&self, from: u32) -> u32 {
        let from = from.max(self.floor);
        let gone = self.deleted.range(from + 1..).count() as u32;
        self.end().saturating_sub(from) - gone
    }

    /// A cursor for a group new to the partition: at the oldest retained message (RET-4).
    pub(crate) fn fresh_cursor(&self) -> Cursor {
        Cursor {
            committed: self.floor,
            ..Cursor::default()
        }
    }
}

/// What a pop will show as `traceId`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Trace {
    /// No `traceId` was given: a pop shows `null`.
    None,
    /// Written by a transaction: always returned.
    Kept(String),
    /// Given on a plain push: returned or dropped (PUSH-9 OPEN); narrowed on first sight.
    Either(String),
}

/// What a pop will show as `data`.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// The payload as pushed, shown verbatim; kept as its compact text, which takes a
    /// fraction of a tree's memory in a model that holds every retained message.
    Value(crate::wire::RawJson),
    /// `payload` absent: `null` or `{}` (PUSH-9 OPEN); narrowed on first sight.
    Absent,
}

/// One stored message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The message's model handle, which the broker's message `id` maps to.
    pub msg: MsgH,
    /// The message's transactionId, client-given or broker-minted (PUSH-4).
    pub transaction_id: String,
    /// The broker minted the transactionId (PUSH-4).
    pub(crate) minted_txn: bool,
    /// What a pop will show as its `traceId`.
    pub(crate) trace: Trace,
    /// What a pop will show as its `data`.
    pub data: Data,
    /// Index into [`State::writes`]: its `createdAt`.
    pub(crate) write: u32,
    /// The `sub` of the token that pushed it (AUTH-2).
    pub producer_sub: Option<Arc<str>>,
}

/// One `(partition, group)` cursor: the last committed offset and the lease on the
/// span after it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Cursor {
    /// The last committed offset (0: nothing yet); everything at or below it is done for the group.
    pub committed: u32,
    /// The group's live or expired lease on the span after `committed`, if any.
    pub lease: Option<Lease>,
    /// After a `failed` ack the span comes back only at this time (ACK-6 `retryDelay`).
    pub(crate) not_before: Option<Stamp>,
    /// Charged retries per offset above the cursor (DLQ-1).
    pub retries: BTreeMap<u32, u32>,
}

/// A claim on `(committed, end]` until `deadline`.
#[derive(Clone, Debug, PartialEq)]
pub struct Lease {
    /// The lease's model handle, which the broker's `leaseId` maps to.
    pub id: LeaseH,
    /// The last offset of the leased span `(committed, end]`.
    pub(crate) end: u32,
    /// When the lease expires, unless an extend renews it (LEASE-1).
    pub deadline: Stamp,
    /// The lease's own duration, used by an extend without `seconds` (LEASE-3).
    pub(crate) duration_ms: i64,
}

/// A message filed as a dead letter for one group (DLQ-2).
#[derive(Clone, Debug, PartialEq)]
pub struct DeadLetterRec {
    /// The partition of the dead-lettered message.
    pub part: PartH,
    /// The offset of the dead-lettered message in its partition.
    pub offset: u32,
    /// The group the dead letter was filed for.
    pub group: String,
    /// The ack's `error`, shown as the dead letter's `errorMessage` (ACK-6).
    pub error: Option<String>,
    /// The retries charged to the message for the group when it was filed.
    pub retry_count: u32,
    /// When the dead letter was filed: its `failedAt`.
    pub failed_at: Stamp,
}

/// A push item waiting in the spool (PUSH-7).
#[derive(Clone, Debug, PartialEq)]
pub struct SpooledItem {
    /// The item as pushed, replayed as such (subject to dedup).
    pub(crate) item: crate::wire::PushItem,
    /// The transactionId answered with `buffered` (given or minted); replay keeps it.
    pub transaction_id: String,
    /// The broker minted the item's transactionId (PUSH-4).
    pub(crate) minted_txn: bool,
}

impl State {
    /// An empty broker: no queues, no messages, both maintenance switches off.
    pub fn new() -> State {
        State::default()
    }

    /// The live partition `h`; `None` once its queue was deleted.
    pub fn part(&self, h: PartH) -> Option<&Partition> {
        self.partitions.get(h.0 as usize).and_then(|p| p.as_deref())
    }

    /// The partition to change: copied first when another state shares it.
    pub(crate) fn part_mut(&mut self, h: PartH) -> Option<&mut Partition> {
        let live = self.part(h).is_some();
        live.then(|| {
            let slot = &mut Arc::make_mut(&mut self.partitions)[h.0 as usize];
            Arc::make_mut(slot.as_mut().expect("live"))
        })
    }

    /// The queue to change: the queues are copied first when another state shares them.
    pub(crate) fn queue_mut(&mut self, name: &str) -> Option<&mut Queue> {
        if !self.queues.contains_key(name) {
            return None;
        }
        Arc::make_mut(&mut self.queues).get_mut(name)
    }

    /// A digest for finding states that may be equal without comparing them: equal
    /// states have equal fingerprints (it reads only what `==` compares), and states that
    /// differ usually differ here too (counts, cursors, leases). It costs the partitions
    /// and their cursors, not the history.
    pub(crate) fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (
            self.next_msg,
            self.next_lease,
            self.writes.len(),
            self.dead_letters.len(),
            self.spool.len(),
            self.replay_by,
            self.push_maintenance,
            self.pop_maintenance,
            self.retention_off,
            self.queues.len(),
            self.partitions.len(),
        )
            .hash(&mut h);
        for p in self.live_partitions() {
            (p.handle, p.messages.len(), p.last_write, p.floor).hash(&mut h);
            for (g, c) in &p.cursors {
                (g, c.committed, c.not_before, &c.retries).hash(&mut h);
                c.lease
                    .as_ref()
                    .map(|l| (l.id, l.end, l.deadline, l.duration_ms))
                    .hash(&mut h);
            }
        }
        h.finish()
    }

    /// Every live partition, by handle.
    pub(crate) fn live_partitions(&self) -> impl Iterator<Item = &Partition> {
        self.partitions.iter().flatten().map(|p| &**p)
    }

    /// The `createdAt` of a message.
    pub(crate) fn created(&self, m: &Message) -> Stamp {
        self.writes[m.write as usize]
    }

    /// The queue, created with `options` and a derived namespace/task when missing.
    pub(crate) fn ensure_queue(&mut self, name: &str, options: QueueOptions) -> &Queue {
        if !self.queues.contains_key(name) {
            let (namespace, task) = crate::wire::derive_namespace_task(name);
            let q = Queue {
                name: name.to_string(),
                namespace,
                task,
                options,
                partitions: BTreeMap::new(),
                subscriptions: BTreeSet::new(),
                extra: Default::default(),
            };
            Arc::make_mut(&mut self.queues).insert(name.to_string(), q);
        }
        &self.queues[name]
    }

    /// The partition `name` of an existing queue, created when missing (PUSH-3).
    pub(crate) fn ensure_partition(&mut self, queue: &str, name: &str) -> PartH {
        if let Some(h) = self.queues.get(queue).and_then(|q| q.partitions.get(name)) {
            return *h;
        }
        let h = PartH(self.partitions.len() as u32);
        Arc::make_mut(&mut self.partitions).push(Some(Arc::new(Partition {
            handle: h,
            queue: queue.to_string(),
            name: name.to_string(),
            messages: Log::new(),
            txn_index: TxnIndex::default(),
            cursors: BTreeMap::new(),
            last_write: None,
            floor: 0,
            deleted: BTreeSet::new(),
        })));
        self.queue_mut(queue)
            .expect("queue exists before its partitions")
            .partitions
            .insert(name.to_string(), h);
        h
    }

    /// How many message handles were minted (handles `0..` this).
    pub(crate) fn msgs_minted(&self) -> u32 {
        self.next_msg
    }

    /// How many lease handles were minted (handles `0..` this).
    pub(crate) fn leases_minted(&self) -> u32 {
        self.next_lease
    }

    /// A fresh message handle.
    pub(crate) fn mint_msg(&mut self) -> MsgH {
        self.next_msg += 1;
        MsgH(self.next_msg - 1)
    }

    /// A fresh lease handle.
    pub(crate) fn mint_lease(&mut self) -> LeaseH {
        self.next_lease += 1;
        LeaseH(self.next_lease - 1)
    }

    /// The cursor of `(part, group)`, created at 0 when missing.
    pub(crate) fn cursor_mut(&mut self, part: PartH, group: &str) -> &mut Cursor {
        let p = self.part_mut(part).expect("cursor of a live partition");
        if !p.cursors.contains_key(group) {
            p.cursors.insert(group.to_string(), p.fresh_cursor());
        }
        p.cursors.get_mut(group).expect("inserted above")
    }

    /// Where lease `h` is held: every `(partition, group)` whose cursor carries it. A
    /// scan, as extends and transactions are rare next to pops and acks.
    pub(crate) fn holders_of(&self, h: LeaseH) -> Vec<(PartH, String)> {
        self.live_partitions()
            .flat_map(|p| {
                p.cursors
                    .iter()
                    .filter(move |(_, c)| c.lease.as_ref().is_some_and(|l| l.id == h))
                    .map(move |(g, _)| (p.handle, g.clone()))
            })
            .collect()
    }

    /// Every message ever written and not deleted, with its partition and offset.
    pub fn all_messages(&self) -> impl Iterator<Item = (&Partition, u32, &Message)> {
        self.live_partitions().flat_map(|p| {
            p.messages
                .iter()
                .enumerate()
                .map(move |(i, m)| (p, i as u32 + 1, m))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> State {
        let mut st = State::new();
        st.ensure_queue("q", QueueOptions::implicit());
        let h = st.ensure_partition("q", "p");
        st.cursor_mut(h, "g").committed = 0;
        st
    }

    #[test]
    fn equal_states_have_equal_fingerprints_and_a_copy_changes_alone() {
        let (a, b) = (built(), built());
        assert_eq!(a, b);
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.cursor_mut(PartH(0), "g").committed = 1;
        assert_ne!(a, c);
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.part(PartH(0)).unwrap().cursors["g"].committed, 0);
        c.cursor_mut(PartH(0), "g").committed = 0;
        assert_eq!(a, c);
    }

    /// Equality compares the partition slots: a slot emptied by a delete in one copy
    /// only is a difference, whatever else the two states share.
    #[test]
    fn a_partition_deleted_in_one_state_only_makes_the_states_differ() {
        let a = built();
        let mut b = a.clone();
        Arc::make_mut(&mut b.partitions)[0] = None;
        assert_ne!(a, b);
        assert_ne!(b, a);
    }
}
