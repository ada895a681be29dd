//! The management reads (PROTOCOL.md MGMT-1..7) from the tables, read-only.
//!
//! Every figure comes from the partition rows and the cursors, never from counting
//! messages: retention removes a prefix, so a partition holds `last_offset -
//! removed_through` offsets and a cursor lags by `last_offset - GREATEST(committed,
//! removed_through)` of them, less the offsets an operator deleted (MGMT-11), which are
//! counted only in a partition that has any ([`retained_above`]). Only the peek listing and the per-message
//! route read message rows, through the primary key. Orders are the model's: every name
//! bytewise (`COLLATE "C"`), whatever the database's collation.

use super::db::Db;
use super::rows::{iso, JsonText};
use crate::seal::{shown, Sealer};
use chrono::{DateTime, Utc};
use queen_reference::wire::*;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

type Found<T> = Result<Result<T, WireError>, sqlx::Error>;

/// Answers one management read.
pub(crate) async fn read(
    pool: &Db,
    req: &ManageRequest,
    seal: Option<&Sealer>,
) -> Result<Answer, sqlx::Error> {
    let json = |v: Result<Value, WireError>| match v {
        Ok(v) => Answer::View(v),
        Err(e) => Answer::error(e.status, e.message),
    };
    fn to<T: serde::Serialize>(t: T) -> Value {
        serde_json::to_value(t).expect("views serialize")
    }
    let out = match req {
        ManageRequest::Overview => Ok(to(overview(pool).await?)),
        ManageRequest::Status => Ok(to(status(pool).await?)),
        ManageRequest::Queues {
            namespace,
            task,
            page,
        } => Ok(to(queues(
            pool,
            namespace.as_deref(),
            task.as_deref(),
            *page,
        )
        .await?)),
        ManageRequest::Queue(name) => detail(pool, name).await?.map(to),
        ManageRequest::StatusQueue { queue, page } => match detail(pool, queue).await? {
            Ok(queue_view) => {
                let p = partitions(pool, Some(queue), *page).await?;
                Ok(to(StatusQueue {
                    queue: queue_view,
                    partitions: p.partitions,
                    page: p.page,
                }))
            }
            Err(e) => Err(e),
        },
        ManageRequest::Depth { queue, group, page } => {
            depth(pool, queue, group.as_deref(), *page).await?.map(to)
        }
        ManageRequest::Partitions { queue, page } => {
            Ok(to(partitions(pool, queue.as_deref(), *page).await?))
        }
        ManageRequest::Namespaces(page) => {
            Ok(to(Namespaces::of(counted(pool, "namespace").await?, *page)))
        }
        ManageRequest::Tasks(page) => Ok(to(Tasks::of(counted(pool, "task").await?, *page))),
        ManageRequest::Groups(page) => Ok(to(groups_page(pool, *page).await?)),
        ManageRequest::Group(name) => {
            let mut found = groups(pool, std::slice::from_ref(name)).await?;
            found.pop().ok_or_else(|| no_such_group(name)).map(to)
        }
        ManageRequest::Lagging {
            min_lag_seconds,
            page,
        } => Ok(to(lagging(pool, *min_lag_seconds, *page).await?)),
        ManageRequest::Messages(MessageQuery {
            queue: Some(queue),
            in_path: true,
            ..
        }) if !queue_exists(pool, queue).await? => Err(no_such_queue(queue)),
        ManageRequest::Messages(q) => match messages(pool, q, seal).await? {
            Ok(page) => Ok(to(page)),
            Err(why) => return Ok(Answer::error(500, why)),
        },
        ManageRequest::Analytics(q) => super::analytics::analytics(pool, q).await?.map(to),
        ManageRequest::Message {
            partition_id,
            transaction_id,
        } => match message(pool, partition_id, transaction_id, seal).await? {
            Ok(found) => found.map(to),
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

/// SQL: how many retained messages partition row `p` holds above offset `from` (an
/// expression at or above its floor): its offsets there, less the deleted ones
/// (MGMT-11), which are counted only when the partition has any.
pub(crate) fn retained_above(from: &str) -> String {
    retained_above_in("p", from)
}

/// [`retained_above`] for a row named `row` that carries a partition's `id`,
/// `last_offset` and `deleted`.
fn retained_above_in(row: &str, from: &str) -> String {
    format!(
        "({row}.last_offset - {from} - CASE WHEN {row}.deleted = 0 THEN 0 ELSE queen_deleted_above({row}.id, {from}) END)"
    )
}

/// SQL: the retained messages and RET-5's unconsumed ones of a partition row `p`.
fn partition_figures() -> String {
    format!(
        "{} AS messages, {} AS unconsumed",
        retained_above("p.removed_through"),
        retained_above(
            "GREATEST(p.removed_through, COALESCE(
            (SELECT min(c.committed) FROM queen_cursors c WHERE c.partition_id = p.id), p.removed_through))"
        )
    )
}

async fn overview(pool: &Db) -> Result<Overview, sqlx::Error> {
    let (queues, partitions, messages, unconsumed, groups, dead): (i64, i64, i64, i64, i64, i64) =
        sqlx::query_as(&format!(
            "SELECT (SELECT count(*) FROM queen_queues),
                    count(*),
                    COALESCE(sum(messages), 0)::bigint,
                    COALESCE(sum(unconsumed), 0)::bigint,
                    (SELECT count(*) FROM ({GROUP_NAMES}) g),
                    (SELECT count(*) FROM queen_dead_letters)
             FROM (SELECT {} FROM queen_partitions p) f",
            partition_figures()
        ))
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
    let switches: BTreeMap<String, bool> =
        sqlx::query_as("SELECT name, enabled FROM queen_switches")
            .fetch_all(&mut *pool.acquire().await?)
            .await?
            .into_iter()
            .collect();
    Ok(StatusView {
        overview: overview(pool).await?,
        push_maintenance: switches.get("push_maintenance").copied().unwrap_or(false),
        pop_maintenance: switches.get("pop_maintenance").copied().unwrap_or(false),
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

/// The figures of the queues a filter picks, by name, one page of them. The groups
/// reading a queue are counted by one probe of `queen_cursors_group` per listed group,
/// not by reading the queue's cursors, which number its partitions times its groups.
const QUEUE_ROWS: &str = "WITH names AS MATERIALIZED (GROUP_NAMES_SQL)
    SELECT q.name, q.namespace, q.task, q.options,
        (SELECT count(*) FROM queen_partitions p WHERE p.queue_id = q.id) AS partitions,
        COALESCE(f.messages, 0)::bigint AS messages, COALESCE(f.unconsumed, 0)::bigint AS unconsumed,
        (SELECT count(*) FROM names g WHERE EXISTS (SELECT 1 FROM queen_cursors c
           WHERE c.consumer_group = g.consumer_group AND c.queue_id = q.id)) AS groups,
        (SELECT count(*) FROM queen_dead_letters d
           JOIN queen_partitions p ON p.id = d.partition_id WHERE p.queue_id = q.id) AS dead
    FROM queen_queues q
    LEFT JOIN LATERAL (SELECT sum(messages) AS messages, sum(unconsumed) AS unconsumed
        FROM (SELECT PARTITION_FIGURES FROM queen_partitions p WHERE p.queue_id = q.id) x) f ON true";

fn queue_sql(filter: &str) -> String {
    QUEUE_ROWS
        .replace("GROUP_NAMES_SQL", GROUP_NAMES)
        .replace("PARTITION_FIGURES", &partition_figures())
        + " WHERE "
        + filter
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
    const FILTER: &str =
        "($1::text IS NULL OR q.namespace = $1) AND ($2::text IS NULL OR q.task = $2)";
    let total: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM queen_queues q WHERE {FILTER}"
    ))
    .bind(namespace)
    .bind(task)
    .fetch_one(&mut *pool.acquire().await?)
    .await?;
    let rows: Vec<QueueRow> =
        sqlx::query_as(&(queue_sql(FILTER) + " ORDER BY q.name COLLATE \"C\" LIMIT $3 OFFSET $4"))
            .bind(namespace)
            .bind(task)
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
    let row: Option<QueueRow> = sqlx::query_as(&queue_sql("q.name = $1"))
        .bind(name)
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
    const FROM: &str = "FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
        WHERE ($1::text IS NULL OR q.name = $1)";
    let total: i64 = sqlx::query_scalar(&format!("SELECT count(*) {FROM}"))
        .bind(queue)
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let rows: Vec<PartitionSql> = sqlx::query_as(&format!(
        // The groups are counted for the page only, not for the rows the offset skips.
        "SELECT x.*, (SELECT count(*) FROM queen_cursors c WHERE c.partition_id = x.id) AS groups
         FROM (SELECT p.id, q.name AS queue, p.name, {} AS messages, p.last_offset
               {FROM} ORDER BY q.name COLLATE \"C\", p.name COLLATE \"C\" LIMIT $2 OFFSET $3) x
         ORDER BY x.queue COLLATE \"C\", x.name COLLATE \"C\"",
        retained_above("p.removed_through")
    ))
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
    // Without a group the largest lag is the lowest cursor's, which is RET-5's count.
    let rows: Vec<(String, Option<i64>)> = sqlx::query_as(&format!(
        "SELECT p.name, CASE WHEN $2::text IS NOT NULL THEN
                (SELECT {} FROM queen_cursors c
                  WHERE c.partition_id = p.id AND c.consumer_group = $2)
             ELSE f.unconsumed END
         FROM queen_partitions p CROSS JOIN LATERAL (SELECT {}) f
         WHERE p.queue_id = $1 ORDER BY p.name COLLATE \"C\"",
        retained_above("GREATEST(c.committed, p.removed_through)"),
        partition_figures()
    ))
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

async fn counted(pool: &Db, column: &str) -> Result<Vec<(String, u64)>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT {column}, count(*) FROM queen_queues GROUP BY 1 ORDER BY {column} COLLATE \"C\""
    ))
    .fetch_all(&mut *pool.acquire().await?)
    .await?;
    Ok(rows.into_iter().map(|(k, c)| (k, n(c))).collect())
}

/// Every listed group's name, bytewise (MGMT-3).
/// A loose index scan of `queen_cursors_group`: one index probe per distinct group,
/// not a pass over every cursor.
const GROUP_NAMES: &str = "WITH RECURSIVE g(n) AS (
        SELECT min(consumer_group) FROM queen_cursors
        UNION ALL
        SELECT (SELECT min(c.consumer_group) FROM queen_cursors c WHERE c.consumer_group > g.n)
        FROM g WHERE g.n IS NOT NULL)
    SELECT n AS consumer_group FROM g WHERE n IS NOT NULL
    UNION SELECT consumer_group FROM queen_subscriptions";

