//! The three pop routes (PROTOCOL.md section 3): query parsing and the 200 answer.

use super::{check_name, WireError, QUEUE_MODE};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which pop route was called.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PopRoute {
    /// `/api/v1/pop/queue/{queue}`: the broker chooses partitions.
    Queue(String),
    /// `/api/v1/pop/queue/{queue}/partition/{partition}`.
    Partition(String, String),
    /// `/api/v1/pop?namespace=&task=`: discovery (at least one of the two).
    Discovery {
        /// The `namespace` the popped queues must have, if given.
        namespace: Option<String>,
        /// The `task` the popped queues must have, if given.
        task: Option<String>,
    },
}

impl PopRoute {
    /// The request path (percent-encoded) and the route-specific query pairs.
    pub fn path(&self) -> String {
        match self {
            PopRoute::Queue(q) => format!("/api/v1/pop/queue/{}", encode_segment(q)),
            PopRoute::Partition(q, p) => format!(
                "/api/v1/pop/queue/{}/partition/{}",
                encode_segment(q),
                encode_segment(p)
            ),
            PopRoute::Discovery { .. } => "/api/v1/pop".to_string(),
        }
    }
}

/// Percent-encodes one path segment (RFC 3986 unreserved characters pass through).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The validated query of a pop, with the defaults of section 3 applied.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PopQuery {
    /// `batch`: the call's total message budget, spent partition by partition (POP-3); default 200.
    pub batch: u32,
    /// `None` means no cap (`partitions` 0 or negative).
    pub partitions: Option<u32>,
    /// `autoAck`: commit each claimed span inside the pop instead of leasing it (POP-7); default
    /// false.
    pub auto_ack: bool,
    /// `wait`: park until a message is claimable or `timeout` passes (POP-11); default false.
    pub wait: bool,
    /// `timeout`: how long, in milliseconds, a `wait` pop parks (POP-11).
    pub timeout_ms: u64,
    /// `None` when absent or `<= 0` (POP-9: then the queue's `leaseTime`).
    pub lease_seconds: Option<u32>,
    /// `consumerGroup`: the group whose cursors the pop reads; default `__QUEUE_MODE__`.
    pub consumer_group: String,
    /// `subscriptionMode`: where a group without a cursor starts (`all`, `new`; POP-13); default
    /// `all`.
    pub subscription_mode: String,
    /// `subscriptionFrom`: `now` or an ISO-8601 time a new group starts at (POP-13); default empty.
    pub subscription_from: String,
}

impl PopQuery {
    /// The defaults of section 3, with `timeout` taken from the caller (it comes from
    /// the broker's environment: `DEFAULT_TIMEOUT`, `POP_DEFAULT_TIMEOUT_MS`, 30000).
    pub fn defaults(default_timeout_ms: u64) -> PopQuery {
        PopQuery {
            batch: 200,
            partitions: Some(1),
            auto_ack: false,
            wait: false,
            timeout_ms: default_timeout_ms,
            lease_seconds: None,
            consumer_group: QUEUE_MODE.to_string(),
            subscription_mode: "all".to_string(),
            subscription_from: String::new(),
        }
    }
}

/// The default long-poll timeout in milliseconds (section 3).
pub const DEFAULT_POP_TIMEOUT_MS: u64 = 30_000;

fn parse_int(key: &str, v: &str) -> Result<i64, WireError> {
    v.trim().parse::<i64>().map_err(|_| {
        WireError::bad(format!(
            "query parameter {key} must be an integer, got {v:?}"
        ))
    })
}

fn parse_bool(key: &str, v: &str) -> Result<bool, WireError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(WireError::bad(format!(
            "query parameter {key} must be true or false, got {v:?}"
        ))),
    }
}

