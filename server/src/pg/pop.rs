//! Pop (PROTOCOL.md section 3), one attempt:
//!
//! 1. **head**: one round trip (`queen_pop_head`, `server/sql/04_pop_head.sql`) reads the
//!    maintenance switch, "now", the queue, the group's subscription, and, when nothing
//!    needs setting up, walks the candidates in name order and claims them (POP-4, our
//!    choice: round robin from where this broker's last claim for the group left off,
//!    kept in [`Rotation`]);
//! 2. **set-up**: a pop that must create its queue (POP-8) or subscription (POP-13) does
//!    so in a transaction of its own, then runs the head again;
//! 3. **second pass**: a pop that claimed nothing because every candidate's lock was
//!    held asks those candidates again, waiting (POP-2 skips only a lease).
//!
//! Every rule about what may be claimed lives in SQL, once: `queen_pop_candidates`
//! (what is claimable), `queen_claim` (the lease or autoAck commit, with its guard) and
//! the small rules of `server/sql/01_rules.sql`. Rows are read by column name.

use super::db::Db;
use super::pair;
use super::queues::ensure_queue;
use super::rows::iso;
use super::rows::JsonText;
use crate::broker::Popped;
use crate::seal::{open_stored, Sealer, Unreadable, UNSEALABLE};
use chrono::{DateTime, Utc};
use queen_reference::model::pop::{subscription_start, SubscriptionStart};
use queen_reference::wire::{
    Answer, PopMessage, PopQuery, PopResponse, PopRoute, QueueOptions, RawJson, QUEUE_MODE,
};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::{Column, FromRow, PgConnection, Postgres, Row, Transaction};
use std::collections::HashMap;
use std::sync::Mutex;
use uuid::Uuid;

/// The head of every pop; see the module documentation and the function's file.
const HEAD: &str =
    "SELECT * FROM queen_pop_head($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// The claim of one partition, under the pair's lock the caller holds.
const CLAIM: &str = "SELECT * FROM queen_claim($1, $2, $3, $4, $5, $6, $7)";

/// Where each pop's walk starts (POP-4): for every (queue, group), and every
/// (discovery scope, group), the partition this broker last claimed for the group there
/// (its name, and its queue's id). It is a hint: a walk from anywhere finds every
/// candidate, so a restart or another broker's claims only change the order, never the
/// outcome; it makes a pop's cost the partitions it passes over rather than the queue's
/// size.
#[derive(Default)]
pub(crate) struct Rotation {
    last: Mutex<HashMap<(String, String), (String, i64)>>,
}

/// Entries kept before the hints start over (each is a few dozen bytes).
const ROTATION_ENTRIES: usize = 100_000;

