//! One item of a push answer: its status says what was written (hard), and the ids it
//! shows are learnt, so later answers are matched against the same messages.

use super::cx::Cx;
use super::{hard, Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::*;
use crate::rules::*;
use crate::wire::*;
use serde_json::{json, Value};

pub(super) fn push_item(cx: &mut Cx, o: &PushOut, a: &Value, path: &str) -> Check {
    let status = a.get("status").and_then(Value::as_str);
    let status = status.and_then(|s| serde_json::from_value::<PushStatus>(json!(s)).ok());
    let status = status.ok_or_else(|| Miss {
        rule: PUSH_1,
        why: format!(
            "item {}: no readable `status` (queued, duplicate or buffered)",
            o.index
        ),
    })?;
    hard(
        status == o.status,
        push_status_rule(o.status, status),
        || {
            format!(
                "item {}: status {status:?} where {:?} is expected",
                o.index, o.status
            )
        },
    )?;
    cx.is(
        a,
        path,
        "index",
        json!(o.index as u64),
        PUSH_1,
        "`index` is not the item's position",
    )?;
    cx.is(
        a,
        path,
        "queueName",
        json!(o.queue),
        PUSH_1,
        "`queueName` is not the item's queue",
    )?;
    let txn = cx.str(a, path, "transaction_id", PUSH_1)?;
    cx.same(
        txn,
        o.transaction_id.as_str(),
        &format!("{path}.transaction_id"),
        PUSH_1,
        "`transaction_id` is not the item's",
    )?;
    if o.minted_txn {
        cx.expect(txn.is_none_or(is_uuid), || {
            Finding::new(PUSH_4, Kind::Value, "a minted transaction_id is not a UUID")
                .example(format!("{txn:?}"))
        })?;
    }
    let Some(id) = cx.str(a, path, "message_id", PUSH_1)? else {
        return Ok(());
    };
    cx.expect(is_uuid_v7(id), || {
        Finding::new(PUSH_1, Kind::Value, "a message_id is not a UUIDv7")
            .at(format!("{path}.message_id"))
            .example(id.to_string())
    })?;
    learn_id(cx, o, id, path)
}

/// Learns the message id an item shows: a duplicate's must be the original's (PUSH-5).
fn learn_id(cx: &mut Cx, o: &PushOut, id: &str, path: &str) -> Check {
    let Some(h) = o.msg else { return Ok(()) };
    if o.status == PushStatus::Duplicate {
        // PUSH-13: a duplicate carries the original message's id. Another id is a
        // finding; the original's id is then learnt from a later answer.
        if let Some(original) = cx.w.ids.msgs.id(h).map(str::to_string) {
            return cx.expect(original == id, || {
                Finding::new(
                    PUSH_13,
                    Kind::Value,
                    "a duplicate item carries another message_id than the original's",
                )
                .at(format!("{path}.message_id"))
                .example(format!(
                    "item {}: {id} where the original is {original}",
                    o.index
                ))
            });
        }
    }
    cx.w.ids.msgs.bind("message", h, id).map_err(|e| Miss {
        rule: if o.status == PushStatus::Duplicate {
            PUSH_5
        } else {
            PUSH_1
        },
        why: format!("{e} (a duplicate carries the original id)"),
    })
}

/// The rule a push item's wrong status breaks.
fn push_status_rule(due: PushStatus, got: PushStatus) -> RuleId {
    if due == PushStatus::Buffered || got == PushStatus::Buffered {
        PUSH_7
    } else {
        PUSH_5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_push_status_breaks_push_7_when_spooling_is_involved_else_push_5() {
        use PushStatus::*;
        assert_eq!(push_status_rule(Buffered, Queued), PUSH_7);
        assert_eq!(push_status_rule(Queued, Buffered), PUSH_7);
        assert_eq!(push_status_rule(Duplicate, Queued), PUSH_5);
        assert_eq!(push_status_rule(Queued, Duplicate), PUSH_5);
    }
}
