//! A world's digest up to the names the model gives things.
//!
//! The model numbers messages, the writes they came from and leases in the order its
//! calls happen, so two orders of the same calls (pops claiming two partitions one way
//! round or the other, pushes to different partitions) reach one broker state under two
//! numberings; compared as they are, the two look different and a search explores both.
//! The digest reads a world in one canonical order instead: partitions by queue and
//! name, messages by offset, cursors by group. A partition is named by its queue and
//! name, a message by where it is stored, and a write or a lease by where it is first
//! met in that order, so every numbering gives one digest. The broker's ids are read
//! beside the things they name, and the ids of things stored nowhere (a lease no cursor
//! holds, a message or partition of a deleted queue) as a sorted set, since nothing but
//! their id can reach them.
//!
//! The digest reads everything the model's next steps read (the transactionId index is
//! a function of each log, and the findings recorded on the way change no answer).
//! Handles are only ever compared for equality where a checker explores (the model's
//! own pop order breaks ties by partition name, and a pop answer's partitions are
//! matched by queue), so renaming them changes nothing. Equal digests therefore stand
//! for worlds that accept the same answers from here on; the converse holds up to a
//! collision of 128-bit hashes.

use super::World;
use crate::ids::{Bimap, Handle, IdBook};
use crate::model::{Cursor, Data, LeaseH, Message, MsgH, PartH, Partition, Queue, Trace};
use std::hash::Hash;
use xxhash_rust::xxh3::xxh3_128;

/// New numbers for old ones, given in the order the old ones are first met.
struct Renumber {
    to: Vec<u32>,
    next: u32,
}

const UNMET: u32 = u32::MAX;

impl Renumber {
    fn new(n: usize) -> Renumber {
        Renumber {
            to: vec![UNMET; n],
            next: 0,
        }
    }

    fn of(&mut self, old: u32) -> u32 {
        let t = &mut self.to[old as usize];
        if *t == UNMET {
            *t = self.next;
            self.next += 1;
        }
        *t
    }

    fn met(&self, old: usize) -> bool {
        self.to[old] != UNMET
    }

    /// The old numbers in the order they were met.
    fn order(&self) -> Vec<usize> {
        let mut order = vec![0; self.next as usize];
        for (old, new) in self.to.iter().enumerate().filter(|(_, n)| **n != UNMET) {
            order[*new as usize] = old;
        }
        order
    }
}

/// The bytes a digest is taken of: everything is written out first and hashed once,
/// which costs far less than feeding a streaming hash many small writes.
#[derive(Default)]
struct Bytes(Vec<u8>);

impl std::hash::Hasher for Bytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("a digest is taken of the bytes, not of this")
    }
}

/// What a walk over the partitions numbers as it meets it.
struct Walk<'a> {
    h: Bytes,
    ids: &'a IdBook,
    writes: Renumber,
    leases: Renumber,
    msgs_stored: Vec<bool>,
}

/// The digest of `w` (see the module's comment).
pub(super) fn digest(w: &World) -> u128 {
    let st = &w.state;
    let mut walk = Walk {
        h: Bytes(Vec::with_capacity(4096)),
        ids: &w.ids,
        writes: Renumber::new(st.writes.len()),
        leases: Renumber::new(st.leases_minted() as usize),
        msgs_stored: vec![false; st.msgs_minted() as usize],
    };
    let h = &mut walk.h;
    w.variants.hash(h);
    (
        st.msgs_minted(),
        st.leases_minted(),
        st.writes.len(),
        st.partitions.len(),
    )
        .hash(h);
    (
        st.replay_by,
        st.push_maintenance,
        st.pop_maintenance,
        st.retention_off,
    )
        .hash(h);
    st.queues.len().hash(h);
    st.queues.values().for_each(|q| queue(h, q));
    let mut live: Vec<&Partition> = st.live_partitions().collect();
    live.sort_unstable_by(|a, b| (&a.queue, &a.name).cmp(&(&b.queue, &b.name)));
    live.len().hash(&mut walk.h);
    for p in live {
        walk.ids.parts.id(p.handle).hash(&mut walk.h);
        walk.partition(p);
    }
    let h = &mut walk.h;
    let order = walk.writes.order();
    order.len().hash(h);
    order.iter().for_each(|&old| st.writes[old].hash(h));
    let unmet = (0..st.writes.len()).filter(|&w| !walk.writes.met(w));
    unmet.for_each(|old| st.writes[old].hash(h));
    let unheld = (0..st.leases_minted() as usize).filter(|&l| !walk.leases.met(l));
    unstored_ids(h, &w.ids.leases, unheld.map(|l| LeaseH(l as u32)));
    let unstored = (0..walk.msgs_stored.len()).filter(|&m| !walk.msgs_stored[m]);
    unstored_ids(h, &w.ids.msgs, unstored.map(|m| MsgH(m as u32)));
    let deleted = (0..st.partitions.len() as u32)
        .map(PartH)
        .filter(|&p| st.part(p).is_none());
    unstored_ids(h, &w.ids.parts, deleted);
    st.dead_letters.len().hash(h);
    for d in &st.dead_letters {
        let named = st.part(d.part).map(|p| (&p.queue, &p.name));
        (named, w.ids.parts.id(d.part), d.offset, &d.group).hash(h);
        (&d.error, d.retry_count, d.failed_at).hash(h);
    }
    st.spool.len().hash(h);
    for s in &st.spool {
        (format!("{:?}", s.item), &s.transaction_id, s.minted_txn).hash(h);
    }
    xxh3_128(&h.0)
}