impl Rotation {
    /// The last claim's partition name and queue id; before every name and queue if none.
    fn after(&self, scope: &str, group: &str) -> (String, i64) {
        let last = self.last.lock().expect("rotation lock");
        last.get(&(scope.to_string(), group.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn reset(&self) {
        self.last.lock().expect("rotation lock").clear();
    }

    fn claimed(&self, scope: String, group: &str, c: &Candidate) {
        let mut last = self.last.lock().expect("rotation lock");
        if last.len() >= ROTATION_ENTRIES {
            last.clear();
        }
        last.insert((scope, group.to_string()), (c.name.clone(), c.queue_id));
    }
}

/// One row of [`HEAD`]: the head's own columns, a candidate's, whether the candidate was
/// passed over for a held lock, and a claimed message's (`m_*`).
struct HeadRow {
    paused: Option<bool>,
    now: DateTime<Utc>,
    queue_id: Option<i64>,
    subscribed: bool,
    ready: bool,
    id: Option<Uuid>,
    name: Option<String>,
    options: Option<Value>,
    skipped: Option<bool>,
    m_offset: Option<i64>,
    m_id: Option<Uuid>,
    m_transaction_id: Option<String>,
    m_trace_id: Option<Uuid>,
    /// The payload as stored text, never built into a tree on the way out.
    m_data: Option<JsonText>,
    m_created_at: Option<DateTime<Utc>>,
    m_producer_sub: Option<String>,
    m_sealed: Option<bool>,
}

/// [`HeadRow`]'s columns in the order `queen_pop_head` returns them. Rows are read by
/// position, since looking up each of a hundred rows' columns by name cost more than
/// decoding them; the names are checked once per answer ([`HeadRow::check`]).
const HEAD_COLUMNS: [&str; 17] = [
    "paused",
    "now",
    "queue_id",
    "subscribed",
    "ready",
    "id",
    "name",
    "options",
    "skipped",
    "m_offset",
    "m_id",
    "m_transaction_id",
    "m_trace_id",
    "m_data",
    "m_created_at",
    "m_producer_sub",
    "m_sealed",
];

impl HeadRow {
    /// Whether a row's columns are [`HEAD_COLUMNS`], in that order.
    fn check(r: &PgRow) -> Result<(), sqlx::Error> {
        let names: Vec<&str> = r.columns().iter().map(|c| c.name()).collect();
        if names != HEAD_COLUMNS {
            return Err(sqlx::Error::Decode(
                format!("queen_pop_head returned the columns {names:?}, not {HEAD_COLUMNS:?}")
                    .into(),
            ));
        }
        Ok(())
    }

    /// The row's columns, by position.
    fn read(r: &PgRow) -> Result<HeadRow, sqlx::Error> {
        Ok(HeadRow {
            paused: r.try_get(0)?,
            now: r.try_get(1)?,
            queue_id: r.try_get(2)?,
            subscribed: r.try_get(3)?,
            ready: r.try_get(4)?,
            id: r.try_get(5)?,
            name: r.try_get(6)?,
            options: r.try_get(7)?,
            skipped: r.try_get(8)?,
            m_offset: r.try_get(9)?,
            m_id: r.try_get(10)?,
            m_transaction_id: r.try_get(11)?,
            m_trace_id: r.try_get(12)?,
            m_data: r.try_get(13)?,
            m_created_at: r.try_get(14)?,
            m_producer_sub: r.try_get(15)?,
            m_sealed: r.try_get(16)?,
        })
    }
}

/// A partition that may be claimable (checked again under its lock).
#[derive(FromRow)]
struct Candidate {
    id: Uuid,
    name: String,
    /// The queue's stored options, handed back to `queen_claim` as they are: only a
    /// candidate passed over for its lock carries them (the second pass claims it).
    options: Option<Value>,
    /// The queue, for the discovery walk's hint.
    queue_id: i64,
}

/// A message a claim took, as `queen_claim` returns it.
#[derive(FromRow)]
struct Claimed {
    offset: i64,
    id: Uuid,
    transaction_id: String,
    trace_id: Option<Uuid>,
    data: JsonText,
    created_at: DateTime<Utc>,
    /// AUTH-2: the `sub` of the token that pushed it.
    producer_sub: Option<String>,
    /// ENC-2: `data` is sealed with the broker's key.
    sealed: bool,
}

/// What a pop's head found.
struct Head {
    paused: bool,
    now: DateTime<Utc>,
    queue_id: Option<i64>,
    subscribed: bool,
    ready: bool,
    /// The partitions claimed, in claim order.
    claims: Vec<Claim>,
    /// The candidates passed over because their lock was held.
    skipped: Vec<Candidate>,
}

/// A partition claimed by this pop, with its messages in offset order.
type Claim = (Candidate, Vec<Claimed>);

/// One pop's inputs, derived once.
struct Pop<'a> {
    route: &'a PopRoute,
    q: &'a PopQuery,
    group: &'a str,
    /// The queue of a queue-scoped route.
    scoped: Option<&'a str>,
    /// The partition of the partition route.
    only: Option<&'a str>,
    /// None with autoAck: no lease.
    lease_id: Option<Uuid>,
    /// At most this many partitions.
    cap: u32,
    /// The key of the walk's hint in [`Rotation`]: the queue, or the discovery scope.
    scope: String,
}

impl<'a> Pop<'a> {
    fn new(route: &'a PopRoute, q: &'a PopQuery) -> Self {
        let (scoped, only, cap) = match route {
            PopRoute::Queue(name) => (Some(name.as_str()), None, q.partitions.unwrap_or(u32::MAX)),
            PopRoute::Partition(name, p) => (Some(name.as_str()), Some(p.as_str()), 1),
            PopRoute::Discovery { .. } => (None, None, q.partitions.unwrap_or(u32::MAX)),
        };
        let scope = match route {
            PopRoute::Discovery { namespace, task } => format!(
                "\0{}\0{}",
                namespace.as_deref().unwrap_or_default(),
                task.as_deref().unwrap_or_default()
            ),
            _ => scoped.unwrap_or_default().to_string(),
        };
        Pop {
            route,
            q,
            group: q.consumer_group.as_str(),
            scoped,
            only,
            lease_id: (!q.auto_ack).then(Uuid::now_v7),
            cap,
            scope,
        }
    }

    /// The answer: 204 when nothing was claimed (POP-6), else the messages of every
    /// claimed partition in claim order, named after the first; a 500 naming the cause
    /// when a sealed message cannot be opened (ENC-3: never garbage; its lease expires).
    fn answer(&self, claims: Vec<Opened>) -> Popped {
        let Some((first, _)) = claims.first() else {
            return Popped::Empty;
        };
        let lease = self.lease_id.map(|l| l.to_string()).unwrap_or_default();
        let (partition, partition_id) = (first.name.clone(), first.id.to_string());
        let partitions_claimed = claims.len() as u32;
        let mut messages = Vec::with_capacity(claims.iter().map(|(_, rows)| rows.len()).sum());
        let mut stamp = Stamp::default();
        for (c, rows) in claims {
            let shared = Shared {
                partition_id: c.id.to_string(),
                partition: &c.name,
                lease_id: &lease,
                group: self.group,
            };
            for (m, data) in rows {
                messages.push(message(&shared, &mut stamp, m, data));
            }
        }
        Popped::Messages(PopResponse {
            success: true,
            queue: self.scoped.unwrap_or_default().to_string(),
            partition,
            partition_id,
            lease_id: lease,
            consumer_group: self.group.to_string(),
            messages,
            partitions_claimed,
        })
    }
}

/// The answer to the claims. A payload no consumer could read is set aside first
/// (POP-16) and the rest is delivered; when an autoAck pop meets a sealed message it
/// cannot open (ENC-3), the cursors it committed go back, so the 500 loses nothing: the
/// messages stay to be popped with the right key (a leased pop's lease simply expires).
async fn deliver(
    b: &super::PgBroker,
    pop: &Pop<'_>,
    claims: Vec<Claim>,
) -> Result<(Popped, bool), sqlx::Error> {
    let pool = &b.inner.pool;
    let spans: Vec<(Uuid, i64, i64)> = claims
        .iter()
        .filter(|_| pop.lease_id.is_none())
        .filter_map(|(c, rows)| Some((c.id, rows.first()?.offset, rows.last()?.offset)))
        .collect();
    let (opened, unfit) = open_all(claims, b.seal());
    let set_aside = !unfit.is_empty();
    for (partition, offset, why) in unfit {
        // The answer goes out whatever happens here: what was claimed is answered.
        let done = super::deletion::set_aside(b, partition, offset, pop.group, &why);
        match done.await {
            Ok(()) => {
                tracing::warn!("offset {offset} of partition {partition} set aside: {why}");
                b.inner
                    .set_aside
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!("cannot set aside offset {offset} of partition {partition}: {e}")
            }
        }
    }
    let popped = match opened {
        Ok(claims) => pop.answer(claims),
        Err(why) => Popped::Other(Answer::error(500, why)),
    };
    if matches!(&popped, Popped::Other(_)) {
        for (partition, first, last) in spans {
            sqlx::query(
                "UPDATE queen_cursors SET committed = $3 - 1
                 WHERE partition_id = $1 AND consumer_group = $2 AND committed = $4",
            )
            .bind(partition)
            .bind(pop.group)
            .bind(first)
            .bind(last)
            .execute(&mut *pool.acquire().await?)
            .await?;
        }
    }
    Ok((popped, set_aside))
}

/// A claimed partition with each message's payload opened, ready to answer.
type Opened = (Candidate, Vec<(Claimed, RawJson)>);

/// Opens every claimed payload (ENC-1). Those no consumer could read leave the answer
/// and are named, with their partition, offset and why (POP-16); a sealed one this
/// broker cannot open fails the whole answer (ENC-3).
#[allow(clippy::type_complexity)]
fn open_all(
    claims: Vec<Claim>,
    seal: Option<&Sealer>,
) -> (Result<Vec<Opened>, &'static str>, Vec<(Uuid, i64, String)>) {
    let mut unfit = Vec::new();
    let mut opened = Vec::with_capacity(claims.len());
    for (c, rows) in claims {
        let mut ready = Vec::with_capacity(rows.len());
        for mut m in rows {
            match open_stored(seal, m.sealed, std::mem::take(&mut m.data.0)) {
                Ok(data) => ready.push((m, data)),
                Err(Unreadable::Unsealable) => return (Err(UNSEALABLE), unfit),
                Err(why @ Unreadable::Undeliverable(_)) => {
                    unfit.push((c.id, m.offset, why.to_string()))
                }
            }
        }
        opened.push((c, ready));
    }
    opened.retain(|(_, rows)| !rows.is_empty());
    (Ok(opened), unfit)
}

pub(crate) async fn pop(
    b: &super::PgBroker,
    route: &PopRoute,
    q: &PopQuery,
) -> Result<Popped, sqlx::Error> {
    let pop = Pop::new(route, q);
    // A claim whose every message was set aside (POP-16) claims again: what follows
    // them is deliverable now.
    for _ in 0..SET_ASIDE_RETRIES {
        let (popped, set_aside) = attempt(b, &pop).await?;
        if !(set_aside && matches!(popped, Popped::Empty)) {
            return Ok(popped);
        }
    }
    Ok(Popped::Empty)
}

/// How often one pop claims again after setting aside everything it claimed.
const SET_ASIDE_RETRIES: usize = 4;

/// One walk and its answer, and whether it set any message aside.
async fn attempt(b: &super::PgBroker, pop: &Pop<'_>) -> Result<(Popped, bool), sqlx::Error> {
    let (pool, rotation) = (&b.inner.pool, &b.inner.rotation);
    let mut conn = pool.acquire().await?;
    let mut head = head(&mut conn, pop, rotation).await?;
    // MAINT-2 / POP-6: a bare 204 while pop maintenance is on.
    if head.paused {
        return Ok((Popped::Paused, false));
    }
    if !head.ready {
        set_up(conn, pop, &head).await?;
        head = head_again(pool, pop, rotation).await?;
        if head.paused {
            return Ok((Popped::Paused, false));
        }
    } else {
        drop(conn);
    }
    let claims = if head.claims.is_empty() && !head.skipped.is_empty() {
        second_pass(pool, pop, head.skipped).await?
    } else {
        head.claims
    };
    if let Some((c, _)) = claims.last() {
        rotation.claimed(pop.scope.clone(), pop.group, c);
    }
    deliver(b, pop, claims).await
}

/// The head once more, after set-up, on a connection of its own.
async fn head_again(pool: &Db, pop: &Pop<'_>, rotation: &Rotation) -> Result<Head, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    head(&mut conn, pop, rotation).await
}

/// Step 1: the head's rows, read into what they say.
async fn head(
    conn: &mut PgConnection,
    pop: &Pop<'_>,
    rotation: &Rotation,
) -> Result<Head, sqlx::Error> {
    let (namespace, task) = match pop.route {
        PopRoute::Discovery { namespace, task } => (namespace.as_deref(), task.as_deref()),
        _ => (None, None),
    };
    let (after_name, after_queue) = match pop.only {
        Some(_) => Default::default(),
        None => rotation.after(&pop.scope, pop.group),
    };
    let rows: Vec<PgRow> = sqlx::query(HEAD)
        .bind(pop.scoped)
        .bind(namespace)
        .bind(task)
        .bind(pop.group)
        .bind(pop.only)
        .bind(QUEUE_MODE)
        .bind(pop.q.batch as i64)
        .bind(i64::from(pop.cap))
        .bind(pop.lease_id)
        .bind(pop.q.lease_seconds.map(i64::from))
        .bind(after_name)
        .bind(after_queue)
        .fetch_all(conn)
        .await?;
    HeadRow::check(rows.first().ok_or(sqlx::Error::RowNotFound)?)?;
    let rows = rows
        .iter()
        .map(HeadRow::read)
        .collect::<Result<Vec<_>, _>>()?;
    let first = &rows[0];
    let mut head = Head {
        paused: first.paused == Some(true),
        now: first.now,
        queue_id: first.queue_id,
        subscribed: first.subscribed,
        ready: first.ready,
        claims: Vec::new(),
        skipped: Vec::new(),
    };
    for row in rows {
        if row.skipped == Some(true) {
            head.skipped.extend(row.candidate());
            continue;
        }
        // Rows of one claimed partition come together: its candidate is read once.
        let same =
            matches!((head.claims.last(), row.id), (Some((last, _)), Some(id)) if last.id == id);
        let c = if same { None } else { row.candidate() };
        let Some(m) = row.claimed() else { continue };
        if let Some(c) = c {
            head.claims.push((c, vec![m]));
        } else if let Some((_, rows)) = head.claims.last_mut() {
            rows.push(m);
        }
    }
    Ok(head)
}

impl HeadRow {
    /// The row's candidate; none on the row that stands for "no candidate".
    fn candidate(&self) -> Option<Candidate> {
        Some(Candidate {
            id: self.id?,
            name: self.name.clone()?,
            options: self.options.clone(),
            queue_id: self.queue_id?,
        })
    }

    /// The row's claimed message; none on a row that claimed nothing.
    fn claimed(self) -> Option<Claimed> {
        Some(Claimed {
            offset: self.m_offset?,
            id: self.m_id?,
            transaction_id: self.m_transaction_id?,
            trace_id: self.m_trace_id,
            data: self.m_data?,
            created_at: self.m_created_at?,
            producer_sub: self.m_producer_sub,
            sealed: self.m_sealed.unwrap_or(false),
        })
    }
}

/// Step 2: creates the queue of a queue-scoped pop (POP-8) and the group's
/// subscriptions (POP-13), in a transaction that commits before the head runs again.
async fn set_up(
    conn: PoolConnection<Postgres>,
    pop: &Pop<'_>,
    head: &Head,
) -> Result<(), sqlx::Error> {
    let mut tx = Transaction::begin(conn, None).await?;
    let queues: Vec<i64> = match (pop.route, head.queue_id) {
        (PopRoute::Queue(_) | PopRoute::Partition(..), Some(id)) => vec![id],
        (PopRoute::Queue(name) | PopRoute::Partition(name, _), None) => {
            vec![
                ensure_queue(&mut tx, name, QueueOptions::implicit())
                    .await?
                    .0,
            ]
        }
        (PopRoute::Discovery { namespace, task }, _) => {
            // Only the queues the group is not subscribed to yet.
            sqlx::query_scalar(
                "SELECT q.id FROM queen_queues q
                 WHERE ($1::text IS NULL OR q.namespace = $1) AND ($2::text IS NULL OR q.task = $2)
                   AND NOT EXISTS (SELECT 1 FROM queen_subscriptions s
                                   WHERE s.queue_id = q.id AND s.consumer_group = $3)
                 ORDER BY q.id",
            )
            .bind(namespace)
            .bind(task)
            .bind(pop.group)
            .fetch_all(&mut *tx)
            .await?
        }
    };
    if pop.group != QUEUE_MODE && !(pop.scoped.is_some() && head.subscribed) {
        subscribe(&mut tx, &queues, pop.q, head.now).await?;
    }
    tx.commit().await
}

/// POP-2: a pop that claimed nothing because other transactions held the locks of
/// `skipped` asks each again, waiting for its lock this time: the holder may have been
/// an ack or another pop that will claim something else. Each ask is a transaction of
/// its own holding no other lock, so no two pops can wait on each other; its "now" is
/// its own.
async fn second_pass(
    pool: &Db,
    pop: &Pop<'_>,
    skipped: Vec<Candidate>,
) -> Result<Vec<Claim>, sqlx::Error> {
    let mut taken = Taken::new(pop);
    for c in skipped {
        if taken.full(pop) {
            break;
        }
        let mut tx = pool.begin().await?;
        pair::lock(&mut tx, c.id, pop.group).await?;
        let now = super::rows::db_now(&mut tx).await?;
        let rows = claim(&mut tx, &c, pop, now, taken.budget).await?;
        tx.commit().await?;
        taken.add(c, rows);
    }
    Ok(taken.claims)
}

/// What a pop's claims have taken so far, against its batch and partition cap.
struct Taken {
    claims: Vec<Claim>,
    /// Messages the batch still has room for.
    budget: i64,
}

impl Taken {
    fn new(pop: &Pop<'_>) -> Self {
        Taken {
            claims: Vec::new(),
            budget: i64::from(pop.q.batch),
        }
    }

    /// The batch is full or the partition cap reached.
    fn full(&self, pop: &Pop<'_>) -> bool {
        self.budget == 0 || self.claims.len() as u32 >= pop.cap
    }

    /// Counts a claim that took something.
    fn add(&mut self, c: Candidate, rows: Vec<Claimed>) {
        if !rows.is_empty() {
            self.budget -= rows.len() as i64;
            self.claims.push((c, rows));
        }
    }
}

/// Claims at most `budget` messages of `c` (`queen_claim`); the caller holds the lock.
async fn claim(
    conn: &mut PgConnection,
    c: &Candidate,
    pop: &Pop<'_>,
    now: DateTime<Utc>,
    budget: i64,
) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as(CLAIM)
        .bind(c.id)
        .bind(pop.group)
        .bind(&c.options)
        .bind(now)
        .bind(budget)
        .bind(pop.lease_id)
        .bind(pop.q.lease_seconds.map(i64::from))
        .fetch_all(conn)
        .await
}

/// A claimed message on the wire.
fn message(shared: &Shared, stamp: &mut Stamp, m: Claimed, data: RawJson) -> PopMessage {
    PopMessage {
        id: m.id.to_string(),
        transaction_id: m.transaction_id,
        trace_id: m.trace_id.map(|t| t.to_string()),
        data,
        producer_sub: m.producer_sub,
        created_at: stamp.of(m.created_at).to_string(),
        partition_id: shared.partition_id.clone(),
        partition: shared.partition.to_string(),
        lease_id: shared.lease_id.to_string(),
        consumer_group: shared.group.to_string(),
    }
}

/// What every message of one claimed partition says alike, formatted once.
struct Shared<'a> {
    partition_id: String,
    partition: &'a str,
    lease_id: &'a str,
    group: &'a str,
}

