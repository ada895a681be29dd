//! The management reads (PROTOCOL.md MGMT-1..7) from the tables, read-only.
//!
//! Every figure comes from the partition rows and the cursors, never from counting
//! messages: retention removes a prefix, so a partition holds `last_offset -
//! removed_through` offsets and a cursor lags by `last_offset - GREATEST(committed,
//! removed_through)` of them, less the offsets an operator deleted (MGMT-11), which are
//! counted only in a partition that has any (`queen_retained_above` in `01_rules.sql`).
//! Only the peek listing and the per-message route read message rows, through the primary
//! key. Orders are the model's: every name bytewise (`COLLATE "C"`), whatever the
//! database's collation. Each statement is a file under `server/sql/manage`.

use super::db::Db;
use super::rows::{iso, JsonText};
use crate::seal::{shown, Sealer};
use chrono::{DateTime, Utc};
use queen_reference::wire::WireId;
use queen_reference::wire::*;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

type Found<T> = Result<Result<T, WireError>, sqlx::Error>;

/// The management reads' statements, one file each.
mod sql {
    pub(super) const OVERVIEW: &str = include_str!("../../sql/manage/overview.sql");
    pub(super) const QUEUES: &str = include_str!("../../sql/manage/queues.sql");
    pub(super) const QUEUES_COUNT: &str = include_str!("../../sql/manage/queues_count.sql");
    pub(super) const PARTITIONS: &str = include_str!("../../sql/manage/partitions.sql");
    pub(super) const PARTITIONS_COUNT: &str = include_str!("../../sql/manage/partitions_count.sql");
    pub(super) const DEPTH: &str = include_str!("../../sql/manage/depth.sql");
    pub(super) const COUNTED: &str = include_str!("../../sql/manage/counted.sql");
    pub(super) const GROUP_NAMES: &str = include_str!("../../sql/manage/group_names.sql");
    pub(super) const GROUPS: &str = include_str!("../../sql/manage/groups.sql");
    pub(super) const MESSAGE: &str = include_str!("../../sql/manage/message.sql");
}

/// Answers one management read.
pub(crate) async fn read(
    pool: &Db,
    req: &ManageRequest,
    seal: Option<&Sealer>,
) -> Result<Answer, sqlx::Error> {
    let json = |v: Result<View, WireError>| match v {
        Ok(v) => Answer::View(v),
        Err(e) => Answer::error(e.status, e.message),
    };
    let out = match req {
        ManageRequest::Overview => Ok(View::Overview(overview(pool).await?)),
        ManageRequest::Status => Ok(View::Status(status(pool).await?)),
        ManageRequest::Queues {
            namespace,
            task,
            page,
        } => Ok(View::Queues(
            queues(pool, namespace.as_deref(), task.as_deref(), *page).await?,
        )),
        ManageRequest::Queue(name) => detail(pool, name).await?.map(View::Queue),
        ManageRequest::StatusQueue { queue, page } => status_queue(pool, queue, *page)
            .await?
            .map(View::StatusQueue),
        ManageRequest::Depth { queue, group, page } => depth(pool, queue, group.as_deref(), *page)
            .await?
            .map(View::Depth),
        ManageRequest::Partitions { queue, page } => Ok(View::Partitions(
            partitions(pool, queue.as_deref(), *page).await?,
        )),
        ManageRequest::Namespaces(page) => Ok(View::Namespaces(Namespaces::of(
            counted(pool, true).await?,
            *page,
        ))),
        ManageRequest::Tasks(page) => {
            Ok(View::Tasks(Tasks::of(counted(pool, false).await?, *page)))
        }
        ManageRequest::Groups(page) => Ok(View::Groups(groups_page(pool, *page).await?)),
        ManageRequest::Group(name) => {
            let mut found = groups(pool, std::slice::from_ref(name)).await?;
            found
                .pop()
                .ok_or_else(|| no_such_group(name))
                .map(View::Group)
        }
        ManageRequest::Lagging {
            min_lag_seconds,
            page,
        } => Ok(View::Lagging(lagging(pool, *min_lag_seconds, *page).await?)),
        ManageRequest::Messages(MessageQuery {
            queue: Some(queue),
            in_path: true,
            ..
        }) if !queue_exists(pool, queue).await? => Err(no_such_queue(queue)),
        ManageRequest::Messages(q) => match messages(pool, q, seal).await? {
            Ok(page) => Ok(View::Messages(page)),
            Err(why) => return Ok(Answer::error(500, why)),
        },
        ManageRequest::Analytics(q) => super::analytics::analytics(pool, q)
            .await?
            .map(View::Analytics),
        ManageRequest::Message {
            partition_id,
            transaction_id,
        } => match message(pool, partition_id, transaction_id, seal).await? {
            Ok(found) => found.map(View::Message),
            Err(why) => return Ok(Answer::error(500, why)),
        },
        ManageRequest::Seek { .. }
        | ManageRequest::Subscription { .. }
        | ManageRequest::Retry { .. }
        | ManageRequest::DeleteGroup { .. }
        | ManageRequest::DeleteMessage { .. } => unreachable!("writes are not views"),
    };
    Ok(json(out))
}

