//! The peek listing (PROTOCOL.md MGMT-6) by offset arithmetic: a page costs the
//! partitions it walks and the rows it shows, never the messages before it.
//!
//! A group's view of a partition is a few ranges of offsets: `(floor, committed]`
//! completed, `(committed, lease end]` leased while the lease is live, the rest pending,
//! with the offsets it dead-lettered taken out of whichever range holds them, and the
//! offsets an operator deleted (MGMT-11) taken out of every range. So the rows
//! of each state in a partition are counted without reading them, a page skips whole
//! partitions by their counts, and only the rows shown are read, by primary key. Both
//! statements run in one read-only snapshot, so the page and its total agree.

use super::db::Db;
use super::rows::{iso, JsonText};
use crate::seal::{shown, Sealer};
use chrono::{DateTime, Utc};
use queen_reference::wire::*;
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

/// One partition as the group sees it.
#[derive(sqlx::FromRow)]
struct Span {
    id: Uuid,
    queue: String,
    name: String,
    last_offset: i64,
    removed_through: i64,
    committed: Option<i64>,
    /// The end of the group's lease, while it is live.
    lease_end: Option<i64>,
    retries: Option<Value>,
    /// Retained offsets the group dead-lettered, ascending, with their retry counts.
    dead: Vec<i64>,
    dead_retries: Vec<i32>,
    /// Offsets above the floor whose message was deleted, ascending.
    deleted: Vec<i64>,
}

impl Span {
    /// Whether offset `o` holds no message any more (MGMT-11).
    fn gone(&self, o: i64) -> bool {
        self.deleted.binary_search(&o).is_ok()
    }

    /// A deleted message's dead letters stay for the DLQ, but the peek lists retained
    /// messages only.
    fn drop_deleted_dead(&mut self) {
        if self.deleted.is_empty() {
            return;
        }
        let keep: Vec<bool> = self.dead.iter().map(|o| !self.gone(*o)).collect();
        let mut k = keep.iter();
        self.dead
            .retain(|_| *k.next().expect("one flag per offset"));
        let mut k = keep.iter();
        self.dead_retries
            .retain(|_| *k.next().expect("one flag per offset"));
    }

    /// The state of offset `o` for the group (the model's order: dead letter, committed,
    /// live lease, pending).
    fn status(&self, o: i64) -> MessageStatus {
        if self.dead.binary_search(&o).is_ok() {
            MessageStatus::DeadLettered
        } else if self.committed.is_some_and(|c| o <= c) {
            MessageStatus::Completed
        } else if self.lease_end.is_some_and(|e| o <= e) {
            MessageStatus::Leased
        } else {
            MessageStatus::Pending
        }
    }

    /// The offsets `(lo, hi]` holding `status` before dead letters are taken out.
    fn range(&self, status: MessageStatus) -> (i64, i64) {
        let (f, l) = (self.removed_through, self.last_offset);
        let c = self.committed.unwrap_or(f).clamp(f, l);
        let e = self.lease_end.unwrap_or(c).clamp(c, l);
        match status {
            MessageStatus::Completed => (f, c),
            MessageStatus::Leased => (c, e),
            MessageStatus::Pending => (e, l),
            MessageStatus::DeadLettered => (f, f),
        }
    }

    /// How many retained offsets have `status` (all of them for `None`).
    fn count(&self, status: Option<MessageStatus>) -> i64 {
        match status {
            None => self.last_offset - self.removed_through - self.deleted.len() as i64,
            Some(MessageStatus::DeadLettered) => self.dead.len() as i64,
            Some(s) => {
                let (lo, hi) = self.range(s);
                let within = |v: &[i64]| v.iter().filter(|o| **o > lo && **o <= hi).count() as i64;
                (hi - lo) - within(&self.dead) - within(&self.deleted)
            }
        }
    }

    /// The offsets with `status`, in order, after skipping `skip` of them, at most `take`.
    fn offsets(&self, status: Option<MessageStatus>, skip: i64, take: usize) -> Vec<i64> {
        let all: Box<dyn Iterator<Item = i64>> = match status {
            None if self.deleted.is_empty() => {
                Box::new(self.removed_through + 1 + skip..=self.last_offset)
            }
            None => Box::new(
                (self.removed_through + 1..=self.last_offset)
                    .filter(|o| !self.gone(*o))
                    .skip(skip as usize),
            ),
            Some(MessageStatus::DeadLettered) => {
                Box::new(self.dead.iter().copied().skip(skip as usize))
            }
            Some(s) => {
                let (lo, hi) = self.range(s);
                Box::new(
                    (lo + 1..=hi)
                        .filter(|o| self.dead.binary_search(o).is_err() && !self.gone(*o))
                        .skip(skip as usize),
                )
            }
        };
        all.take(take).collect()
    }

