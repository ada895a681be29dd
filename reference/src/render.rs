//! Turning an [`Outcome`] into a concrete HTTP answer.
//!
//! The engine renders with real ids (minted on first use) and exact times; the checker
//! renders the answers it expected, for a report, with placeholders such as
//! `<message 3>` for ids it has not learnt and time ranges for uncertain times.

use crate::ids::IdBook;
use crate::model::{Data, Outcome, PushOut, State, Trace, TxnItemOut};
use crate::policy::{AbsentPayload, PlainPushTrace, Policy};
use crate::time::Stamp;
use crate::wire::*;
use serde_json::{json, Value};

/// What a renderer needs besides the outcome.
pub struct Renderer<'a> {
    pub state: &'a State,
    pub ids: &'a mut IdBook,
    pub policy: &'a Policy,
    /// Makes an id for a handle the book does not know: (kind, handle number).
    pub mint: &'a mut dyn FnMut(&str, u32) -> String,
    /// Shows a moment.
    pub time: &'a dyn Fn(Stamp) -> String,
}

impl Renderer<'_> {
    /// The answer for `out`.
    pub fn render(&mut self, out: &Outcome) -> HttpResponse {
        let ok = |v: Value| HttpResponse {
            status: 200,
            body: Some(v),
        };
        match out {
            Outcome::Rejected(e) => HttpResponse {
                status: e.status,
                body: Some(json!({ "error": e.message })),
            },
            Outcome::DiscoveryRejected => HttpResponse {
                status: 400,
                body: Some(to_value(&DiscoveryError::new())),
            },
            Outcome::Push(items) => HttpResponse {
                status: 201,
                body: Some(Value::Array(
                    items
                        .iter()
                        .map(|p| to_value(&self.push_result(p)))
                        .collect(),
                )),
            },
            Outcome::PopEmpty => HttpResponse {
                status: 204,
                body: None,
            },
            Outcome::PopIllegal(_, why) => HttpResponse {
                status: 0,
                body: Some(json!({ "illegal": why })),
            },
            Outcome::Pop(p) => {
                let lease_id = match p.lease {
                    Some(h) => self.ids.leases.id_or_mint(h, || (self.mint)("lease", h.0)),
                    None => String::new(),
                };
                let messages: Vec<PopMessage> = p
                    .messages
                    .iter()
                    .map(|&(ph, off)| {
                        let part = self.state.part(ph).expect("delivered partition exists");
                        let m = part.at(off);
                        PopMessage {
                            id: self
                                .ids
                                .msgs
                                .id_or_mint(m.msg, || (self.mint)("message", m.msg.0)),
                            transaction_id: m.transaction_id.clone(),
                            trace_id: match &m.trace {
                                Trace::None => None,
                                Trace::Kept(t) => Some(t.clone()),
                                Trace::Either(t) => (self.policy.plain_push_trace
                                    == PlainPushTrace::Keep)
                                    .then(|| t.clone()),
                            },
                            data: self.data(&m.data),
                            producer_sub: None,
                            created_at: (self.time)(self.state.created(m)),
                            partition_id: self
                                .ids
                                .parts
                                .id_or_mint(ph, || (self.mint)("partition", ph.0)),
                            partition: part.name.clone(),
                            lease_id: lease_id.clone(),
                            consumer_group: p.group.clone(),
                        }
                    })
                    .collect();
                let first = self.state.part(p.first).expect("claimed partition exists");
                ok(to_value(&PopResponse {
                    success: true,
                    queue: p.queue.clone(),
                    partition: first.name.clone(),
                    partition_id: self
                        .ids
                        .parts
                        .id_or_mint(p.first, || (self.mint)("partition", p.first.0)),
                    lease_id,
                    consumer_group: p.group.clone(),
                    messages,
                    partitions_claimed: p.partitions_claimed,
                }))
            }
            Outcome::Ack(items) => ok(Value::Array(
                items.iter().map(|a| to_value(&a.result)).collect(),
            )),
            Outcome::Extend(e) => ok(to_value(&ExtendResponse {
                lease_id: e.lease_id.clone(),
                success: e.renewed > 0,
                renewed: e.renewed,
                expires_at: e.expires_at.map(|t| (self.time)(t)),
                error: (e.renewed == 0).then(|| ERR_LEASE_NOT_FOUND.to_string()),
            })),
            Outcome::Txn(t) => {
                let results = t
                    .results
                    .iter()
                    .map(|r| match r {
                        TxnItemOut::Push(p) => TxnResult::Push(self.push_result(p)),
                        TxnItemOut::Ack(a) => TxnResult::Ack(a.result.clone()),
                    })
                    .collect();
                ok(to_value(&TxnResponse {
                    transaction_id: (self.mint)("transaction", 0),
                    success: t.success,
                    results,
                    error: t.error.clone(),
                }))
            }
            Outcome::Configure(c) => ok(to_value(c)),
            Outcome::Delete(d) => ok(to_value(d)),
            Outcome::Dlq(d) => {
                let messages = d
                    .items
                    .iter()
                    .map(|&i| {
                        let rec = &self.state.dead_letters[i];
                        let part = self
                            .state
                            .part(rec.part)
                            .expect("dead letters of live queues");
                        let m = part.at(rec.offset);
                        DeadLetter {
                            id: self
                                .ids
                                .msgs
                                .id_or_mint(m.msg, || (self.mint)("message", m.msg.0)),
                            transaction_id: m.transaction_id.clone(),
                            partition_id: self
                                .ids
                                .parts
                                .id_or_mint(rec.part, || (self.mint)("partition", rec.part.0)),
                            partition: part.name.clone(),
                            queue: part.queue.clone(),
                            consumer_group: rec.group.clone(),
                            error_message: rec.error.clone(),
                            retry_count: rec.retry_count,
                            data: self.data(&m.data),
                            created_at: (self.time)(self.state.created(m)),
                            failed_at: (self.time)(rec.failed_at),
                        }
                    })
                    .collect();
                ok(to_value(&DlqResponse {
                    messages,
                    total: d.total,
                    limit: d.limit,
                    offset: d.offset,
                }))
            }
            Outcome::Maintenance { enabled, buffered } => ok(to_value(&MaintenanceResponse {
                maintenance_mode: *enabled,
                buffered_messages: *buffered,
            })),
            Outcome::PopMaintenance { enabled } => ok(to_value(&PopMaintenanceResponse {
                pop_maintenance_mode: *enabled,
            })),
            Outcome::Health => ok(to_value(&HealthResponse {
                status: "healthy".into(),
                database: "connected".into(),
            })),
        }
    }

    fn push_result(&mut self, p: &PushOut) -> PushResult {
        let message_id = match p.msg {
            Some(h) => self.ids.msgs.id_or_mint(h, || (self.mint)("message", h.0)),
            None => (self.mint)("buffered message", p.index as u32),
        };
        PushResult {
            index: p.index,
            message_id,
            transaction_id: p.transaction_id.clone(),
            queue_name: p.queue.clone(),
            status: p.status,
        }
    }

    fn data(&self, d: &Data) -> Value {
        match d {
            Data::Value(v) => (**v).clone(),
            Data::Absent => match self.policy.absent_payload {
                AbsentPayload::Null => Value::Null,
                AbsentPayload::EmptyObject => json!({}),
            },
        }
    }
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("wire types serialize")
}