/// Parses the query pairs of a pop (already percent-decoded). Unknown keys are ignored;
/// a value that does not parse is 400 (POP-10). For the discovery route the caller
/// reads `namespace`/`task` with `discovery_scope`.
pub fn parse_pop_query(
    pairs: &[(String, String)],
    default_timeout_ms: u64,
) -> Result<PopQuery, WireError> {
    let mut q = PopQuery::defaults(default_timeout_ms);
    for (k, v) in pairs {
        match k.as_str() {
            "batch" => {
                let n = parse_int(k, v)?;
                if n < 1 {
                    return Err(WireError::bad(format!("batch must be at least 1, got {n}")));
                }
                q.batch = n.min(u32::MAX as i64) as u32;
            }
            "partitions" => {
                let n = parse_int(k, v)?;
                q.partitions = if n <= 0 {
                    None
                } else {
                    Some(n.min(u32::MAX as i64) as u32)
                };
            }
            "autoAck" => q.auto_ack = parse_bool(k, v)?,
            "wait" => q.wait = parse_bool(k, v)?,
            "timeout" => {
                let n = parse_int(k, v)?;
                if n < 0 {
                    return Err(WireError::bad(format!(
                        "timeout must not be negative, got {n}"
                    )));
                }
                q.timeout_ms = n as u64;
            }
            "leaseSeconds" => {
                let n = parse_int(k, v)?;
                q.lease_seconds = if n <= 0 {
                    None
                } else {
                    Some(n.min(u32::MAX as i64) as u32)
                };
            }
            "consumerGroup" => {
                if v.is_empty() {
                    q.consumer_group = QUEUE_MODE.to_string();
                } else {
                    check_name("consumerGroup", v)?;
                    q.consumer_group = v.clone();
                }
            }
            "subscriptionMode" => q.subscription_mode = v.clone(),
            "subscriptionFrom" => q.subscription_from = v.clone(),
            _ => {}
        }
    }
    Ok(q)
}

/// Reads the discovery scope; neither given is the exact 400 of POP-10.
pub fn discovery_scope(pairs: &[(String, String)]) -> Result<PopRoute, WireError> {
    let get = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let namespace = get("namespace");
    let task = get("task");
    if namespace.is_none() && task.is_none() {
        return Err(WireError::bad(DISCOVERY_SCOPE_ERROR));
    }
    Ok(PopRoute::Discovery { namespace, task })
}

/// The error text of POP-10, also carried in [`DiscoveryError`].
const DISCOVERY_SCOPE_ERROR: &str = "namespace or task is required";

/// The exact 400 body of a discovery pop without scope (POP-10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub(crate) struct DiscoveryError {
    /// `success`: always false.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `error`: always [`DISCOVERY_SCOPE_ERROR`].
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error: String,
    /// `messages`: always empty.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub messages: Vec<Value>,
}

impl DiscoveryError {
    /// The one body POP-10 prescribes.
    pub(crate) fn new() -> DiscoveryError {
        DiscoveryError {
            success: false,
            error: DISCOVERY_SCOPE_ERROR.to_string(),
            messages: vec![],
        }
    }
}

impl Default for DiscoveryError {
    fn default() -> Self {
        Self::new()
    }
}

/// A 200 pop answer (POP-5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PopResponse {
    /// `success`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `queue`: the popped queue's name; `""` on a discovery pop.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `partition`: the name of the first claimed partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition: String,
    /// `partitionId`: the UUID of the first claimed partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition_id: String,
    /// `leaseId`: the lease the pop took on every claimed partition; `""` with `autoAck` (POP-7).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lease_id: String,
    /// `consumerGroup`: the group the pop read for.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_group: String,
    /// `messages`: the delivered messages, partition by partition in offset order.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub messages: Vec<PopMessage>,
    /// `partitionsClaimed`: how many partitions the pop claimed.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions_claimed: u32,
}

impl PopResponse {
    /// The transactionIds of a pop's answer, in delivery order; none for a 204 (`None`).
    pub fn transaction_ids(answer: &Option<PopResponse>) -> Vec<String> {
        answer.as_ref().map_or_else(Vec::new, |p| {
            p.messages
                .iter()
                .map(|m| m.transaction_id.clone())
                .collect()
        })
    }
}

