//! What a recorded history says, read once for the invariant checks: which messages were
//! pushed and with what answer, every delivery (one per pop and partition, its messages in
//! the order the pop returned them), every ack call, the pops whose deliveries the history
//! cannot name, every lease extend and what it showed, the dead letters the drain listed,
//! and the order of messages within a partition that the history makes *certain* (offsets
//! never appear on the wire, so order is only known where real time or one request fixes
//! it). Answers are read leniently ([`crate::concurrent::answers`]): what cannot be read
//! is unknown, never "not applied".

use crate::concurrent::answers::{
    read_acks, read_extend, read_pop, read_push, AckRead, ExtendRead, PopRead, PushRead,
};
use crate::concurrent::history::{Answer, History, Op};
use queen_reference::time::Millis;
use queen_reference::wire::{
    parse_request, AckStatus, DlqResponse, PopRoute, PushStatus, Request, QUEUE_MODE,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One message, as the history names it: queue, partition name, transactionId.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgKey {
    /// The queue's name.
    pub queue: String,
    /// The partition's name.
    pub partition: String,
    /// The message's `transactionId`.
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
    /// The push call's id in the history.
    pub op: usize,
    /// The item's position in the push request.
    pub index: usize,
    /// What the push answer said of the item.
    pub(crate) fate: Fate,
    /// When the push was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
}

/// One pop's messages from one partition.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The pop call's id in the history.
    pub op: usize,
    /// The consumer group that popped.
    pub group: String,
    /// The id of the partition the messages came from.
    pub partition_id: String,
    /// The lease id the pop answer gave.
    pub lease: String,
    /// In the order the pop returned them (offset order, POP-1).
    pub msgs: Vec<MsgKey>,
    /// When the pop was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
    /// The shortest the lease can be (`leaseSeconds` of the pop), if the request says.
    pub(crate) lease_min_ms: Option<Millis>,
    /// Whether the pop asked for `autoAck` (the messages count as acknowledged on delivery).
    pub(crate) auto_ack: bool,
}

/// One acknowledgment inside an ack call, with its result when the answer is known.
#[derive(Clone, Debug)]
pub struct Acked {
    /// The ack call's id in the history.
    pub op: usize,
    /// The consumer group acknowledging.
    pub group: String,
    /// The partition id the ack names.
    pub partition_id: String,
    /// `None` when the partition id was never seen in a pop answer.
    pub msg: Option<MsgKey>,
    /// The status the ack asked for (`completed` or `failed`).
    pub status: AckStatus,
    /// The lease id the ack names, if any.
    pub lease: Option<String>,
    /// `None`: the answer is unknown or unreadable (the ack may or may not have taken
    /// effect).
    pub result: Option<AckRead>,
    /// When the ack was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
}

impl Acked {
    /// Whether the broker may have accepted this item (known success, or unknown).
    pub(crate) fn maybe_effective(&self) -> bool {
        self.result.as_ref().is_none_or(|r| r.success)
    }

    /// A failure signal that may make messages come back (ACK-6): `failed` or `retry`
    /// not known to be refused or dead-lettered.
    pub(crate) fn maybe_comes_back(&self) -> bool {
        matches!(self.status, AckStatus::Failed | AckStatus::Retry)
            && self.maybe_effective()
            && self.result.as_ref().is_none_or(|r| r.dlq != Some(true))
    }
}

/// A pop whose answer names no delivery the history can follow (unknown, or unreadable):
/// it may have taken a lease nobody can name.
#[derive(Clone, Debug)]
pub struct BlindPop {
    /// The pop call's id in the history.
    pub op: usize,
    /// `None`: a discovery pop (any queue).
    pub queue: Option<String>,
    /// The partition route's partition name (`None`: any partition of the queue).
    pub partition: Option<String>,
    /// The consumer group that popped.
    pub group: String,
    /// When the pop was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived or the client gave up (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
    /// Whether the answer is unknown (then it may have acted after its completion).
    pub unknown: bool,
    /// The shortest the lease can be (`leaseSeconds` of the pop), if the request says.
    pub(crate) lease_min_ms: Option<Millis>,
}

