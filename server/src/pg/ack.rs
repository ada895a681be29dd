//! Acknowledgment (PROTOCOL.md section 4): resolve the items to offsets (ACK-8) and
//! read the cursors of the pairs they name, let the reference model decide (step 1's
//! [`step_one`], steps 2–6's [`decide`]), and write the decisions: two statements
//! whatever the call's size. No rule is decided here: only rows are read and written.
//!
//! The read takes no lock. The write (`queen_ack_write`, `server/sql/08_ack.sql`) takes
//! the pairs' locks and writes only if every cursor read is still the version read, so a
//! call that raced another reads and decides again; after a few such races it takes the
//! locks before it reads, as an ack inside a transaction always does.

use super::db::Db;
use crate::wakes::Wakes;
use chrono::{DateTime, Duration, Utc};
use queen_reference::model::ack::{
    decide, step_one, Decision, Found, PairView, StepOne, StepOneFacts, ValidAck,
};
use queen_reference::policy::{BlockedCompletion, ChoicePoint, Policy};
use queen_reference::wire::{AckItem, AckResult, Answer, QueueOptions, WireId, ERR_UNRESOLVABLE};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The ack routes: read, decide and write without holding a lock between them; when
/// every try raced another writer of the same cursors, once more under the locks.
pub(crate) async fn ack_route(
    pool: &Db,
    wakes: &Wakes,
    items: Vec<AckItem>,
) -> Result<Answer, sqlx::Error> {
    let mut done = None;
    for _ in 0..UNLOCKED_TRIES {
        done = evaluate(&mut *pool.acquire().await?, &items).await?;
        if done.is_some() {
            break;
        }
    }
    let (results, touched) = match done {
        Some(done) => done,
        None => {
            let mut tx = pool.begin().await?;
            let done = ack(&mut tx, &items).await?;
            tx.commit().await?;
            done
        }
    };
    for q in touched {
        wakes.ring(&q);
    }
    Ok(Answer::Acked(results))
}

/// How often an ack reads and decides without locks before it takes them first.
const UNLOCKED_TRIES: usize = 3;

/// Evaluates and applies one ack call in the caller's transaction: takes every named
/// pair's lock first, so the cursors read are the ones written over. Returns the answers
/// and the queues where something became claimable again.
pub(crate) async fn ack(
    conn: &mut PgConnection,
    items: &[AckItem],
) -> Result<(Vec<AckResult>, Vec<String>), sqlx::Error> {
    lock(conn, items).await?;
    evaluate(conn, items).await?.ok_or_else(|| {
        sqlx::Error::Protocol("an ack's cursors changed while it held their locks".into())
    })
}

/// Reads, decides and writes one call ([`read`], [`judge`] and [`decide`], [`write`]):
/// the answers and the queues to wake, or none when a cursor read had changed by the
/// time of the write (nothing was written then).
async fn evaluate(
    conn: &mut PgConnection,
    items: &[AckItem],
) -> Result<Option<(Vec<AckResult>, Vec<String>)>, sqlx::Error> {
    let mut out: Vec<Option<AckResult>> = vec![None; items.len()];
    let mut read = read(conn, items, &mut out).await?;
    let now = read.now;
    let mut w = Writes::default();
    for (pi, ((pid, group), list)) in read.pairs.iter().enumerate() {
        let cursor = read.cursors.remove(&(*pid, group.clone()));
        w.seen
            .push((*pid, group.clone(), cursor.as_ref().map(|c| c.xmin)));
        let valid = judge(items, list, cursor.as_ref(), now, &mut out);
        let Some(c) = cursor.filter(|_| !valid.is_empty()) else {
            continue;
        };
        let (queue, opts) = &read.parts[pid];
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
    if !write(conn, &mut w, now).await? {
        return Ok(None);
    }
    let results = out
        .into_iter()
        .map(|o| o.expect("every item answered"))
        .collect();
    Ok(Some((results, w.touched)))
}

/// Our choices where the spec leaves a point open or to the project: the default policy,
/// which the model follows as our broker.
const OURS: Policy = Policy::ours();

/// A `(partition, group)`: the unit an ack call is evaluated and locked in.
type Pair = (Uuid, String);

/// A cursor row as the evaluation needs it, with the version read (its `xmin`).
struct CursorRow {
    xmin: i64,
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

    /// The cursor columns of a row of [`read`]: none when the pair has no cursor.
    fn of(r: &PgRow) -> Result<Option<CursorRow>, sqlx::Error> {
        let Some(xmin) = r.try_get::<Option<i64>, _>(5)? else {
            return Ok(None);
        };
        let retries: Value = r.try_get(10)?;
        let retries = retries
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.parse().ok()?, u32::try_from(v.as_u64()?).ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(CursorRow {
            xmin,
            committed: offset(r.try_get(6)?)?,
            lease_id: r.try_get(7)?,
            lease_end: r.try_get::<Option<i64>, _>(8)?.map(offset).transpose()?,
            lease_deadline: r.try_get(9)?,
            retries,
        }))
    }
}

/// What one read found: "now", each partition's queue and options, the items grouped
/// by pair in first-appearance order, each with its offset, and the pairs' cursors.
struct Read {
    now: DateTime<Utc>,
    parts: HashMap<Uuid, (String, QueueOptions)>,
    pairs: Vec<(Pair, Vec<(usize, u32)>)>,
    cursors: HashMap<Pair, CursorRow>,
}

