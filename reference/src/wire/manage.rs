//! The management and observability routes (PROTOCOL.md section 17, MGMT-1..10).
//!
//! The official clients' admin calls read these answers as JSON objects, so the shapes
//! are the project's (MGMT-3..7), written once here: the model builds them, the
//! PostgreSQL engine fills them from its tables, and the suite reads them back. Reads
//! are [`ManageRequest`]s like any other request, so they are parsed once and judged
//! against the model like a push or a pop; two of them (seek, group delete) change
//! cursors and are the only ones that do.

use super::WireId;
use super::{check_name, parse_json, route::decode_segment, EchoedOptions, RouteId, WireError};
use crate::time::{parse_iso, Millis};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest page a listing serves (MGMT-2).
pub const MAX_PAGE_LIMIT: u32 = 1000;
/// The page size when `limit` is absent (MGMT-2).
const DEFAULT_PAGE_LIMIT: u32 = 100;
/// `minLagSeconds` when absent (MGMT-3).
const DEFAULT_MIN_LAG_SECONDS: u64 = 60;

/// One page of a listing (MGMT-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Page {
    /// Rows per page, 1 to `MAX_PAGE_LIMIT` (MGMT-2); `DEFAULT_PAGE_LIMIT` when `limit` is absent.
    pub limit: u32,
    /// Any integer ≥ 0 (MGMT-2); one past every row is an empty page.
    pub offset: u64,
}

impl Default for Page {
    fn default() -> Page {
        Page {
            limit: DEFAULT_PAGE_LIMIT,
            offset: 0,
        }
    }
}

impl Page {
    /// The rows of this page out of `rows`, with how many there were in all.
    pub(crate) fn cut<T>(&self, rows: impl IntoIterator<Item = T>) -> (Vec<T>, u64) {
        let mut total = 0u64;
        let mut kept = Vec::new();
        for (i, r) in rows.into_iter().enumerate() {
            total += 1;
            if i as u64 >= self.offset && kept.len() < self.limit as usize {
                kept.push(r);
            }
        }
        (kept, total)
    }
}

/// A message's state for one group (MGMT-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
// The variants' docs are left out of the `openapi` build: a doc on a unit variant
// would turn the schema's string `enum` into a `oneOf` (spec/openapi.json).
#[cfg_attr(feature = "openapi", allow(missing_docs))]
pub enum MessageStatus {
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "Above the group's cursor, outside its live lease and not dead-lettered by it (`pending`)."
    )]
    Pending,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "Inside the group's live lease, above its cursor (`leased`)."
    )]
    Leased,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "At or below the group's cursor (`completed`)."
    )]
    Completed,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "The group filed a dead letter of the message (`deadLettered`), whatever its cursor."
    )]
    DeadLettered,
}

impl MessageStatus {
    /// The status named by a `status` query value (`pending`, `leased`, `completed`,
    /// `deadLettered`); `None` for any other text, which MGMT-6 answers 400.
    pub fn parse(s: &str) -> Option<MessageStatus> {
        serde_json::from_value(Value::String(s.to_string())).ok()
    }
}

/// Where a seek moves a group's cursors (MGMT-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeekTo {
    /// To each partition's last offset.
    End,
    /// To the last message created before this moment.
    Time(Millis),
}

/// The peek query (MGMT-6).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MessageQuery {
    /// The `queue` filter, or the queue named in the path of MGMT-5's peek route; `None` peeks
    /// every queue.
    pub queue: Option<String>,
    /// MGMT-5's route named the queue in its path: a queue that does not exist is 404
    /// (MGMT-1), where the `queue` filter of `/api/v1/messages` simply finds nothing.
    pub in_path: bool,
    /// The `partition` filter by partition name; `None` peeks every partition.
    pub partition: Option<String>,
    /// The group whose `status` and `retryCount` each row shows (`consumerGroup`, default
    /// `__QUEUE_MODE__`).
    pub group: String,
    /// The `status` filter: only rows in that state for the group; `None` keeps every row.
    pub status: Option<MessageStatus>,
    /// Which page of the matching rows to answer (MGMT-2).
    pub page: Page,
}

