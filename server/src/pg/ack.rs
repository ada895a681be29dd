//! Acknowledgment (PROTOCOL.md section 4): resolve the items to offsets (ACK-8), then
//! per `(partition, group)`, under its advisory lock, read the cursor, let the reference
//! model decide (step 1's [`step_one`], steps 2–6's [`decide`]), and write the decision.
//! No rule is decided here: only rows are read and written.

use super::rows::db_now;
use crate::wakes::Wakes;
use chrono::{DateTime, Duration, Utc};
use queen_reference::model::ack::{
    decide, step_one, Decision, Found, PairView, StepOne, StepOneFacts, ValidAck,
};
use queen_reference::wire::{AckItem, AckResult, Answer, QueueOptions, WireId, ERR_UNRESOLVABLE};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The ack routes: one transaction for the whole call.
pub(crate) async fn ack_route(
    pool: &PgPool,
    wakes: &Wakes,
    items: Vec<AckItem>,
) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (results, touched) = ack(&mut tx, &items).await?;
    tx.commit().await?;
    for q in touched {
        wakes.ring(&q);
    }
    Ok(Answer::Acked(results))
}

/// A `(partition, group)`: the unit an ack call is evaluated and locked in.
type Pair = (Uuid, String);

/// A cursor row as the evaluation needs it.
struct CursorRow {
    committed: u32,
    lease_id: Option<Uuid>,
    lease_end: Option<u32>,
    lease_deadline: Option<DateTime<Utc>>,
    retries: BTreeMap<u32, u32>,
}

/// What resolution found: each partition's queue and options, and the items grouped by
/// pair in first-appearance order, each with its offset.
struct Resolved {
    parts: HashMap<Uuid, (String, QueueOptions)>,
    pairs: Vec<(Pair, Vec<(usize, u32)>)>,
}

/// What the writes of one call leave to do after the loop over pairs.
#[derive(Default)]
struct Effects {
    /// Queues where something became claimable again (parked pops are woken).
    touched: Vec<String>,
    /// Dead letters, by the position of their pair in the call (DLQ-2's filing order).
    dead: Vec<(usize, Uuid, String, u32, Option<String>, u32)>,
}

/// Evaluates and applies one ack call in the caller's transaction: resolve, then per
/// pair lock and read, decide (the model's [`step_one`] and [`decide`]), write. Returns
/// the answers and the queues where something became claimable again.
pub(crate) async fn ack(
    conn: &mut PgConnection,
    items: &[AckItem],
) -> Result<(Vec<AckResult>, Vec<String>), sqlx::Error> {
    let now = db_now(conn).await?;
    let mut out: Vec<Option<AckResult>> = vec![None; items.len()];
    let resolved = resolve(conn, items, &mut out).await?;
    // Lock pairs in a canonical order so two calls never wait on each other in a cycle.
    let mut order: Vec<usize> = (0..resolved.pairs.len()).collect();
    order.sort_by(|a, b| resolved.pairs[*a].0.cmp(&resolved.pairs[*b].0));
    let mut effects = Effects::default();
    for pi in order {
        let ((pid, group), list) = &resolved.pairs[pi];
        super::pair::lock(conn, *pid, group).await?;
        let cursor = read_cursor(conn, *pid, group).await?;
        let valid = judge(items, list, cursor.as_ref(), now, &mut out);
        let Some(c) = cursor.filter(|_| !valid.is_empty()) else {
            continue;
        };
        let (queue, opts) = &resolved.parts[pid];
        let acks: Vec<ValidAck> = valid
            .iter()
            .map(|&(i, offset)| ValidAck {
                index: i,
                offset,
                status: items[i].status,
                error: items[i].error.as_deref(),
            })
            .collect();
        let view = PairView {
            committed: c.committed,
            retries: &c.retries,
            lease: c
                .lease_end
                .map(|end| (end, c.lease_deadline.is_some_and(|d| d > now))),
            retry_limit: opts.retry_limit,
        };
        let d = decide(&view, &acks);
        write(conn, (*pid, group), &c, &d, opts, now).await?;
        if d.release {
            effects.touched.push(queue.clone());
            notify(conn, queue).await?;
        }
        for (off, error, retry_count) in &d.dead {
            effects
                .dead
                .push((pi, *pid, group.clone(), *off, error.clone(), *retry_count));
        }
        for &(i, dlq, _blocked) in &d.items {
            // ACK step 6 [OPEN], ours: a blocked completion answers success, not noop.
            let mut r = AckResult::new(i, &items[i].transaction_id, true, None, false);
            r.lease_released = d.released_live;
            r.dlq = dlq;
            out[i] = Some(r);
        }
    }
    file_dead_letters(conn, effects.dead, now).await?;
    let results = out
        .into_iter()
        .map(|o| o.expect("every item answered"))
        .collect();
    Ok((results, effects.touched))
}

