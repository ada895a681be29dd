//! Which real id belongs to which model handle (PROTOCOL.md section 13).
//!
//! The model names messages, partitions and leases by its own handles. An
//! [`IdBook`] ties each handle to the UUID a broker used for it, in both directions,
//! so that an id is never given to two things and a thing never has two ids. An
//! engine fills its book by minting; a checker fills it by learning from answers,
//! and a contradiction is a finding (e.g. a lease id reused, a message whose id changed).
//!
//! The maps are persistent ([`crate::shared`]): a checker copies a book with every state
//! it explores, and the book grows with every id learnt.

use crate::model::{AckIn, LeaseH, LeaseRef, MsgH, Op, PartH, PopRequest, TxnOpIn};
use crate::shared::OrdMap;
use crate::wire::{AckItem, Request, TxnOp};
use std::sync::Arc;

/// A model handle that numbers its things from zero, so a book can index by it.
pub trait Handle: Copy + Ord + std::fmt::Debug {
    /// The handle's number.
    fn index(self) -> usize;
}

/// Each model handle is a number in a tuple struct.
macro_rules! numbered {
    ($($h:ty),*) => {$(
        impl Handle for $h {
            fn index(self) -> usize {
                self.0 as usize
            }
        }
    )*};
}
numbered!(MsgH, PartH, LeaseH);

/// A two-way map between handles of one kind and the ids a broker gave them.
///
/// A watched broker's every message and lease has an id here for as long as the model
/// lives, so both directions share one copy of each id: by handle, a persistent vector
/// (handles are numbered densely, so its nodes are full), and by id, a B-tree (whose
/// nodes stay dense where a hash trie's leaves are mostly empty slots).
#[derive(Clone, Debug)]
pub struct Bimap<H: Handle> {
    by_handle: imbl::Vector<Option<Arc<str>>>,
    by_id: OrdMap<Arc<str>, H>,
}

impl<H: Handle> Default for Bimap<H> {
    fn default() -> Self {
        Bimap {
            by_handle: imbl::Vector::new(),
            by_id: OrdMap::default(),
        }
    }
}

/// Two books are equal when they tie the same handles to the same ids: `by_id` is the
/// inverse of `by_handle` (they are only ever extended together), so it is not compared.
impl<H: Handle> PartialEq for Bimap<H> {
    fn eq(&self, other: &Self) -> bool {
        crate::shared::same_log(&self.by_handle, &other.by_handle, PartialEq::eq)
    }
}

impl<H: Handle> Bimap<H> {
    /// How many handles have an id.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no handle has an id yet.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The broker's id tied to handle `h`, if learnt.
    pub fn id(&self, h: H) -> Option<&str> {
        self.by_handle.get(h.index()).and_then(|id| id.as_deref())
    }

    /// The handle tied to the broker's id `id`, if learnt.
    pub fn handle(&self, id: &str) -> Option<H> {
        self.by_id.get(id).copied()
    }

    /// Ties `h` to `id`, or explains the contradiction with what is already known.
    pub(crate) fn bind(&mut self, what: &str, h: H, id: &str) -> Result<(), String> {
        match (self.id(h), self.by_id.get(id)) {
            (Some(known), _) if known != id => Err(format!("{what} {h:?} was {known}, now {id}")),
            (_, Some(other)) if *other != h => Err(format!(
                "{what} id {id} was already given to {other:?}, now also to {h:?}"
            )),
            (Some(_), Some(_)) => Ok(()),
            _ => {
                self.tie(h, Arc::from(id));
                Ok(())
            }
        }
    }

    /// The id of `h`, minting one with `mint` the first time.
    pub(crate) fn id_or_mint(&mut self, h: H, mint: impl FnOnce() -> String) -> String {
        if let Some(id) = self.id(h) {
            return id.to_string();
        }
        let id = mint();
        self.tie(h, Arc::from(id.as_str()));
        id
    }

    /// Ties `h` to `id`, both unknown so far.
    fn tie(&mut self, h: H, id: Arc<str>) {
        let i = h.index();
        while self.by_handle.len() <= i {
            self.by_handle.push_back(None);
        }
        self.by_handle.set(i, Some(id.clone()));
        self.by_id.insert(id, h);
    }
}

/// Every id known for one model state.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct IdBook {
    /// Message ids (`id`, `message_id`) by message handle.
    pub msgs: Bimap<MsgH>,
    /// Partition ids (`partitionId`) by partition handle.
    pub parts: Bimap<PartH>,
    /// Lease ids (`leaseId`) by lease handle.
    pub(crate) leases: Bimap<LeaseH>,
}