/// Every management request, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ManageRequest {
    /// `GET /api/v1/resources/overview`: the system's totals (MGMT-4).
    Overview,
    /// `GET /api/v1/status`: the overview with the maintenance switches (MGMT-5).
    Status,
    /// `GET /api/v1/resources/queues` and `/status/queues`: a page of queues (MGMT-4, MGMT-5).
    Queues {
        /// The `namespace` filter: only queues in this namespace.
        namespace: Option<String>,
        /// The `task` filter: only queues with this task.
        task: Option<String>,
        /// Which page of the matching queues to answer (MGMT-2).
        page: Page,
    },
    /// `GET /api/v1/resources/queues/{queue}`: one queue with its options (MGMT-4).
    Queue(String),
    /// `GET /api/v1/status/queues/{queue}`: one queue with a page of its partitions (MGMT-5).
    StatusQueue {
        /// The queue named in the path.
        queue: String,
        /// Which page of the queue's partitions to answer (MGMT-2).
        page: Page,
    },
    /// `GET /api/v1/resources/queues/{queue}/depth`: the queue's backlog (MGMT-4).
    Depth {
        /// The queue named in the path.
        queue: String,
        /// The `group` whose lag is counted; `None` takes per partition the largest lag of the
        /// groups reading it.
        group: Option<String>,
        /// Which page of the partitions with something pending to answer (MGMT-2).
        page: Page,
    },
    /// `GET /api/v1/resources/partitions`: a page of partitions (MGMT-4).
    Partitions {
        /// The `queue` filter: only that queue's partitions; `None` lists every queue's.
        queue: Option<String>,
        /// Which page of the matching partitions to answer (MGMT-2).
        page: Page,
    },
    /// `GET /api/v1/resources/namespaces`: a page of namespaces with their queue counts (MGMT-4).
    Namespaces(Page),
    /// `GET /api/v1/resources/tasks`: a page of tasks with their queue counts (MGMT-4).
    Tasks(Page),
    /// `GET /api/v1/consumer-groups`: a page of the listed groups (MGMT-3).
    Groups(Page),
    /// `GET /api/v1/consumer-groups/{group}`: one group, 404 when it is not listed (MGMT-3).
    Group(String),
    /// `GET /api/v1/consumer-groups/lagging`: the groups lagging on some queue (MGMT-3).
    Lagging {
        /// `minLagSeconds`: the lag in seconds a group must reach on a queue to be listed.
        min_lag_seconds: u64,
        /// Which page of the lagging groups to answer (MGMT-2).
        page: Page,
    },
    /// `GET /api/v1/messages` or `/status/queues/{queue}/messages`: the peek (MGMT-6, MGMT-5).
    Messages(MessageQuery),
    /// MGMT-13.
    Analytics(super::AnalyticsQuery),
    /// `GET /api/v1/messages/{partitionId}/{transactionId}`: one message with every reading group's
    /// view of it (MGMT-7).
    Message {
        /// The partition's UUID from the path, parsed once.
        partition_id: WireId,
        /// The message's transactionId from the path.
        transaction_id: String,
    },
    /// One partition when `partition` is named, else every partition of the queue.
    Seek {
        /// The consumer group whose cursors move.
        group: String,
        /// The queue whose partitions are sought.
        queue: String,
        /// The one partition named in the path, or `None` for every partition of the queue.
        partition: Option<String>,
        /// Where the cursors go: the end, or a moment (`toEnd` or `timestamp`).
        to: SeekTo,
    },
    /// The seek to a time on every queue the group reads or subscribed to (MGMT-8).
    Subscription {
        /// The consumer group sought.
        group: String,
        /// The `subscriptionTimestamp`: where its cursors go and its subscriptions start.
        at: Millis,
    },
    /// MGMT-12.
    Retry {
        /// The partition's UUID from the path, parsed once.
        partition_id: WireId,
        /// The dead-lettered message's transactionId from the path.
        transaction_id: String,
    },
    /// `DELETE /api/v1/consumer-groups/{group}[/queues/{queue}]`: removes a group's cursors and
    /// leases (MGMT-9).
    DeleteGroup {
        /// The consumer group deleted.
        group: String,
        /// The queue the delete keeps to, or `None` for every queue.
        queue: Option<String>,
        /// `deleteMetadata` (default true): whether the group's subscriptions go too.
        delete_metadata: bool,
    },
    /// MGMT-11.
    DeleteMessage {
        /// The partition's UUID from the path, parsed once.
        partition_id: WireId,
        /// The transactionId of the message deleted, the newest retained one with it.
        transaction_id: String,
    },
}

impl ManageRequest {
    /// Whether the request only reads (MGMT-1): everything but seeks, a retry and deletes.
    pub fn is_read(&self) -> bool {
        self.route().route().method == "GET"
    }
}

