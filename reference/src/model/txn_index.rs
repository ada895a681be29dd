//! A partition's transactionId index: transactionId -> the newest offset written with it
//! (PUSH-5 dedup, ACK-8 ack resolution).
//!
//! Every push writes it and every ack reads it, so it is on the model's hot path, and
//! like the rest of the state it must copy in O(1) ([`crate::shared`]). Keyed by the
//! transactionId itself, each write cost a copy of the string and each probe string
//! hashing and comparison inside a persistent map whose leaves were three times larger.
//! It is keyed instead by a 64-bit hash of the transactionId, and a hit is confirmed
//! against the message's own transactionId in the partition's log. A different
//! transactionId whose hash is already taken (practically never) goes to a small
//! second map keyed by the string, so answers are exactly those of a map by string.

use super::state::Message;
use crate::shared::{same_map, HashMap, Log};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Hashes `u64` keys that are already hashes: the key is its own hash.
#[derive(Clone, Copy, Debug, Default)]
pub struct PreHashed(u64);

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

type ByHash = imbl::GenericHashMap<
    u64,
    u32,
    BuildHasherDefault<PreHashed>,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// transactionId -> newest offset, for one partition. Every method takes that
/// partition's message log, which the offsets point into.
#[derive(Clone, Debug, Default)]
pub struct TxnIndex {
    /// Hash of a transactionId -> newest offset of the first transactionId indexed with
    /// that hash.
    by_hash: ByHash,
    /// Newest offset of each transactionId whose hash another one holds in `by_hash`.
    spill: HashMap<String, u32>,
}

fn hash(txn: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(txn)
}

impl TxnIndex {
    /// The newest offset written with `txn`, if any.
    pub fn get(&self, txn: &str, messages: &Log<Message>) -> Option<u32> {
        let off = *self.by_hash.get(&hash(txn))?;
        if messages[off as usize - 1].transaction_id == txn {
            Some(off)
        } else {
            self.spill.get(txn).copied()
        }
    }

    /// Records that `off` is now the newest offset written with `txn`.
    pub fn insert(&mut self, txn: &str, off: u32, messages: &Log<Message>) {
        let h = hash(txn);
        if let Some(old) = self.by_hash.insert(h, off) {
            if messages[old as usize - 1].transaction_id != txn {
                // The hash belongs to another transactionId: keep it there.
                self.by_hash.insert(h, old);
                self.spill.insert(txn.to_string(), off);
            }
        }
    }

    /// How many transactionIds are indexed.
    pub fn len(&self) -> usize {
        self.by_hash.len() + self.spill.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Equality by content, without comparing what two copies share.
impl PartialEq for TxnIndex {
    fn eq(&self, other: &TxnIndex) -> bool {
        same_map(&self.by_hash, &other.by_hash) && same_map(&self.spill, &other.spill)
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
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn transaction_ids_sharing_a_hash_are_told_apart() {
        // Force a collision: index "x" under the hash of "y" by hand.
        let msgs = log(&["x", "y", "y"]);
        let mut ix = TxnIndex::default();
        ix.by_hash.insert(hash("y"), 1);
        ix.insert("y", 2, &msgs);
        assert_eq!(
            ix.by_hash.get(&hash("y")),
            Some(&1),
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
}