/// The sorted ids of `handles` (those that have one): what names them from outside.
fn unstored_ids<H: Handle>(h: &mut Bytes, book: &Bimap<H>, handles: impl Iterator<Item = H>) {
    let mut ids: Vec<&str> = handles.filter_map(|x| book.id(x)).collect();
    ids.sort_unstable();
    ids.hash(h);
}

fn queue(h: &mut Bytes, q: &Queue) {
    (&q.name, &q.namespace, &q.task, &q.options).hash(h);
    q.partitions.len().hash(h);
    q.partitions.keys().for_each(|name| name.hash(h));
    q.subscriptions.len().hash(h);
    q.subscriptions.iter().for_each(|group| group.hash(h));
    q.extra.len().hash(h);
    if !q.extra.is_empty() {
        serde_json::to_string(&q.extra).unwrap_or_default().hash(h);
    }
}

impl Walk<'_> {
    fn partition(&mut self, p: &Partition) {
        (&p.queue, &p.name, p.floor, &p.deleted, p.messages.len()).hash(&mut self.h);
        for m in &p.messages {
            self.message(m);
        }
        p.last_write.map(|w| self.writes.of(w)).hash(&mut self.h);
        p.cursors.len().hash(&mut self.h);
        for (group, c) in &p.cursors {
            group.hash(&mut self.h);
            self.cursor(c);
        }
    }

    fn message(&mut self, m: &Message) {
        self.msgs_stored[m.msg.index()] = true;
        let write = self.writes.of(m.write);
        let h = &mut self.h;
        (
            self.ids.msgs.id(m.msg),
            &m.transaction_id,
            m.minted_txn,
            write,
        )
            .hash(h);
        match &m.trace {
            Trace::None => 0u8.hash(h),
            Trace::Kept(t) => (1u8, t).hash(h),
            Trace::Either(t) => (2u8, t).hash(h),
        }
        match &m.data {
            Data::Absent => 0u8.hash(h),
            Data::Value(v) => (1u8, v.get()).hash(h),
        }
        m.producer_sub.hash(h);
    }

    fn cursor(&mut self, c: &Cursor) {
        (c.committed, c.not_before, &c.retries).hash(&mut self.h);
        match &c.lease {
            None => false.hash(&mut self.h),
            Some(l) => {
                let named = self.leases.of(l.id.0);
                let id = self.ids.leases.id(l.id);
                (true, named, id, l.end, l.deadline, l.duration_ms).hash(&mut self.h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Lease;
    use crate::time::Stamp;
    use crate::wire::QueueOptions;

    /// A queue with partitions `a` and `b`, each with one message and a lease of its
    /// own: `first` is the partition that was created, written and leased first.
    fn world(first: &str) -> World {
        let mut w = World::default();
        let st = &mut w.state;
        st.ensure_queue("q", QueueOptions::implicit());
        let order = match first {
            "a" => [st.ensure_partition("q", "a"), st.ensure_partition("q", "b")],
            _ => [st.ensure_partition("q", "b"), st.ensure_partition("q", "a")],
        };
        for part in order {
            let msg = st.mint_msg();
            let write = st.writes.len() as u32;
            let p = st.part_mut(part).unwrap();
            let at = if p.name == "a" { 1_000 } else { 2_000 };
            p.messages.push_back(Message {
                msg,
                transaction_id: format!("t-{}", p.name),
                minted_txn: false,
                trace: Trace::None,
                data: Data::Absent,
                write,
                producer_sub: None,
            });
            st.writes.push_back(Stamp::exact(at));
            let id = st.mint_lease();
            st.cursor_mut(part, "g").lease = Some(Lease {
                id,
                end: 1,
                deadline: Stamp::exact(5_000),
                duration_ms: 1_000,
            });
            let name = st.part(part).unwrap().name.clone();
            w.ids
                .leases
                .bind("lease", id, &format!("lease-{name}"))
                .unwrap();
            w.ids
                .msgs
                .bind("message", msg, &format!("msg-{name}"))
                .unwrap();
        }
        w
    }

    #[test]
    fn one_state_reached_in_two_orders_has_one_digest() {
        let (ab, ba) = (world("a"), world("b"));
        assert_ne!(ab, ba, "the two numberings differ");
        assert_eq!(digest(&ab), digest(&ba));
    }

    #[test]
    fn a_lease_id_tied_to_the_other_partition_changes_the_digest() {
        let ab = world("a");
        let mut swapped = world("b");
        swapped.ids.leases = Default::default();
        swapped
            .ids
            .leases
            .bind("lease", LeaseH(0), "lease-a")
            .unwrap();
        swapped
            .ids
            .leases
            .bind("lease", LeaseH(1), "lease-b")
            .unwrap();
        assert_ne!(digest(&ab), digest(&swapped));
    }

    #[test]
    fn a_deadline_or_a_write_time_changes_the_digest() {
        let ab = world("a");
        let mut later = ab.clone();
        let p = later.state.part_mut(PartH(1)).unwrap();
        p.cursors
            .get_mut("g")
            .unwrap()
            .lease
            .as_mut()
            .unwrap()
            .deadline = Stamp::exact(6_000);
        assert_ne!(digest(&ab), digest(&later));
        let mut written = ab.clone();
        written.state.writes.set(0, Stamp::exact(999));
        assert_ne!(digest(&ab), digest(&written));
    }

    #[test]
    fn a_lease_no_cursor_holds_counts_by_its_id() {
        let mut one = world("a");
        let mut other = world("a");
        for (w, id) in [(&mut one, "x"), (&mut other, "y")] {
            let h = w.state.mint_lease();
            w.ids.leases.bind("lease", h, id).unwrap();
        }
        assert_ne!(digest(&one), digest(&other));
    }
}