/// What one call writes, pair by pair, in the one statement of [`write`].
#[derive(Default)]
struct Writes {
    /// Every pair read, with the version of its cursor read (none: no cursor).
    seen: Vec<(Uuid, String, Option<i64>)>,
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

/// Every pair the call names, locked (waited for) in a canonical order, so two calls
/// never wait on each other in a cycle; [`write`]'s function takes the same order.
async fn lock(conn: &mut PgConnection, items: &[AckItem]) -> Result<(), sqlx::Error> {
    let mut locks: Vec<Pair> = items
        .iter()
        .map(|i| (i.partition_id.uuid(), i.consumer_group.clone()))
        .collect();
    locks.sort();
    locks.dedup();
    let (lp, lg): (Vec<Uuid>, Vec<String>) = locks.into_iter().unzip();
    sqlx::query(
        "SELECT count(pg_advisory_xact_lock(queen_pair_key(l.p, l.g)))
         FROM (SELECT * FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS l(p, g, o)
               ORDER BY l.o) l",
    )
    .bind(&lp)
    .bind(&lg)
    .execute(conn)
    .await
    .map(|_| ())
}

/// One statement, one snapshot: "now", step 1's resolution of every item (ACK-8: the
/// newest message of the partition with that transactionId) and the cursor of its pair.
/// Items that do not resolve are answered in `out`; the others come back grouped by
/// pair in the order the call first names each pair.
async fn read(
    conn: &mut PgConnection,
    items: &[AckItem],
    out: &mut [Option<AckResult>],
) -> Result<Read, sqlx::Error> {
    let (mut kp, mut kt, mut kg) = (vec![], vec![], vec![]);
    for i in items {
        kp.push(i.partition_id.uuid());
        kt.push(i.transaction_id.as_str());
        kg.push(i.consumer_group.as_str());
    }
    // Read by position: the cursor columns from 5 on ([`CursorRow::of`]).
    let rows = sqlx::query(
        "SELECT now(), k.i, q.name, q.options,
                (SELECT m.\"offset\" FROM queen_messages m
                 WHERE m.partition_id = p.id AND m.transaction_id = k.t
                 ORDER BY m.\"offset\" DESC LIMIT 1),
                c.xmin::text::bigint, c.committed, c.lease_id, c.lease_end, c.lease_deadline,
                c.retries
         FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS k(p, t, g, i)
         LEFT JOIN queen_partitions p ON p.id = k.p
         LEFT JOIN queen_queues q ON q.id = p.queue_id
         LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = k.g
         ORDER BY k.i",
    )
    .bind(&kp)
    .bind(&kt)
    .bind(&kg)
    .fetch_all(&mut *conn)
    .await?;
    let mut read = Read {
        now: match rows.first() {
            Some(r) => r.try_get(0)?,
            None => super::rows::db_now(conn).await?,
        },
        parts: HashMap::new(),
        pairs: Vec::new(),
        cursors: HashMap::new(),
    };
    let mut at: HashMap<Pair, usize> = HashMap::new();
    for r in rows {
        let i = r.try_get::<i64, _>(1)? as usize - 1;
        let it = &items[i];
        let pid = it.partition_id.uuid();
        let (Some(queue), Some(o)) = (
            r.try_get::<Option<String>, _>(2)?,
            r.try_get::<Option<i64>, _>(4)?,
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
        if let std::collections::hash_map::Entry::Vacant(e) = read.parts.entry(pid) {
            let options: Value = r.try_get(3)?;
            e.insert((queue, super::rows::options_of(options)));
        }
        let key = (pid, it.consumer_group.clone());
        let slot = match at.get(&key) {
            Some(&slot) => slot,
            None => {
                if let Some(c) = CursorRow::of(&r)? {
                    read.cursors.insert(key.clone(), c);
                }
                read.pairs.push((key.clone(), Vec::new()));
                at.insert(key, read.pairs.len() - 1);
                read.pairs.len() - 1
            }
        };
        read.pairs[slot].1.push((i, offset(o)?));
    }
    Ok(read)
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

/// One statement (`queen_ack_write`): under the locks of every pair read, each cursor
/// must still be the version read; then every pair's decision and the call's dead
/// letters in the order the call first names each pair (DLQ-2), not in the locking
/// order. False, with nothing written, when a cursor had changed. The queues where
/// something became claimable again are rung after the commit ([`ack_route`]).
async fn write(
    conn: &mut PgConnection,
    w: &mut Writes,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    if w.pairs.is_empty() {
        // Nothing to write: the answers are those of the read's snapshot.
        return Ok(true);
    }
    w.seen.sort();
    w.dead.sort_by_key(|d| d.0);
    w.touched.sort();
    w.touched.dedup();
    let mut seen = (vec![], vec![], vec![]);
    for (p, g, xmin) in &w.seen {
        seen.0.push(*p);
        seen.1.push(g.as_str());
        seen.2.push(*xmin);
    }
    let (pp, pg): (Vec<Uuid>, Vec<&str>) = w.pairs.iter().map(|(p, g)| (*p, g.as_str())).unzip();
    let mut dead = (vec![], vec![], vec![], vec![], vec![]);
    for (_, pid, group, off, error, retry_count) in &w.dead {
        dead.0.push(*pid);
        dead.1.push(i64::from(*off));
        dead.2.push(group.as_str());
        dead.3.push(error.as_deref());
        dead.4.push(*retry_count as i32);
    }
    sqlx::query_scalar(
        "SELECT queen_ack_write($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(&seen.0)
    .bind(&seen.1)
    .bind(&seen.2)
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
    .fetch_one(conn)
    .await
}

/// An offset as the model counts them; one past its range is an error, never a wrap.
fn offset(o: i64) -> Result<u32, sqlx::Error> {
    u32::try_from(o)
        .map_err(|_| sqlx::Error::Decode(format!("offset {o} is beyond the model's range").into()))
}