fn n(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// MGMT-5: a queue with one page of its partitions.
async fn status_queue(pool: &Db, queue: &str, page: Page) -> Found<StatusQueue> {
    Ok(match detail(pool, queue).await? {
        Ok(queue_view) => {
            let p = partitions(pool, Some(queue), page).await?;
            Ok(StatusQueue {
                queue: queue_view,
                partitions: p.partitions,
                page: p.page,
            })
        }
        Err(e) => Err(e),
    })
}

async fn overview(pool: &Db) -> Result<Overview, sqlx::Error> {
    let (queues, partitions, messages, unconsumed, groups, dead): (i64, i64, i64, i64, i64, i64) =
        sqlx::query_as(sql::OVERVIEW)
            .fetch_one(&mut *pool.acquire().await?)
            .await?;
    Ok(Overview {
        queues: n(queues),
        partitions: n(partitions),
        messages: n(messages),
        unconsumed: n(unconsumed),
        consumer_groups: n(groups),
        dead_letters: n(dead),
    })
}

async fn status(pool: &Db) -> Result<StatusView, sqlx::Error> {
    let (push_maintenance, pop_maintenance): (bool, bool) =
        sqlx::query_as("SELECT push_maintenance, pop_maintenance FROM queen_switch_state")
            .fetch_one(&mut *pool.acquire().await?)
            .await?;
    Ok(StatusView {
        overview: overview(pool).await?,
        push_maintenance,
        pop_maintenance,
    })
}

#[derive(sqlx::FromRow)]
struct QueueRow {
    name: String,
    namespace: String,
    task: String,
    options: Value,
    partitions: i64,
    messages: i64,
    unconsumed: i64,
    groups: i64,
    dead: i64,
}

impl QueueRow {
    fn summary(&self) -> QueueSummary {
        QueueSummary {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            task: self.task.clone(),
            partitions: n(self.partitions),
            messages: n(self.messages),
            unconsumed: n(self.unconsumed),
            consumer_groups: n(self.groups),
            dead_letters: n(self.dead),
        }
    }
}

async fn queues(
    pool: &Db,
    namespace: Option<&str>,
    task: Option<&str>,
    page: Page,
) -> Result<QueuesPage, sqlx::Error> {
    let total: i64 = sqlx::query_scalar(sql::QUEUES_COUNT)
        .bind(namespace)
        .bind(task)
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let rows: Vec<QueueRow> = sqlx::query_as(sql::QUEUES)
        .bind(namespace)
        .bind(task)
        .bind(None::<&str>)
        .bind(i64::from(page.limit))
        .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
        .fetch_all(&mut *pool.acquire().await?)
        .await?;
    Ok(QueuesPage {
        queues: rows.iter().map(QueueRow::summary).collect(),
        page: PageInfo::new(page, n(total)),
    })
}

async fn detail(pool: &Db, name: &str) -> Found<QueueDetail> {
    let row: Option<QueueRow> = sqlx::query_as(sql::QUEUES)
        .bind(None::<&str>)
        .bind(None::<&str>)
        .bind(name)
        .bind(1i64)
        .bind(0i64)
        .fetch_optional(&mut *pool.acquire().await?)
        .await?;
    Ok(row
        .map(|r| QueueDetail {
            summary: r.summary(),
            options: serde_json::from_value(r.options.clone()).unwrap_or_else(|_| EchoedOptions {
                known: super::rows::options_of(r.options.clone()),
                extra: Default::default(),
            }),
        })
        .ok_or_else(|| no_such_queue(name)))
}

#[derive(sqlx::FromRow)]
struct PartitionSql {
    id: Uuid,
    queue: String,
    name: String,
    messages: i64,
    last_offset: i64,
    groups: i64,
}

async fn partitions(
    pool: &Db,
    queue: Option<&str>,
    page: Page,
) -> Result<PartitionsPage, sqlx::Error> {
    let total: i64 = sqlx::query_scalar(sql::PARTITIONS_COUNT)
        .bind(queue)
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let rows: Vec<PartitionSql> = sqlx::query_as(sql::PARTITIONS)
        .bind(queue)
        .bind(i64::from(page.limit))
        .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
        .fetch_all(&mut *pool.acquire().await?)
        .await?;
    Ok(PartitionsPage {
        partitions: rows
            .into_iter()
            .map(|r| PartitionRow {
                id: r.id.to_string(),
                queue: r.queue,
                name: r.name,
                messages: n(r.messages),
                last_offset: n(r.last_offset),
                consumer_groups: n(r.groups),
            })
            .collect(),
        page: PageInfo::new(page, n(total)),
    })
}

async fn depth(pool: &Db, queue: &str, group: Option<&str>, page: Page) -> Found<Depth> {
    let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM queen_queues WHERE name = $1")
        .bind(queue)
        .fetch_optional(&mut *pool.acquire().await?)
        .await?;
    let Some(id) = exists else {
        return Ok(Err(no_such_queue(queue)));
    };
    let rows: Vec<(String, Option<i64>)> = sqlx::query_as(sql::DEPTH)
        .bind(id)
        .bind(group)
        .fetch_all(&mut *pool.acquire().await?)
        .await?;
    let rows = rows.into_iter().filter_map(|(partition, pending)| {
        Some(PartitionDepth {
            partition,
            pending: n(pending?),
        })
    });
    Ok(Ok(Depth::of(queue, group, rows, page)))
}

/// The queues per namespace (`by_namespace`) or per task.
async fn counted(pool: &Db, by_namespace: bool) -> Result<Vec<(String, u64)>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(sql::COUNTED)
        .bind(by_namespace)
        .fetch_all(&mut *pool.acquire().await?)
        .await?;
    Ok(rows.into_iter().map(|(k, c)| (k, n(c))).collect())
}