/// Step 1's resolution (ACK-8: the newest message of the partition with that
/// transactionId); items that do not resolve are answered in `out`.
async fn resolve(
    conn: &mut PgConnection,
    items: &[AckItem],
    out: &mut [Option<AckResult>],
) -> Result<Resolved, sqlx::Error> {
    let pids: Vec<Uuid> = items.iter().map(|i| i.partition_id.uuid()).collect();
    let parts: HashMap<Uuid, (String, QueueOptions)> = sqlx::query_as(
        "SELECT p.id, q.name, q.options FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id WHERE p.id = ANY($1)",
    )
    .bind(&pids)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|(id, name, options): (Uuid, String, Value)| (id, (name, super::rows::options_of(options))))
    .collect();
    let (kp, kt): (Vec<Uuid>, Vec<&str>) = items
        .iter()
        .map(|i| (i.partition_id.uuid(), i.transaction_id.as_str()))
        .unzip();
    let offsets: HashMap<(Uuid, String), i64> = sqlx::query_as(
        "SELECT DISTINCT ON (m.partition_id, m.transaction_id) m.partition_id, m.transaction_id, m.\"offset\"
         FROM queen_messages m JOIN unnest($1::uuid[], $2::text[]) AS k(p, t) ON m.partition_id = k.p AND m.transaction_id = k.t
         ORDER BY m.partition_id, m.transaction_id, m.\"offset\" DESC",
    )
    .bind(&kp)
    .bind(&kt)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|(p, t, o): (Uuid, String, i64)| ((p, t), o))
    .collect();
    let mut pairs: Vec<(Pair, Vec<(usize, u32)>)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let pid = Some(it.partition_id.uuid()).filter(|p| parts.contains_key(p));
        let off = pid.and_then(|p| offsets.get(&(p, it.transaction_id.clone())).copied());
        let (Some(p), Some(o)) = (pid, off) else {
            out[i] = Some(AckResult::new(
                i,
                &it.transaction_id,
                false,
                Some(ERR_UNRESOLVABLE),
                false,
            ));
            continue;
        };
        let key = (p, it.consumer_group.clone());
        let o = offset(o)?;
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push((i, o)),
            None => pairs.push((key, vec![(i, o)])),
        }
    }
    Ok(Resolved { parts, pairs })
}

/// The rest of step 1 for one pair's items, as the model decides it ([`step_one`]):
/// answers the refused ones in `out`, returns the valid ones.
fn judge(
    items: &[AckItem],
    list: &[(usize, u32)],
    cursor: Option<&CursorRow>,
    now: DateTime<Utc>,
    out: &mut [Option<AckResult>],
) -> Vec<(usize, u32)> {
    let mut valid = Vec::new();
    for &(i, offset) in list {
        let it = &items[i];
        let found = Found {
            index: i,
            transaction_id: &it.transaction_id,
            offset,
            status: it.status,
            committed: cursor.map(|c| c.committed),
            names_lease: it.lease_id.is_some(),
        };
        let mut facts = RowFacts {
            cursor,
            named: it.lease_id.as_ref().map(WireId::uuid),
            now,
        };
        match step_one(&found, &mut facts) {
            StepOne::Answered(r) => out[i] = Some(r),
            // Our choice at step 7 never creates a cursor.
            StepOne::Valid { .. } => valid.push((i, offset)),
        }
    }
    valid
}

