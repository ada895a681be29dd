//! `POST /api/v1/push` (PROTOCOL.md section 2): request parsing and the 201 answer.

use super::raw::deliverable;
use super::{check_name, check_uuid, parse_json, RawJson, WireError, DEFAULT_PARTITION};
use crate::rules::PUSH_11;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A payload as sent: absent is not the same as `null` (PUSH-9 leaves absent open).
/// Kept as the text it came in (shared, so the model stores it without copying).
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// No `payload` key: stored as `null` or `{}` (PUSH-9).
    Absent,
    /// The `payload` value as sent, `null` included.
    Given(RawJson),
}

/// One validated push item.
#[derive(Clone, Debug, PartialEq)]
pub struct PushItem {
    /// `queue`: the name of the queue pushed to, created if unknown (PUSH-2).
    pub queue: String,
    /// Already defaulted to `Default` (PUSH-3).
    pub partition: String,
    /// `payload`: the message's data, returned verbatim by a pop (POP-17).
    pub payload: Payload,
    /// `transactionId`: the client's id for dedup (PUSH-5); the broker mints one when absent
    /// (PUSH-4).
    pub transaction_id: Option<String>,
    /// `traceId`: a UUID the pop returns as the message's `traceId` (PUSH-9).
    pub trace_id: Option<String>,
    /// The `sub` of the token that pushed it (AUTH-2): set by [`Request::stamp_producer`]
    /// from the caller, never read from the body.
    ///
    /// [`Request::stamp_producer`]: super::Request::stamp_producer
    pub producer_sub: Option<String>,
}

/// A validated push request.
#[derive(Clone, Debug, PartialEq)]
pub struct PushRequest {
    /// `items`: the messages to write, atomically and in request order (PUSH-3).
    pub items: Vec<PushItem>,
}

/// `status` of one push result (PUSH-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
// The variants' docs are left out of the `openapi` build: a doc on a unit variant
// would turn the schema's string `enum` into a `oneOf` (spec/openapi.json).
#[cfg_attr(feature = "openapi", allow(missing_docs))]
pub enum PushStatus {
    #[cfg_attr(not(feature = "openapi"), doc = "`queued`: written now.")]
    Queued,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`duplicate`: not written: its transactionId is already in the partition within the dedup window (PUSH-5)."
    )]
    Duplicate,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`buffered`: spooled to disk, written when the spool is replayed (PUSH-7)."
    )]
    Buffered,
}

/// One item of the 201 array (PUSH-1). Note the snake_case `message_id` and
/// `transaction_id`, unlike every other answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PushResult {
    /// `index`: the item's place in the request, from 0.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub index: usize,
    /// `message_id`: the written message's id, or the original's for a duplicate (PUSH-13).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub message_id: String,
    /// `transaction_id`: the item's transactionId, given or minted (PUSH-4).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `queueName`: the name of the queue the item went to.
    #[serde(rename = "queueName")]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue_name: String,
    /// `status`: what became of the item.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub status: PushStatus,
}

/// RET-5's refusal: the push would take `queue` past its `maxSize` (429; the route adds
/// `Retry-After`).
pub fn queue_full(queue: &str, max_size: u64, unconsumed: u64, added: u64) -> WireError {
    WireError {
        rule: None,
        status: 429,
        message: format!(
            "queue {queue} is full: maxSize is {max_size}, it holds {unconsumed} unconsumed \
             messages and the push adds {added}; try again once consumers catch up"
        ),
    }
}

/// Parses a push body (PUSH-8) from its bytes, keeping every payload as the text it was
/// sent as: a push is the hottest request, and its payloads are only ever written out
/// again. The answer is exactly [`parse_push`]'s of the parsed body: anything this path
/// does not take as it is (a malformed body, a field of the wrong type, a NUL escape
/// anywhere) is handed to that parse, which says what is wrong.
pub(crate) fn parse_push_bytes(body: &[u8]) -> Result<PushRequest, WireError> {
    match fast_push(body) {
        Some(r) => {
            check_payloads(&r.items, |i| format!("items[{i}]."))?;
            Ok(r)
        }
        None => parse_push(parse_json(body)?),
    }
}

/// PUSH-11: every payload of `items` can be delivered as it is; `ctx` names an item's
/// place for the message.
fn check_payloads(items: &[PushItem], ctx: impl Fn(usize) -> String) -> Result<(), WireError> {
    for (i, item) in items.iter().enumerate() {
        if let Payload::Given(p) = &item.payload {
            check_payload(p).map_err(|e| e.in_context(&ctx(i)))?;
        }
    }
    Ok(())
}

/// PUSH-11 for one payload: a 400 naming why it could not be delivered.
fn check_payload(p: &RawJson) -> Result<(), WireError> {
    deliverable(p.get()).map_err(|e| WireError::bad(format!("payload {e}")).under(PUSH_11))
}

