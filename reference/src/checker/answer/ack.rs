//! One item of an ack answer: whether it was applied and what it did to the state
//! (a lease released, a dead letter filed) are hard, its wording is soft.

use super::cx::Cx;
use super::{hard, Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::*;
use crate::rules::*;
use crate::time::Stamp;
use crate::wire::*;
use serde_json::{json, Value};

/// The rule an ack item's expected answer is decided by.
fn ack_rule(e: &AckResult) -> RuleId {
    match e.error.as_deref() {
        Some(ERR_INVALID_LEASE) => ACK_5,
        Some(_) => ACK_3,
        None if e.noop => ACK_3,
        None if e.dlq => ACK_6,
        None => ACK_1,
    }
}

pub(super) fn ack_item(cx: &mut Cx, o: &AckOut, a: &Value, path: &str) -> Check {
    let e = &o.result;
    let success = a
        .get("success")
        .and_then(Value::as_bool)
        .ok_or_else(|| Miss {
            rule: ACK_0,
            why: format!(
                "ack item {}: no boolean `success`: whether it was applied cannot be read",
                e.index
            ),
        })?;
    cx.is(
        a,
        path,
        "index",
        json!(e.index as u64),
        ACK_0,
        "`index` is not the item's position",
    )?;
    let error = match a.get("error") {
        None => {
            cx.soft(
                Finding::new(ACK_0, Kind::MissingField, "`error` is missing")
                    .at(format!("{path}.error")),
            )?;
            None
        }
        Some(v) => v.as_str(),
    };
    if o.may_fail && !success {
        // ACK step 6 [OPEN]: a blocked completion may be refused with an error.
        return cx.expect(error.is_some_and(|s| !s.is_empty()), || {
            Finding::new(
                ACK_0,
                Kind::MissingField,
                "a refused ack item without an error",
            )
            .at(format!("{path}.error"))
        });
    }
    let rule = ack_rule(e);
    hard(success == e.success, rule, || {
        format!(
            "ack item {}: success {success} where {} is expected ({})",
            e.index,
            e.success,
            e.error.as_deref().unwrap_or("applied")
        )
    })?;
    cx.is(
        a,
        path,
        "transactionId",
        json!(e.transaction_id),
        ACK_0,
        "`transactionId` is not the item's",
    )?;
    error_text(cx, rule, e, error, path)?;
    // These three say what the ack did (a dead letter filed, a lease released, a cursor
    // already past): when present, another value is another state, not another wording.
    // Where the message went is read first: a lease kept or released follows from it.
    let dlq = cx.bool(a, path, "dlq", ACK_6)?;
    state_flag(dlq, e.dlq, e.index, "dlq", ACK_6)?;
    let released = cx.bool(a, path, "leaseReleased", ACK_0)?;
    match (&o.released, released) {
        (Some((ph, group)), Some(false)) if cx.j.keep_going => kept_lease(cx, *ph, group, e.index)?,
        _ => {
            let rule = if e.lease_released { ACK_1 } else { ACK_STEP_5 };
            state_flag(released, e.lease_released, e.index, "leaseReleased", rule)?;
        }
    }
    let noop = cx.bool(a, path, "noop", ACK_3)?;
    state_flag(noop, e.noop, e.index, "noop", ACK_3)
}

/// The error an ack item shows against the one due: its wording is what the broker
/// says, so each difference is soft.
fn error_text(cx: &mut Cx, rule: RuleId, e: &AckResult, error: Option<&str>, path: &str) -> Check {
    match (&e.error, error) {
        (Some(want), Some(got)) if want != got => cx.soft(
            Finding::new(
                rule,
                Kind::ErrorText,
                format!("the error {want:?} is worded otherwise"),
            )
            .at(format!("{path}.error"))
            .example(format!("{got:?} where {want:?} is expected")),
        )?,
        (Some(_), None) => cx.soft(
            Finding::new(
                rule,
                Kind::MissingField,
                "a refused ack item without an error",
            )
            .at(format!("{path}.error")),
        )?,
        (None, Some(got)) => cx.soft(
            Finding::new(ACK_0, Kind::Value, "an accepted ack item carries an error")
                .at(format!("{path}.error"))
                .example(got.to_string()),
        )?,
        _ => {}
    }
    Ok(())
}

/// A broker that says it kept the lease an ack released by the protocol (ACK-1: the
/// span is acked away): followed, in keep-going mode, as the lease it held before the
/// call, live until some time before its deadline (the broker decides when it lets
/// go), so later pops are judged by it instead of failing every case on the way.
fn kept_lease(cx: &mut Cx, ph: PartH, group: &str, index: usize) -> Check {
    let held = cx
        .before
        .part(ph)
        .and_then(|p| p.cursors.get(group))
        .and_then(|c| c.lease.clone());
    let Some(mut l) = held else {
        return hard(false, ACK_1, || {
            format!("ack item {index}: leaseReleased false where true is expected")
        });
    };
    l.deadline = Stamp::between(l.deadline.lo - l.duration_ms, l.deadline.hi);
    cx.w.state.cursor_mut(ph, group).lease = Some(l);
    cx.soft_state(
        Finding::new(
            ACK_1,
            Kind::KeptLease,
            "an ack that completes the leased span keeps the lease",
        )
        .example(format!("ack item {index} answered leaseReleased:false")),
    )
}

/// An ack item's flag that reports state: absent is a finding already; another value a miss.
fn state_flag(got: Option<bool>, want: bool, index: usize, key: &str, rule: RuleId) -> Check {
    hard(got.is_none_or(|g| g == want), rule, || {
        format!("ack item {index}: {key} {} where {want} is expected", !want)
    })
}