/// One delivered message (POP-5): no offset, attempt count, expiry or queue name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PopMessage {
    /// `id`: the message's id (UUIDv7, broker-minted).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub id: String,
    /// `transactionId`: the message's transactionId, client-given or broker-minted (PUSH-4).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `traceId`: the trace id the push gave, or `null` (PUSH-9).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub trace_id: Option<String>,
    // The payload as pushed, carried as its text (`RawJson`); described as any value.
    /// `data`: the pushed payload, verbatim (POP-17).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub data: super::RawJson,
    /// `producerSub`: the `sub` of the token that pushed it (AUTH-2), or `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub producer_sub: Option<String>,
    /// `createdAt`: the time of the write that stored it, ISO-8601 UTC with `Z` (POP-12).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub created_at: String,
    /// `partitionId`: the UUID of its partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition_id: String,
    /// `partition`: the name of its partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition: String,
    /// `leaseId`: the pop's lease id; `""` with `autoAck` (POP-7).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lease_id: String,
    /// `consumerGroup`: the group it was delivered to.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_group: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_read_true_false_one_zero_and_empty() {
        for (v, want) in [
            ("true", true),
            ("1", true),
            ("FALSE", false),
            ("0", false),
            ("", false),
        ] {
            assert_eq!(parse_bool("autoAck", v), Ok(want), "{v:?}");
        }
        assert!(parse_bool("autoAck", "yes").is_err());
    }

    #[test]
    fn a_zero_timeout_is_allowed_and_a_negative_one_is_not() {
        let q = parse_pop_query(&pairs(&[("timeout", "0")]), DEFAULT_POP_TIMEOUT_MS).unwrap();
        assert_eq!(q.timeout_ms, 0);
        assert!(parse_pop_query(&pairs(&[("timeout", "-1")]), DEFAULT_POP_TIMEOUT_MS).is_err());
    }

    fn pairs(s: &[(&str, &str)]) -> Vec<(String, String)> {
        s.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pop_5_answer_round_trips_the_seed_literal() {
        let lit = r#"{"success":true,"queue":"orders.created","partition":"customer-42","partitionId":"b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061","leaseId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","consumerGroup":"billing","messages":[{"id":"0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83","transactionId":"order-8891-created","traceId":null,"data":{"orderId":8891,"total":4200},"producerSub":null,"createdAt":"2026-07-30T11:02:44.512873Z","partitionId":"b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061","partition":"customer-42","leaseId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","consumerGroup":"billing"}],"partitionsClaimed":1}"#;
        let parsed: PopResponse = serde_json::from_str(lit).unwrap();
        assert_eq!(parsed.messages[0].transaction_id, "order-8891-created");
        assert_eq!(parsed.messages[0].trace_id, None);
        assert_eq!(serde_json::to_string(&parsed).unwrap(), lit);
    }

    #[test]
    fn pop_defaults_follow_section_3() {
        let q = parse_pop_query(&[], DEFAULT_POP_TIMEOUT_MS).unwrap();
        assert_eq!(q.batch, 200);
        assert_eq!(q.partitions, Some(1));
        assert!(!q.auto_ack && !q.wait);
        assert_eq!(q.timeout_ms, 30_000);
        assert_eq!(q.lease_seconds, None);
        assert_eq!(q.consumer_group, "__QUEUE_MODE__");
        assert_eq!(q.subscription_mode, "all");
    }

    #[test]
    fn pop_9_non_positive_lease_seconds_is_absent_and_partitions_zero_is_no_cap() {
        let q = parse_pop_query(&pairs(&[("leaseSeconds", "0"), ("partitions", "-1")]), 1).unwrap();
        assert_eq!(q.lease_seconds, None);
        assert_eq!(q.partitions, None);
        let q = parse_pop_query(&pairs(&[("leaseSeconds", "7"), ("unknown", "x")]), 1).unwrap();
        assert_eq!(q.lease_seconds, Some(7));
    }

    #[test]
    fn pop_10_unparseable_parameters_are_400() {
        for (k, v) in [
            ("batch", "abc"),
            ("batch", "0"),
            ("wait", "maybe"),
            ("timeout", "-5"),
            ("partitions", "1.5"),
        ] {
            let e = parse_pop_query(&pairs(&[(k, v)]), 1).unwrap_err();
            assert_eq!(e.status, 400, "{k}={v}");
        }
        let e = discovery_scope(&pairs(&[("batch", "1")])).unwrap_err();
        assert_eq!(e.message, "namespace or task is required");
        let body = serde_json::to_string(&DiscoveryError::new()).unwrap();
        assert_eq!(
            body,
            r#"{"success":false,"error":"namespace or task is required","messages":[]}"#
        );
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(
            PopRoute::Queue("a b/ü".into()).path(),
            "/api/v1/pop/queue/a%20b%2F%C3%BC"
        );
    }
}
