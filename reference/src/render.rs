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
pub(crate) struct Renderer<'a> {
    /// The model state the outcome was reached in.
    pub state: &'a State,
    /// The ids known for that state, extended with any the renderer makes.
    pub ids: &'a mut IdBook,
    /// How the points the spec leaves open are answered.
    pub policy: &'a Policy,
    /// Makes an id for a handle the book does not know: (kind, handle number).
    pub(crate) mint: &'a mut dyn FnMut(&str, u32) -> String,
    /// Shows a moment.
    pub(crate) time: &'a dyn Fn(Stamp) -> String,
}

impl Renderer<'_> {
    /// The answer for `out`, as it goes on the wire; a pop the checker found illegal in
    /// some world is shown as status 0 with the reason.
    pub(crate) fn render(&mut self, out: &Outcome) -> HttpResponse {
        match out {
            Outcome::PopIllegal(_, why) => HttpResponse {
                status: 0,
                body: Some(json!({ "illegal": why })),
            },
            out => self.answer(out).into_http(),
        }
    }

    /// The typed answer for `out`. An engine never meets an illegal pop (its policy
    /// picks a legal one); were it to, the broker failed, and says so as a 500.
    pub(crate) fn answer(&mut self, out: &Outcome) -> Answer {
        match out {
            Outcome::Rejected(e) => Answer::error(e.status, &e.message),
            Outcome::DiscoveryRejected => Answer::DiscoveryScope,
            Outcome::Push(items) => {
                Answer::Pushed(items.iter().map(|p| self.push_result(p)).collect())
            }
            Outcome::PopEmpty => Answer::Empty,
            Outcome::PopIllegal(_, why) => Answer::error(500, format!("illegal pop: {why}")),
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
                            data: crate::wire::RawJson::from_value(&self.data(&m.data)),
                            producer_sub: m.producer_sub.as_deref().map(str::to_string),
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
                Answer::Popped(PopResponse {
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
                })
            }
            Outcome::Ack(items) => Answer::Acked(items.iter().map(|a| a.result.clone()).collect()),
            Outcome::Extend(e) => Answer::Extended(ExtendResponse {
                lease_id: e.lease_id.clone(),
                success: e.renewed > 0,
                renewed: e.renewed,
                expires_at: e.expires_at.map(|t| (self.time)(t)),
                error: (e.renewed == 0).then(|| ERR_LEASE_NOT_FOUND.to_string()),
            }),
            Outcome::Txn(t) => {
                let results = t
                    .results
                    .iter()
                    .map(|r| match r {
                        TxnItemOut::Push(p) => TxnResult::Push(self.push_result(p)),
                        TxnItemOut::Ack(a) => TxnResult::Ack(a.result.clone()),
                    })
                    .collect();
                Answer::Transaction(TxnResponse {
                    transaction_id: (self.mint)("transaction", 0),
                    success: t.success,
                    results,
                    error: t.error.clone(),
                })
            }
            Outcome::Configure(c) => Answer::Configured(c.clone()),
            Outcome::Delete(d) => Answer::Deleted(d.clone()),
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
                            data_error: None,
                            created_at: (self.time)(self.state.created(m)),
                            failed_at: (self.time)(rec.failed_at),
                        }
                    })
                    .collect();
                Answer::Dlq(DlqResponse {
                    messages,
                    total: d.total,
                    limit: d.limit,
                    offset: d.offset,
                })
            }
            Outcome::Maintenance { enabled, buffered } => {
                Answer::PushMaintenance(MaintenanceResponse {
                    maintenance_mode: *enabled,
                    buffered_messages: *buffered,
                })
            }
            Outcome::PopMaintenance { enabled } => Answer::PopMaintenance(PopMaintenanceResponse {
                pop_maintenance_mode: *enabled,
            }),
            Outcome::Health => Answer::Health(HealthResponse::new(HEALTHY, "connected")),
            Outcome::View { route, value, .. } => {
                match View::from_value(*route, self.resolve(value)) {
                    Ok(view) => Answer::View(view),
                    Err(why) => Answer::error(500, why),
                }
            }
        }
    }

    /// A management view with its symbols replaced: ids from the book (minted on first
    /// use), times shown as the renderer shows them, an open value as `null`.
    fn resolve(&mut self, v: &Value) -> Value {
        use crate::model::views::sym::{self, Sym};
        match v {
            Value::String(s) => match sym::read(s) {
                None => v.clone(),
                Some(Sym::Part(h)) => Value::String(
                    self.ids
                        .parts
                        .id_or_mint(h, || (self.mint)("partition", h.0)),
                ),
                Some(Sym::Msg(h)) => {
                    Value::String(self.ids.msgs.id_or_mint(h, || (self.mint)("message", h.0)))
                }
                Some(Sym::Time(t)) => Value::String((self.time)(t)),
                Some(Sym::Any) => Value::Null,
            },
            Value::Array(a) => Value::Array(a.iter().map(|x| self.resolve(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.resolve(x)))
                    .collect(),
            ),
            other => other.clone(),
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
            Data::Value(v) => v.value(),
            Data::Absent => match self.policy.absent_payload {
                AbsentPayload::Null => Value::Null,
                AbsentPayload::EmptyObject => json!({}),
            },
        }
    }
}
