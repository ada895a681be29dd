//! The reference model: a pure state machine over [`State`], one module per part of
//! the protocol. [`apply`] runs one operation under a [`Ctx`] (policy or exploring).
//!
//! Operations take ids already resolved to the model's handles ([`Op`]); turning wire
//! requests with real UUIDs into an [`Op`] is the job of an [`crate::ids::IdBook`].

pub mod ack;
pub mod admin;
pub mod analytics;
pub mod capacity;
pub mod deletion;
pub mod groups;
mod join;
pub mod lease;
pub mod outcome;
pub mod pop;
pub mod push;
pub mod redrive;
pub mod retention;
pub mod state;
pub mod txn;
pub mod txn_index;
pub mod views;

pub use ack::{AckIn, LeaseRef};
pub use outcome::*;
pub use pop::PopRequest;
pub use push::{PushKind, TxnMinter};
pub use state::*;
pub use txn::TxnOpIn;

use crate::choice::Ctx;
use crate::rules::*;
use crate::wire::{ConfigureRequest, DlqQuery, ManageRequest, PushItem, WireError};

/// One operation on the model, with ids resolved to handles.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A request the wire layer rejected: nothing changes.
    Rejected(WireError),
    /// A discovery pop without scope (POP-10).
    DiscoveryRejected,
    /// A push's items (section 2).
    Push(Vec<PushItem>),
    /// A pop (section 3).
    Pop(PopRequest),
    /// Single and batch acks answer the same array.
    Ack(Vec<AckIn>),
    /// A lease extend (section 5).
    Extend {
        /// The lease the path names, as the model knows it.
        lease: LeaseRef,
        /// The lease id as the client sent it, echoed in the answer.
        lease_id: String,
        /// `seconds`, or `None` for the lease's own duration (LEASE-3).
        seconds: Option<u32>,
    },
    /// A transaction (section 7).
    Txn {
        /// Its operations, in order.
        ops: Vec<TxnOpIn>,
        /// The `requiredLeases` that must all be live, each with the id as sent.
        required: Vec<(LeaseRef, String)>,
    },
    /// A configure (section 8).
    Configure(ConfigureRequest),
    /// A queue delete, naming the queue (DEL-1).
    Delete(String),
    /// A dead-letter listing (DLQ-2).
    Dlq(DlqQuery),
    /// Turns push maintenance on or off (MAINT-1).
    SetPushMaintenance(bool),
    /// Reads the push maintenance switch (MAINT-1).
    GetPushMaintenance,
    /// Turns pop maintenance on or off (MAINT-2).
    SetPopMaintenance(bool),
    /// Reads the pop maintenance switch (MAINT-2).
    GetPopMaintenance,
    /// The health check (HEALTH-1).
    Health,
    /// Section 17; `part` is the partition a per-message read names, when known.
    Manage {
        /// The management request.
        req: ManageRequest,
        /// The partition a per-message read names, when the model knows it.
        part: Option<PartH>,
    },
}

/// Choices observed in a broker's answer that the model must follow rather than make.
pub struct Hints<'a> {
    /// Mints (engine) or reads back (checker) transactionIds for items without one.
    pub minter: &'a mut dyn TxnMinter,
    /// The partitions a pop was observed to claim, in order (POP-4).
    pub pop_order: Option<&'a [PartH]>,
}

