//! A pop answer: which messages it delivered, in which order, is the heart of the
//! protocol and checked hard; the ids it shows are learnt and the OPEN choices it makes
//! (trace ids, empty payloads) narrow the model.

use super::cx::Cx;
use super::time::check_time;
use super::{delivered_parts, hard, Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::*;
use crate::rules::*;
use crate::time::Stamp;
use crate::wire::*;
use serde_json::{json, Value};

/// Nothing to deliver: a bare 204. A 2xx whose body holds an empty `messages` array
/// said the same thing differently (POP-6).
pub(super) fn pop_empty(cx: &mut Cx, actual: &HttpResponse) -> Check {
    match delivered_parts(actual) {
        Some(p) if p.is_empty() => {}
        Some(_) => {
            return hard(false, POP_2, || {
                "a delivery where nothing was claimable".into()
            })
        }
        None => {
            return hard(false, POP_6, || {
                "nothing was claimable: a bare 204 is due, and this answer is no empty delivery"
                    .into()
            })
        }
    }
    // One finding for the whole answer: its status and body say the same thing.
    hard(actual.status / 100 == 2, POP_6, || {
        format!("status {} where a bare 204 is due", actual.status)
    })?;
    let shown = actual.body.as_ref().map(|b| format!(" {b}"));
    cx.expect(actual.status == 204 && shown.is_none(), || {
        Finding::new(POP_6, Kind::Shape, "an empty pop is not a bare 204")
            .at("$")
            .example(format!("{}{}", actual.status, shown.unwrap_or_default()))
    })
}

pub(super) fn pop(cx: &mut Cx, p: &PopOut, actual: &HttpResponse) -> Check {
    hard(actual.status != 204, POP_2, || {
        format!("204 where {} message(s) were claimable", p.messages.len())
    })?;
    cx.status(200, actual.status, POP_5)?;
    let b = actual
        .body
        .as_ref()
        .filter(|b| b.is_object())
        .ok_or_else(|| Miss {
            rule: POP_5,
            why: "a pop answer must be a JSON object".into(),
        })?;
    let messages = b
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| Miss {
            rule: POP_5,
            why: "a pop answer must carry a `messages` array".into(),
        })?;
    hard(messages.len() == p.messages.len(), POP_3, || {
        format!(
            "{} messages where {} are expected",
            messages.len(),
            p.messages.len()
        )
    })?;
    top_level(cx, p, b)?;
    let lease = cx.str(b, "$", "leaseId", POP_5)?;
    pop_lease(cx, p, lease)?;
    let first = cx.w.state.part(p.first).ok_or_else(|| Miss {
        rule: POP_1,
        why: "the claimed partition vanished".into(),
    })?;
    let first_name = first.name.clone();
    cx.is(
        b,
        "$",
        "partition",
        json!(first_name),
        POP_5,
        "the top-level `partition` is not the first claimed one",
    )?;
    if let Some(id) = cx.str(b, "$", "partitionId", POP_5)? {
        bind_part(cx, p.first, id)?;
    }
    for (m, &(ph, off)) in messages.iter().zip(&p.messages) {
        pop_message(cx, p, m, ph, off, lease)?;
    }
    Ok(())
}

/// The top-level fields that restate the pop: the request's queue and group, and how
/// many partitions it claimed.
fn top_level(cx: &mut Cx, p: &PopOut, b: &Value) -> Check {
    cx.is(
        b,
        "$",
        "success",
        json!(true),
        POP_5,
        "`success` is not true on a delivery",
    )?;
    cx.is(
        b,
        "$",
        "queue",
        json!(p.queue),
        POP_5,
        "the top-level `queue` differs",
    )?;
    cx.is(
        b,
        "$",
        "consumerGroup",
        json!(p.group),
        POP_5,
        "the top-level `consumerGroup` differs",
    )?;
    cx.is(
        b,
        "$",
        "partitionsClaimed",
        json!(p.partitions_claimed as u64),
        POP_5,
        "`partitionsClaimed` differs",
    )?;
    Ok(())
}

fn bind_part(cx: &mut Cx, h: PartH, id: &str) -> Check {
    cx.w.ids
        .parts
        .bind("partition", h, id)
        .map_err(|why| Miss { rule: POP_5, why })
}

fn pop_lease(cx: &mut Cx, p: &PopOut, lease: Option<&str>) -> Check {
    let Some(lease) = lease else { return Ok(()) };
    match p.lease {
        None => cx.expect(lease.is_empty(), || {
            Finding::new(
                POP_7,
                Kind::Value,
                "an autoAck pop answers a leaseId (\"\" is due)",
            )
            .at("$.leaseId")
            .example(lease.to_string())
        }),
        Some(h) => {
            cx.expect(is_uuid(lease), || {
                Finding::new(POP_5, Kind::Value, "a leaseId is not a UUID")
                    .at("$.leaseId")
                    .example(lease.to_string())
            })?;
            cx.w.ids.leases.bind("lease", h, lease).map_err(|e| Miss {
                rule: ACK_4,
                why: format!("{e}: a pop mints a fresh lease id"),
            })
        }
    }
}

const MSG: &str = "$.messages[*]";

