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
    /// The broker's HTTP answer.
    Known(HttpResponse),
    /// No usable answer (why): the call may or may not have been applied.
    Unknown(String),
}

/// One call of a concurrent history.
#[derive(Clone, Debug)]
pub struct Op {
    /// Position in the history (order of invocation).
    pub id: usize,
    /// The client that made the call (calls of one client never overlap).
    pub client: usize,
    /// The partition of the history the call belongs to (its queue): calls on
    /// different keys are checked independently.
    pub key: String,
    /// The request sent.
    pub request: HttpRequest,
    /// When the call was sent (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer arrived, or the client gave up (ms since the Unix epoch).
    pub(crate) complete_ms: Millis,
    /// What the call returned.
    pub answer: Answer,
}

impl Op {
    /// Whether the call has no usable answer (it may or may not have been applied).
    pub(crate) fn is_unknown(&self) -> bool {
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

    /// The call as one JSON object of a recorded history file.
    pub fn to_json(&self) -> Value {
        let answer = match &self.answer {
            Answer::Known(r) => json!({"status": r.status, "body": r.body}),
            Answer::Unknown(why) => json!({"unknown": why}),
        };
        json!({
            "id": self.id,
            "client": self.client,
            "key": self.key,
            "request": crate::exchange::request_json(&self.request),
            "invokeMs": self.invoke_ms,
            "completeMs": self.complete_ms,
            "answer": answer,
        })
    }

    /// The call [`Op::to_json`] wrote (a failing round's history file), or why `v` is
    /// not one. Bearer tokens are not recorded, so a replayed call carries none.
    pub(crate) fn from_json(v: &Value) -> Result<Op, String> {
        let num = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| format!("call without a numeric `{k}`"))
        };
        let ms = |k: &str| {
            v[k].as_i64()
                .ok_or_else(|| format!("call without a time `{k}`"))
        };
        let r = &v["request"];
        let text = |x: &Value, k: &str| {
            x[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("call without a `{k}` string"))
        };
        let (id, client, key) = (
            num("id")? as usize,
            num("client")? as usize,
            text(v, "key")?,
        );
        let (invoke_ms, complete_ms) = (ms("invokeMs")?, ms("completeMs")?);
        let query = serde_json::from_value(r["query"].clone())
            .map_err(|e| format!("a call's query is not a list of pairs: {e}"))?;
        let body = match &r["body"] {
            Value::Null => Vec::new(),
            b => serde_json::to_vec(b).expect("a value serializes"),
        };
        let a = &v["answer"];
        let answer = match a.get("unknown") {
            Some(why) => Answer::Unknown(why.as_str().unwrap_or_default().to_string()),
            None => Answer::Known(HttpResponse {
                status: a["status"]
                    .as_u64()
                    .and_then(|s| u16::try_from(s).ok())
                    .ok_or("an answer without a status or `unknown`")?,
                body: Some(a["body"].clone()).filter(|b| !b.is_null()),
            }),
        };
        Ok(Op {
            id,
            client,
            key,
            request: HttpRequest {
                method: text(r, "method")?,
                path: text(r, "path")?,
                query,
                body,
                bearer: None,
            },
            invoke_ms,
            complete_ms,
            answer,
        })
    }
}

/// A whole concurrent history.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every call, in order of invocation.
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

    /// How many calls have no usable answer.
    pub fn unknown(&self) -> usize {
        self.ops.iter().filter(|o| o.is_unknown()).count()
    }

    /// The history as the JSON array `recheck` reads.
    pub fn to_json(&self) -> Value {
        Value::Array(self.ops.iter().map(Op::to_json).collect())
    }

    /// The history [`History::to_json`] wrote, in its recorded order.
    pub(crate) fn from_json(v: &Value) -> Result<History, String> {
        let calls = v.as_array().ok_or("a history is a JSON array of calls")?;
        let ops = calls
            .iter()
            .enumerate()
            .map(|(i, c)| Op::from_json(c).map_err(|e| format!("call {i}: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(History { ops })
    }
}
