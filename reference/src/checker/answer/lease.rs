//! An extend answer: how many leases were renewed and until when are state (hard);
//! the rest of the object is what the broker says about it.

use super::cx::Cx;
use super::time::check_format;
use super::{hard, Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::*;
use crate::rules::*;
use crate::time::format_iso;
use crate::wire::*;
use serde_json::{json, Value};

pub(super) fn extend(cx: &mut Cx, e: &ExtendOut, actual: &HttpResponse) -> Check {
    // A 4xx to an extend the model takes: the broker validates the body otherwise, and
    // which bodies are valid is LEASE-3's to say.
    hard(actual.status / 100 != 4, LEASE_3, || {
        format!(
            "status {} to an extend with a valid body (absent, empty or a positive `seconds`)",
            actual.status
        )
    })?;
    cx.status(200, actual.status, LEASE_2)?;
    let mut b = actual.body.as_ref();
    if let Some(Value::Array(a)) = b {
        if a.len() == 1 && a[0].is_object() {
            cx.soft(
                Finding::new(
                    LEASE_2,
                    Kind::Shape,
                    "the extend answer is an array holding the object",
                )
                .at("$"),
            )?;
            b = a.first();
        }
    }
    let b = b.filter(|b| b.is_object()).ok_or_else(|| Miss {
        rule: LEASE_2,
        why: "the extend answer must be a JSON object".into(),
    })?;
    let renewed = b
        .get("renewed")
        .and_then(Value::as_u64)
        .ok_or_else(|| Miss {
            rule: LEASE_2,
            why: "no integer `renewed`: what was renewed cannot be read".into(),
        })?;
    hard(renewed == e.renewed as u64, LEASE_1, || {
        format!(
            "renewed {renewed} where {} live leases have that id",
            e.renewed
        )
    })?;
    cx.is(
        b,
        "$",
        "leaseId",
        json!(e.lease_id),
        LEASE_2,
        "`leaseId` is not the path's",
    )?;
    cx.is(
        b,
        "$",
        "success",
        json!(e.renewed > 0),
        LEASE_2,
        "`success` does not say whether anything was renewed",
    )?;
    expires_at(cx, e, b)?;
    if e.renewed == 0 {
        let error = b.get("error").and_then(Value::as_str);
        cx.expect(error.is_some_and(|s| !s.is_empty()), || {
            Finding::new(
                LEASE_2,
                Kind::MissingField,
                "a failed extend carries no error",
            )
            .at("$.error")
        })?;
    }
    Ok(())
}

/// The new deadline the extend answers, when it shows one: a time the model allows.
fn expires_at(cx: &mut Cx, e: &ExtendOut, b: &Value) -> Check {
    match (cx.get(b, "$", "expiresAt", LEASE_2)?, e.expires_at) {
        (None, _) | (Some(Value::Null), None) => {}
        (Some(Value::String(t)), Some(s)) => {
            // The deadline is state: another one is another lease duration, the queue's
            // (POP-9) when the extend named no seconds, else the extend's own (LEASE-1).
            let rule = if e.own_duration { POP_9 } else { LEASE_1 };
            let t = check_format(cx, t, "$.expiresAt")?;
            hard(t.is_none_or(|t| s.admits(t, 1)), rule, || {
                format!(
                    "expiresAt lies outside [{}, {}]",
                    format_iso(s.lo),
                    format_iso(s.hi)
                )
            })?;
        }
        (Some(a), _) => cx.soft(
            Finding::new(LEASE_1, Kind::Value, "`expiresAt` differs")
                .at("$.expiresAt")
                .example(format!(
                    "{a} where {:?} is expected",
                    e.expires_at.map(|s| format_iso(s.lo))
                )),
        )?,
    }
    Ok(())
}