    fn retry_count(&self, o: i64) -> u32 {
        if let Ok(i) = self.dead.binary_search(&o) {
            return u32::try_from(self.dead_retries[i]).unwrap_or(0);
        }
        self.retries
            .as_ref()
            .and_then(|r| r.get(o.to_string()))
            .and_then(Value::as_u64)
            .map_or(0, |n| n as u32)
    }
}

#[derive(sqlx::FromRow)]
struct Row {
    partition_id: Uuid,
    offset: i64,
    id: Uuid,
    transaction_id: String,
    trace_id: Option<Uuid>,
    data: JsonText,
    sealed: bool,
    created_at: DateTime<Utc>,
    producer_sub: Option<String>,
}

/// MGMT-6: one page of retained messages by queue, partition and offset, with their
/// state for the group; a sealed payload that cannot be opened names the cause.
pub(crate) async fn messages(
    pool: &Db,
    q: &MessageQuery,
    seal: Option<&Sealer>,
) -> Result<Result<MessagesPage, &'static str>, sqlx::Error> {
    let mut tx = pool.snapshot().await?;
    let mut spans: Vec<Span> = sqlx::query_as(include_str!("../../sql/manage/peek_spans.sql"))
        .bind(&q.queue)
        .bind(&q.partition)
        .bind(&q.group)
        .fetch_all(&mut *tx)
        .await?;
    spans.iter_mut().for_each(Span::drop_deleted_dead);
    let total: i64 = spans.iter().map(|s| s.count(q.status)).sum();
    let picked = pick(
        &spans,
        q.status,
        i64::try_from(q.page.offset).unwrap_or(i64::MAX),
        q.page.limit as usize,
    );
    let (pids, offs): (Vec<Uuid>, Vec<i64>) =
        picked.iter().map(|(i, o)| (spans[*i].id, *o)).unzip();
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT m.partition_id, m.\"offset\", m.id, m.transaction_id, m.trace_id, m.data, m.sealed,
                m.created_at, m.producer_sub
         FROM unnest($1::uuid[], $2::bigint[]) AS k(pid, off)
         JOIN queen_messages m ON m.partition_id = k.pid AND m.\"offset\" = k.off",
    )
    .bind(&pids)
    .bind(&offs)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let by: HashMap<(Uuid, i64), Row> = rows
        .into_iter()
        .map(|r| ((r.partition_id, r.offset), r))
        .collect();
    let messages = match page_rows(&spans, picked, by, seal) {
        Ok(m) => m,
        Err(why) => return Ok(Err(why)),
    };
    Ok(Ok(MessagesPage {
        messages,
        page: PageInfo::new(q.page, u64::try_from(total).unwrap_or(0)),
    }))
}

/// The page's messages in `picked` order, from the rows read by key, each with its
/// partition's state for the group; a sealed payload that cannot be opened names the
/// cause instead.
fn page_rows(
    spans: &[Span],
    picked: Vec<(usize, i64)>,
    mut by: HashMap<(Uuid, i64), Row>,
    seal: Option<&Sealer>,
) -> Result<Vec<MessageRow>, &'static str> {
    let mut messages = Vec::with_capacity(picked.len());
    for (i, o) in picked {
        let span = &spans[i];
        let Some(r) = by.remove(&(span.id, o)) else {
            continue;
        };
        let (data, data_error) = shown(seal, r.sealed, r.data.0)?;
        messages.push(MessageRow {
            message: MessageCore {
                id: r.id.to_string(),
                transaction_id: r.transaction_id,
                trace_id: r.trace_id.map(|t| t.to_string()),
                partition_id: span.id.to_string(),
                queue: span.queue.clone(),
                partition: span.name.clone(),
                data,
                data_error,
                created_at: iso(r.created_at),
                producer_sub: r.producer_sub,
            },
            status: span.status(o),
            retry_count: span.retry_count(o),
        });
    }
    Ok(messages)
}

/// The `(span index, offset)` of one page: whole partitions skipped by their counts.
fn pick(
    spans: &[Span],
    status: Option<MessageStatus>,
    mut skip: i64,
    limit: usize,
) -> Vec<(usize, i64)> {
    let mut out = Vec::with_capacity(limit);
    for (i, span) in spans.iter().enumerate() {
        if out.len() == limit {
            break;
        }
        let n = span.count(status);
        if skip >= n {
            skip -= n;
            continue;
        }
        out.extend(
            span.offsets(status, skip, limit - out.len())
                .into_iter()
                .map(|o| (i, o)),
        );
        skip = 0;
    }
    out
}