/// The listed groups' names, bytewise (MGMT-3): one page, or all of them.
async fn group_names(pool: &Db, page: Option<Page>) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(sql::GROUP_NAMES)
        .bind(page.map(|p| i64::from(p.limit)))
        .bind(page.map_or(0, |p| i64::try_from(p.offset).unwrap_or(i64::MAX)))
        .fetch_all(&mut *pool.acquire().await?)
        .await
}

async fn groups_page(pool: &Db, page: Page) -> Result<GroupsPage, sqlx::Error> {
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_group_names()")
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let names = group_names(pool, Some(page)).await?;
    Ok(GroupsPage {
        consumer_groups: groups(pool, &names).await?,
        page: PageInfo::new(page, n(total)),
    })
}

#[derive(sqlx::FromRow)]
struct GroupQueueSql {
    consumer_group: String,
    queue: String,
    partitions: i64,
    lag: i64,
    leased: i64,
    /// Milliseconds since the oldest retained message after a cursor was created.
    oldest_age_ms: Option<i64>,
}

/// The group listing's statement, by how it finds each cursor's first unread message
/// (for its lag in seconds): by an index probe per cursor, which costs about ten times
/// what hashing one message row costs, or by hashing every message and joining. Probes
/// win while the cursors are fewer than a tenth of the messages: a few groups, or one.
fn groups_sql(cursors: f32, messages: f32) -> &'static str {
    /// `groups.sql` with each way of joining, made once.
    static SQL: std::sync::LazyLock<[String; 2]> = std::sync::LazyLock::new(|| {
        [PROBE, HASH].map(|join| sql::GROUPS.replace("FIRST_UNREAD", join))
    });
    const PROBE: &str = "LEFT JOIN LATERAL (SELECT m.created_at FROM queen_messages m
             WHERE m.partition_id = c.id AND m.\"offset\" = c.pos + 1 AND c.pos < c.last_offset
             OFFSET 0) m ON true";
    const HASH: &str =
        "LEFT JOIN queen_messages m ON m.partition_id = c.id AND m.\"offset\" = c.pos + 1";
    &SQL[usize::from(cursors * 10.0 >= messages)]
}