async fn groups_page(pool: &Db, page: Page) -> Result<GroupsPage, sqlx::Error> {
    let total: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM ({GROUP_NAMES}) g"))
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let names: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT consumer_group FROM ({GROUP_NAMES}) g ORDER BY consumer_group COLLATE \"C\" LIMIT $1 OFFSET $2"
    ))
    .bind(i64::from(page.limit))
    .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
    .fetch_all(&mut *pool.acquire().await?)
    .await?;
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

/// How a group listing finds each cursor's first unread message (for its lag in
/// seconds): by an index probe per cursor, which costs about ten times what hashing one
/// message row costs, or by hashing every message and joining. Probes win while the
/// cursors are fewer than a tenth of the messages: a few groups, or one.
fn first_unread_join(cursors: f32, messages: f32) -> &'static str {
    if cursors * 10.0 < messages {
        "LEFT JOIN LATERAL (SELECT m.created_at FROM queen_messages m
             WHERE m.partition_id = c.id AND m.\"offset\" = c.pos + 1 AND c.pos < c.last_offset
             OFFSET 0) m ON true"
    } else {
        "LEFT JOIN queen_messages m ON m.partition_id = c.id AND m.\"offset\" = c.pos + 1"
    }
}

/// The named groups (those listed, by name), each over its queues by name.
///
/// One pass over the groups' cursors, each joined to its first unread message for the
/// lag in seconds (see [`first_unread_join`]). Partitions without deleted offsets
/// (nearly all) find that message at `pos + 1`; the few with deleted offsets search for
/// it and subtract what was deleted above the cursor ([`retained_above_in`]).
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
    let rows: Vec<GroupQueueSql> = sqlx::query_as(&format!(
        "WITH c AS NOT MATERIALIZED (
             SELECT c.consumer_group, p.id, p.queue_id, p.last_offset, p.deleted,
                    GREATEST(c.committed, p.removed_through) AS pos,
                    c.lease_id IS NOT NULL AND c.lease_deadline > now() AS leased
             FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
             WHERE c.consumer_group = ANY($1)
         ), seen AS (
             SELECT c.consumer_group, c.queue_id, c.last_offset - c.pos AS lag, c.leased,
                    m.created_at AS first_at
             FROM c {}
             WHERE c.deleted = 0
             UNION ALL
             SELECT c.consumer_group, c.queue_id, {}, c.leased,
                    (SELECT m.created_at FROM queen_messages m
                     WHERE m.partition_id = c.id AND m.\"offset\" > c.pos
                     ORDER BY m.\"offset\" LIMIT 1)
             FROM c WHERE c.deleted > 0
         )
         SELECT s.consumer_group, q.name AS queue, s.partitions, s.lag, s.leased, s.oldest_age_ms
         FROM (SELECT consumer_group, queue_id, count(*) AS partitions,
                      COALESCE(sum(lag), 0)::bigint AS lag, count(*) FILTER (WHERE leased) AS leased,
                      (extract(epoch FROM now() - min(first_at)) * 1000)::bigint AS oldest_age_ms
               FROM seen GROUP BY consumer_group, queue_id) s
         JOIN queen_queues q ON q.id = s.queue_id
         UNION ALL
         -- Subscribed queues with no cursor yet; `partitions` 0 marks them (see below).
         SELECT s.consumer_group, q.name, 0, 0, 0, NULL
         FROM queen_subscriptions s JOIN queen_queues q ON q.id = s.queue_id
         WHERE s.consumer_group = ANY($1)",
        first_unread_join(cursors, messages),
        retained_above_in("c", "c.pos")
    ))
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
    let names: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT consumer_group FROM ({GROUP_NAMES}) g ORDER BY consumer_group COLLATE \"C\""
    ))
    .fetch_all(&mut *pool.acquire().await?)
    .await?;
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

