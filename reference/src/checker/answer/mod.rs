//! Matching one broker answer against one outcome of the model.
//!
//! Every check here is one of two sorts. A *hard* check reads what the broker did (which
//! messages a pop delivered, whether an ack was applied, which push items were written):
//! when it fails, this outcome is not what happened. A *soft* check reads only what the
//! broker said (a status code inside the right class, a field's presence, type or text):
//! when it fails, the [`Judge`] decides whether that is a divergence or a [`Finding`]
//! recorded on the world, and the match goes on. Each check names the one rule it is
//! about, so a finding or a divergence is reported under the rule it breaks.

mod ack;
mod admin;
mod cx;
mod lease;
mod pop;
mod push;
mod reject;
mod time;
mod txn;
mod view;

use super::{describe, World};
use crate::finding::{Accept, Finding};
use crate::model::*;
use crate::rules::*;
use crate::wire::*;
use ack::ack_item;
use admin::{configure, dlq};
use cx::Cx;
use lease::extend;
use pop::{pop, pop_empty};
use push::push_item;
use reject::rejected;
use serde_json::Value;
use txn::txn;

/// How much an answer may differ from the model's (see the checker's module doc).
#[derive(Clone, Copy, Debug)]
pub struct Judge<'a> {
    /// Hold the broker to every PROJECT decision: a departure is a divergence.
    pub strict_project: bool,
    /// Record an answer that differs only in what it says as a finding and go on, on any rule.
    pub keep_going: bool,
    /// Deviations declared known (`--accept`): allowed everywhere, listed as findings.
    pub accept: &'a [Accept],
}

impl Judge<'_> {
    /// Whether `f` is recorded and the match goes on (else it is a divergence).
    pub(crate) fn allows(&self, f: &Finding) -> bool {
        self.accept.iter().any(|a| a.covers(f))
            || f.level == Level::Open
            || (f.level == Level::Project && !self.strict_project)
            || (self.keep_going && f.kind.answer_only())
    }
}

/// A check that failed: the rule it is about, and why.
#[derive(Clone, Debug)]
pub(crate) struct Miss {
    pub rule: RuleId,
    pub(crate) why: String,
}

type Check = Result<(), Miss>;