/// The named groups (those listed, by name), each over its queues by name.
///
/// One pass over the groups' cursors, each joined to its first unread message for the
/// lag in seconds (see [`groups_sql`]).
async fn groups(pool: &Db, names: &[String]) -> Result<Vec<GroupView>, sqlx::Error> {
    let mut tx = pool.snapshot().await?;
    // The planner's row counts (the groups read at most every partition), and, for this
    // transaction, room for a hash of every message row, which outgrows the default
    // work_mem at a million messages and spills to disk.
    let (partitions, messages): (f32, f32) = sqlx::query_as(
        "SELECT (SELECT reltuples FROM pg_class WHERE oid = 'queen_partitions'::regclass),
                (SELECT reltuples FROM pg_class WHERE oid = 'queen_messages'::regclass)
         FROM set_config('work_mem', '64MB', true)",
    )
    .fetch_one(&mut *tx)
    .await?;
    let cursors = names.len() as f32 * partitions.max(1.0);
    let rows: Vec<GroupQueueSql> = sqlx::query_as(groups_sql(cursors, messages))
        .bind(names)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    let mut by: BTreeMap<&str, Vec<GroupQueue>> =
        names.iter().map(|g| (g.as_str(), vec![])).collect();
    for r in &rows {
        let lag = n(r.lag);
        let leased = n(r.leased);
        let lag_seconds = r
            .oldest_age_ms
            .filter(|_| lag > 0)
            .map_or(0, |ms| n(ms) / 1000);
        if let Some(list) = by.get_mut(r.consumer_group.as_str()) {
            list.push(GroupQueue {
                queue: r.queue.clone(),
                partitions: n(r.partitions),
                lag,
                lag_seconds,
                leased,
                state: GroupState::of(lag, leased),
            });
        }
    }
    Ok(names
        .iter()
        .filter_map(|g| {
            let mut qs = by.remove(g.as_str())?;
            // A subscribed queue the group also reads appears twice: keep the reading.
            qs.sort_by(|a, b| {
                let by_name = a.queue.as_bytes().cmp(b.queue.as_bytes());
                by_name.then(b.partitions.cmp(&a.partitions))
            });
            qs.dedup_by(|later, kept| later.queue == kept.queue);
            (!qs.is_empty()).then(|| GroupView::new(g.clone(), qs))
        })
        .collect())
}

/// Every group is read to know which lag, so the page bounds the answer, not the work.
async fn lagging(pool: &Db, min: u64, page: Page) -> Result<Lagging, sqlx::Error> {
    let names = group_names(pool, None).await?;
    let lagging = groups(pool, &names).await?.into_iter().filter_map(|g| {
        let kept: Vec<GroupQueue> = g
            .queues
            .into_iter()
            .filter(|q| q.lag > 0 && q.lag_seconds >= min)
            .collect();
        (!kept.is_empty()).then(|| GroupView::new(g.name, kept))
    });
    Ok(Lagging::of(lagging, min, page))
}

