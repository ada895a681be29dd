//! `POST /api/v1/ack` and `POST /api/v1/ack/batch` (PROTOCOL.md section 4).

use super::{as_object, check_name, opt_str, req_str, WireError, WireId, QUEUE_MODE};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The four ack statuses, ordered by ACK-2 precedence (weakest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
// The variants' docs are left out of the `openapi` build: a doc on a unit variant
// would turn the schema's string `enum` into a `oneOf` (spec/openapi.json).
#[cfg_attr(feature = "openapi", allow(missing_docs))]
pub enum AckStatus {
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`completed`: commits the cursor to the message (ACK-1)."
    )]
    Completed,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`retry`: releases the lease; the message comes back at once, no retry spent (ACK-6)."
    )]
    Retry,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`failed`: releases the lease and spends one retry, or files a dead letter when none is left (ACK-6, DLQ-1)."
    )]
    Failed,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`dlq`: files the message in the dead-letter queue now, spending nothing (ACK-6)."
    )]
    Dlq,
}

/// One validated acknowledgment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AckItem {
    /// `transactionId`: names, with the partition, the newest message with that id (ACK-8).
    pub transaction_id: String,
    /// `partitionId`: the partition of the acknowledged message.
    pub partition_id: WireId,
    /// `status`: the ack's signal; `completed` when absent or `true`, `failed` for `false`.
    pub status: AckStatus,
    /// Already defaulted to `__QUEUE_MODE__`.
    pub consumer_group: String,
    /// `None` when absent, `null` or `""` (an autoAck message carries `""`).
    pub lease_id: Option<WireId>,
    /// `error`: the reason a `failed` or `dlq` ack gives, kept as the dead letter's `errorMessage`
    /// (ACK-6).
    pub error: Option<String>,
}

/// One item of the 200 answer (section 4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AckResult {
    /// `index`: the acknowledgment's place in the request, from 0.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub index: usize,
    /// `transactionId`: the transactionId the acknowledgment named.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `success`: whether the ack was accepted (ACK-0).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `error`: why it was not (`already committed`, `unresolvable`, `invalid or expired lease`),
    /// else `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error: Option<String>,
    /// `leaseReleased`: whether this call released the `(partition, group)`'s lease (ACK step 5).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lease_released: bool,
    /// `dlq`: whether this call filed the message as a dead letter.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub dlq: bool,
    /// `noop`: a completion at or below the cursor, accepted without effect (ACK-3).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub noop: bool,
}

impl AckResult {
    /// An item with no lease released and no dead letter; the caller sets those.
    pub fn new(
        index: usize,
        transaction_id: &str,
        success: bool,
        error: Option<&str>,
        noop: bool,
    ) -> AckResult {
        AckResult {
            index,
            transaction_id: transaction_id.to_string(),
            success,
            error: error.map(str::to_string),
            lease_released: false,
            dlq: false,
            noop,
        }
    }
}

/// The error of a failure signal at or below the cursor (ACK-3); the texts below are fixed by
/// the spec too.
pub const ERR_ALREADY_COMMITTED: &str = "already committed";
/// The error of an ack whose message cannot be resolved in its partition (ACK-3, ACK-8).
pub const ERR_UNRESOLVABLE: &str = "unresolvable";
/// The error of an ack whose `leaseId` is not the live lease, or whose offset is outside it (ACK-5,
/// ACK-10).
pub const ERR_INVALID_LEASE: &str = "invalid or expired lease";

fn parse_status(v: Option<&Value>, ctx: &str) -> Result<AckStatus, WireError> {
    match v {
        None | Some(Value::Null) => Ok(AckStatus::Completed),
        Some(Value::Bool(true)) => Ok(AckStatus::Completed),
        Some(Value::Bool(false)) => Ok(AckStatus::Failed),
        Some(Value::String(s)) => match s.as_str() {
            "completed" => Ok(AckStatus::Completed),
            "failed" => Ok(AckStatus::Failed),
            "retry" => Ok(AckStatus::Retry),
            "dlq" => Ok(AckStatus::Dlq),
            other => Err(WireError::bad(format!(
                "{ctx}status {other:?} is not one of completed, failed, retry, dlq"
            ))),
        },
        Some(_) => Err(WireError::bad(format!(
            "{ctx}status must be a string or a boolean"
        ))),
    }
}

fn parse_group(obj: &Map<String, Value>, ctx: &str) -> Result<Option<String>, WireError> {
    match opt_str(obj, "consumerGroup", ctx)? {
        Some(g) if g.is_empty() => Ok(None),
        Some(g) => {
            check_name(&format!("{ctx}consumerGroup"), &g)?;
            Ok(Some(g))
        }
        None => Ok(None),
    }
}

