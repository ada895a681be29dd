//! The wire protocol: one set of request and response types for every crate.
//!
//! Requests are parsed from raw JSON (or query pairs) by the `parse_*` functions here,
//! which apply the validation rules of PROTOCOL.md (PUSH-8, ACK-0, LEASE-3, CFG-3, ...)
//! and return a [`WireError`] with a clear message for anything malformed. The server
//! answers that error with 400 and changes nothing; the model predicts the same 400.
//! Responses are plain serde structs with the exact JSON names of the spec: the server
//! serializes them, the conformance suite deserializes what a broker sent.
//!
//! Conventions from section 0 of the spec: unknown request keys are ignored, `null`
//! means absent, and clients must tolerate extra response keys (so response types
//! never deny unknown fields).

mod ack;
mod admin;
mod analytics;
mod answer;
mod auth;
mod configure;
mod dlq;
mod id;
mod lease;
mod manage;
#[cfg(feature = "openapi")]
pub mod openapi;
mod pop;
mod push;
mod raw;
mod route;
mod table;
mod txn;
mod view;

pub use ack::*;
pub use admin::*;
pub use analytics::*;
pub use answer::*;
pub use auth::*;
pub use configure::*;
pub use dlq::*;
pub use id::WireId;
pub use lease::*;
pub use manage::*;
pub use pop::*;
pub use push::*;
pub use raw::{deliverable, RawJson, Undeliverable, PAYLOAD_DEPTH_LIMIT};
pub use route::*;
pub use table::*;
pub use txn::*;
pub use view::{View, ViewKind};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The reserved group name used when a request names no consumer group (PROTO-GROUP-1).
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";
/// The partition used when a push names none (PUSH-3).
const DEFAULT_PARTITION: &str = "Default";
/// The longest queue, partition or group name accepted, in bytes (section 1).
pub const MAX_NAME_BYTES: usize = 255;

/// A request the protocol rejects: answered with `status` (400, or 413 for an oversized
/// body) and `{"error": message}`, and nothing changes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    /// The HTTP status of the refusal: 400 for bad input, else the one its rule names (401, 403,
    /// 404, 405, 413, 429, 503).
    pub status: u16,
    /// The `error` text of the answer: what is wrong with the request.
    pub message: String,
    /// The rule that refuses, where it is not the route's own bad-input rule (PUSH-11 for
    /// a payload that could not be delivered): the checker files a difference under it.
    pub rule: Option<crate::rules::RuleId>,
}

impl WireError {
    /// A 400 refusal saying `message`.
    pub(crate) fn bad(message: impl Into<String>) -> WireError {
        WireError {
            rule: None,
            status: 400,
            message: message.into(),
        }
    }

    /// The same refusal, decided by `rule`.
    fn under(mut self, rule: crate::rules::RuleId) -> WireError {
        self.rule = Some(rule);
        self
    }

    /// The same error with `ctx` (such as `items[3].`) in front of its message.
    fn in_context(mut self, ctx: &str) -> WireError {
        self.message.insert_str(0, ctx);
        self
    }
}

/// The body of every 400/413/500 answer: `{"error": "..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    /// `error`: what is wrong, or `internal error` (ERR-1).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error: String,
}

/// Parses a request body as JSON, or explains why it is not.
fn parse_json(body: &[u8]) -> Result<Value, WireError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        let e = e.to_string();
        let lone = std::str::from_utf8(body).ok().and_then(raw::lone_surrogate);
        if let Some(unit) = lone {
            return WireError::bad(format!(
                "body holds a lone UTF-16 surrogate escape ({unit}), which is not a \
                 character (PUSH-11)"
            ));
        }
        match e.starts_with("recursion limit exceeded") {
            true => WireError::bad(format!(
                "body is nested too deeply to read ({e}); a payload may nest at most \
                 {PAYLOAD_DEPTH_LIMIT} levels (PUSH-11)"
            )),
            false => WireError::bad(format!("body is not valid JSON: {e}")),
        }
    })?;
    if has_nul(&v) {
        return Err(WireError::bad(NUL_ERROR));
    }
    Ok(v)
}

/// \[PROJECT\] Text may not contain U+0000: PostgreSQL cannot store it in `text` or
/// `jsonb`, so a broker on it could not keep such a message. Rejected up front, for
/// every route, instead of failing half-way.
const NUL_ERROR: &str = "the request contains a NUL character (\\u0000), which cannot be stored";