fn hard(ok: bool, rule: RuleId, why: impl FnOnce() -> String) -> Check {
    if ok {
        Ok(())
    } else {
        Err(Miss { rule, why: why() })
    }
}
/// A key of `obj` that names `key` in another case or style (`messageId` for
/// `message_id`): clients differ there, and what the field says can still be read.
pub(crate) fn loose<'v>(obj: &'v Value, key: &str) -> Option<(&'v str, &'v Value)> {
    let norm = |k: &str| {
        k.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let want = norm(key);
    obj.as_object()?
        .iter()
        .find(|(k, _)| norm(k) == want)
        .map(|(k, v)| (k.as_str(), v))
}

/// The messages a pop answer delivered, as `(partitionId, partition)` in order: empty
/// for a 204 or an empty `messages` array, `None` when it cannot be read as a delivery.
pub(crate) fn delivered_parts(actual: &HttpResponse) -> Option<Vec<(String, String)>> {
    if actual.status == 204 {
        return Some(vec![]);
    }
    let messages = actual.body.as_ref()?.get("messages")?.as_array()?;
    messages
        .iter()
        .map(|m| {
            let id = m.get("partitionId")?.as_str()?;
            let name = m.get("partition").and_then(Value::as_str).unwrap_or("");
            Some((id.to_string(), name.to_string()))
        })
        .collect()
}
/// Whether `actual` is an answer the model allows for `out` under `judge`, learning ids,
/// narrowing uncertain times and OPEN values, and recording findings in `w` as it goes.
/// Returns how many soft differences it allowed (0: the answer is the model's).
pub(crate) fn check_answer(
    out: &Outcome,
    actual: &HttpResponse,
    w: &mut World,
    before: &State,
    path: &str,
    judge: Judge,
) -> Result<usize, Miss> {
    let cx = &mut Cx {
        w,
        before,
        j: judge,
        softened: 0,
    };
    answer(cx, out, actual, path)?;
    Ok(cx.softened)
}

fn answer(cx: &mut Cx, out: &Outcome, actual: &HttpResponse, path: &str) -> Check {
    let body = actual.body.as_ref();
    match out {
        Outcome::PopIllegal(rule, why) => Err(Miss {
            rule: *rule,
            why: why.clone(),
        }),
        Outcome::Rejected(e) => rejected(cx, e, actual, path),
        Outcome::DiscoveryRejected => {
            cx.status(400, actual.status, POP_10)?;
            let expected = serde_json::to_value(DiscoveryError::new()).expect("serializes");
            cx.subset(&expected, body, "$", &|_| POP_10)
        }
        Outcome::Push(items) => {
            cx.status(201, actual.status, PUSH_1)?;
            let arr = results(body, items.len(), PUSH_1, "push")?;
            items
                .iter()
                .zip(arr)
                .try_for_each(|(o, a)| push_item(cx, o, a, "$[*]"))
        }
        Outcome::PopEmpty => pop_empty(cx, actual),
        Outcome::Pop(p) => pop(cx, p, actual),
        Outcome::Ack(items) => {
            cx.status(200, actual.status, ACK_0)?;
            let arr = results(body, items.len(), ACK_0, "ack")?;
            items
                .iter()
                .zip(arr)
                .try_for_each(|(o, a)| ack_item(cx, o, a, "$[*]"))
        }
        Outcome::Extend(e) => extend(cx, e, actual),
        Outcome::Txn(t) => txn(cx, t, actual),
        Outcome::Dlq(d) => {
            cx.status(200, actual.status, DLQ_2)?;
            // How many dead letters there are is state (ACK-6, DLQ-1), whatever the shape.
            if let Some(total) = body.and_then(|b| b.get("total")).and_then(Value::as_u64) {
                let (rule, cause) = dlq_shortfall(d, total);
                hard(total == d.total, rule, || {
                    format!(
                        "{total} dead letters listed where {} were filed{cause}",
                        d.total
                    )
                })?;
            }
            cx.part(DLQ_2, "the dead-letter listing differs", |cx| {
                dlq(cx, d, body)
            })
        }
        Outcome::Configure(_) => {
            cx.status(200, actual.status, CFG_1)?;
            configure(cx, out, body)
        }
        Outcome::Delete(_) => {
            cx.status(200, actual.status, DEL_1)?;
            let expected = describe(out, cx.w)
                .body
                .expect("a delete answer has a body");
            cx.subset(&expected, body, "$", &|_| DEL_1)
        }
        Outcome::Health | Outcome::Maintenance { .. } | Outcome::PopMaintenance { .. } => {
            let rule = match out {
                Outcome::Health => HEALTH_1,
                Outcome::Maintenance { .. } => MAINT_1,
                _ => MAINT_2,
            };
            cx.status(200, actual.status, rule)?;
            let expected = describe(out, cx.w).body.expect("these answers have bodies");
            cx.subset(&expected, body, "$", &|_| rule)
        }
        Outcome::View { rule, value, .. } => {
            cx.status(200, actual.status, *rule)?;
            view::view(cx, *rule, value, body, "$")
        }
    }
}

/// The rule a dead-letter count breaks: one short by no more than the dead letters of
/// removed (or deleted) messages lost the copies those keep (RET-4, MGMT-11), not a filing.
fn dlq_shortfall(d: &DlqOut, total: u64) -> (RuleId, &'static str) {
    let short = d.total.saturating_sub(total);
    let (removed, deleted) = d.gone;
    if short == 0 || short > removed + deleted {
        (DLQ_1, "")
    } else if short <= removed {
        (
            RET_4,
            ": the missing ones may be of messages retention removed, whose dead letters keep their own copy",
        )
    } else {
        (
            MGMT_11,
            ": the missing ones may be of messages an operator deleted, whose dead letters keep their own copy",
        )
    }
}

/// The per-item results of a push or an ack answer: a JSON array with one result per
/// item (hard: without it, what was done with each item cannot be read).
fn results<'v>(
    body: Option<&'v Value>,
    n: usize,
    rule: RuleId,
    what: &str,
) -> Result<&'v Vec<Value>, Miss> {
    let arr = body.and_then(Value::as_array).ok_or_else(|| Miss {
        rule,
        why: format!("{what} answer must be a JSON array of per-item results"),
    })?;
    hard(arr.len() == n, rule, || {
        format!("{} results for {n} items", arr.len())
    })?;
    Ok(arr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_read_under_another_case_or_separator_but_not_another_name() {
        let v = json!({"messageId": 1, "transaction-id": 2, "LEASE_ID": 3, "message": 4});
        assert_eq!(loose(&v, "message_id"), Some(("messageId", &json!(1))));
        assert_eq!(
            loose(&v, "transactionId"),
            Some(("transaction-id", &json!(2)))
        );
        assert_eq!(loose(&v, "leaseId"), Some(("LEASE_ID", &json!(3))));
        assert_eq!(loose(&v, "partition_id"), None);
        assert_eq!(loose(&json!([1]), "message"), None, "not an object");
    }
}
