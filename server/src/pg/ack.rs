//! Acknowledgment (PROTOCOL.md section 4): lock every `(partition, group)` the call
//! names (advisory locks) and resolve the items to offsets (ACK-8), read the pairs'
//! cursors, let the reference model decide (step 1's [`step_one`], steps 2–6's
//! [`decide`]), and write the decisions: three statements whatever the call's size.
//! No rule is decided here: only rows are read and written.

use super::db::Db;
use super::rows::db_now;
use crate::wakes::Wakes;
use chrono::{DateTime, Duration, Utc};
use queen_reference::model::ack::{
    decide, step_one, Decision, Found, PairView, StepOne, StepOneFacts, ValidAck,
};
use queen_reference::policy::{BlockedCompletion, ChoicePoint, Policy};
use queen_reference::wire::{AckItem, AckResult, Answer, QueueOptions, WireId, ERR_UNRESOLVABLE};
use serde_json::Value;
use sqlx::{PgConnection, Row};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The ack routes: one transaction for the whole call.
pub(crate) async fn ack_route(
    pool: &Db,
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

/// Our choices where the spec leaves a point open or to the project: the default policy,
/// which the model follows as our broker.
const OURS: Policy = Policy::ours();

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

impl CursorRow {
    /// Whether the cursor's lease is live at `now`: until its deadline, as
    /// `queen_lease_live` says in SQL.
    fn lease_live(&self, now: DateTime<Utc>) -> bool {
        self.lease_deadline.is_some_and(|d| d > now)
    }
}

/// What resolution found: each partition's queue and options, and the items grouped by
/// pair in first-appearance order, each with its offset.
struct Resolved {
    now: DateTime<Utc>,
    parts: HashMap<Uuid, (String, QueueOptions)>,
    pairs: Vec<(Pair, Vec<(usize, u32)>)>,
}

/// What one call writes, pair by pair, in the one statement of [`write`].
#[derive(Default)]
struct Writes {
    pairs: Vec<(Uuid, String)>,
    committed: Vec<i64>,
    retries: Vec<String>,
    not_before: Vec<Option<DateTime<Utc>>>,
    release: Vec<bool>,
    /// Queues where something became claimable again (parked pops are woken).
    touched: Vec<String>,
    /// Dead letters, by the position of their pair in the call (DLQ-2's filing order).
    dead: Vec<(usize, Uuid, String, u32, Option<String>, u32)>,
}

/// Evaluates and applies one ack call in the caller's transaction, in three statements:
/// lock every pair and resolve every item, read the pairs' cursors, then (after the
/// model has decided, [`step_one`] and [`decide`]) write every pair's decision, file the
/// dead letters and notify other processes. Returns the answers and the queues where
/// something became claimable again.
pub(crate) async fn ack(
    conn: &mut PgConnection,
    items: &[AckItem],
) -> Result<(Vec<AckResult>, Vec<String>), sqlx::Error> {
    let mut out: Vec<Option<AckResult>> = vec![None; items.len()];
    let resolved = lock_and_resolve(conn, items, &mut out).await?;
    let mut cursors = read_cursors(conn, &resolved.pairs).await?;
    let now = resolved.now;
    let mut w = Writes::default();
    for (pi, ((pid, group), list)) in resolved.pairs.iter().enumerate() {
        let cursor = cursors.remove(&(*pid, group.clone()));
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
            lease: c.lease_end.map(|end| (end, c.lease_live(now))),
            retry_limit: opts.retry_limit,
        };
        let d = decide(&view, &acks);
        w.add((*pid, group), &c, &d, opts, now);
        if d.release {
            w.touched.push(queue.clone());
        }
        for (off, error, retry_count) in &d.dead {
            w.dead
                .push((pi, *pid, group.clone(), *off, error.clone(), *retry_count));
        }
        let refuse_blocked = OURS.blocked_completion == BlockedCompletion::Failure;
        for &(i, dlq, blocked) in &d.items {
            out[i] = Some(d.answer(i, &items[i].transaction_id, dlq, blocked && refuse_blocked));
        }
    }
    write(conn, &mut w, now).await?;
    let results = out
        .into_iter()
        .map(|o| o.expect("every item answered"))
        .collect();
    Ok((results, w.touched))
}

