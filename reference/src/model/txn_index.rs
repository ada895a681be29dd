//! A partition's transactionId index: transactionId -> the newest offset written with it
//! (PUSH-5 dedup, ACK-8 ack resolution).
//!
//! Every push writes it and every ack reads it, so it is on the model's hot path, and
//! like the rest of the state it must copy in O(1) ([`crate::shared`]).
//!
//! * It is keyed by a 64-bit hash of the transactionId, and a hit is confirmed against
//!   the message's own transactionId in the partition's log: writes copy no string and
//!   probes compare none. A different transactionId whose hash is already taken
//!   (practically never) goes to a small second map keyed by the string, so answers are
//!   exactly those of a map by string.
//! * Entries live in two layers. New ones go to a small persistent map (`recent`, a HAMT:
//!   a write to a shared copy copies only its path). When it outgrows a fraction of the
//!   rest it is merged into `settled`, a plain hash table behind an [`Arc`] (copied
//!   whole only when a shared copy merges, which the size ratio makes rare: O(1)
//!   amortized per write). A lookup in a large HAMT walks several scattered nodes,
//!   nearly all cache misses on a long history; the plain table costs one or two.
//!
//! The index is a function of the log (each written offset is recorded once, in order),
//! and so is its split into layers: partitions with equal logs have equal layers.

use super::state::Message;
use crate::shared::{same_map, HashMap, Log};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Hashes `u64` keys that are already hashes: the key is its own hash.
#[derive(Clone, Copy, Debug, Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are expected; anything else is still hashed deterministically.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Recent = imbl::GenericHashMap<
    u64,
    u32,
    BuildHasherDefault<PreHashed>,
    imbl::shared_ptr::DefaultSharedPtr,
>;
type Settled = std::collections::HashMap<u64, u32, BuildHasherDefault<PreHashed>>;

/// `recent` is merged into `settled` once it holds more than this many entries and
/// more than `settled.len() / SETTLED_RATIO`.
const MIN_RECENT: usize = 256;
const SETTLED_RATIO: usize = 64;

/// transactionId -> newest offset, for one partition. Every method takes that
/// partition's message log, which the offsets point into.
#[derive(Clone, Debug, Default)]
pub struct TxnIndex {
    /// Hash of a transactionId -> newest offset of the first transactionId indexed with
    /// that hash: written since the last merge (newer than `settled`).
    recent: Recent,
    /// The same for everything before the last merge.
    settled: Arc<Settled>,
    /// Newest offset of each transactionId whose hash another one holds.
    spill: HashMap<String, u32>,
}

fn hash(txn: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(txn)
}

impl TxnIndex {
    /// The newest offset recorded under hash `h`, whichever transactionId it is.
    fn by_hash(&self, h: u64) -> Option<u32> {
        match self.recent.get(&h) {
            Some(&off) => Some(off),
            None => self.settled.get(&h).copied(),
        }
    }

    /// Where `txn` stands: what [`TxnIndex::get`] answers, and what
    /// [`TxnIndex::record`] needs to record it without looking again.
    pub(crate) fn probe(&self, txn: &str, messages: &Log<Message>) -> Probe {
        let hash = hash(txn);
        let holder = self.by_hash(hash);
        let found = match holder {
            None => None,
            Some(off) if messages[off as usize - 1].transaction_id == txn => Some(off),
            // The hash belongs to another transactionId.
            Some(_) => self.spill.get(txn).copied(),
        };
        Probe {
            hash,
            holder,
            found,
        }
    }

    /// The newest offset written with `txn`, if any.
    pub(crate) fn get(&self, txn: &str, messages: &Log<Message>) -> Option<u32> {
        self.probe(txn, messages).found
    }

    /// Records that `off` is now the newest offset written with `txn`.
    pub fn insert(&mut self, txn: &str, off: u32, messages: &Log<Message>) {
        let probe = self.probe(txn, messages);
        self.record(txn, probe, off);
    }

    /// [`TxnIndex::insert`] with `probe`, this index's probe for `txn` taken since its
    /// last change.
    pub(crate) fn record(&mut self, txn: &str, probe: Probe, off: u32) {
        if probe.holder.is_some() && probe.found != probe.holder {
            // The hash belongs to another transactionId: keep it there.
            self.spill.insert(txn.to_string(), off);
            return;
        }
        self.recent.insert(probe.hash, off);
        if self.recent.len() > MIN_RECENT.max(self.settled.len() / SETTLED_RATIO) {
            let settled = Arc::make_mut(&mut self.settled);
            settled.reserve(self.recent.len());
            settled.extend(std::mem::take(&mut self.recent));
        }
    }
}