/// Parses a management request on `route` (section 17), whose path's variable segments,
/// not yet decoded, are `vars` in order; `None` when the route is not one of section 17.
pub(crate) fn parse_manage(
    route: RouteId,
    vars: &[&str],
    query: &[(String, String)],
    body: &[u8],
) -> Option<Result<ManageRequest, WireError>> {
    use RouteId as R;
    let seg = |i: usize| decode_segment(vars[i]);
    let named = |kind: &str, i: usize| -> Result<String, WireError> {
        let s = seg(i)?;
        check_name(kind, &s)?;
        Ok(s)
    };
    let message = |i: usize| -> Result<(WireId, String), WireError> {
        let partition_id = WireId::parse("partitionId", &seg(i)?)?;
        Ok((partition_id, seg(i + 1)?))
    };
    let r = match route {
        R::Overview => Ok(ManageRequest::Overview),
        R::Status => Ok(ManageRequest::Status),
        R::Queues | R::StatusQueues => parse_page(query).map(|page| ManageRequest::Queues {
            namespace: param(query, "namespace"),
            task: param(query, "task"),
            page,
        }),
        R::Queue => named("queue", 0).map(ManageRequest::Queue),
        R::StatusQueue => named("queue", 0).and_then(|queue| {
            Ok(ManageRequest::StatusQueue {
                queue,
                page: parse_page(query)?,
            })
        }),
        R::Depth => named("queue", 0).and_then(|queue| {
            Ok(ManageRequest::Depth {
                queue,
                group: param(query, "group"),
                page: parse_page(query)?,
            })
        }),
        R::Partitions => parse_page(query).map(|page| ManageRequest::Partitions {
            queue: param(query, "queue"),
            page,
        }),
        R::Namespaces => parse_page(query).map(ManageRequest::Namespaces),
        R::Tasks => parse_page(query).map(ManageRequest::Tasks),
        R::Groups => parse_page(query).map(ManageRequest::Groups),
        R::Lagging => parse_min_lag(query).and_then(|min_lag_seconds| {
            Ok(ManageRequest::Lagging {
                min_lag_seconds,
                page: parse_page(query)?,
            })
        }),
        R::Group => named("consumer group", 0).map(ManageRequest::Group),
        R::Analytics => super::AnalyticsQuery::parse(query).map(ManageRequest::Analytics),
        R::Messages => parse_message_query(query).map(ManageRequest::Messages),
        // MGMT-5: one queue's messages, the peek with its queue in the path.
        R::QueueMessages => named("queue", 0).and_then(|queue| {
            let mut q = parse_message_query(query)?;
            q.queue = Some(queue);
            q.in_path = true;
            Ok(ManageRequest::Messages(q))
        }),
        R::Message => message(0).map(|(partition_id, transaction_id)| ManageRequest::Message {
            partition_id,
            transaction_id,
        }),
        R::Seek | R::SeekPartition => (|| {
            Ok(ManageRequest::Seek {
                group: named("consumer group", 0)?,
                queue: named("queue", 1)?,
                partition: match route {
                    R::SeekPartition => Some(named("partition", 2)?),
                    _ => None,
                },
                to: parse_seek(body)?,
            })
        })(),
        R::Subscription => (|| {
            Ok(ManageRequest::Subscription {
                group: named("consumer group", 0)?,
                at: parse_subscription(body)?,
            })
        })(),
        R::Retry => message(0).map(|(partition_id, transaction_id)| ManageRequest::Retry {
            partition_id,
            transaction_id,
        }),
        R::DeleteMessage => {
            message(0).map(
                |(partition_id, transaction_id)| ManageRequest::DeleteMessage {
                    partition_id,
                    transaction_id,
                },
            )
        }
        R::DeleteGroup | R::DeleteGroupQueue => (|| {
            Ok(ManageRequest::DeleteGroup {
                group: named("consumer group", 0)?,
                queue: match route {
                    R::DeleteGroupQueue => Some(named("queue", 1)?),
                    _ => None,
                },
                delete_metadata: parse_delete_metadata(query)?,
            })
        })(),
        _ => return None,
    };
    Some(r)
}

/// A non-empty query parameter (the last one given).
pub(super) fn param(query: &[(String, String)], key: &str) -> Option<String> {
    query
        .iter()
        .rev()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v.clone())
}

/// MGMT-2: `limit` 1..=1000 (default 100), `offset` >= 0 (default 0).
pub(crate) fn parse_page(query: &[(String, String)]) -> Result<Page, WireError> {
    let mut page = Page::default();
    for (k, v) in query {
        match k.as_str() {
            "limit" => match v.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE_LIMIT).contains(&n) => page.limit = n,
                _ => {
                    return Err(WireError::bad(format!(
                        "limit must be an integer from 1 to {MAX_PAGE_LIMIT}, got {v:?}"
                    )))
                }
            },
            "offset" => match whole_number(v) {
                Some(n) => page.offset = n,
                None => {
                    return Err(WireError::bad(format!(
                        "offset must be a non-negative integer, got {v:?}"
                    )))
                }
            },
            _ => {}
        }
    }
    Ok(page)
}

fn parse_min_lag(query: &[(String, String)]) -> Result<u64, WireError> {
    match query.iter().rev().find(|(k, _)| k == "minLagSeconds") {
        None => Ok(DEFAULT_MIN_LAG_SECONDS),
        Some((_, v)) => whole_number(v).ok_or_else(|| {
            WireError::bad(format!(
                "minLagSeconds must be a non-negative integer, got {v:?}"
            ))
        }),
    }
}

/// An integer ≥ 0 written in decimal digits, of any size: one past `u64::MAX` means the
/// same as `u64::MAX` to an offset or a lag (past every row, above every lag), so it is
/// taken as that (MGMT-2, MGMT-3).
fn whole_number(v: &str) -> Option<u64> {
    let v = v.trim();
    let digits = v.strip_prefix('+').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse::<u64>().unwrap_or(u64::MAX))
}

