//! `GET /api/v1/dlq` (PROTOCOL.md DLQ-2): the dead-letter listing.

use super::WireError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A validated listing query; every filter is optional.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DlqQuery {
    pub queue: Option<String>,
    pub consumer_group: Option<String>,
    pub partition: Option<String>,
    pub limit: u32,
    pub offset: u64,
}

/// The largest page the listing serves.
pub const MAX_DLQ_LIMIT: u32 = super::MAX_PAGE_LIMIT;

/// Parses the listing's query pairs; `limit` 1..=1000 (default 100), `offset` >= 0.
pub fn parse_dlq_query(pairs: &[(String, String)]) -> Result<DlqQuery, WireError> {
    let mut q = DlqQuery {
        queue: None,
        consumer_group: None,
        partition: None,
        limit: 100,
        offset: 0,
    };
    let page = super::parse_page(pairs)?;
    (q.limit, q.offset) = (page.limit, page.offset);
    for (k, v) in pairs {
        let nonempty = (!v.is_empty()).then(|| v.clone());
        match k.as_str() {
            "queue" => q.queue = nonempty,
            "consumerGroup" => q.consumer_group = nonempty,
            "partition" => q.partition = nonempty,
            _ => {}
        }
    }
    Ok(q)
}

/// The listing (DLQ-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DlqResponse {
    pub messages: Vec<DeadLetter>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// One dead letter: a message filed for one group (DLQ-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DeadLetter {
    pub id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub partition: String,
    pub queue: String,
    pub consumer_group: String,
    pub error_message: Option<String>,
    pub retry_count: u32,
    pub data: Value,
    /// POP-16: why the stored payload cannot be shown (`data` is then `null`); absent
    /// for every payload a consumer can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_error: Option<String>,
    pub created_at: String,
    pub failed_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlq_2_query_defaults_and_bounds() {
        let q = parse_dlq_query(&[]).unwrap();
        assert_eq!((q.limit, q.offset), (100, 0));
        let p = |k: &str, v: &str| parse_dlq_query(&[(k.to_string(), v.to_string())]);
        assert!(p("limit", "0").is_err());
        assert!(p("limit", "1001").is_err());
        assert!(p("offset", "-1").is_err());
        assert_eq!(p("queue", "q").unwrap().queue.as_deref(), Some("q"));
    }
}