/// One statement: "now", every named pair's lock (waited for, in a canonical order, so
/// two calls never wait on each other in a cycle), and step 1's resolution of every item
/// (ACK-8: the newest message of the partition with that transactionId). Items that do
/// not resolve are answered in `out`; the others come back grouped by pair in the order
/// the call first names each pair.
async fn lock_and_resolve(
    conn: &mut PgConnection,
    items: &[AckItem],
    out: &mut [Option<AckResult>],
) -> Result<Resolved, sqlx::Error> {
    let mut locks: Vec<Pair> = items
        .iter()
        .map(|i| (i.partition_id.uuid(), i.consumer_group.clone()))
        .collect();
    locks.sort();
    locks.dedup();
    let (lp, lg): (Vec<Uuid>, Vec<String>) = locks.into_iter().unzip();
    let (kp, kt): (Vec<Uuid>, Vec<&str>) = items
        .iter()
        .map(|i| (i.partition_id.uuid(), i.transaction_id.as_str()))
        .unzip();
    let rows = sqlx::query(
        "WITH locks AS MATERIALIZED (
            SELECT count(pg_advisory_xact_lock(queen_pair_key(l.p, l.g))) AS n
            FROM (SELECT * FROM unnest($3::uuid[], $4::text[]) WITH ORDINALITY AS l(p, g, o) ORDER BY l.o) l)
         SELECT now() AS now, (SELECT n FROM locks) AS locked, k.i, q.name AS queue, q.options,
                (SELECT m.\"offset\" FROM queen_messages m
                 WHERE m.partition_id = p.id AND m.transaction_id = k.t
                 ORDER BY m.\"offset\" DESC LIMIT 1) AS \"offset\"
         FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS k(p, t, i)
         LEFT JOIN queen_partitions p ON p.id = k.p
         LEFT JOIN queen_queues q ON q.id = p.queue_id
         ORDER BY k.i",
    )
    .bind(&kp)
    .bind(&kt)
    .bind(&lp)
    .bind(&lg)
    .fetch_all(&mut *conn)
    .await?;
    let mut now = None;
    let mut parts: HashMap<Uuid, (String, QueueOptions)> = HashMap::new();
    // In the order the call first names each pair: the filing order of its dead letters.
    let mut pairs: Vec<(Pair, Vec<(usize, u32)>)> = Vec::new();
    let mut at: HashMap<Pair, usize> = HashMap::new();
    for r in rows {
        now.get_or_insert(r.try_get::<DateTime<Utc>, _>("now")?);
        let i = r.try_get::<i64, _>("i")? as usize - 1;
        let it = &items[i];
        let pid = it.partition_id.uuid();
        let (Some(queue), Some(o)) = (
            r.try_get::<Option<String>, _>("queue")?,
            r.try_get::<Option<i64>, _>("offset")?,
        ) else {
            out[i] = Some(AckResult::new(
                i,
                &it.transaction_id,
                false,
                Some(ERR_UNRESOLVABLE),
                false,
            ));
            continue;
        };
        if let std::collections::hash_map::Entry::Vacant(e) = parts.entry(pid) {
            let options: Value = r.try_get("options")?;
            e.insert((queue, super::rows::options_of(options)));
        }
        let key = (pid, it.consumer_group.clone());
        let slot = *at.entry(key.clone()).or_insert_with(|| {
            pairs.push((key, Vec::new()));
            pairs.len() - 1
        });
        pairs[slot].1.push((i, offset(o)?));
    }
    Ok(Resolved {
        now: match now {
            Some(n) => n,
            None => db_now(conn).await?,
        },
        parts,
        pairs,
    })
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
            StepOne::Valid { creates_cursor } => {
                // Our choice at step 7 (`OURS`) never lets an ack create a cursor.
                debug_assert!(!creates_cursor, "our policy creates no cursor on ack");
                valid.push((i, offset))
            }
        }
    }
    valid
}

/// Step 1's facts from the cursor row, with our choices read from [`OURS`].
struct RowFacts<'a> {
    cursor: Option<&'a CursorRow>,
    named: Option<Uuid>,
    now: DateTime<Utc>,
}

impl StepOneFacts for RowFacts<'_> {
    fn live_lease_end(&mut self) -> Option<u32> {
        let c = self.cursor?;
        let named = self.named?;
        let live = c.lease_id == Some(named) && c.lease_live(self.now);
        live.then_some(c.lease_end).flatten()
    }

    fn commit_without_cursor(&mut self) -> bool {
        OURS.pick(ChoicePoint::AckWithoutCursor) == 1
    }

    fn accept_outside_span(&mut self) -> bool {
        OURS.pick(ChoicePoint::AckOutsideSpan) == 1
    }
}

impl Writes {
    /// One pair's decision: the cursor, the retries, the retry delay, the lease.
    fn add(
        &mut self,
        (pid, group): (Uuid, &str),
        c: &CursorRow,
        d: &Decision,
        opts: &QueueOptions,
        now: DateTime<Utc>,
    ) {
        let retries: serde_json::Map<String, Value> = d
            .retries_after(&c.retries)
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        self.pairs.push((pid, group.to_string()));
        self.committed.push(i64::from(d.new_cursor));
        self.retries.push(Value::Object(retries).to_string());
        self.not_before.push(
            d.failed_back
                .then(|| now + Duration::milliseconds(opts.retry_delay as i64)),
        );
        self.release.push(d.release);
    }
}