fn parse_delete_metadata(query: &[(String, String)]) -> Result<bool, WireError> {
    match query.iter().rev().find(|(k, _)| k == "deleteMetadata") {
        None => Ok(true),
        Some((_, v)) => match v.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(WireError::bad(format!(
                "deleteMetadata must be true or false, got {v:?}"
            ))),
        },
    }
}

fn parse_message_query(query: &[(String, String)]) -> Result<MessageQuery, WireError> {
    let status = match param(query, "status") {
        None => None,
        Some(s) => Some(MessageStatus::parse(&s).ok_or_else(|| {
            WireError::bad(format!(
                "status must be one of pending, leased, completed, deadLettered, got {s:?}"
            ))
        })?),
    };
    let named = |key: &str, kind: &str| -> Result<Option<String>, WireError> {
        let v = param(query, key);
        if let Some(n) = &v {
            check_name(kind, n)?;
        }
        Ok(v)
    };
    Ok(MessageQuery {
        queue: named("queue", "queue")?,
        in_path: false,
        partition: named("partition", "partition")?,
        group: named("consumerGroup", "consumer group")?
            .unwrap_or_else(|| super::QUEUE_MODE.to_string()),
        status,
        page: parse_page(query)?,
    })
}

/// MGMT-8: `{"subscriptionTimestamp": ISO-8601}`.
fn parse_subscription(body: &[u8]) -> Result<Millis, WireError> {
    let v = parse_json(body)?;
    match v.get("subscriptionTimestamp") {
        Some(Value::String(t)) => parse_iso(t).ok_or_else(|| {
            WireError::bad(format!(
                "subscriptionTimestamp must be an ISO-8601 time, got {t:?}"
            ))
        }),
        _ => Err(WireError::bad(
            "the body must be {\"subscriptionTimestamp\": ISO-8601}",
        )),
    }
}

/// MGMT-8: `{"toEnd": true}` or `{"timestamp": ISO-8601}`.
fn parse_seek(body: &[u8]) -> Result<SeekTo, WireError> {
    let v = parse_json(body)?;
    let obj = v
        .as_object()
        .ok_or_else(|| WireError::bad("the seek body must be a JSON object"))?;
    match (obj.get("toEnd"), obj.get("timestamp")) {
        (Some(Value::Bool(true)), None | Some(Value::Null)) => Ok(SeekTo::End),
        (None | Some(Value::Null) | Some(Value::Bool(false)), Some(Value::String(t))) => {
            parse_iso(t).map(SeekTo::Time).ok_or_else(|| {
                WireError::bad(format!("timestamp must be an ISO-8601 time, got {t:?}"))
            })
        }
        _ => Err(WireError::bad(
            "a seek takes {\"toEnd\": true} or {\"timestamp\": ISO-8601}",
        )),
    }
}

/// A page's bookkeeping, beside its rows (MGMT-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PageInfo {
    /// `total`: how many rows match, over all pages.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub total: u64,
    /// `limit`: the page size the listing used.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub limit: u32,
    /// `offset`: how many matching rows come before this page.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub offset: u64,
}

impl PageInfo {
    /// The bookkeeping of `page` out of `total` matching rows.
    pub fn new(page: Page, total: u64) -> PageInfo {
        PageInfo {
            total,
            limit: page.limit,
            offset: page.offset,
        }
    }
}

/// `GET /api/v1/resources/overview` (MGMT-4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Overview {
    /// `queues`: how many queues exist.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queues: u64,
    /// `partitions`: how many partitions exist, over every queue.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: u64,
    /// Retained messages.
    pub messages: u64,
    /// Messages as RET-5 counts them.
    pub unconsumed: u64,
    /// `consumerGroups`: how many groups are listed (MGMT-3): reading some partition or holding a
    /// subscription.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_groups: u64,
    /// Dead-letter records (one per message and group).
    pub dead_letters: u64,
}

/// `GET /api/v1/status` (MGMT-5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct StatusView {
    /// The system's totals, flattened beside the switches.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub overview: Overview,
    /// `pushMaintenance`: whether push maintenance is on (MAINT-1).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub push_maintenance: bool,
    /// `popMaintenance`: whether pop maintenance is on (MAINT-2).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pop_maintenance: bool,
}

/// One queue's figures (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct QueueSummary {
    /// `name`: the queue's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub name: String,
    /// `namespace`: the queue's namespace, configured or derived from its name (CFG-3).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub namespace: String,
    /// `task`: the queue's task, configured or derived from its name (CFG-3).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub task: String,
    /// `partitions`: how many partitions the queue has.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: u64,
    /// `messages`: the queue's retained messages.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub messages: u64,
    /// `unconsumed`: the queue's unconsumed messages as RET-5 counts them.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub unconsumed: u64,
    /// Groups reading some partition of the queue.
    pub consumer_groups: u64,
    /// `deadLetters`: the dead-letter records of the queue's messages (one per message and group).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub dead_letters: u64,
}