/// A lease extend and what its answer showed (LEASE-1, LEASE-2).
#[derive(Clone, Debug)]
pub struct Extended {
    /// The extend call's id in the history.
    pub op: usize,
    /// The lease id extended.
    pub lease: String,
    /// `seconds` of the request (`None`: the lease's own duration, LEASE-3).
    pub seconds: Option<u32>,
    /// What the extend answer showed.
    pub read: ExtendRead,
    /// When the extend was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
}

/// Everything the checks need, over the workload and the drain together.
#[derive(Debug, Default)]
pub struct Facts {
    /// Every push of each message (a message may be pushed again: dedup).
    pub pushes: BTreeMap<MsgKey, Vec<Pushed>>,
    /// Every pop answer's messages, by partition.
    pub deliveries: Vec<Delivery>,
    /// Every acknowledgment made.
    pub acks: Vec<Acked>,
    /// Pops that may have leased what no answer names.
    pub(crate) blind_pops: Vec<BlindPop>,
    /// Every lease extend, with what it showed.
    pub extends: Vec<Extended>,
    /// Other calls that may release leases or move cursors outside ack calls
    /// (transactions, queue deletes): op index and queue (`None`: any queue).
    pub(crate) other_writers: Vec<(usize, Option<String>, Millis)>,
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
        Facts::from_ops(&history.ops)
    }

    /// Reads calls in invocation order (each named by its `id`): what the drain reads
    /// of one queue while it runs.
    pub(crate) fn from_ops<'a>(ops: impl IntoIterator<Item = &'a Op>) -> Facts {
        let mut f = Facts::default();
        let mut acks_raw = Vec::new();
        for op in ops {
            // Limits do not matter here: the workload's requests are well-formed, and a
            // request that does not parse changed nothing (it was answered 400).
            let Ok(req) = parse_request(&op.request, 30_000, usize::MAX) else {
                continue;
            };
            match req {
                Request::Push(p) => f.read_push(op, &p),
                Request::Pop { route, query } => f.read_pop(op, &route, &query),
                Request::Ack(item) => acks_raw.push((op, vec![item])),
                Request::AckBatch(items) => acks_raw.push((op, items)),
                Request::Dlq(_) => f.read_dlq(op),
                Request::Extend(e) => f.extends.push(Extended {
                    op: op.id,
                    lease: e.lease_id.to_string(),
                    seconds: e.seconds,
                    read: read_extend(&op.answer),
                    invoke_ms: op.invoke_ms,
                    complete_ms: op.complete_ms,
                }),
                Request::Transaction(_) => f.other_writers.push((op.id, None, op.invoke_ms)),
                Request::DeleteQueue(q) => f.other_writers.push((op.id, Some(q), op.invoke_ms)),
                _ => {}
            }
        }
        // Acks last: their partition ids are resolved with every pop answer read.
        for (op, items) in acks_raw {
            f.read_acks(op, items);
        }
        f
    }

    fn read_pop(&mut self, op: &Op, route: &PopRoute, query: &queen_reference::wire::PopQuery) {
        let (queue, partition) = match route {
            PopRoute::Queue(q) => (Some(q.clone()), None),
            PopRoute::Partition(q, p) => (Some(q.clone()), Some(p.clone())),
            PopRoute::Discovery { .. } => (None, None),
        };
        let lease_min_ms = query.lease_seconds.map(|s| s as Millis * 1000);
        let msgs = match read_pop(&op.answer) {
            PopRead::Empty => return,
            PopRead::Delivered(m) => m,
            PopRead::Blind => {
                // An autoAck pop takes no lease (POP-7): nothing of it can hold a partition.
                if !query.auto_ack {
                    self.blind_pops.push(BlindPop {
                        op: op.id,
                        queue,
                        partition,
                        group: query.consumer_group.clone(),
                        invoke_ms: op.invoke_ms,
                        complete_ms: op.complete_ms,
                        unknown: op.is_unknown(),
                        lease_min_ms,
                    });
                }
                return;
            }
        };
        let mut by_part: Vec<Delivery> = Vec::new();
        for m in msgs {
            // Discovery pops do not name the queue per message (POP-5): such messages
            // are identified through the partition id, if known; so is a message whose
            // answer leaves its partition's name out.
            let learnt = self.partitions.get(&m.partition_id).cloned();
            let Some(q) = queue.clone().or_else(|| learnt.clone().map(|l| l.0)) else {
                continue;
            };
            let Some(pname) = m.partition.clone().or_else(|| learnt.map(|l| l.1)) else {
                continue;
            };
            self.partitions
                .insert(m.partition_id.clone(), (q.clone(), pname.clone()));
            let key = MsgKey {
                queue: q,
                partition: pname,
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
                    lease_min_ms,
                    auto_ack: query.auto_ack,
                }),
            }
        }
        self.deliveries.extend(by_part);
    }

    fn read_dlq(&mut self, op: &Op) {
        let Some(a) = known(op) else { return };
        let Some(body) = a
            .body
            .clone()
            .filter(|_| a.status == 200)
            .and_then(|b| serde_json::from_value::<DlqResponse>(b).ok())
        else {
            return;
        };
        for d in body.messages {
            self.partitions.insert(
                d.partition_id.clone(),
                (d.queue.clone(), d.partition.clone()),
            );
            let group = if d.consumer_group.is_empty() {
                QUEUE_MODE.to_string()
            } else {
                d.consumer_group
            };
            self.dead.insert((
                group,
                MsgKey {
                    queue: d.queue,
                    partition: d.partition,
                    txn: d.transaction_id,
                },
            ));
        }
    }

    /// Every item of an ack call, with its result where the answer reads (a known
    /// answer that does not read, even a 4xx to a well-formed call, is unknown: maybe
    /// applied).
    fn read_acks(&mut self, op: &Op, items: Vec<queen_reference::wire::AckItem>) {
        let results = read_acks(&op.answer);
        for (i, it) in items.into_iter().enumerate() {
            let msg = self
                .partitions
                .get(it.partition_id.as_str())
                .map(|(q, p)| MsgKey {
                    queue: q.clone(),
                    partition: p.clone(),
                    txn: it.transaction_id.clone(),
                });
            self.acks.push(Acked {
                op: op.id,
                group: it.consumer_group,
                partition_id: it.partition_id.to_string(),
                msg,
                status: it.status,
                lease: it.lease_id.map(|l| l.to_string()),
                result: results.as_ref().and_then(|r| r.get(i).cloned().flatten()),
                invoke_ms: op.invoke_ms,
                complete_ms: op.complete_ms,
            });
        }
    }

    fn read_push(&mut self, op: &Op, p: &queen_reference::wire::PushRequest) {
        let results = match read_push(&op.answer) {
            // A 4xx wrote nothing (400, 413).
            PushRead::Refused => return,
            PushRead::Unknown => None,
            PushRead::Items(r) => Some(r),
        };
        for (i, it) in p.items.iter().enumerate() {
            let r = results.as_ref().and_then(|r| r.get(i));
            let txn = match (&it.transaction_id, r.and_then(|r| r.transaction_id.clone())) {
                (Some(t), _) => t.clone(),
                (None, Some(t)) => t,
                // A minted id we never learnt: this item cannot be followed.
                (None, None) => continue,
            };
            // An item the answer leaves out or does not read is unknown, like a lost
            // answer.
            let fate = match r.and_then(|r| r.status) {
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

    /// The pushes of `key` that must not be lost: answered `queued` or `buffered`.
    pub fn required(&self, key: &MsgKey) -> Vec<usize> {
        self.pushes.get(key).map_or(vec![], |ps| {
            ps.iter()
                .filter(|p| matches!(p.fate, Fate::Queued | Fate::Buffered))
                .map(|p| p.op)
                .collect()
        })
    }

    /// The messages of `queue` that must not be lost and have not reached `group`.
    pub fn missing(&self, queue: &str, group: &str) -> Vec<&MsgKey> {
        let reached: BTreeSet<&MsgKey> = self
            .deliveries
            .iter()
            .filter(|d| d.group == group)
            .flat_map(|d| d.msgs.iter())
            .chain(self.dead.iter().filter(|(g, _)| g == group).map(|(_, k)| k))
            .collect();
        self.pushes
            .keys()
            .filter(|k| k.queue == queue && !reached.contains(k) && !self.required(k).is_empty())
            .collect()
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