fn pop_message(
    cx: &mut Cx,
    p: &PopOut,
    m: &Value,
    ph: PartH,
    off: u32,
    lease: Option<&str>,
) -> Check {
    let part = cx.w.state.part(ph).ok_or_else(|| Miss {
        rule: POP_1,
        why: "a delivered partition vanished".into(),
    })?;
    let msg = part.at(off).clone();
    let pname = part.name.clone();
    let txn = m.get("transactionId").and_then(Value::as_str);
    hard(txn == Some(msg.transaction_id.as_str()), POP_1, || {
        format!(
            "transactionId {txn:?} where {} is expected (offset order)",
            msg.transaction_id
        )
    })?;
    message_ids(cx, m, ph, &msg, pname)?;
    let ml = cx.str(m, MSG, "leaseId", POP_5)?;
    if let Some(l) = lease {
        cx.same(
            ml,
            l,
            &format!("{MSG}.leaseId"),
            POP_5,
            "a message's `leaseId` is not the top-level one",
        )?;
    }
    cx.is(
        m,
        MSG,
        "consumerGroup",
        json!(p.group),
        POP_5,
        "a message's `consumerGroup` differs",
    )?;
    if let Some(v) = cx.get(m, MSG, "producerSub", POP_5)? {
        let due = msg
            .producer_sub
            .as_deref()
            .map_or(Value::Null, |s| json!(s));
        if *v != due {
            let why = match &msg.producer_sub {
                None => "producerSub is not null for a message pushed without a token's sub",
                Some(_) => "producerSub is not the sub of the token that pushed the message",
            };
            cx.soft(
                Finding::new(AUTH_2, Kind::Value, why)
                    .at(format!("{MSG}.producerSub"))
                    .example(format!("{v} where {due} is due")),
            )?;
        }
    }
    let created = cx.w.state.created(&msg);
    if let Some(t) = cx.str(m, MSG, "createdAt", POP_12)? {
        if let Some(t) = check_time(cx, t, created, &format!("{MSG}.createdAt"))? {
            let write = msg.write as usize;
            cx.w.state.writes[write] =
                cx.w.state.writes[write].intersect(&Stamp::between(t, t + 1));
        }
    }
    message_content(cx, m, ph, off)
}

/// A delivered message's partition and its ids, learnt so later answers name the same.
fn message_ids(cx: &mut Cx, m: &Value, ph: PartH, msg: &Message, pname: String) -> Check {
    if let Some(id) = cx.str(m, MSG, "partitionId", POP_5)? {
        cx.expect(is_uuid(id), || {
            Finding::new(POP_5, Kind::Value, "a partitionId is not a UUID").example(id.to_string())
        })?;
        bind_part(cx, ph, id)?;
    }
    cx.is(
        m,
        MSG,
        "partition",
        json!(pname),
        POP_5,
        "a message's `partition` differs",
    )?;
    if let Some(id) = cx.str(m, MSG, "id", POP_5)? {
        cx.expect(is_uuid_v7(id), || {
            Finding::new(POP_5, Kind::Value, "a message id is not a UUIDv7").example(id.to_string())
        })?;
        cx.w.ids
            .msgs
            .bind("message", msg.msg, id)
            .map_err(|why| Miss { rule: POP_5, why })?;
    }
    Ok(())
}

/// A delivered message's traceId and data, narrowing the OPEN choices of PUSH-9.
fn message_content(cx: &mut Cx, m: &Value, ph: PartH, off: u32) -> Check {
    let trace = cx.get(m, MSG, "traceId", POP_5)?.cloned();
    let data = cx.get(m, MSG, "data", POP_5)?.cloned();
    let slot =
        cx.w.state
            .part_mut(ph)
            .expect("exists")
            .messages
            .get_mut(off as usize - 1)
            .expect("exists");
    let mut wrong = Vec::new();
    if let Some(a) = &trace {
        match (&slot.trace, a.as_str()) {
            (Trace::None, None) => {}
            (Trace::Kept(t), Some(a)) if t == a => {}
            (Trace::Either(t), Some(a)) if t == a => slot.trace = Trace::Kept(t.clone()),
            (Trace::Either(_), None) if a.is_null() => slot.trace = Trace::None,
            (e, _) => wrong.push(
                Finding::new(POP_5, Kind::Value, "a message's traceId differs")
                    .example(format!("{a} where {e:?} is expected")),
            ),
        }
    }
    if let Some(d) = data {
        match &slot.data {
            Data::Value(v) if !v.is(&d) => wrong.push(
                // Another value is POP-5's; the same value spelt otherwise, POP-17's.
                match same_numbers(&v.value(), &d) {
                    true => Finding::new(
                        POP_17,
                        Kind::Value,
                        "a message's data spells a number otherwise than it was pushed",
                    ),
                    false => Finding::new(
                        POP_5,
                        Kind::Value,
                        "a message's data is not the payload pushed",
                    ),
                }
                .example(format!("{d} where {} is expected", v.get())),
            ),
            Data::Value(_) => {}
            Data::Absent if d.is_null() || d == json!({}) => {
                slot.data = Data::Value(crate::wire::RawJson::from_value(&d))
            }
            Data::Absent => wrong.push(
                Finding::new(
                    POP_5,
                    Kind::Value,
                    "an absent payload is shown as neither null nor {}",
                )
                .example(d.to_string()),
            ),
        }
    }
    wrong.into_iter().try_for_each(|f| cx.soft(f))
}

/// Whether `a` and `b` are the same JSON value once numbers are read as numbers (what
/// differs then is only how a number, or the order of keys, is written: POP-17).
fn same_numbers(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_numbers(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_numbers(v, w)))
        }
        (x, y) => x == y,
    }
}