/// `GET /api/v1/resources/queues` and `/status/queues` (MGMT-4, MGMT-5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct QueuesPage {
    /// `queues`: this page's queues, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queues: Vec<QueueSummary>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// `GET /api/v1/resources/queues/{queue}` (MGMT-4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct QueueDetail {
    /// The queue's figures, flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub summary: QueueSummary,
    /// `options`: every effective option, as the configure answer shows them (CFG-4).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub options: EchoedOptions,
}

/// `GET /api/v1/status/queues/{queue}` (MGMT-5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct StatusQueue {
    /// `queue`: the queue with its options, as MGMT-4 shows it.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: QueueDetail,
    /// `partitions`: this page of the queue's partitions, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: Vec<PartitionRow>,
    /// The page's bookkeeping over the queue's partitions, flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// One partition (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PartitionRow {
    /// `id`: the partition's UUID (`partitionId`).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub id: String,
    /// `queue`: the name of the queue it belongs to.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `name`: the partition's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub name: String,
    /// Retained messages.
    pub messages: u64,
    /// The highest offset written.
    pub last_offset: u64,
    /// `consumerGroups`: how many groups read the partition (have a cursor on it).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_groups: u64,
}

/// `GET /api/v1/resources/partitions` (MGMT-4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PartitionsPage {
    /// `partitions`: this page's partitions, by queue then name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: Vec<PartitionRow>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// One partition's backlog (MGMT-4, the client's depth shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PartitionDepth {
    /// `partition`: the partition's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition: String,
    /// `pending`: its backlog: the group's lag, or without a group the largest lag of the groups
    /// reading it, or all its retained messages when none does.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pending: u64,
}

/// `GET /api/v1/resources/queues/{queue}/depth` (MGMT-4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Depth {
    /// `queue`: the queue's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `group`: the group whose lag is counted, or `null` for the largest of every group's.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub group: Option<String>,
    /// `pending`: the backlog summed over the queue's partitions.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pending: u64,
    /// `partitionsPending`: how many partitions have pending > 0.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions_pending: u64,
    /// `conflation`: always false; the client's shape carries it.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    conflation: bool,
    /// `effectivePending`: equal to `pending` (no conflation).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    effective_pending: u64,
    /// `partitions`: this page of the partitions with pending > 0, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: Vec<PartitionDepth>,
    /// The page's bookkeeping over the pending partitions, flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

impl Depth {
    /// The depth of `queue` from its partitions' pending counts, in name order: those
    /// with nothing pending are left out, the rest summed and paged.
    pub fn of(
        queue: &str,
        group: Option<&str>,
        rows: impl IntoIterator<Item = PartitionDepth>,
        page: Page,
    ) -> Depth {
        let rows: Vec<PartitionDepth> = rows.into_iter().filter(|r| r.pending > 0).collect();
        let pending = rows.iter().map(|r| r.pending).sum();
        let partitions_pending = rows.len() as u64;
        let (partitions, total) = page.cut(rows);
        Depth {
            queue: queue.to_string(),
            group: group.map(str::to_string),
            pending,
            partitions_pending,
            conflation: false,
            effective_pending: pending,
            partitions,
            page: PageInfo::new(page, total),
        }
    }
}

/// A namespace or a task with how many queues it has (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct NamespaceRow {
    /// `namespace`: the namespace's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub namespace: String,
    /// `queues`: how many queues are in it.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queues: u64,
}

/// A task with how many queues it has (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(description = ""))]
pub struct TaskRow {
    /// `task`: the task's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub task: String,
    /// `queues`: how many queues have it.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queues: u64,
}

/// `GET /api/v1/resources/namespaces` (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(description = ""))]
pub struct Namespaces {
    /// `namespaces`: this page's namespaces, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub namespaces: Vec<NamespaceRow>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// `GET /api/v1/resources/tasks` (MGMT-4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(description = ""))]
pub struct Tasks {
    /// `tasks`: this page's tasks, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub tasks: Vec<TaskRow>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

impl Namespaces {
    /// One page of the namespaces, from each one's queue count in name order.
    pub fn of(counts: impl IntoIterator<Item = (String, u64)>, page: Page) -> Namespaces {
        let rows = counts
            .into_iter()
            .map(|(namespace, queues)| NamespaceRow { namespace, queues });
        let (namespaces, total) = page.cut(rows);
        Namespaces {
            namespaces,
            page: PageInfo::new(page, total),
        }
    }
}

impl Tasks {
    /// One page of the tasks, from each one's queue count in name order.
    pub fn of(counts: impl IntoIterator<Item = (String, u64)>, page: Page) -> Tasks {
        let rows = counts
            .into_iter()
            .map(|(task, queues)| TaskRow { task, queues });
        let (tasks, total) = page.cut(rows);
        Tasks {
            tasks,
            page: PageInfo::new(page, total),
        }
    }
}

/// A group's state on a queue, or over all (MGMT-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
// The variants' docs are left out of the `openapi` build: a doc on a unit variant
// would turn the schema's string `enum` into a `oneOf` (spec/openapi.json).
#[cfg_attr(feature = "openapi", allow(missing_docs))]
pub enum GroupState {
    #[cfg_attr(not(feature = "openapi"), doc = "`caughtUp`: the lag is 0.")]
    CaughtUp,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`behind`: some lag and no live lease."
    )]
    Behind,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`consuming`: some lag and some live lease."
    )]
    Consuming,
}

