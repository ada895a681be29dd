//! What a recorded history says, read once for the invariant checks: which messages were
//! pushed and with what answer, every delivery (one per pop and partition, its messages in
//! the order the pop returned them), every ack call, the dead letters the drain listed,
//! and the order of messages within a partition that the history makes *certain* (offsets
//! never appear on the wire, so order is only known where real time or one request fixes
//! it).

use crate::concurrent::history::{Answer, History, Op};
use queen_reference::time::Millis;
use queen_reference::wire::{
    parse_request, AckResult, AckStatus, DlqResponse, PopResponse, PushResult, PushStatus, Request,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One message, as the history names it: queue, partition name, transactionId.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgKey {
    pub queue: String,
    pub partition: String,
    pub txn: String,
}

impl std::fmt::Display for MsgKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.queue, self.partition, self.txn)
    }
}

/// What a push answer said about one item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// 201 `queued`: written before the answer.
    Queued,
    /// 201 `buffered`: spooled, written at replay (PUSH-7); must not be lost either.
    Buffered,
    /// 201 `duplicate`: not written by this call.
    Duplicate,
    /// No usable answer: written or not, at any time after the invocation.
    Unknown,
}

/// One pushed item.
#[derive(Clone, Debug)]
pub struct Pushed {
    pub op: usize,
    pub index: usize,
    pub fate: Fate,
    pub invoke_ms: Millis,
    pub complete_ms: Millis,
}

/// One pop's messages from one partition.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub op: usize,
    pub group: String,
    pub partition_id: String,
    pub lease: String,
    /// In the order the pop returned them (offset order, POP-1).
    pub msgs: Vec<MsgKey>,
    pub invoke_ms: Millis,
    pub complete_ms: Millis,
    /// The shortest the lease can be (`leaseSeconds` of the pop), if the request says.
    pub lease_min_ms: Option<Millis>,
    pub auto_ack: bool,
}

/// One acknowledgment inside an ack call, with its result when the answer is known.
#[derive(Clone, Debug)]
pub struct Acked {
    pub op: usize,
    pub group: String,
    pub partition_id: String,
    /// `None` when the partition id was never seen in a pop answer.
    pub msg: Option<MsgKey>,
    pub status: AckStatus,
    pub lease: Option<String>,
    /// `None`: the answer is unknown (the ack may or may not have taken effect).
    pub result: Option<AckResult>,
    pub invoke_ms: Millis,
    pub complete_ms: Millis,
}

impl Acked {
    /// Whether the broker may have accepted this item (known success, or unknown).
    pub fn maybe_effective(&self) -> bool {
        self.result.as_ref().is_none_or(|r| r.success)
    }

    /// A failure signal that may make messages come back (ACK-6): `failed` or `retry`
    /// not known to be refused or dead-lettered.
    pub fn maybe_comes_back(&self) -> bool {
        matches!(self.status, AckStatus::Failed | AckStatus::Retry)
            && self.maybe_effective()
            && !self.result.as_ref().is_some_and(|r| r.dlq)
    }
}

/// Everything the checks need, over the workload and the drain together.
#[derive(Debug, Default)]
pub struct Facts {
    /// Every push of each message (a message may be pushed again: dedup).
    pub pushes: BTreeMap<MsgKey, Vec<Pushed>>,
    pub deliveries: Vec<Delivery>,
    pub acks: Vec<Acked>,
    /// Other calls that may release leases or move cursors outside ack calls
    /// (transactions, queue deletes): op index and queue (`None`: any queue).
    pub other_writers: Vec<(usize, Option<String>, Millis)>,
    /// Dead letters listed, by group.
    pub dead: BTreeSet<(String, MsgKey)>,
    /// partitionId -> (queue, partition name), learnt from pop answers and DLQ listings.
    pub partitions: HashMap<String, (String, String)>,
}

fn known(op: &Op) -> Option<&queen_reference::wire::HttpResponse> {
    match &op.answer {
        Answer::Known(a) => Some(a),
        Answer::Unknown(_) => None,
    }
}