/// Applies `op` to `st` and returns the model's answer.
pub fn apply(st: &mut State, op: &Op, hints: &mut Hints, ctx: &mut Ctx) -> Outcome {
    // RET-3: whatever retention has removed by now is gone before the request looks.
    retention::sweep(st, ctx);
    // MAINT-3: a spool replay still running may have finished by now.
    admin::settle_spool(st, ctx);
    match op {
        Op::Rejected(e) => Outcome::Rejected(e.clone()),
        Op::DiscoveryRejected => Outcome::DiscoveryRejected,
        Op::Push(items) if !st.push_maintenance && capacity::capped(st, items) => {
            let mut work = st.clone();
            let out = push::push(&mut work, items, PushKind::Plain, hints.minter, ctx);
            match capacity::refusal(st, &work, &out, ctx) {
                Some(e) => Outcome::Rejected(e),
                None => {
                    *st = work;
                    Outcome::Push(out)
                }
            }
        }
        Op::Push(items) => Outcome::Push(push::push(st, items, PushKind::Plain, hints.minter, ctx)),
        Op::Pop(req) => pop::pop(st, req, hints.pop_order, ctx),
        Op::Ack(items) => Outcome::Ack(ack::ack(st, items, ctx)),
        Op::Extend {
            lease,
            lease_id,
            seconds,
        } => Outcome::Extend(lease::extend(st, *lease, lease_id, *seconds, ctx)),
        Op::Txn { ops, required } => match txn::refused_under_maintenance(st, ops, ctx) {
            Some(e) => Outcome::Rejected(e),
            None => match txn::transaction(st, ops, required, hints.minter, ctx) {
                Ok(out) => Outcome::Txn(out),
                Err(e) => Outcome::Rejected(e),
            },
        },
        Op::Configure(req) => match admin::encryption_refused(req, ctx) {
            Some(e) => Outcome::Rejected(e),
            None => Outcome::Configure(admin::configure(st, req)),
        },
        Op::Delete(name) => Outcome::Delete(admin::delete_queue(st, name, ctx)),
        Op::Dlq(q) => Outcome::Dlq(admin::list_dlq(st, q)),
        Op::SetPushMaintenance(on) => admin::set_push_maintenance(st, *on, ctx),
        Op::GetPushMaintenance => admin::push_maintenance(st),
        Op::SetPopMaintenance(on) => {
            st.pop_maintenance = *on;
            Outcome::PopMaintenance { enabled: *on }
        }
        Op::GetPopMaintenance => Outcome::PopMaintenance {
            enabled: st.pop_maintenance,
        },
        Op::Health => Outcome::Health,
        Op::Manage { req, part } => manage(st, req, *part, hints, ctx),
    }
}

/// A management request: a read through [`views`] (which cannot change the state), or
/// one of the writes of [`groups`], [`redrive`] and [`deletion`].
fn manage(
    st: &mut State,
    req: &ManageRequest,
    part: Option<PartH>,
    hints: &mut Hints,
    ctx: &mut Ctx,
) -> Outcome {
    let answer = match req {
        ManageRequest::Seek {
            group,
            queue,
            partition,
            to,
        } => groups::seek(st, group, queue, partition.as_deref(), *to, ctx).map(|r| to_json(&r)),
        ManageRequest::Subscription { group, at } => {
            Ok(to_json(&groups::subscription(st, group, *at, ctx)))
        }
        ManageRequest::Retry {
            partition_id,
            transaction_id,
        } => redrive::retry(st, part, partition_id, transaction_id, hints.minter, ctx).map(
            |(pushed, retried)| {
                to_json(&crate::wire::RetryResponse {
                    success: true,
                    transaction_id: pushed.transaction_id,
                    message_id: views::sym::msg(pushed.msg.expect("a retry writes")),
                    retried,
                })
            },
        ),
        ManageRequest::DeleteMessage { .. }
            if ctx.project(
                crate::policy::ChoicePoint::MessageDeleteRefused,
                MGMT_11,
                "refused the delete of one message by its address (ours: deleted)",
            ) =>
        {
            Err(crate::wire::WireError {
                rule: None,
                status: 405,
                message: crate::wire::MESSAGE_DELETE_REFUSED.into(),
            })
        }
        ManageRequest::DeleteMessage {
            partition_id,
            transaction_id,
        } => deletion::delete_message(st, part, partition_id, transaction_id).map(|msg| {
            to_json(&crate::wire::MessageDeleted {
                success: true,
                partition_id: partition_id.as_str().to_string(),
                transaction_id: transaction_id.clone(),
                message_id: views::sym::msg(msg),
            })
        }),
        ManageRequest::DeleteGroup {
            group,
            queue,
            delete_metadata,
        } => Ok(to_json(&groups::delete_group(
            st,
            group,
            queue.as_deref(),
            *delete_metadata,
        ))),
        read => views::read(st, read, part, ctx),
    };
    match answer {
        Ok(value) => Outcome::View {
            rule: req.rule(),
            route: req.route(),
            value,
        },
        Err(e) => Outcome::Rejected(e),
    }
}

fn to_json<T: serde::Serialize>(t: &T) -> serde_json::Value {
    serde_json::to_value(t).expect("answers serialize")
}
