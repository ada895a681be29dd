//! A transaction answer: whether it committed is the deciding rule's (TXN-2, TXN-6), the
//! rest of its shape one PROJECT point, its items checked as the push and ack items
//! they are.

use super::ack::ack_item;
use super::cx::Cx;
use super::push::push_item;
use super::{hard, Check, Miss};
use crate::model::*;
use crate::rules::*;
use crate::wire::*;
use serde_json::Value;

pub(super) fn txn(cx: &mut Cx, t: &TxnOut, actual: &HttpResponse) -> Check {
    cx.status(200, actual.status, TXN_3)?;
    let b = actual.body.as_ref().ok_or_else(|| Miss {
        rule: TXN_1,
        why: "a transaction answer has no body".into(),
    })?;
    // Whether it commits is decided by the rule the model names (TXN-2, TXN-6); all or
    // nothing (TXN-1) is judged by what later reads find the broker kept.
    let success = b.get("success").and_then(Value::as_bool);
    hard(success == Some(t.success), t.rule, || {
        let said = b.get("error").and_then(Value::as_str);
        match (t.success, said) {
            (true, Some(e)) => format!("success must be true; the broker refused it: {e:?}"),
            (true, None) => "success must be true".into(),
            (false, _) => format!(
                "success must be false: {}",
                t.error.as_deref().unwrap_or("it must abort")
            ),
        }
    })?;
    // TXN-3 [PROJECT]: the rest of the answer's shape.
    cx.part(TXN_3, "the transaction answer's shape differs", |cx| {
        let id = b.get("transactionId").and_then(Value::as_str).unwrap_or("");
        hard(is_uuid(id), TXN_3, || {
            format!("transactionId {id:?} is not a UUID")
        })?;
        if !t.success {
            let e = b.get("error").and_then(Value::as_str);
            return hard(e.is_some_and(|s| !s.is_empty()), TXN_3, || {
                "an aborted transaction must say why in \"error\"".into()
            });
        }
        let res = b.get("results").and_then(Value::as_array);
        let res = res.ok_or_else(|| Miss {
            rule: TXN_3,
            why: "results must be an array".into(),
        })?;
        hard(res.len() == t.results.len(), TXN_3, || {
            format!(
                "{} results where {} are expected",
                res.len(),
                t.results.len()
            )
        })?;
        t.results.iter().zip(res).try_for_each(|(o, a)| match o {
            TxnItemOut::Push(p) => push_item(cx, p, a, "$.results[*]"),
            TxnItemOut::Ack(x) => ack_item(cx, x, a, "$.results[*]"),
        })
    })
}