/// One statement: every pair's decision and the call's dead letters in the order the call
/// first names each pair (DLQ-2), not in the locking order. The queues where something
/// became claimable again are rung after the commit ([`ack_route`]).
async fn write(
    conn: &mut PgConnection,
    w: &mut Writes,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    if w.pairs.is_empty() {
        return Ok(());
    }
    w.dead.sort_by_key(|d| d.0);
    w.touched.sort();
    w.touched.dedup();
    let (pp, pg): (Vec<Uuid>, Vec<&str>) = w.pairs.iter().map(|(p, g)| (*p, g.as_str())).unzip();
    let mut dead = (vec![], vec![], vec![], vec![], vec![]);
    for (_, pid, group, off, error, retry_count) in &w.dead {
        dead.0.push(*pid);
        dead.1.push(i64::from(*off));
        dead.2.push(group.as_str());
        dead.3.push(error.as_deref());
        dead.4.push(*retry_count as i32);
    }
    sqlx::query(
        "WITH upd AS (
            UPDATE queen_cursors c SET committed = x.committed, retries = x.retries::jsonb,
                not_before = COALESCE(x.not_before, c.not_before),
                lease_id = CASE WHEN x.release THEN NULL ELSE c.lease_id END,
                lease_end = CASE WHEN x.release THEN NULL ELSE c.lease_end END,
                lease_deadline = CASE WHEN x.release THEN NULL ELSE c.lease_deadline END,
                lease_duration_ms = CASE WHEN x.release THEN NULL ELSE c.lease_duration_ms END
            FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::boolean[])
                 AS x(p, g, committed, retries, not_before, release)
            WHERE c.partition_id = x.p AND c.consumer_group = x.g
            RETURNING 1),
         dead AS (
            INSERT INTO queen_dead_letters (partition_id, \"offset\", consumer_group, error_message, retry_count, failed_at)
            SELECT d.p, d.o, d.g, d.e, d.r, $12
            FROM unnest($7::uuid[], $8::bigint[], $9::text[], $10::text[], $11::integer[]) WITH ORDINALITY AS d(p, o, g, e, r, n)
            ORDER BY d.n
            ON CONFLICT DO NOTHING RETURNING 1)
         SELECT (SELECT count(*) FROM upd), (SELECT count(*) FROM dead)",
    )
    .bind(&pp)
    .bind(&pg)
    .bind(&w.committed)
    .bind(&w.retries)
    .bind(&w.not_before)
    .bind(&w.release)
    .bind(&dead.0)
    .bind(&dead.1)
    .bind(&dead.2)
    .bind(&dead.3)
    .bind(&dead.4)
    .bind(now)
    .execute(conn)
    .await
    .map(|_| ())
}

/// An offset as the model counts them; one past its range is an error, never a wrap.
fn offset(o: i64) -> Result<u32, sqlx::Error> {
    u32::try_from(o)
        .map_err(|_| sqlx::Error::Decode(format!("offset {o} is beyond the model's range").into()))
}

#[derive(sqlx::FromRow)]
struct CursorSql {
    partition_id: Uuid,
    consumer_group: String,
    committed: i64,
    lease_id: Option<Uuid>,
    lease_end: Option<i64>,
    lease_deadline: Option<DateTime<Utc>>,
    retries: Value,
}

/// The cursors of `pairs`, read after their locks were taken (a statement of its own,
/// so that it sees every commit made under them).
async fn read_cursors(
    conn: &mut PgConnection,
    pairs: &[(Pair, Vec<(usize, u32)>)],
) -> Result<HashMap<Pair, CursorRow>, sqlx::Error> {
    if pairs.is_empty() {
        return Ok(HashMap::new());
    }
    let (kp, kg): (Vec<Uuid>, Vec<&str>) = pairs.iter().map(|((p, g), _)| (*p, g.as_str())).unzip();
    let rows: Vec<CursorSql> = sqlx::query_as(
        "SELECT c.partition_id, c.consumer_group, c.committed, c.lease_id, c.lease_end, c.lease_deadline, c.retries
         FROM unnest($1::uuid[], $2::text[]) AS k(p, g)
         JOIN queen_cursors c ON c.partition_id = k.p AND c.consumer_group = k.g",
    )
    .bind(&kp)
    .bind(&kg)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = HashMap::with_capacity(rows.len());
    for r in rows {
        let retries = r
            .retries
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.parse().ok()?, u32::try_from(v.as_u64()?).ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        out.insert(
            (r.partition_id, r.consumer_group),
            CursorRow {
                committed: offset(r.committed)?,
                lease_id: r.lease_id,
                lease_end: r.lease_end.map(offset).transpose()?,
                lease_deadline: r.lease_deadline,
                retries,
            },
        );
    }
    Ok(out)
}
