//! One item of an ack answer: whether it was applied and what it did to the state
//! (a lease released, a dead letter filed) are hard, its wording is soft.

use super::cx::Cx;
use super::{hard, Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::*;
use crate::rules::*;
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
    // already past). What a broker says is not what it did: another value is a flag
    // finding, and the state is judged by what later answers show (a pop, an extend).
    // What `dlq` and `leaseReleased` report is step 5's (PROJECT); the state itself,
    // a dead letter filed or a lease released, is ACK-6's and ACK-1's, judged later.
    let dlq = cx.bool(a, path, "dlq", ACK_0)?;
    flag(cx, dlq, e.dlq, path, "dlq", ACK_STEP_5)?;
    let released = cx.bool(a, path, "leaseReleased", ACK_0)?;
    flag(
        cx,
        released,
        e.lease_released,
        path,
        "leaseReleased",
        ACK_STEP_5,
    )?;
    let noop = cx.bool(a, path, "noop", ACK_3)?;
    flag(cx, noop, e.noop, path, "noop", ACK_3)
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

/// An ack item's flag that reports state: absent is a finding already; another value a
/// [`Kind::Flag`] finding (the state it names is judged by later answers).
fn flag(cx: &mut Cx, got: Option<bool>, want: bool, path: &str, key: &str, rule: RuleId) -> Check {
    match got {
        Some(g) if g != want => cx.flag(
            Finding::new(
                rule,
                Kind::Flag,
                format!(
                    "`{key}` says {g} where the ack did {}",
                    if want { "so" } else { "not" }
                ),
            )
            .at(format!("{path}.{key}"))
            .example(format!("{g} where {want} is expected")),
        ),
        _ => Ok(()),
    }
}