impl GroupState {
    /// A queue's state from its lag and whether some lease is live.
    pub fn of(lag: u64, leased: u64) -> GroupState {
        match (lag, leased) {
            (0, _) => GroupState::CaughtUp,
            (_, 0) => GroupState::Behind,
            _ => GroupState::Consuming,
        }
    }
}

/// A group on one queue (MGMT-3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct GroupQueue {
    /// `queue`: the queue's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `partitions`: how many of its partitions the group reads.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partitions: u64,
    /// `lag`: the group's retained messages after its cursors, summed over those partitions.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lag: u64,
    /// `lagSeconds`: age in whole seconds of the oldest retained message after the group's cursor,
    /// the largest over those partitions (MGMT-3); 0 when none.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lag_seconds: u64,
    /// `leased`: how many of those partitions hold a live lease of the group.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub leased: u64,
    /// `state`: the group's state on this queue, from its lag and leases.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub state: GroupState,
}

/// A consumer group (MGMT-3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct GroupView {
    /// `name`: the group's name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub name: String,
    /// `queues`: the queues it reads or lags on, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queues: Vec<GroupQueue>,
    /// `lag`: the lag summed over those queues.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lag: u64,
    /// `lagSeconds`: the largest lag in seconds of those queues; 0 when none.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lag_seconds: u64,
    /// `state`: `consuming` when any queue is, else `behind` when any is, else `caughtUp`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub state: GroupState,
}

impl GroupView {
    /// The group over its queues: lags summed, the largest lag in seconds, `consuming`
    /// when any queue is, else `behind` when any is.
    pub fn new(name: String, queues: Vec<GroupQueue>) -> GroupView {
        GroupView {
            name,
            lag: queues.iter().map(|q| q.lag).sum(),
            lag_seconds: queues.iter().map(|q| q.lag_seconds).max().unwrap_or(0),
            state: queues
                .iter()
                .map(|q| q.state)
                .max()
                .unwrap_or(GroupState::CaughtUp),
            queues,
        }
    }
}

/// `GET /api/v1/consumer-groups` (MGMT-3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct GroupsPage {
    /// `consumerGroups`: this page of the listed groups, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_groups: Vec<GroupView>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// `GET /api/v1/consumer-groups/lagging` (MGMT-3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Lagging {
    /// `consumerGroups`: this page of the lagging groups, by name, each with only its lagging
    /// queues.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_groups: Vec<GroupView>,
    /// `minLagSeconds`: the threshold the groups reach.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    min_lag_seconds: u64,
    /// The page's bookkeeping; `total` counts the lagging groups.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

impl Lagging {
    /// One page of the lagging groups, in name order; `total` counts them all.
    pub fn of(groups: impl IntoIterator<Item = GroupView>, min: u64, page: Page) -> Lagging {
        let (consumer_groups, total) = page.cut(groups);
        Lagging {
            consumer_groups,
            min_lag_seconds: min,
            page: PageInfo::new(page, total),
        }
    }
}

/// A message as management shows it (MGMT-6, MGMT-7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageCore {
    /// `id`: the message's id (UUIDv7, broker-minted).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub id: String,
    /// `transactionId`: the message's transactionId, client-given or broker-minted.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// `traceId`: the trace id the push gave, or `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub trace_id: Option<String>,
    /// `partitionId`: the UUID of the message's partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition_id: String,
    /// `queue`: the name of the message's queue.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `partition`: the name of the message's partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition: String,
    /// `data`: the payload as a pop delivers it (POP-5, decrypted as ENC-1 says); `null` beside
    /// `dataError` when it cannot be delivered.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub data: Value,
    /// POP-16: why the stored payload cannot be shown (`data` is then `null`); absent
    /// for every payload a consumer can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_error: Option<String>,
    /// `createdAt`: the time of the write that stored the message, ISO-8601 UTC (POP-12).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub created_at: String,
    /// `producerSub`: the `sub` of the token that pushed it (AUTH-2), or `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub producer_sub: Option<String>,
}

/// One row of the peek listing (MGMT-6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageRow {
    /// The message itself, flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub message: MessageCore,
    /// `status`: the message's state for the queried group.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub status: MessageStatus,
    /// `retryCount`: the retries charged to it for that group, or recorded on its dead letter.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub retry_count: u32,
}