/// The last `createdAt` formatted: the messages of one push share it (POP-12), so a
/// batch formats each write's time once.
#[derive(Default)]
struct Stamp(Option<(DateTime<Utc>, String)>);

impl Stamp {
    fn of(&mut self, at: DateTime<Utc>) -> &str {
        if self.0.as_ref().is_none_or(|(t, _)| *t != at) {
            self.0 = Some((at, iso(at)));
        }
        &self.0.as_ref().expect("set above").1
    }
}

/// How many messages a queue-route pop could take now (POP-15's "under-full" test): the
/// backlog of the claimable partitions (`queen_pop_candidates`, the definition every
/// pop uses), at most `batch` each, over at most `partitions` of them. Visibility delays
/// are not counted, so the estimate can only be high, which makes a pop stop waiting
/// early, never late.
pub(crate) async fn claimable(
    pool: &Db,
    route: &PopRoute,
    q: &PopQuery,
) -> Result<u32, sqlx::Error> {
    let PopRoute::Queue(name) = route else {
        return Ok(0);
    };
    let n: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(n), 0)::bigint FROM (
           SELECT LEAST(c.backlog, $3) AS n
           FROM queen_queues qq, LATERAL queen_pop_candidates(qq.id, $2, NULL, now(), qq.options) AS c
           WHERE qq.name = $1
           ORDER BY n DESC LIMIT $4) s",
    )
    .bind(name)
    .bind(&q.consumer_group)
    .bind(q.batch as i64)
    .bind(q.partitions.map_or(i64::MAX, |p| p as i64))
    .fetch_one(&mut *pool.acquire().await?)
    .await?;
    Ok(n.min(q.batch as i64) as u32)
}