/// Where a transactionId stands in a [`TxnIndex`] ([`TxnIndex::probe`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Probe {
    hash: u64,
    /// The newest offset recorded under the hash, whichever transactionId wrote it.
    holder: Option<u32>,
    /// The newest offset written with this transactionId.
    pub(crate) found: Option<u32>,
}

/// Equality by content, without comparing what two copies share. Layers are compared
/// layer by layer: equal logs give equal layers (see the module comment).
impl PartialEq for TxnIndex {
    fn eq(&self, other: &TxnIndex) -> bool {
        same_map(&self.recent, &other.recent)
            && (Arc::ptr_eq(&self.settled, &other.settled) || self.settled == other.settled)
            && same_map(&self.spill, &other.spill)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::{Data, MsgH, Trace};

    fn log(txns: &[&str]) -> Log<Message> {
        txns.iter()
            .enumerate()
            .map(|(i, t)| Message {
                msg: MsgH(i as u32),
                transaction_id: t.to_string(),
                minted_txn: false,
                trace: Trace::None,
                data: Data::Absent,
                write: 0,
                producer_sub: None,
            })
            .collect()
    }

    #[test]
    fn answers_the_newest_offset_of_each_transaction_id() {
        let msgs = log(&["a", "b", "a"]);
        let mut ix = TxnIndex::default();
        for (i, m) in msgs.iter().enumerate() {
            ix.insert(&m.transaction_id, i as u32 + 1, &msgs);
        }
        assert_eq!(ix.get("a", &msgs), Some(3));
        assert_eq!(ix.get("b", &msgs), Some(2));
        assert_eq!(ix.get("c", &msgs), None);
    }

    #[test]
    fn transaction_ids_sharing_a_hash_are_told_apart() {
        // Force a collision: index "x" under the hash of "y" by hand.
        let msgs = log(&["x", "y", "y"]);
        let mut ix = TxnIndex::default();
        ix.recent.insert(hash("y"), 1);
        ix.insert("y", 2, &msgs);
        assert_eq!(
            ix.by_hash(hash("y")),
            Some(1),
            "the first holder keeps the hash"
        );
        assert_eq!(ix.get("y", &msgs), Some(2));
        ix.insert("y", 3, &msgs);
        assert_eq!(ix.get("y", &msgs), Some(3));
        assert_eq!(ix.get("z", &msgs), None);
    }

    #[test]
    fn copies_compare_by_content() {
        let msgs = log(&["a", "b"]);
        let mut a = TxnIndex::default();
        a.insert("a", 1, &msgs);
        let mut b = a.clone();
        assert_eq!(a, b);
        b.insert("b", 2, &msgs);
        assert_ne!(a, b);
        a.insert("b", 2, &msgs);
        assert_eq!(a, b);
    }

    #[test]
    fn answers_survive_merges_and_copies_stay_apart() {
        // Ids repeat (t0..t699 twice, then new ones), crossing several merges.
        let txns: Vec<String> = (0..3000)
            .map(|i| format!("t{}", i % 700 + i / 1400 * 700))
            .collect();
        let refs: Vec<&str> = txns.iter().map(String::as_str).collect();
        let msgs = log(&refs);
        let mut ix = TxnIndex::default();
        let mut want = std::collections::HashMap::new();
        let mut early = None;
        for (i, t) in refs.iter().enumerate() {
            ix.insert(t, i as u32 + 1, &msgs);
            want.insert(*t, i as u32 + 1);
            if i == 1000 {
                early = Some((ix.clone(), want.clone()));
            }
        }
        assert!(!ix.settled.is_empty(), "merged at least once");
        for (t, off) in &want {
            assert_eq!(ix.get(t, &msgs), Some(*off), "{t}");
        }
        assert_eq!(ix.get("t99999", &msgs), None);
        // The copy taken halfway answers as it did then.
        let (early, early_want) = early.unwrap();
        for t in &refs {
            assert_eq!(early.get(t, &msgs), early_want.get(t).copied(), "{t}");
        }
        assert_ne!(early, ix);
    }
}