/// `GET /api/v1/messages` (MGMT-6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessagesPage {
    /// `messages`: this page of the matching messages, by queue, partition, then offset.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub messages: Vec<MessageRow>,
    /// The page's bookkeeping (`total`, `limit`, `offset`), flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub page: PageInfo,
}

/// One group's view of one message (MGMT-7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageGroup {
    /// `group`: the name of a group reading the message's partition.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub group: String,
    /// `status`: the message's state for that group.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub status: MessageStatus,
    /// `retryCount`: the retries charged to the message for that group, or recorded on its dead
    /// letter.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub retry_count: u32,
    /// `errorMessage`: the error its dead letter for that group keeps, else `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error_message: Option<String>,
}

/// One reading group's view of a message in the shape the official clients read
/// (MGMT-7's `consumerGroups`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageConsumerGroup {
    /// `name`: the group.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub name: String,
    /// `consumed`: the group is done with the message (`completed` or `deadLettered`).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumed: bool,
    /// `leaseExpiresAt`: while the message is `leased`, when the lease ends (ISO-8601);
    /// else `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lease_expires_at: Option<String>,
}

/// `GET /api/v1/messages/{partitionId}/{transactionId}` (MGMT-7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageDetail {
    /// The message itself, flattened.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub message: MessageCore,
    /// `groups`: every group reading the partition, by name.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub groups: Vec<MessageGroup>,
    /// `consumerGroups`: the same groups, in order, as the official clients read them.
    #[serde(rename = "consumerGroups")]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub consumer_groups: Vec<MessageConsumerGroup>,
}

impl MessageDetail {
    /// The answer for `message` and its groups, each with its lease's end while `leased`.
    pub fn new(message: MessageCore, groups: Vec<(MessageGroup, Option<String>)>) -> Self {
        let consumer_groups = groups
            .iter()
            .map(|(g, lease_end)| MessageConsumerGroup {
                name: g.group.clone(),
                consumed: matches!(
                    g.status,
                    MessageStatus::Completed | MessageStatus::DeadLettered
                ),
                lease_expires_at: match g.status {
                    MessageStatus::Leased => lease_end.clone(),
                    _ => None,
                },
            })
            .collect();
        MessageDetail {
            message,
            groups: groups.into_iter().map(|(g, _)| g).collect(),
            consumer_groups,
        }
    }
}

/// The seek answer (MGMT-8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SeekResponse {
    /// `success`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `group`: the group sought.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub group: String,
    /// `queue`: the queue it was sought on.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// How many cursors the seek set.
    pub partitions: u64,
}

/// The subscription-time answer (MGMT-8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SubscriptionResponse {
    /// `success`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `group`: the group sought.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub group: String,
    /// How many queues the group was sought on.
    pub queues: u64,
    /// How many cursors that set.
    pub partitions: u64,
}

/// The dead-letter retry answer (MGMT-12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct RetryResponse {
    /// `success`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// The new message's transactionId (minted by the broker).
    pub transaction_id: String,
    /// `messageId`: the new message's id.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub message_id: String,
    /// How many dead letters went.
    pub retried: u64,
}

/// MGMT-11 [PROJECT alternative]: the refusal of a broker that does not delete one
/// message by its address.
pub(crate) const MESSAGE_DELETE_REFUSED: &str =
    "this broker does not delete one message by its address; seek the consumer group past it, or ack it with status dlq";

/// The answer of a delete of one message (MGMT-11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MessageDeleted {
    /// `success`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `partitionId`: the UUID of the partition the message was in.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub partition_id: String,
    /// `transactionId`: the transactionId the delete named.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub transaction_id: String,
    /// The id of the message that went.
    pub message_id: String,
}

/// The 404 of a partition named in a seek that does not exist (MGMT-8).
pub fn no_such_partition(queue: &str, partition: &str) -> WireError {
    WireError {
        rule: None,
        status: 404,
        message: format!("queue {queue:?} has no partition {partition:?}"),
    }
}

/// The 404 of a retry of a message without a dead letter (MGMT-12).
pub fn no_dead_letter(partition_id: &str, transaction_id: &str) -> WireError {
    WireError {
        rule: None,
        status: 404,
        message: format!(
            "no dead letter of transactionId {transaction_id:?} in partition {partition_id}"
        ),
    }
}

/// The group delete answer (MGMT-9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct GroupDeleted {
    /// `success`: always true, including for a group that is not there.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `group`: the group deleted.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub group: String,
    /// `queue`: the one queue of a per-queue delete; absent for a delete on every queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: Option<String>,
    /// How many cursors went.
    pub deleted: u64,
}