/// Step 1's facts from the cursor row, with our choices (no commit without a cursor, no
/// ack outside the lease's span).
struct RowFacts<'a> {
    cursor: Option<&'a CursorRow>,
    named: Option<Uuid>,
    now: DateTime<Utc>,
}

impl StepOneFacts for RowFacts<'_> {
    fn live_lease_end(&mut self) -> Option<u32> {
        let c = self.cursor?;
        let named = self.named?;
        let live = c.lease_id == Some(named) && c.lease_deadline.is_some_and(|d| d > self.now);
        live.then_some(c.lease_end).flatten()
    }

    fn commit_without_cursor(&mut self) -> bool {
        false
    }

    fn accept_outside_span(&mut self) -> bool {
        false
    }
}

/// Writes one pair's decision: the cursor, the retries, the retry delay, the lease.
async fn write(
    conn: &mut PgConnection,
    (pid, group): (Uuid, &str),
    c: &CursorRow,
    d: &Decision,
    opts: &QueueOptions,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let retries = Value::Object(
        d.retries_after(&c.retries)
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect(),
    );
    let not_before = d
        .failed_back
        .then(|| now + Duration::milliseconds(opts.retry_delay as i64));
    sqlx::query(
        "UPDATE queen_cursors SET committed = $3, retries = $4,
            not_before = CASE WHEN $5::timestamptz IS NULL THEN not_before ELSE $5 END,
            lease_id = CASE WHEN $6 THEN NULL ELSE lease_id END,
            lease_end = CASE WHEN $6 THEN NULL ELSE lease_end END,
            lease_deadline = CASE WHEN $6 THEN NULL ELSE lease_deadline END,
            lease_duration_ms = CASE WHEN $6 THEN NULL ELSE lease_duration_ms END
         WHERE partition_id = $1 AND consumer_group = $2",
    )
    .bind(pid)
    .bind(group)
    .bind(i64::from(d.new_cursor))
    .bind(retries)
    .bind(not_before)
    .bind(d.release)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Tells other processes' parked pops that `queue` has something claimable again.
async fn notify(conn: &mut PgConnection, queue: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify('queen_push', $1)")
        .bind(queue)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Files the call's dead letters in the order the call first names each pair (DLQ-2),
/// not in the locking order.
async fn file_dead_letters(
    conn: &mut PgConnection,
    mut dead: Vec<(usize, Uuid, String, u32, Option<String>, u32)>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    dead.sort_by_key(|d| d.0);
    for (_, pid, group, off, error, retry_count) in dead {
        sqlx::query(
            "INSERT INTO queen_dead_letters (partition_id, \"offset\", consumer_group, error_message, retry_count, failed_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(pid)
        .bind(i64::from(off))
        .bind(group)
        .bind(error)
        .bind(retry_count as i32)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// An offset as the model counts them; one past its range is an error, never a wrap.
fn offset(o: i64) -> Result<u32, sqlx::Error> {
    u32::try_from(o)
        .map_err(|_| sqlx::Error::Decode(format!("offset {o} is beyond the model's range").into()))
}

#[derive(sqlx::FromRow)]
struct CursorSql {
    committed: i64,
    lease_id: Option<Uuid>,
    lease_end: Option<i64>,
    lease_deadline: Option<DateTime<Utc>>,
    retries: Value,
}

async fn read_cursor(
    conn: &mut PgConnection,
    pid: Uuid,
    group: &str,
) -> Result<Option<CursorRow>, sqlx::Error> {
    let row: Option<CursorSql> = sqlx::query_as(
        "SELECT committed, lease_id, lease_end, lease_deadline, retries FROM queen_cursors WHERE partition_id = $1 AND consumer_group = $2",
    )
    .bind(pid)
    .bind(group)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    let retries = r
        .retries
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, u32::try_from(v.as_u64()?).ok()?)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(CursorRow {
        committed: offset(r.committed)?,
        lease_id: r.lease_id,
        lease_end: r.lease_end.map(offset).transpose()?,
        lease_deadline: r.lease_deadline,
        retries,
    }))
}
