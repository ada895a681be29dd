//! `POST /api/v1/transaction` (PROTOCOL.md section 7): pushes and acks that commit
//! together or not at all.

use super::{
    as_object, opt_str, parse_ack_item, parse_push_item, AckItem, AckResult, PushItem, PushResult,
    WireError, WireId, QUEUE_MODE,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum TxnOp {
    /// `{"type":"push","items":[...]}`: push items, following section 2.
    Push(Vec<PushItem>),
    /// `{"type":"ack", ...}`: one acknowledgment, following section 4.
    Ack(AckItem),
}

/// A validated transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct TxnRequest {
    /// `operations`: the pushes and acks to commit together (TXN-1); never empty.
    pub operations: Vec<TxnOp>,
    /// Lease ids that must all be live for the transaction to commit \[PROJECT\].
    pub required_leases: Vec<WireId>,
}

/// One result, tagged with the kind of operation it answers (an extra key, allowed by
/// section 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub enum TxnResult {
    /// A pushed item's result, tagged `"type":"push"`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    Push(PushResult),
    /// An ack's result, tagged `"type":"ack"`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    Ack(AckResult),
}

/// The 200 answer (TXN-3). `results` is empty when the transaction aborted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct TxnResponse {
    /// `transactionId`: the broker's id for this transaction.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `success`: whether every operation committed (TXN-1).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `results`: one per pushed item and per ack, in order.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub results: Vec<TxnResult>,
    /// `error`: why the transaction aborted; absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error: Option<String>,
}

/// The `error` of an aborted transaction (TXN-1): it says that nothing was applied, then why.
pub fn rolled_back(why: &str) -> String {
    format!("transaction rolled back, nothing applied: {why}")
}

/// Why a transaction aborts when one of its `requiredLeases` is not live (TXN-1).
pub fn lease_not_held(lease: impl std::fmt::Display) -> String {
    format!("required lease {lease} is not held")
}

/// Members of a transaction body that other Queen brokers act on and this protocol does
/// not have (key-value gates, timers): TXN-5 refuses them rather than commit without them.
const UNSUPPORTED_MEMBERS: [&str; 2] = ["kv", "timers"];

/// Parses a transaction body (TXN-3: empty `operations` is 400; TXN-5: `kv` or `timers`
/// operations are 400).
pub(crate) fn parse_transaction(body: &Value) -> Result<TxnRequest, WireError> {
    let obj = as_object(body, "transaction body")?;
    for member in UNSUPPORTED_MEMBERS {
        match obj.get(member) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(_) => {
                return Err(WireError::bad(format!(
                "{member} operations are not supported by this broker (TXN-5); nothing was applied"
            )))
            }
        }
    }
    let ops = match obj.get("operations") {
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(WireError::bad("operations must not be empty"))
        }
        Some(Value::Array(a)) => a,
        Some(_) => return Err(WireError::bad("operations must be an array")),
        None => return Err(WireError::bad("operations is required")),
    };
    let mut operations = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let ctx = format!("operations[{i}].");
        let o = as_object(op, &format!("operations[{i}]"))?;
        match opt_str(o, "type", &ctx)?.as_deref() {
            Some("push") => {
                let items = match o.get("items") {
                    Some(Value::Array(a)) => a,
                    _ => return Err(WireError::bad(format!("{ctx}items must be an array"))),
                };
                let items = items
                    .iter()
                    .enumerate()
                    .map(|(j, v)| parse_push_item(v.clone(), || format!("{ctx}items[{j}].")))
                    .collect::<Result<Vec<_>, _>>()?;
                operations.push(TxnOp::Push(items));
            }
            Some("ack") => {
                let group = match opt_str(o, "consumerGroup", &ctx)? {
                    Some(g) if !g.is_empty() => {
                        super::check_name(&format!("{ctx}consumerGroup"), &g)?;
                        g
                    }
                    _ => QUEUE_MODE.to_string(),
                };
                operations.push(TxnOp::Ack(parse_ack_item(op, &ctx, Some(&group))?));
            }
            Some(other) => {
                return Err(WireError::bad(format!(
                    "{ctx}type {other:?} is not push or ack"
                )))
            }
            None => return Err(WireError::bad(format!("{ctx}type is required"))),
        }
    }
    let required_leases = match obj.get("requiredLeases") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v.as_str() {
                Some(s) => WireId::parse("requiredLeases[]", s),
                None => Err(WireError::bad("requiredLeases must hold lease id strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(WireError::bad("requiredLeases must be an array")),
    };
    Ok(TxnRequest {
        operations,
        required_leases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    const P: &str = "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061";

    #[test]
    fn an_ack_operation_with_an_empty_group_is_queue_mode() {
        let ack = |g: &str| {
            let body = json!({"operations": [
                {"type": "ack", "transactionId": "t", "partitionId": P, "consumerGroup": g}
            ]});
            match &parse_transaction(&body).unwrap().operations[0] {
                TxnOp::Ack(a) => a.consumer_group.clone(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(ack(""), QUEUE_MODE);
        assert_eq!(ack("g"), "g");
    }

    #[test]
    fn txn_3_parses_and_rejects() {
        let t = parse_transaction(&json!({"operations": [
            {"type": "push", "items": [{"queue": "q", "payload": 1}]},
            {"type": "ack", "transactionId": "t", "partitionId": P, "status": "completed", "consumerGroup": "g"}
        ]}))
        .unwrap();
        assert_eq!(t.operations.len(), 2);
        match &t.operations[1] {
            TxnOp::Ack(a) => assert_eq!(a.consumer_group, "g"),
            _ => panic!(),
        }
        for bad in [
            json!({"operations": []}),
            json!({"operations": {}}),
            json!({}),
            json!({"operations": [{"type": "pop"}]}),
            json!({"operations": [{"items": []}]}),
            json!({"operations": [{"type": "ack", "partitionId": P}]}),
            json!({"operations": [{"type": "push", "items": [{"queue": 1}]}]}),
            json!({"operations": [{"type": "push", "items": []}], "requiredLeases": ["x"]}),
            // TXN-5: a gate or a timer this broker would not apply.
            json!({"operations": [{"type": "push", "items": []}],
                   "kv": [{"op": "putIfAbsent", "ns": "n", "key": "k", "required": true}]}),
            json!({"operations": [], "timers": [{"at": 1}]}),
            json!({"operations": [{"type": "push", "items": []}], "kv": {"op": "put"}}),
        ] {
            assert_eq!(parse_transaction(&bad).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn txn_results_are_tagged() {
        let r = TxnResult::Ack(AckResult {
            index: 0,
            transaction_id: "t".into(),
            success: true,
            error: None,
            lease_released: false,
            dlq: false,
            noop: false,
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["type"], "ack");
        assert_eq!(serde_json::from_value::<TxnResult>(v).unwrap(), r);
    }
}
