//! `GET /api/v1/dlq` (PROTOCOL.md DLQ-2): the dead-letter listing.

use super::WireError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A validated listing query; every filter is optional.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DlqQuery {
    /// The `queue` filter: only dead letters of that queue's messages.
    pub queue: Option<String>,
    /// The `consumerGroup` filter: only dead letters filed for that group.
    pub consumer_group: Option<String>,
    /// The `partition` filter by partition name.
    pub partition: Option<String>,
    /// `limit`: rows per page, 1 to 1000; default 100 (MGMT-2).
    pub limit: u32,
    /// `offset`: how many matching rows the page skips; default 0.
    pub offset: u64,
}

/// The largest page the listing serves.
pub const MAX_DLQ_LIMIT: u32 = super::MAX_PAGE_LIMIT;

/// Parses the listing's query pairs; `limit` 1..=1000 (default 100), `offset` >= 0.
pub(crate) fn parse_dlq_query(pairs: &[(String, String)]) -> Result<DlqQuery, WireError> {
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
    /// `messages`: this page of the dead letters.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub messages: Vec<DeadLetter>,
    /// `total`: how many dead letters match, over all pages.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub total: u64,
    /// `limit`: the page size used.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub limit: u32,
    /// `offset`: how many matching rows come before this page.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub offset: u64,
}

/// One dead letter: a message filed for one group (DLQ-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DeadLetter {
    /// `id`: the message's id.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub id: String,
    /// `transactionId`: the message's transactionId.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `partitionId`: the UUID of the message's partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition_id: String,
    /// `partition`: the name of the message's partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition: String,
    /// `queue`: the name of the message's queue.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `consumerGroup`: the group the dead letter was filed for.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_group: String,
    /// `errorMessage`: the `error` of the ack that filed it (ACK-6), or `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error_message: Option<String>,
    /// `retryCount`: the retries charged to the message for that group when it was filed.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub retry_count: u32,
    /// `data`: the payload as a pop delivers it (ENC-1); `null` beside `dataError` when it cannot
    /// be delivered.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub data: Value,
    /// POP-16: why the stored payload cannot be shown (`data` is then `null`); absent
    /// for every payload a consumer can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_error: Option<String>,
    /// `createdAt`: when the message was written, ISO-8601 UTC (POP-12).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub created_at: String,
    /// `failedAt`: when the dead letter was filed, ISO-8601 UTC.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
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