impl IdBook {
    /// A lease id from a request, as the model sees it.
    fn lease_ref(&self, id: Option<&str>) -> LeaseRef {
        match id {
            None => LeaseRef::Absent,
            Some(id) => self
                .leases
                .handle(id)
                .map_or(LeaseRef::Unknown, LeaseRef::Known),
        }
    }

    fn ack_in(&self, a: &AckItem) -> AckIn {
        AckIn {
            transaction_id: a.transaction_id.clone(),
            part: self.parts.handle(&a.partition_id),
            status: a.status,
            group: a.consumer_group.clone(),
            lease: self.lease_ref(a.lease_id.as_deref()),
            error: a.error.clone(),
        }
    }

    /// Resolves the ids of a validated request into a model operation.
    pub fn resolve(&self, req: &Request) -> Op {
        match req {
            Request::Push(p) => Op::Push(p.items.clone()),
            Request::Pop { route, query } => Op::Pop(PopRequest {
                route: route.clone(),
                query: query.clone(),
            }),
            Request::Ack(a) => Op::Ack(vec![self.ack_in(a)]),
            Request::AckBatch(list) => Op::Ack(list.iter().map(|a| self.ack_in(a)).collect()),
            Request::Extend(e) => Op::Extend {
                lease: self.lease_ref(Some(&e.lease_id)),
                lease_id: e.lease_id.to_string(),
                seconds: e.seconds,
            },
            Request::Transaction(t) => Op::Txn {
                ops: t
                    .operations
                    .iter()
                    .map(|o| match o {
                        TxnOp::Push(items) => TxnOpIn::Push(items.clone()),
                        TxnOp::Ack(a) => TxnOpIn::Ack(self.ack_in(a)),
                    })
                    .collect(),
                required: t
                    .required_leases
                    .iter()
                    .map(|id| (self.lease_ref(Some(id)), id.to_string()))
                    .collect(),
            },
            Request::Configure(c) => Op::Configure(c.clone()),
            Request::DeleteQueue(q) => Op::Delete(q.clone()),
            Request::Dlq(q) => Op::Dlq(q.clone()),
            Request::SetPushMaintenance(b) => Op::SetPushMaintenance(*b),
            Request::GetPushMaintenance => Op::GetPushMaintenance,
            Request::SetPopMaintenance(b) => Op::SetPopMaintenance(*b),
            Request::GetPopMaintenance => Op::GetPopMaintenance,
            Request::Health => Op::Health,
            Request::Manage(m) => Op::Manage {
                part: match m {
                    crate::wire::ManageRequest::Message { partition_id, .. }
                    | crate::wire::ManageRequest::Retry { partition_id, .. }
                    | crate::wire::ManageRequest::DeleteMessage { partition_id, .. } => {
                        self.parts.handle(partition_id)
                    }
                    _ => None,
                },
                req: m.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_refuses_contradictions() {
        let mut b: Bimap<MsgH> = Bimap::default();
        b.bind("message", MsgH(1), "a").unwrap();
        b.bind("message", MsgH(1), "a").unwrap();
        assert!(b.bind("message", MsgH(1), "b").is_err());
        assert!(b.bind("message", MsgH(2), "a").is_err());
        assert_eq!(b.id_or_mint(MsgH(3), || "c".into()), "c");
        assert_eq!(b.id_or_mint(MsgH(3), || unreachable!()), "c");
        assert_eq!(b.handle("c"), Some(MsgH(3)));
    }

    #[test]
    fn a_book_counts_its_handles() {
        let mut b: Bimap<MsgH> = Bimap::default();
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
        b.bind("message", MsgH(1), "a").unwrap();
        b.bind("message", MsgH(2), "b").unwrap();
        assert!(!b.is_empty());
        assert_eq!(b.len(), 2);
    }

    /// Ids learnt out of their handles' order (pushes answered out of order) make the
    /// same book as ids learnt in order; a handle not yet tied has no id.
    #[test]
    fn books_are_equal_whatever_order_their_ids_were_learnt_in() {
        let mut a: Bimap<LeaseH> = Bimap::default();
        let mut b: Bimap<LeaseH> = Bimap::default();
        a.bind("lease", LeaseH(4), "d").unwrap();
        a.bind("lease", LeaseH(1), "a").unwrap();
        b.bind("lease", LeaseH(1), "a").unwrap();
        assert!(a != b);
        assert_eq!((b.id(LeaseH(4)), b.id(LeaseH(9))), (None, None));
        b.bind("lease", LeaseH(4), "d").unwrap();
        assert!(a == b);
        assert_eq!(
            (a.len(), a.id(LeaseH(2)), a.handle("d")),
            (2, None, Some(LeaseH(4)))
        );
    }
}