/// `GET /metrics` (MGMT-10): counts since the broker started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MetricsView {
    /// `uptimeSeconds`: whole seconds since the broker started.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub uptime_seconds: u64,
    /// Requests answered.
    pub requests: u64,
    /// Requests answered 5xx.
    pub errors: u64,
    /// `pushes`: push calls answered.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pushes: u64,
    /// `pops`: pop calls answered.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pops: u64,
    /// Ack calls, single and batch.
    pub acks: u64,
    /// Long polls parked now.
    pub parked_polls: u64,
    /// Connections refused at the cap (CONN-1).
    pub connections_refused: u64,
}

/// The 404 of a queue named in a management path that does not exist (MGMT-1).
pub fn no_such_queue(queue: &str) -> WireError {
    WireError {
        rule: None,
        status: 404,
        message: format!("queue {queue:?} does not exist"),
    }
}

/// The 404 of a group that is not listed (MGMT-1, MGMT-3).
pub fn no_such_group(group: &str) -> WireError {
    WireError {
        rule: None,
        status: 404,
        message: format!("consumer group {group:?} does not exist"),
    }
}

/// The 404 of MGMT-7.
pub fn no_such_message(partition_id: &str, transaction_id: &str) -> WireError {
    WireError {
        rule: None,
        status: 404,
        message: format!(
            "no retained message with transactionId {transaction_id:?} in partition {partition_id}"
        ),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn mgmt_2_any_whole_number_is_an_offset_or_a_lag() {
        assert_eq!(whole_number("4294967296"), Some(1 << 32));
        assert_eq!(whole_number("18446744073709551616"), Some(u64::MAX));
        assert_eq!(whole_number(&"9".repeat(100)), Some(u64::MAX));
        for bad in ["", "-1", "1.5", "1e3", "x", "+"] {
            assert_eq!(whole_number(bad), None, "{bad:?}");
        }
        let q = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            parse_page(&q("offset", "4294967296")).unwrap().offset,
            1 << 32
        );
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: &str,
    ) -> Result<ManageRequest, WireError> {
        let raw: Vec<&str> = path.split('/').skip(1).collect();
        let (route, vars) = super::super::find(method, &raw).expect("a route");
        parse_manage(route.id, &vars, &q(query), body.as_bytes()).expect("a management route")
    }

    #[test]
    fn mgmt_2_pages_are_bounded() {
        assert_eq!(parse_page(&[]).unwrap(), Page::default());
        for bad in [
            ("limit", "0"),
            ("limit", "1001"),
            ("limit", "x"),
            ("offset", "-1"),
        ] {
            assert!(parse_page(&q(&[bad])).is_err(), "{bad:?}");
        }
        let p = parse_page(&q(&[("limit", "2"), ("offset", "1")])).unwrap();
        assert_eq!(p.cut([1, 2, 3, 4]), (vec![2, 3], 4));
    }

    #[test]
    fn routes_parse_and_bad_input_is_400() {
        assert_eq!(
            parse("GET", "/api/v1/consumer-groups/lagging", &[], ""),
            Ok(ManageRequest::Lagging {
                min_lag_seconds: DEFAULT_MIN_LAG_SECONDS,
                page: Page::default(),
            })
        );
        assert!(parse(
            "GET",
            "/api/v1/consumer-groups/lagging",
            &[("minLagSeconds", "-2")],
            ""
        )
        .is_err());
        assert!(parse("GET", "/api/v1/messages", &[("status", "gone")], "").is_err());
        assert!(parse("GET", "/api/v1/messages/not-a-uuid/t", &[], "").is_err());
        assert!(parse(
            "DELETE",
            "/api/v1/consumer-groups/g",
            &[("deleteMetadata", "yes")],
            ""
        )
        .is_err());
        let seek = "/api/v1/consumer-groups/g/queues/q/seek";
        assert_eq!(
            parse("POST", seek, &[], r#"{"toEnd": true}"#).map(|r| r.is_read()),
            Ok(false)
        );
        assert!(matches!(
            parse(
                "POST",
                seek,
                &[],
                r#"{"timestamp": "2026-01-01T00:00:00.000Z"}"#
            ),
            Ok(ManageRequest::Seek {
                to: SeekTo::Time(_),
                ..
            })
        ));
        for bad in [
            "{}",
            r#"{"toEnd": false}"#,
            r#"{"timestamp": "soon"}"#,
            "[]",
            "{",
        ] {
            assert!(parse("POST", seek, &[], bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_group_states_order_is_the_one_of_mgmt_3() {
        assert_eq!(GroupState::of(0, 1), GroupState::CaughtUp);
        assert_eq!(GroupState::of(3, 0), GroupState::Behind);
        assert_eq!(GroupState::of(3, 1), GroupState::Consuming);
        let q = |state| GroupQueue {
            queue: "q".into(),
            partitions: 1,
            lag: 1,
            lag_seconds: 2,
            leased: 0,
            state,
        };
        let g = GroupView::new(
            "g".into(),
            vec![q(GroupState::Behind), q(GroupState::CaughtUp)],
        );
        assert_eq!((g.lag, g.lag_seconds, g.state), (2, 2, GroupState::Behind));
    }
}