/// Parses one acknowledgment object; `group` is the call's group when the item has none.
pub(crate) fn parse_ack_item(
    v: &Value,
    ctx: &str,
    group: Option<&str>,
) -> Result<AckItem, WireError> {
    let obj = as_object(
        v,
        if ctx.is_empty() {
            "ack body"
        } else {
            ctx.trim_end_matches('.')
        },
    )?;
    let transaction_id = req_str(obj, "transactionId", ctx)?;
    let partition_id = WireId::parse(
        &format!("{ctx}partitionId"),
        &req_str(obj, "partitionId", ctx)?,
    )?;
    let status = parse_status(obj.get("status"), ctx)?;
    let lease_id = match opt_str(obj, "leaseId", ctx)? {
        Some(l) if l.is_empty() => None,
        Some(l) => Some(WireId::parse(&format!("{ctx}leaseId"), &l)?),
        None => None,
    };
    let error = opt_str(obj, "error", ctx)?;
    let consumer_group = group.unwrap_or(QUEUE_MODE).to_string();
    Ok(AckItem {
        transaction_id,
        partition_id,
        status,
        consumer_group,
        lease_id,
        error,
    })
}

/// Parses a single ack body: one acknowledgment with its own `consumerGroup` (ACK-0).
pub fn parse_ack(body: &Value) -> Result<AckItem, WireError> {
    let obj = as_object(body, "ack body")?;
    let group = parse_group(obj, "")?;
    parse_ack_item(body, "", group.as_deref())
}

/// Parses a batch ack body: `{"consumerGroup"?, "acknowledgments":[...]}` (ACK-0).
pub fn parse_ack_batch(body: &Value) -> Result<Vec<AckItem>, WireError> {
    let obj = as_object(body, "ack batch body")?;
    let group = parse_group(obj, "")?;
    let list = match obj.get("acknowledgments") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(WireError::bad("acknowledgments must be an array")),
        None => return Err(WireError::bad("acknowledgments is required")),
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| parse_ack_item(v, &format!("acknowledgments[{i}]."), group.as_deref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const P: &str = "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061";
    const L: &str = "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90";

    #[test]
    fn ack_answer_round_trips_the_seed_literal() {
        let lit = r#"[{"index":0,"transactionId":"0198...","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false}]"#;
        let parsed: Vec<AckResult> = serde_json::from_str(lit).unwrap();
        assert!(parsed[0].success && parsed[0].lease_released);
        assert_eq!(serde_json::to_string(&parsed).unwrap(), lit);
    }

    #[test]
    fn ack_statuses_accept_booleans_and_null() {
        let item = |s: Value| {
            parse_ack(&json!({"transactionId": "t", "partitionId": P, "status": s}))
                .unwrap()
                .status
        };
        assert_eq!(item(json!(true)), AckStatus::Completed);
        assert_eq!(item(json!(false)), AckStatus::Failed);
        assert_eq!(item(Value::Null), AckStatus::Completed);
        assert_eq!(item(json!("retry")), AckStatus::Retry);
        assert_eq!(item(json!("dlq")), AckStatus::Dlq);
        // The Python client sends null for absent fields.
        let a = parse_ack(&json!({"transactionId": "t", "partitionId": P, "leaseId": null, "consumerGroup": null, "error": null})).unwrap();
        assert_eq!(a.consumer_group, QUEUE_MODE);
        assert_eq!(a.lease_id, None);
    }

    #[test]
    fn ack_0_malformed_calls_are_400() {
        let bad = [
            json!("x"),
            json!({"partitionId": P}),
            json!({"transactionId": "t"}),
            json!({"transactionId": "t", "partitionId": P, "status": "done"}),
            json!({"transactionId": "t", "partitionId": P, "status": 3}),
            json!({"transactionId": "t", "partitionId": "nope"}),
            json!({"transactionId": "t", "partitionId": P, "leaseId": "nope"}),
            json!({"transactionId": 5, "partitionId": P}),
        ];
        for b in bad {
            assert_eq!(parse_ack(&b).unwrap_err().status, 400, "{b}");
        }
        // An empty group is no group (queue mode), as an absent one.
        let no_group = parse_ack(&json!({"transactionId": "t", "partitionId": P})).unwrap();
        let empty_group =
            parse_ack(&json!({"transactionId": "t", "partitionId": P, "consumerGroup": ""}));
        assert_eq!(empty_group.unwrap(), no_group);
        let empty = parse_ack(&json!({"transactionId": "", "partitionId": P})).unwrap_err();
        assert_eq!(empty.message, "transactionId must not be empty");
        assert!(parse_ack_batch(&json!({"acknowledgments": {}})).is_err());
        assert!(parse_ack_batch(&json!({})).is_err());
        assert!(parse_ack_batch(&json!({"acknowledgments": [{"transactionId": "t"}]})).is_err());
        let ok = parse_ack_batch(&json!({"consumerGroup": "g", "acknowledgments": [
            {"transactionId": "t", "partitionId": P, "leaseId": L, "status": "failed", "error": "boom"}
        ]}))
        .unwrap();
        assert_eq!(ok[0].consumer_group, "g");
        assert_eq!(ok[0].error.as_deref(), Some("boom"));
    }

    #[test]
    fn ack_2_precedence_order() {
        assert!(AckStatus::Dlq > AckStatus::Failed);
        assert!(AckStatus::Failed > AckStatus::Retry);
        assert!(AckStatus::Retry > AckStatus::Completed);
    }
}
