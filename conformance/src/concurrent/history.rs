//! Concurrent histories: every call a client makes, with its invocation and completion
//! times (client clock, ms) and its answer, or "unknown" when the answer is lost (a
//! client-side timeout, a dropped connection, a 5xx): such a call may or may not have
//! taken effect, at any time after it was invoked.

use queen_reference::time::Millis;
use queen_reference::wire::{HttpRequest, HttpResponse};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What a call returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Known(HttpResponse),
    /// No usable answer (why): the call may or may not have been applied.
    Unknown(String),
}

/// One call of a concurrent history.
#[derive(Clone, Debug)]
pub struct Op {
    /// Position in the history (order of invocation).
    pub id: usize,
    pub client: usize,
    /// The partition of the history the call belongs to (its queue): calls on
    /// different keys are checked independently.
    pub key: String,
    pub request: HttpRequest,
    pub invoke_ms: Millis,
    pub complete_ms: Millis,
    pub answer: Answer,
}

impl Op {
    pub fn is_unknown(&self) -> bool {
        matches!(self.answer, Answer::Unknown(_))
    }

    /// A one-line description for reports.
    pub fn label(&self) -> String {
        let q: Vec<String> = self
            .request
            .query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let ans = match &self.answer {
            Answer::Known(r) => r.status.to_string(),
            Answer::Unknown(why) => format!("unknown ({why})"),
        };
        format!(
            "#{} c{} {} {}{}{} -> {ans}",
            self.id,
            self.client,
            self.request.method,
            self.request.path,
            if q.is_empty() { "" } else { "?" },
            q.join("&")
        )
    }

    pub fn to_json(&self) -> Value {
        let answer = match &self.answer {
            Answer::Known(r) => json!({"status": r.status, "body": r.body}),
            Answer::Unknown(why) => json!({"unknown": why}),
        };
        json!({
            "id": self.id,
            "client": self.client,
            "key": self.key,
            "request": crate::session::request_json(&self.request),
            "invokeMs": self.invoke_ms,
            "completeMs": self.complete_ms,
            "answer": answer,
        })
    }
}

/// A whole concurrent history.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
}

impl History {
    /// Builds a history from calls in any order: sorted by invocation, ids renumbered.
    pub fn new(mut ops: Vec<Op>) -> History {
        ops.sort_by_key(|o| (o.invoke_ms, o.complete_ms, o.client));
        for (i, o) in ops.iter_mut().enumerate() {
            o.id = i;
        }
        History { ops }
    }

    /// The calls of each key, in invocation order.
    pub fn partitions(&self) -> BTreeMap<String, Vec<Op>> {
        let mut m: BTreeMap<String, Vec<Op>> = BTreeMap::new();
        for o in &self.ops {
            m.entry(o.key.clone()).or_default().push(o.clone());
        }
        m
    }

    pub fn unknown(&self) -> usize {
        self.ops.iter().filter(|o| o.is_unknown()).count()
    }

    pub fn to_json(&self) -> Value {
        Value::Array(self.ops.iter().map(Op::to_json).collect())
    }
}