impl Facts {
    /// Reads `history` (workload and drain merged, ids as in `history`).
    pub fn read(history: &History) -> Facts {
        let mut f = Facts::default();
        let mut acks_raw = Vec::new();
        for op in &history.ops {
            // Limits do not matter here: the workload's requests are well-formed, and a
            // request that does not parse changed nothing (it was answered 400).
            let Ok(req) = parse_request(&op.request, 30_000, usize::MAX) else {
                continue;
            };
            match req {
                Request::Push(p) => f.read_push(op, &p),
                Request::Pop { route, query } => {
                    let Some(a) = known(op) else { continue };
                    if a.status != 200 {
                        continue;
                    }
                    let Some(body) = a
                        .body
                        .clone()
                        .and_then(|b| serde_json::from_value::<PopResponse>(b).ok())
                    else {
                        continue;
                    };
                    let queue = match &route {
                        queen_reference::wire::PopRoute::Queue(q)
                        | queen_reference::wire::PopRoute::Partition(q, _) => Some(q.clone()),
                        queen_reference::wire::PopRoute::Discovery { .. } => None,
                    };
                    let mut by_part: Vec<Delivery> = Vec::new();
                    for m in body.messages {
                        // Discovery pops do not name the queue per message (POP-5): such
                        // messages are identified through the partition id, if known.
                        let q = match &queue {
                            Some(q) => q.clone(),
                            None => match f.partitions.get(&m.partition_id) {
                                Some((q, _)) => q.clone(),
                                None => continue,
                            },
                        };
                        f.partitions
                            .insert(m.partition_id.clone(), (q.clone(), m.partition.clone()));
                        let key = MsgKey {
                            queue: q,
                            partition: m.partition.clone(),
                            txn: m.transaction_id.clone(),
                        };
                        match by_part
                            .iter_mut()
                            .find(|d| d.partition_id == m.partition_id)
                        {
                            Some(d) => d.msgs.push(key),
                            None => by_part.push(Delivery {
                                op: op.id,
                                group: query.consumer_group.clone(),
                                partition_id: m.partition_id.clone(),
                                lease: m.lease_id.clone(),
                                msgs: vec![key],
                                invoke_ms: op.invoke_ms,
                                complete_ms: op.complete_ms,
                                lease_min_ms: query.lease_seconds.map(|s| s as Millis * 1000),
                                auto_ack: query.auto_ack,
                            }),
                        }
                    }
                    f.deliveries.extend(by_part);
                }
                Request::Ack(item) => acks_raw.push((op, vec![item])),
                Request::AckBatch(items) => acks_raw.push((op, items)),
                Request::Dlq(_) => {
                    let Some(a) = known(op) else { continue };
                    let Some(body) = a
                        .body
                        .clone()
                        .filter(|_| a.status == 200)
                        .and_then(|b| serde_json::from_value::<DlqResponse>(b).ok())
                    else {
                        continue;
                    };
                    for d in body.messages {
                        f.partitions.insert(
                            d.partition_id.clone(),
                            (d.queue.clone(), d.partition.clone()),
                        );
                        let group = if d.consumer_group.is_empty() {
                            queen_reference::wire::QUEUE_MODE.to_string()
                        } else {
                            d.consumer_group
                        };
                        f.dead.insert((
                            group,
                            MsgKey {
                                queue: d.queue,
                                partition: d.partition,
                                txn: d.transaction_id,
                            },
                        ));
                    }
                }
                Request::Transaction(_) => f.other_writers.push((op.id, None, op.invoke_ms)),
                Request::DeleteQueue(q) => f.other_writers.push((op.id, Some(q), op.invoke_ms)),
                _ => {}
            }
        }
        // Acks last: their partition ids are resolved with every pop answer read.
        for (op, items) in acks_raw {
            let results: Option<Vec<AckResult>> = known(op)
                .filter(|a| a.status == 200)
                .and_then(|a| a.body.clone())
                .and_then(|b| serde_json::from_value(b).ok());
            if known(op).is_some() && results.is_none() {
                // A known answer that is not a 200 array (400): nothing changed.
                continue;
            }
            for (i, it) in items.into_iter().enumerate() {
                let msg = f.partitions.get(&it.partition_id).map(|(q, p)| MsgKey {
                    queue: q.clone(),
                    partition: p.clone(),
                    txn: it.transaction_id.clone(),
                });
                f.acks.push(Acked {
                    op: op.id,
                    group: it.consumer_group,
                    partition_id: it.partition_id,
                    msg,
                    status: it.status,
                    lease: it.lease_id,
                    result: results.as_ref().and_then(|r| r.get(i).cloned()),
                    invoke_ms: op.invoke_ms,
                    complete_ms: op.complete_ms,
                });
            }
        }
        f
    }

    fn read_push(&mut self, op: &Op, p: &queen_reference::wire::PushRequest) {
        let results: Option<Vec<PushResult>> = match &op.answer {
            Answer::Unknown(_) => None,
            Answer::Known(a) if a.status == 201 => {
                a.body.clone().and_then(|b| serde_json::from_value(b).ok())
            }
            // Any other known answer wrote nothing (400, 413).
            Answer::Known(_) => return,
        };
        for (i, it) in p.items.iter().enumerate() {
            let r = results.as_ref().and_then(|r| r.get(i));
            let txn = match (&it.transaction_id, r) {
                (Some(t), _) => t.clone(),
                (None, Some(r)) => r.transaction_id.clone(),
                // A minted id we never learnt: this item cannot be followed.
                (None, None) => continue,
            };
            let fate = match r.map(|r| r.status) {
                None if results.is_some() => continue,
                None => Fate::Unknown,
                Some(PushStatus::Queued) => Fate::Queued,
                Some(PushStatus::Buffered) => Fate::Buffered,
                Some(PushStatus::Duplicate) => Fate::Duplicate,
            };
            self.pushes
                .entry(MsgKey {
                    queue: it.queue.clone(),
                    partition: it.partition.clone(),
                    txn,
                })
                .or_default()
                .push(Pushed {
                    op: op.id,
                    index: i,
                    fate,
                    invoke_ms: op.invoke_ms,
                    complete_ms: op.complete_ms,
                });
        }
    }

    /// Whether `x` certainly has a lower offset than `y` (same partition): `x` was
    /// answered `queued` and either came earlier in the same request, or its push
    /// completed before `y`'s push was invoked (offsets follow commit order, PUSH-6).
    pub fn before(&self, x: &MsgKey, y: &MsgKey) -> bool {
        if x == y || x.queue != y.queue || x.partition != y.partition {
            return false;
        }
        let (Some(px), Some(py)) = (self.pushes.get(x), self.pushes.get(y)) else {
            return false;
        };
        let Some(wx) = px.iter().find(|p| p.fate == Fate::Queued) else {
            return false;
        };
        // y's writing push: any that may have written it (not a known duplicate). If
        // several may have, y is after x only if each of them is.
        let writers: Vec<&Pushed> = py.iter().filter(|p| p.fate != Fate::Duplicate).collect();
        !writers.is_empty()
            && writers.iter().all(|wy| {
                if wy.op == wx.op {
                    wx.index < wy.index
                } else {
                    wx.complete_ms < wy.invoke_ms
                }
            })
    }

    /// Whether `x` was named by any push request (whatever its answer).
    pub fn pushed(&self, x: &MsgKey) -> bool {
        self.pushes.contains_key(x)
    }
}
