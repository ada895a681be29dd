//! Transactions (PROTOCOL.md section 7): pushes and acks applied to a copy of the
//! state, kept only if every ack succeeds.

use super::ack::{ack, AckIn, LeaseRef};
use super::capacity;
use super::outcome::{PushOut, TxnItemOut, TxnOut};
use super::push::{push, PushKind, TxnMinter};
use super::state::State;
use crate::choice::Ctx;
use crate::policy::ChoicePoint;
use crate::rules::{RuleId, TXN_2, TXN_6};
use crate::wire::PushItem;

/// One operation with its ids resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum TxnOpIn {
    /// A push operation's items (section 2).
    Push(Vec<PushItem>),
    /// One acknowledgment, its ids resolved (section 4).
    Ack(AckIn),
}

/// TXN-4's refusal text.
pub const TXN_MAINTENANCE_ERROR: &str =
    "push maintenance is on: a transaction with a push cannot be spooled; try again later";

/// TXN-4 \[PROJECT\]: under push maintenance a transaction with a push is refused (503),
/// since it cannot be spooled as a unit; another broker may write it anyway.
pub(crate) fn refused_under_maintenance(
    st: &State,
    ops: &[TxnOpIn],
    ctx: &mut Ctx,
) -> Option<crate::wire::WireError> {
    let pushes = ops.iter().any(|o| matches!(o, TxnOpIn::Push(_)));
    let refused = st.push_maintenance
        && pushes
        && !ctx.project(
            ChoicePoint::TxnWritesUnderMaintenance,
            crate::rules::TXN_4,
            "wrote a transaction's push while push maintenance was on (ours: 503)",
        );
    refused.then(|| crate::wire::WireError {
        rule: None,
        status: 503,
        message: TXN_MAINTENANCE_ERROR.into(),
    })
}

/// TXN-1..3. `required` are the `requiredLeases`: each must be a live lease
/// (TXN-6), else the transaction aborts. A push past a queue's `maxSize` refuses it
/// (RET-5: the error, nothing applied). `minter` is asked for transactionIds by the
/// running index of pushed items across the call.
pub(crate) fn transaction(
    st: &mut State,
    ops: &[TxnOpIn],
    required: &[(LeaseRef, String)],
    minter: &mut dyn TxnMinter,
    ctx: &mut Ctx,
) -> Result<TxnOut, crate::wire::WireError> {
    let abort = |rule: RuleId, error: String| {
        Ok(TxnOut {
            success: false,
            results: vec![],
            error: Some(crate::wire::rolled_back(&error)),
            rule,
        })
    };
    let not_held = required
        .iter()
        .find(|(lease, _)| !lease_live(st, lease, ctx));
    if let Some((_, id)) = not_held {
        if !ctx.project(
            ChoicePoint::TxnIgnoresRequiredLeases,
            TXN_6,
            "committed a transaction whose required lease is not live (ours: it is refused)",
        ) {
            if ctx.deviates(crate::variant::Variant::TxnNotAtomic) {
                push_all(st, ops, minter, ctx);
            }
            return abort(TXN_6, crate::wire::lease_not_held(id));
        }
    }
    let mut work = st.clone();
    let mut results = Vec::new();
    let mut pushed = 0usize;
    for (i, op) in ops.iter().enumerate() {
        match op {
            TxnOpIn::Push(items) => {
                let before = capacity::capped(&work, items).then(|| work.clone());
                let outs = push_op(&mut work, items, &mut pushed, minter, ctx);
                // RET-5: a push past a queue's maxSize refuses the whole transaction.
                if let Some(e) = before.and_then(|b| capacity::refusal(&b, &work, &outs, ctx)) {
                    return Err(e);
                }
                for mut o in outs {
                    o.index = results.len();
                    results.push(TxnItemOut::Push(o));
                }
            }
            TxnOpIn::Ack(item) => {
                let mut out = ack(&mut work, std::slice::from_ref(item), ctx).remove(0);
                // TXN-2 [PROJECT]: any ack that would answer success:false aborts
                // everything; another broker may commit and report the failed ack.
                if !out.result.success
                    && !ctx.project(
                        ChoicePoint::TxnKeepsFailedAck,
                        TXN_2,
                        "committed a transaction containing an ack that answered success:false (ours: it aborts)",
                    )
                {
                    let why = out.result.error.take().unwrap_or_default();
                    if ctx.deviates(crate::variant::Variant::TxnNotAtomic) {
                        *st = work;
                    }
                    return abort(
                        TXN_2,
                        format!(
                            "operations[{i}]: ack of {} failed: {why}",
                            item.transaction_id
                        ),
                    );
                }
                out.result.index = results.len();
                results.push(TxnItemOut::Ack(out));
            }
        }
    }
    *st = work;
    Ok(TxnOut {
        success: true,
        results,
        error: None,
        rule: refusal_rule(ops, required),
    })
}

/// What a broker that is not atomic keeps of a transaction refused before it ran: every
/// push operation, written as if the transaction had run.
fn push_all(st: &mut State, ops: &[TxnOpIn], minter: &mut dyn TxnMinter, ctx: &mut Ctx) {
    let mut pushed = 0usize;
    for op in ops {
        if let TxnOpIn::Push(items) = op {
            push_op(st, items, &mut pushed, minter, ctx);
        }
    }
}

/// One push operation of a transaction. Its transactionIds are minted by the running
/// index across the call: `pushed` counts the items of the operations before it.
fn push_op(
    st: &mut State,
    items: &[PushItem],
    pushed: &mut usize,
    minter: &mut dyn TxnMinter,
    ctx: &mut Ctx,
) -> Vec<PushOut> {
    let base = *pushed;
    let mut shifted = |j: usize| minter.mint_txn(base + j);
    let outs = push(st, items, PushKind::Transaction, &mut shifted, ctx);
    *pushed += items.len();
    outs
}

/// Whether `lease` is the live lease of some `(partition, group)` (TXN-6).
fn lease_live(st: &State, lease: &LeaseRef, ctx: &mut Ctx) -> bool {
    let LeaseRef::Known(h) = lease else {
        return false;
    };
    st.holders_of(*h).iter().any(|(ph, g)| {
        let deadline = st
            .part(*ph)
            .and_then(|p| p.cursors.get(g))
            .and_then(|c| c.lease.as_ref())
            .filter(|l| l.id == *h)
            .map(|l| l.deadline);
        deadline.is_some_and(|d| ctx.now_before(d))
    })
}

/// The rule a broker departs from when it refuses a transaction the model commits: the
/// acks' (TXN-2) when there are any, else the required leases' (TXN-6), else the
/// pushes' (TXN-2 again: they follow section 2).
fn refusal_rule(ops: &[TxnOpIn], required: &[(LeaseRef, String)]) -> RuleId {
    let acks = ops.iter().any(|o| matches!(o, TxnOpIn::Ack(_)));
    if !acks && !required.is_empty() {
        TXN_6
    } else {
        TXN_2
    }
}
