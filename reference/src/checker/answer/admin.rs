//! The administrative answers that carry state: a configure answer tells the options
//! the broker applies (and is followed), a dead-letter listing must be the model's.

use super::cx::Cx;
use super::time::check_time;
use super::{hard, Check, Miss};
use crate::checker::describe;
use crate::model::*;
use crate::rules::*;
use crate::wire::*;
use serde::Deserialize;
use serde_json::{json, Value};

/// The configure answer: every effective option (CFG-1, CFG-2) and the namespace and
/// task (CFG-3). A broker that derived another namespace or task is followed: the
/// model's queue takes the ones it answered, so discovery pops are judged by them.
pub(super) fn configure(cx: &mut Cx, out: &Outcome, body: Option<&Value>) -> Check {
    let Outcome::Configure(c) = out else {
        unreachable!("a configure outcome")
    };
    let expected = describe(out, cx.w)
        .body
        .expect("a configure answer has a body");
    // An option answered as it was before this call was not replaced (CFG-1); any other
    // value where the model has the default is another default (CFG-2).
    let before = serde_json::to_value(cx.before.queues.get(&c.queue).map(|q| q.options))
        .expect("serializes");
    let defaults = serde_json::to_value(QueueOptions::default()).expect("serializes");
    let answered = body.and_then(|b| b.get("options"));
    let rule_at = |p: &str| match p {
        "$.namespace" | "$.task" => CFG_3,
        p if p.starts_with("$.options.") => {
            let key = &p["$.options.".len()..];
            let got = answered.and_then(|o| o.get(key));
            let key_root = key.split(['.', '[']).next().unwrap_or(key);
            if !KNOWN_OPTIONS.contains(&key_root) {
                // A key the broker was asked to keep without acting on it.
                CFG_4
            } else if matches!(key_root, "retentionEnabled" | "maxWaitTimeSeconds") {
                // Options of section 16, which older brokers do not know.
                RET_2
            } else if got.is_some() && got == before.get(key) {
                CFG_1
            } else if expected["options"].get(key) == defaults.get(key) {
                CFG_2
            } else {
                CFG_1
            }
        }
        _ => CFG_1,
    };
    cx.subset(&expected, body, "$", &rule_at)?;
    // The broker is followed: the options it answered are the ones it applies.
    if let Some(o) = answered.and_then(|o| QueueOptions::deserialize(o).ok()) {
        if let Some(q) = cx.w.state.queue_mut(&c.queue) {
            q.options = o;
        }
    }
    let read = |k: &str| {
        body.and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(q) = cx.w.state.queue_mut(&c.queue) {
        if let Some(ns) = read("namespace") {
            q.namespace = ns;
        }
        if let Some(task) = read("task") {
            q.task = task;
        }
    }
    Ok(())
}

pub(super) fn dlq(cx: &mut Cx, d: &DlqOut, body: Option<&Value>) -> Check {
    let miss = |why: String| Miss { rule: DLQ_2, why };
    let b = body.ok_or_else(|| miss("no body".into()))?;
    let r: DlqResponse = DlqResponse::deserialize(b)
        .map_err(|e| miss(format!("the listing does not parse: {e}")))?;
    hard(
        r.total == d.total && r.limit == d.limit && r.offset == d.offset,
        DLQ_2,
        || {
            format!(
                "total/limit/offset {}/{}/{} where {}/{}/{} are expected",
                r.total, r.limit, r.offset, d.total, d.limit, d.offset
            )
        },
    )?;
    hard(r.messages.len() == d.items.len(), DLQ_2, || {
        format!(
            "{} dead letters where {} are expected",
            r.messages.len(),
            d.items.len()
        )
    })?;
    for (a, &i) in r.messages.iter().zip(&d.items) {
        let rec = cx.w.state.dead_letters[i].clone();
        let part =
            cx.w.state
                .part(rec.part)
                .ok_or_else(|| miss("a dead letter of a deleted partition".into()))?;
        let msg = part.at(rec.offset).clone();
        let (pname, qname) = (part.name.clone(), part.queue.clone());
        cx.w.ids
            .msgs
            .bind("message", msg.msg, &a.id)
            .map_err(miss)?;
        cx.w.ids
            .parts
            .bind("partition", rec.part, &a.partition_id)
            .map_err(miss)?;
        let same = a.transaction_id == msg.transaction_id
            && a.partition == pname
            && a.queue == qname
            && a.consumer_group == rec.group
            && a.error_message == rec.error
            && a.retry_count == rec.retry_count;
        hard(same, DLQ_2, || {
            format!(
                "dead letter {} differs from the model's {rec:?}",
                serde_json::to_value(a).expect("serializes")
            )
        })?;
        let created = cx.w.state.created(&msg);
        check_time(cx, &a.created_at, created, "$.messages[*].createdAt")?;
        check_time(cx, &a.failed_at, rec.failed_at, "$.messages[*].failedAt")?;
        let shown = match &msg.data {
            Data::Value(v) => v.is(&a.data),
            Data::Absent => a.data.is_null() || a.data == json!({}),
        };
        hard(shown, DLQ_2, || {
            format!("dead letter data {} differs", a.data)
        })?;
    }
    Ok(())
}