/// The push body's items with their payloads as text, or `None` for anything but a
/// well-formed, valid body.
fn fast_push(body: &[u8]) -> Option<PushRequest> {
    if may_hold_nul(body) {
        return None;
    }
    let top: HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
    let list: Vec<&RawValue> = serde_json::from_str(top.get("items")?.get()).ok()?;
    let items = list
        .into_iter()
        .map(|raw| {
            let mut fields: HashMap<String, &RawValue> = serde_json::from_str(raw.get()).ok()?;
            let payload = fields.remove("payload").map(|p| {
                RawJson::from(RawValue::from_string(p.get().to_string()).expect("checked JSON"))
            });
            // The other fields are few and short: validated by the one item parser.
            let small: Map<String, Value> = fields
                .into_iter()
                .filter(|(k, _)| ITEM_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| Some((k, serde_json::from_str(v.get()).ok()?)))
                .collect::<Option<_>>()?;
            let mut item = item_fields(small).ok()?;
            item.payload = payload.map_or(Payload::Absent, Payload::Given);
            Some(item)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(PushRequest { items })
}

/// The item keys [`item_fields`] reads besides `payload`; the rest are ignored.
const ITEM_FIELDS: [&str; 4] = ["queue", "partition", "transactionId", "traceId"];

/// Whether `body` has a `\u0000` escape (a backslash run of odd length before `u0000`):
/// such a body is left to the full parse, which refuses a NUL anywhere.
fn may_hold_nul(body: &[u8]) -> bool {
    body.windows(5).enumerate().any(|(i, w)| {
        w == b"u0000" && body[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
    })
}

/// Parses a push body (PUSH-8): `{"items":[...]}`. Takes the body by value, so that
/// payloads are moved into the items, not copied.
pub fn parse_push(body: Value) -> Result<PushRequest, WireError> {
    let Value::Object(mut obj) = body else {
        return Err(WireError::bad("push body must be a JSON object"));
    };
    let items = match obj.remove("items") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(WireError::bad("items must be an array")),
        None => return Err(WireError::bad("items is required")),
    };
    let items = items
        .into_iter()
        .enumerate()
        .map(|(i, v)| parse_push_item(v, || format!("items[{i}].")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PushRequest { items })
}

/// Parses one push item; `ctx` says where it is (`items[3].`), for error messages only,
/// so a valid item costs no formatting.
pub(crate) fn parse_push_item(v: Value, ctx: impl Fn() -> String) -> Result<PushItem, WireError> {
    match v {
        Value::Object(obj) => item_fields(obj).map_err(|e| e.in_context(&ctx())),
        _ => Err(WireError::bad(format!(
            "{} must be a JSON object",
            ctx().trim_end_matches('.')
        ))),
    }
}

/// [`parse_push_item`]'s fields, moved out of the item; messages start at the field.
fn item_fields(mut obj: Map<String, Value>) -> Result<PushItem, WireError> {
    let mut take_str = |key: &str| match obj.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(WireError::bad(format!("{key} must be a string"))),
    };
    let queue = take_str("queue")?.ok_or_else(|| WireError::bad("queue is required"))?;
    check_name("queue", &queue)?;
    let partition = match take_str("partition")? {
        None => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            check_name("partition", &p)?;
            p
        }
    };
    let transaction_id = match take_str("transactionId")? {
        Some(t) if t.is_empty() => return Err(WireError::bad("transactionId must not be empty")),
        Some(t) if t.len() > 1024 => {
            return Err(WireError::bad("transactionId is longer than 1024 bytes"))
        }
        t => t,
    };
    let trace_id = take_str("traceId")?;
    if let Some(t) = &trace_id {
        check_uuid("traceId", t)?;
    }
    let payload = match obj.remove("payload") {
        None => Payload::Absent,
        Some(v) => {
            let p = RawJson::from_value(&v);
            check_payload(&p)?;
            Payload::Given(p)
        }
    };
    Ok(PushItem {
        queue,
        partition,
        payload,
        transaction_id,
        trace_id,
        producer_sub: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn push_8_names_and_transaction_ids_are_bounded() {
        let item = |q: &str, t: &str| {
            parse_push(json!({"items": [{"queue": q, "transactionId": t}]})).map(|_| ())
        };
        assert_eq!(
            item("", "t").unwrap_err().message,
            "items[0].queue must not be empty"
        );
        assert!(item("q", &"t".repeat(1024)).is_ok());
        assert!(item("q", &"t".repeat(1025)).is_err());
        assert!(item("q", "").is_err());
    }

    #[test]
    fn push_1_answer_round_trips_the_seed_literal() {
        let lit = r#"[{"index":0,"message_id":"0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83","transaction_id":"0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b84","queueName":"orders","status":"queued"}]"#;
        let parsed: Vec<PushResult> = serde_json::from_str(lit).unwrap();
        assert_eq!(parsed[0].status, PushStatus::Queued);
        assert_eq!(parsed[0].queue_name, "orders");
        assert_eq!(serde_json::to_string(&parsed).unwrap(), lit);
    }

    #[test]
    fn push_8_rejects_malformed_items() {
        let bad = [
            json!([]),
            json!({}),
            json!({"items": {}}),
            json!({"items": [1]}),
            json!({"items": [{}]}),
            json!({"items": [{"queue": ""}]}),
            json!({"items": [{"queue": 5}]}),
            json!({"items": [{"queue": "q", "partition": 7}]}),
            json!({"items": [{"queue": "q", "transactionId": 7}]}),
            json!({"items": [{"queue": "q", "traceId": "abc"}]}),
            json!({"items": [{"queue": "q".repeat(256)}]}),
            json!({"items": [{"queue": "ok"}, {"queue": null}]}),
        ];
        for b in bad {
            let err = parse_push(b.clone()).unwrap_err();
            assert_eq!(err.status, 400, "{b}");
            assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn push_8_messages_say_which_item_and_field() {
        let cases = [
            (json!({"items": [1]}), "items[0] must be a JSON object"),
            (
                json!({"items": [{"queue": "ok"}, {"queue": null}]}),
                "items[1].queue is required",
            ),
            (
                json!({"items": [{"queue": ""}]}),
                "items[0].queue must not be empty",
            ),
            (
                json!({"items": [{"queue": "q", "partition": 7}]}),
                "items[0].partition must be a string",
            ),
            (
                json!({"items": [{"queue": "q", "transactionId": ""}]}),
                "items[0].transactionId must not be empty",
            ),
            (
                json!({"items": [{"queue": "q", "traceId": "abc"}]}),
                "items[0].traceId must be a UUID, got \"abc\"",
            ),
            (
                json!({"items": [{"queue": "q".repeat(256)}]}),
                "items[0].queue is 256 bytes long; at most 255 are allowed",
            ),
        ];
        for (body, message) in cases {
            assert_eq!(
                parse_push(body.clone()).unwrap_err().message,
                message,
                "{body}"
            );
        }
    }

    #[test]
    fn push_3_defaults_and_nulls() {
        let r = parse_push(json!({"items": [
            {"queue": "q", "partition": null, "transactionId": null, "traceId": null, "extra": 1},
            {"queue": "q", "payload": null},
        ]}))
        .unwrap();
        assert_eq!(r.items[0].partition, "Default");
        assert_eq!(r.items[0].payload, Payload::Absent);
        assert_eq!(
            r.items[1].payload,
            Payload::Given(RawJson::from_value(&Value::Null))
        );
        assert!(parse_push(json!({"items": []})).unwrap().items.is_empty());
    }

    /// The bytes path answers what the parse of the parsed body answers, for good and
    /// bad bodies alike, and keeps each payload's text.
    #[test]
    fn push_8_the_bytes_path_answers_as_the_value_path() {
        let bodies = [
            r#"{"items": [{"queue": "q", "payload": {"b": 1, "a": 18446744073709551616, "c": 0.10}}]}"#,
            r#"{"items": [{"queue": "q", "partition": null, "transactionId": "t", "extra": [1]}, {"queue": "q", "payload": null}]}"#,
            r#"{"items": [], "other": 1}"#,
            r#"{"items": [{"queue": "q", "queue": "r", "payload": "s"}]}"#,
            r#"{"items": [{"queue": "q", "payload": "a\u0000b"}]}"#,
            r#"{"items": [{"queue": "q", "payload": "a\\u0000b"}]}"#,
            r#"{"items": [{"queue": "q\u0000"}]}"#,
            r#"{"items": [1]}"#,
            r#"{"items": {}}"#,
            r#"[1, 2"#,
            r#"{"items": [{"queue": ""}]}"#,
            r#"{"items": [{"queue": "q", "traceId": "abc"}]}"#,
            r#"{"items": [{"queue": 5}]}"#,
            r#"{"items": [{"queue": "ok"}, {"queue": null}]}"#,
            r#"not json"#,
        ];
        for b in bodies {
            let slow = parse_json(b.as_bytes()).and_then(parse_push);
            let fast = parse_push_bytes(b.as_bytes());
            assert_eq!(fast, slow, "{b}");
        }
        let r = parse_push_bytes(bodies[0].as_bytes()).unwrap();
        match &r.items[0].payload {
            Payload::Given(p) => {
                assert_eq!(p.get(), r#"{"b": 1, "a": 18446744073709551616, "c": 0.10}"#)
            }
            other => panic!("{other:?}"),
        }
        assert!(may_hold_nul(br#""\u0000""#) && !may_hold_nul(br#""\\u0000""#));
        assert!(may_hold_nul(br#""\\\u0000""#));
    }
}