/// A message row `m` of partition `p` (queue `q`) seen by the group whose cursor is `c`
/// and whose dead letter of it is `d` (MGMT-6's four states).
const MESSAGE_COLUMNS: &str = "m.id, m.transaction_id, m.trace_id, p.id AS partition_id, q.name AS queue,
    p.name AS partition, m.data, m.sealed, m.created_at, m.producer_sub,
    CASE WHEN d.seq IS NOT NULL THEN 'deadLettered'
         WHEN c.committed IS NOT NULL AND m.\"offset\" <= c.committed THEN 'completed'
         WHEN c.lease_id IS NOT NULL AND m.\"offset\" <= c.lease_end AND c.lease_deadline > now() THEN 'leased'
         ELSE 'pending' END AS status,
    COALESCE(d.retry_count, (c.retries ->> m.\"offset\"::text)::int, 0) AS retry_count,
    d.error_message";

async fn messages(
    pool: &Db,
    q: &MessageQuery,
    seal: Option<&Sealer>,
) -> Result<Result<MessagesPage, &'static str>, sqlx::Error> {
    super::peek::messages(pool, q, seal).await
}

async fn message(
    pool: &Db,
    partition_id: &str,
    txn: &str,
    seal: Option<&Sealer>,
) -> Result<Result<Result<MessageDetail, WireError>, &'static str>, sqlx::Error> {
    let pid: Uuid = partition_id.parse().expect("validated as a UUID");
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
    let rows: Vec<(String, MessageSql)> = sqlx::query_as::<_, GroupMessageSql>(&format!(
        "SELECT g.consumer_group AS grp, {MESSAGE_COLUMNS}
         FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
         JOIN queen_messages m ON m.partition_id = p.id AND m.\"offset\" = $2
         LEFT JOIN (SELECT consumer_group FROM queen_cursors WHERE partition_id = $1) g ON true
         LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = g.consumer_group
         LEFT JOIN queen_dead_letters d ON d.partition_id = p.id AND d.\"offset\" = m.\"offset\" AND d.consumer_group = g.consumer_group
         WHERE p.id = $1 ORDER BY g.consumer_group COLLATE \"C\""
    ))
    .bind(pid)
    .bind(offset)
    .fetch_all(&mut *pool.acquire().await?)
    .await?
    .into_iter()
    .map(|r| (r.grp.unwrap_or_default(), r.row))
    .collect();
    let Some((_, first)) = rows.first() else {
        return Ok(Ok(Err(no_such_message(partition_id, txn))));
    };
    let core = match first.core(seal) {
        Ok(c) => c,
        Err(why) => return Ok(Err(why)),
    };
    let groups = rows
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, r)| MessageGroup {
            group: g.clone(),
            status: r.status(),
            retry_count: u32::try_from(r.retry_count).unwrap_or(0),
            error_message: r.error_message.clone(),
        })
        .collect();
    Ok(Ok(Ok(MessageDetail {
        message: core,
        groups,
    })))
}

/// One reading group's row of a message.
struct GroupMessageSql {
    grp: Option<String>,
    row: MessageSql,
}

impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for GroupMessageSql {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row;
        Ok(GroupMessageSql {
            grp: row.try_get("grp")?,
            row: MessageSql::from_row(row)?,
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