/// POP-13: the first pop of a named group on a queue records its subscription and seeds
/// a cursor on every partition that exists then, for all of `queues` in one statement
/// (a discovery pop's first visit may subscribe thousands). A concurrent first pop waits
/// on the subscription row's insert and then inserts nothing, so seeding happens once and
/// before any claim; the ids come sorted, so two such pops lock in one order.
async fn subscribe(
    conn: &mut PgConnection,
    queues: &[i64],
    q: &PopQuery,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    if queues.is_empty() {
        return Ok(());
    }
    let start = subscription_start(&q.subscription_mode, &q.subscription_from);
    let from_time = match start {
        SubscriptionStart::Since(t) => DateTime::<Utc>::from_timestamp_millis(t),
        _ => None,
    };
    let skip_backlog = matches!(start, SubscriptionStart::Now | SubscriptionStart::New);
    sqlx::query(
        "WITH ins AS (
             INSERT INTO queen_subscriptions (queue_id, consumer_group, mode, from_value, created_at)
             SELECT qid, $2, $3, $4, $5 FROM unnest($1::bigint[]) WITH ORDINALITY AS u(qid, n)
             ORDER BY n
             ON CONFLICT DO NOTHING
             RETURNING queue_id)
         INSERT INTO queen_cursors (partition_id, consumer_group, queue_id, committed)
         SELECT p.id, $2, p.queue_id,
                CASE WHEN $6 THEN p.last_offset
                     WHEN $7::timestamptz IS NOT NULL THEN COALESCE(
                        (SELECT min(m.\"offset\") - 1 FROM queen_messages m WHERE m.partition_id = p.id AND m.created_at >= $7),
                        p.last_offset)
                     ELSE p.removed_through END
         FROM ins JOIN queen_partitions p ON p.queue_id = ins.queue_id
         ON CONFLICT DO NOTHING",
    )
    .bind(queues)
    .bind(&q.consumer_group)
    .bind(&q.subscription_mode)
    .bind(&q.subscription_from)
    .bind(now)
    .bind(skip_backlog)
    .bind(from_time)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameter numbers a statement uses, sorted, without repeats.
    fn params(sql: &str) -> Vec<usize> {
        let mut out: Vec<usize> = sql
            .split('$')
            .skip(1)
            .filter_map(|s| {
                let n: String = s.chars().take_while(char::is_ascii_digit).collect();
                n.parse().ok()
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    #[test]
    fn the_statements_use_exactly_the_parameters_pop_binds() {
        assert_eq!(params(HEAD), (1..=12).collect::<Vec<_>>());
        assert_eq!(params(CLAIM), vec![1, 2, 3, 4, 5, 6, 7]);
    }

    /// The head's rows are read by position: the positions must be the function's.
    #[test]
    fn the_head_columns_are_those_queen_pop_head_returns_in_order() {
        let sql = include_str!("../../sql/04_pop_head.sql");
        let table = sql
            .split("RETURNS TABLE (")
            .nth(1)
            .and_then(|rest| rest.split(") LANGUAGE").next())
            .expect("queen_pop_head returns a table");
        let names: Vec<&str> = table
            .split(',')
            .filter_map(|col| col.split_whitespace().next())
            .collect();
        assert_eq!(names, HEAD_COLUMNS);
    }
}
