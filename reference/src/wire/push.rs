//! `POST /api/v1/push` (PROTOCOL.md section 2): request parsing and the 201 answer.

use super::{as_object, check_name, check_uuid, opt_str, req_str, WireError, DEFAULT_PARTITION};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// A payload as sent: absent is not the same as `null` (PUSH-9 leaves absent open).
/// Shared, so the model stores it without copying the document.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    Absent,
    Given(Arc<Value>),
}

/// One validated push item.
#[derive(Clone, Debug, PartialEq)]
pub struct PushItem {
    pub queue: String,
    /// Already defaulted to `Default` (PUSH-3).
    pub partition: String,
    pub payload: Payload,
    pub transaction_id: Option<String>,
    pub trace_id: Option<String>,
}

/// A validated push request.
#[derive(Clone, Debug, PartialEq)]
pub struct PushRequest {
    pub items: Vec<PushItem>,
}

/// `status` of one push result (PUSH-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PushStatus {
    Queued,
    Duplicate,
    Buffered,
}

/// One item of the 201 array (PUSH-1). Note the snake_case `message_id` and
/// `transaction_id`, unlike every other answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushResult {
    pub index: usize,
    pub message_id: String,
    pub transaction_id: String,
    #[serde(rename = "queueName")]
    pub queue_name: String,
    pub status: PushStatus,
}

/// Parses a push body (PUSH-8): `{"items":[...]}`.
pub fn parse_push(body: &Value) -> Result<PushRequest, WireError> {
    let obj = as_object(body, "push body")?;
    let items = match obj.get("items") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(WireError::bad("items must be an array")),
        None => return Err(WireError::bad("items is required")),
    };
    let items = items
        .iter()
        .enumerate()
        .map(|(i, v)| parse_push_item(v, &format!("items[{i}].")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PushRequest { items })
}

/// Parses one push item; `ctx` prefixes error messages (`items[3].`).
pub fn parse_push_item(v: &Value, ctx: &str) -> Result<PushItem, WireError> {
    let obj = as_object(v, ctx.trim_end_matches('.'))?;
    let queue = req_str(obj, "queue", ctx)?;
    check_name(&format!("{ctx}queue"), &queue)?;
    let partition = match opt_str(obj, "partition", ctx)? {
        None => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            check_name(&format!("{ctx}partition"), &p)?;
            p
        }
    };
    let transaction_id = match opt_str(obj, "transactionId", ctx)? {
        Some(t) if t.is_empty() => {
            return Err(WireError::bad(format!(
                "{ctx}transactionId must not be empty"
            )))
        }
        Some(t) if t.len() > 1024 => {
            return Err(WireError::bad(format!(
                "{ctx}transactionId is longer than 1024 bytes"
            )))
        }
        t => t,
    };
    let trace_id = opt_str(obj, "traceId", ctx)?;
    if let Some(t) = &trace_id {
        check_uuid(&format!("{ctx}traceId"), t)?;
    }
    let payload = match obj.get("payload") {
        None => Payload::Absent,
        Some(v) => Payload::Given(Arc::new(v.clone())),
    };
    Ok(PushItem {
        queue,
        partition,
        payload,
        transaction_id,
        trace_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            let err = parse_push(&b).unwrap_err();
            assert_eq!(err.status, 400, "{b}");
            assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn push_3_defaults_and_nulls() {
        let r = parse_push(&json!({"items": [
            {"queue": "q", "partition": null, "transactionId": null, "traceId": null, "extra": 1},
            {"queue": "q", "payload": null},
        ]}))
        .unwrap();
        assert_eq!(r.items[0].partition, "Default");
        assert_eq!(r.items[0].payload, Payload::Absent);
        assert_eq!(r.items[1].payload, Payload::Given(Arc::new(Value::Null)));
        assert!(parse_push(&json!({"items": []})).unwrap().items.is_empty());
    }
}