/// Whether any string or key in `v` contains U+0000.
fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The body as a JSON object, or a 400 naming what was expected.
fn as_object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, WireError> {
    v.as_object()
        .ok_or_else(|| WireError::bad(format!("{what} must be a JSON object")))
}

/// A key that may be absent or `null` (both mean absent), else must be a string.
fn opt_str(obj: &Map<String, Value>, key: &str, ctx: &str) -> Result<Option<String>, WireError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(WireError::bad(format!("{ctx}{key} must be a string"))),
    }
}

/// A key that must be present as a non-empty string.
fn req_str(obj: &Map<String, Value>, key: &str, ctx: &str) -> Result<String, WireError> {
    match opt_str(obj, key, ctx)? {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(WireError::bad(format!("{ctx}{key} must not be empty"))),
        None => Err(WireError::bad(format!("{ctx}{key} is required"))),
    }
}

/// Checks a queue, partition or group name: non-empty, at most 255 bytes (section 1).
fn check_name(kind: &str, name: &str) -> Result<(), WireError> {
    if name.is_empty() {
        return Err(WireError::bad(format!("{kind} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(WireError::bad(format!(
            "{kind} is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
            name.len()
        )));
    }
    Ok(())
}

/// Checks that a string is a UUID in its canonical hyphenated form.
fn check_uuid(kind: &str, s: &str) -> Result<(), WireError> {
    if is_uuid(s) {
        Ok(())
    } else {
        Err(WireError::bad(format!("{kind} must be a UUID, got {s:?}")))
    }
}

/// Whether `s` is a UUID in canonical hyphenated form (8-4-4-4-12 hex digits).
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

/// Whether `s` is a version-7 UUID (server-minted message ids, PUSH-4).
pub fn is_uuid_v7(s: &str) -> bool {
    is_uuid(s)
        && uuid::Uuid::try_parse(s)
            .map(|u| u.get_version_num() == 7)
            .unwrap_or(false)
}

/// Namespace and task derived from a dotted queue name (CFG-3, POP-8): namespace is
/// the text before the first `.`, task the second dotted segment or `""`.
pub fn derive_namespace_task(queue: &str) -> (String, String) {
    let mut parts = queue.split('.');
    let ns = parts.next().unwrap_or("").to_string();
    let task = parts.next().unwrap_or("").to_string();
    (ns, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_3_namespace_and_task_come_from_the_dotted_name() {
        assert_eq!(
            derive_namespace_task("orders"),
            ("orders".into(), "".into())
        );
        assert_eq!(
            derive_namespace_task("orders.created.v2"),
            ("orders".into(), "created".into())
        );
        assert_eq!(derive_namespace_task(".x"), ("".into(), "x".into()));
    }

    #[test]
    fn push_8_nul_characters_are_rejected_anywhere_in_a_body() {
        for body in [
            r#"{"items":[{"queue":"q","payload":{"a":"x\u0000y"}}]}"#,
            r#"{"a\u0000":1}"#,
            r#"["\u0000"]"#,
        ] {
            assert_eq!(
                parse_json(body.as_bytes()).unwrap_err().message,
                NUL_ERROR,
                "{body}"
            );
        }
        // An escaped backslash followed by u0000 is not a NUL.
        assert!(parse_json(br#"{"a":"\\u0000"}"#).is_ok());
    }

    #[test]
    fn names_and_uuids_are_checked() {
        assert!(check_name("queue", "").is_err());
        assert!(check_name("queue", &"q".repeat(255)).is_ok());
        assert!(check_name("queue", &"q".repeat(256)).is_err());
        assert!(check_name("queue", "'; drop table queues; --").is_ok());
        assert!(check_name("queue", "очередь").is_ok());
        assert!(is_uuid("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"));
        assert!(is_uuid_v7("0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"));
        assert!(
            !is_uuid_v7("0198f2c1-9a7b-4d20-8e31-4c5d6e7f8a90"),
            "a v4 UUID"
        );
        assert!(
            !is_uuid_v7("0198f2c19a7b7d208e314c5d6e7f8a90"),
            "not hyphenated"
        );
        assert!(!is_uuid("0198f2c19a7b7d208e314c5d6e7f8a90"));
        assert!(!is_uuid("not-a-uuid"));
    }
}