#[derive(sqlx::FromRow)]
pub(super) struct MessageSql {
    id: Uuid,
    transaction_id: String,
    trace_id: Option<Uuid>,
    partition_id: Uuid,
    queue: String,
    partition: String,
    data: JsonText,
    sealed: bool,
    created_at: DateTime<Utc>,
    producer_sub: Option<String>,
    status: String,
    retry_count: i32,
    error_message: Option<String>,
}

impl MessageSql {
    pub(super) fn core(&self, seal: Option<&Sealer>) -> Result<MessageCore, &'static str> {
        let (data, data_error) = shown(seal, self.sealed, self.data.0.clone())?;
        Ok(MessageCore {
            id: self.id.to_string(),
            transaction_id: self.transaction_id.clone(),
            trace_id: self.trace_id.map(|t| t.to_string()),
            partition_id: self.partition_id.to_string(),
            queue: self.queue.clone(),
            partition: self.partition.clone(),
            data,
            data_error,
            created_at: iso(self.created_at),
            producer_sub: self.producer_sub.clone(),
        })
    }

    fn status(&self) -> MessageStatus {
        MessageStatus::parse(&self.status).unwrap_or(MessageStatus::Pending)
    }
}

async fn messages(
    pool: &Db,
    q: &MessageQuery,
    seal: Option<&Sealer>,
) -> Result<Result<MessagesPage, &'static str>, sqlx::Error> {
    super::peek::messages(pool, q, seal).await
}

async fn message(
    pool: &Db,
    partition_id: &WireId,
    txn: &str,
    seal: Option<&Sealer>,
) -> Result<Result<Result<MessageDetail, WireError>, &'static str>, sqlx::Error> {
    let pid = partition_id.uuid();
    let offset: Option<i64> = sqlx::query_scalar(
        "SELECT m.\"offset\" FROM queen_messages m JOIN queen_partitions p ON p.id = m.partition_id
         WHERE m.partition_id = $1 AND m.transaction_id = $2 AND m.\"offset\" > p.removed_through
         ORDER BY m.\"offset\" DESC LIMIT 1",
    )
    .bind(pid)
    .bind(txn)
    .fetch_optional(&mut *pool.acquire().await?)
    .await?;
    let Some(offset) = offset else {
        return Ok(Ok(Err(no_such_message(partition_id, txn))));
    };
    let rows: Vec<(String, MessageSql, Option<DateTime<Utc>>)> =
        sqlx::query_as::<_, GroupMessageSql>(sql::MESSAGE)
            .bind(pid)
            .bind(offset)
            .fetch_all(&mut *pool.acquire().await?)
            .await?
            .into_iter()
            .map(|r| (r.grp.unwrap_or_default(), r.row, r.lease_deadline))
            .collect();
    let Some((_, first, _)) = rows.first() else {
        return Ok(Ok(Err(no_such_message(partition_id, txn))));
    };
    let core = match first.core(seal) {
        Ok(c) => c,
        Err(why) => return Ok(Err(why)),
    };
    let groups = rows
        .iter()
        .filter(|(g, _, _)| !g.is_empty())
        .map(|(g, r, lease_deadline)| {
            let group = MessageGroup {
                group: g.clone(),
                status: r.status(),
                retry_count: u32::try_from(r.retry_count).unwrap_or(0),
                error_message: r.error_message.clone(),
            };
            (group, lease_deadline.map(super::rows::iso))
        })
        .collect();
    Ok(Ok(Ok(MessageDetail::new(core, groups))))
}

/// One reading group's row of a message.
struct GroupMessageSql {
    grp: Option<String>,
    row: MessageSql,
    /// The group's lease deadline, whether or not it covers the message.
    lease_deadline: Option<DateTime<Utc>>,
}

impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for GroupMessageSql {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row;
        Ok(GroupMessageSql {
            grp: row.try_get("grp")?,
            row: MessageSql::from_row(row)?,
            lease_deadline: row.try_get("lease_deadline")?,
        })
    }
}

/// Whether a queue named `name` exists.
async fn queue_exists(pool: &Db, name: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM queen_queues WHERE name = $1)")
        .bind(name)
        .fetch_one(&mut *pool.acquire().await?)
        .await
}
