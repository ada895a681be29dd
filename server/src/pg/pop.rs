//! Pop (PROTOCOL.md section 3), one attempt: which partitions are claimable for the
//! group, claiming them in POP-4's oldest-first order under the pair's advisory lock,
//! the lease or the autoAck commit, and subscription seeding (POP-13).

use super::push::ensure_queue;
use super::{iso, no_content, ok, PAIR_KEY_SQL};
use chrono::{DateTime, Duration, Utc};
use queen_reference::time::parse_iso;
use queen_reference::wire::{
    HttpResponse, PopMessage, PopQuery, PopResponse, PopRoute, QueueOptions, QUEUE_MODE,
};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};
use std::sync::LazyLock;
use uuid::Uuid;

/// The cursor of partition $1 for group $5, read under the pair's lock (taken by the
/// previous statement, so this statement's snapshot sees every commit made under it):
/// one row with the committed offset, or none while the pair is leased (ACK-4) or waits
/// out a `retryDelay` (ACK-6) at $2 ("now").
const FREE_CURSOR: &str = "cur AS (
    SELECT committed, lease_deadline, not_before FROM queen_cursors WHERE partition_id = $1 AND consumer_group = $5),
  free AS (
    SELECT COALESCE((SELECT committed FROM cur), 0) AS committed
    WHERE NOT EXISTS (SELECT 1 FROM cur WHERE lease_deadline > $2 OR not_before > $2)),
  m AS (
    SELECT \"offset\", id, transaction_id, trace_id, data, created_at FROM queen_messages, free
    WHERE partition_id = $1 AND \"offset\" > free.committed AND ($3::timestamptz IS NULL OR created_at <= $3)
    ORDER BY \"offset\" LIMIT $4)";

/// Reads the claimable span of partition $1 past its free cursor (see [`FREE_CURSOR`]),
/// visible before $3, at most $4 messages, and leases it for group $5 with lease $6 until
/// $7 ($8 ms).
static CLAIM_LEASE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {FREE_CURSOR},
  claim AS (
    INSERT INTO queen_cursors (partition_id, consumer_group, lease_id, lease_end, lease_deadline, lease_duration_ms)
    SELECT $1, $5, $6, max(\"offset\"), $7, $8 FROM m HAVING count(*) > 0
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET lease_id = EXCLUDED.lease_id, lease_end = EXCLUDED.lease_end,
      lease_deadline = EXCLUDED.lease_deadline, lease_duration_ms = EXCLUDED.lease_duration_ms, not_before = NULL)
  SELECT * FROM m ORDER BY \"offset\""
    )
});

/// The same span, committed at once (autoAck): no lease, and retries at or below the new
/// cursor forgotten.
static CLAIM_AUTO_ACK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {FREE_CURSOR},
  claim AS (
    INSERT INTO queen_cursors (partition_id, consumer_group, committed)
    SELECT $1, $5, max(\"offset\") FROM m HAVING count(*) > 0
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed, lease_id = NULL, lease_end = NULL,
      lease_deadline = NULL, lease_duration_ms = NULL, not_before = NULL,
      retries = COALESCE((SELECT jsonb_object_agg(k, v) FROM jsonb_each(queen_cursors.retries) AS e(k, v)
                          WHERE k::bigint > EXCLUDED.committed), '{{}}'))
  SELECT * FROM m ORDER BY \"offset\""
    )
});

/// Where a candidate's columns start in a row of [`CANDIDATES`] or of [`HEAD`].
const CAND: usize = 5;

/// The candidates of queues $1 for group $2 at $4 ("now"), optionally only partition $3,
/// after setting up (creating the queue, subscribing): the partitions with something
/// past the group's cursor, not leased or waiting, checked again under their lock. Each
/// queue's come from migration 0004's `queen_pop_candidates`, the definition the head
/// uses too. Five placeholder columns first, so the candidate starts at [`CAND`] as in
/// the head's rows.
const CANDIDATES: &str = "SELECT NULL, NULL, NULL, NULL, NULL, c.*
     FROM queen_queues q, LATERAL queen_pop_candidates(q.id, $2, $3, $4, q.options) AS c
     WHERE q.id = ANY($1)";

/// Where the claiming head's own columns start: the candidate it tried to claim (NULL if
/// it tried none), then a claimed message's columns, as a claim's rows have them.
const TRIED: usize = CAND + 6;

/// The head of every pop: the maintenance switch, "now", the queue's id, whether the
/// group is subscribed there, and `ready` (nothing to set up first), then the candidate
/// partitions from [`CAND`] on; for a queue-scoped pop with exactly one candidate left
/// after POP-14's windowBuffer, also its claim, so that a parked pop woken by a push
/// (the queue exists, the group is set up, one partition has the new message) answers
/// in one round trip. It is the function `queen_pop_head` (migration 0004 says what its
/// rows are, and why it is a function rather than one statement); the tried candidate
/// is at [`TRIED`], then a claimed message's columns. A discovery pop has no queue
/// ($1 is NULL): it is never `ready` and gets the switch and "now" alone. With two or
/// more candidates the claims run in a transaction here.
const HEAD: &str = "SELECT * FROM queen_pop_head($1, $2, $3, $4, $5, $6, $7)";

/// A partition that may be claimable (checked again under its lock).
struct Candidate {
    id: Uuid,
    name: String,
    options: QueueOptions,
    last_write_at: Option<DateTime<Utc>>,
    oldest: Option<DateTime<Utc>>,
    seq: i64,
}

pub(crate) async fn pop(
    pool: &PgPool,
    route: &PopRoute,
    q: &PopQuery,
) -> Result<HttpResponse, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let group = q.consumer_group.as_str();
    // One round trip for the maintenance switch, "now", the queue of a queue-scoped
    // route, whether the group already has its subscription there and, when nothing is
    // left to set up (the queue exists, the group needs no subscription), the candidate
    // partitions too: a parked pop woken by a push claims in as few round trips as can be.
    let scoped = match route {
        PopRoute::Queue(name) | PopRoute::Partition(name, _) => Some(name.as_str()),
        PopRoute::Discovery { .. } => None,
    };
    let only = match route {
        PopRoute::Partition(_, p) => Some(p.as_str()),
        _ => None,
    };
    // POP-9: the pop's leaseSeconds, else the queue's leaseTime; autoAck: no lease.
    let lease_id = (!q.auto_ack).then(Uuid::now_v7);
    let head = sqlx::query(HEAD)
        .bind(scoped)
        .bind(group)
        .bind(only)
        .bind(QUEUE_MODE)
        .bind(q.batch as i64)
        .bind(lease_id)
        .bind(q.lease_seconds.map(i64::from))
        .fetch_all(&mut *conn)
        .await?;
    let first = head.first().ok_or(sqlx::Error::RowNotFound)?;
    let (paused, now, queue_id, subscribed, ready): (
        Option<bool>,
        DateTime<Utc>,
        Option<i64>,
        bool,
        bool,
    ) = (
        first.get(0),
        first.get(1),
        first.get(2),
        first.get(3),
        first.get(4),
    );
    // MAINT-2 / POP-6: a bare 204 while pop maintenance is on.
    if paused == Some(true) {
        return Ok(no_content());
    }
    let lease_str = lease_id.map(|l| l.to_string()).unwrap_or_default();
    let answer = |claimed: Vec<(Uuid, String)>, messages: Vec<PopMessage>| {
        if claimed.is_empty() {
            return no_content();
        }
        ok(&PopResponse {
            success: true,
            queue: scoped.unwrap_or_default().to_string(),
            partition: claimed[0].1.clone(),
            partition_id: claimed[0].0.to_string(),
            lease_id: lease_str.clone(),
            consumer_group: group.to_string(),
            messages,
            partitions_claimed: claimed.len() as u32,
        })
    };
    // The head tried the claim itself (one candidate): that claim is the pop's answer,
    // messages or none (POP-2: the pair's lock was held; or the cursor moved).
    if let Some(id) = scoped.and_then(|_| first.get::<Option<Uuid>, _>(TRIED)) {
        let name: String = first.get(CAND + 1);
        let messages = head
            .iter()
            .filter(|r| r.get::<Option<i64>, _>(TRIED + 1).is_some())
            .map(|r| message(r, TRIED + 1, id, &name, &lease_str, group))
            .collect::<Vec<_>>();
        if !messages.is_empty() {
            return Ok(answer(vec![(id, name)], messages));
        }
        // Nothing claimed: the pair's lock may have been held by a pop that was only
        // looking at it. Ask again, waiting for the lock (POP-2 skips only a lease).
        drop(conn);
        let lone = vec![candidate(first)];
        let (claimed, messages) =
            second_pass(pool, lone, q, lease_id, &lease_str, u32::MAX).await?;
        return Ok(answer(claimed, messages));
    }
    // Nothing to set up and no candidate (most often a parked pop's re-check): answered
    // from the head alone, read outside a transaction, in one round trip instead of three.
    // Otherwise, setting up runs in a transaction, and so do the claims; the head's
    // candidates are only hints, each checked again under its lock.
    if ready
        && head
            .iter()
            .all(|r| r.get::<Option<Uuid>, _>(CAND).is_none())
    {
        return Ok(no_content());
    }
    let (rows, claims) = if ready {
        (head, Claims::NotYet(conn))
    } else {
        let mut tx = Transaction::begin(conn, None).await?;
        let queues: Vec<i64> = match (route, queue_id) {
            (PopRoute::Queue(_) | PopRoute::Partition(..), Some(id)) => vec![id],
            (PopRoute::Queue(name) | PopRoute::Partition(name, _), None) => {
                // POP-8: a queue-scoped pop on an unknown queue creates its configuration row.
                vec![ensure_queue(&mut tx, name, QueueOptions::implicit()).await?.0]
            }
            (PopRoute::Discovery { namespace, task }, _) => {
                sqlx::query_scalar("SELECT id FROM queen_queues WHERE ($1::text IS NULL OR namespace = $1) AND ($2::text IS NULL OR task = $2) ORDER BY id")
                    .bind(namespace)
                    .bind(task)
                    .fetch_all(&mut *tx)
                    .await?
            }
        };
        if group != QUEUE_MODE && !(scoped.is_some() && subscribed) {
            for qid in &queues {
                subscribe(&mut tx, *qid, q, now).await?;
            }
        }
        let rows = sqlx::query(CANDIDATES)
            .bind(&queues)
            .bind(group)
            .bind(only)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        (rows, Claims::Tx(tx))
    };
    let mut cands: Vec<Candidate> = rows
        .into_iter()
        // The head's row without a candidate (nothing claimable, or not `ready`).
        .filter(|r| r.get::<Option<Uuid>, _>(CAND).is_some())
        .map(|r| candidate(&r))
        // POP-14: windowBuffer holds back a partition written to within the window.
        .filter(|c| {
            c.options.window_buffer == 0
                || c.last_write_at
                    .is_none_or(|w| w + Duration::seconds(c.options.window_buffer as i64) <= now)
        })
        .collect();
    // POP-4 (our choice): the oldest unconsumed message first, then creation order.
    cands.sort_by_key(|c| (c.oldest, c.seq));

    let cap = match route {
        PopRoute::Partition(..) => 1,
        _ => q.partitions.unwrap_or(u32::MAX),
    };
    // Several candidates (the head claims a lone one itself): the claims run in a
    // transaction, each after a lock statement, so that claims of several partitions
    // commit together, and a candidate whose lock is taken costs only that small
    // statement. (Claiming each of several candidates in one statement, as long as the
    // cap was one, made the consume benchmark, where 4 consumers race for the same
    // oldest partitions with `partitions=1`, about 10 % slower.)
    let mut tx = match claims {
        Claims::Tx(tx) => tx,
        Claims::NotYet(_) if cands.is_empty() => return Ok(no_content()),
        Claims::NotYet(conn) => Transaction::begin(conn, None).await?,
    };
    let mut budget = q.batch as i64;
    let mut claimed: Vec<(Uuid, String)> = Vec::new();
    let mut messages: Vec<PopMessage> = Vec::new();
    let mut skipped = Vec::new();
    for c in cands {
        if budget == 0 || claimed.len() as u32 >= cap {
            break;
        }
        let got: bool =
            sqlx::query_scalar(&format!("SELECT pg_try_advisory_xact_lock({PAIR_KEY_SQL})"))
                .bind(c.id)
                .bind(group)
                .fetch_one(&mut *tx)
                .await?;
        if !got {
            skipped.push(c); // another pop or ack holds this pair right now
            continue;
        }
        let rows = claim(&mut tx, &c, q, lease_id, now, budget).await?;
        if rows.is_empty() {
            continue;
        }
        messages.extend(
            rows.iter()
                .map(|r| message(r, 0, c.id, &c.name, &lease_str, group)),
        );
        budget -= rows.len() as i64;
        claimed.push((c.id, c.name));
    }
    tx.commit().await?;
    if claimed.is_empty() && !skipped.is_empty() {
        let (c, m) = second_pass(pool, skipped, q, lease_id, &lease_str, cap).await?;
        (claimed, messages) = (c, m);
    }
    Ok(answer(claimed, messages))
}

/// A candidate partition from a row whose candidate columns start at [`CAND`].
fn candidate(r: &PgRow) -> Candidate {
    Candidate {
        id: r.get(CAND),
        name: r.get(CAND + 1),
        options: super::options_of(r.get(CAND + 2)),
        last_write_at: r.get(CAND + 3),
        seq: r.get(CAND + 4),
        oldest: r.get(CAND + 5),
    }
}

/// Claims `c`'s span in `tx`, whose caller holds the pair's lock. One statement reads
/// the cursor again under the lock (it may have moved since the scan), reads the span
/// past it and claims it: the lease (POP-9: leaseSeconds if given, else the queue's
/// leaseTime) or, with autoAck, the commit (POP-7). Offsets are contiguous (pushes
/// assign them under the partition lock), so the span ends at the highest offset read.
/// No rows: leased, waiting, or nothing new.
async fn claim(
    tx: &mut PgConnection,
    c: &Candidate,
    q: &PopQuery,
    lease_id: Option<Uuid>,
    now: DateTime<Utc>,
    budget: i64,
) -> Result<Vec<PgRow>, sqlx::Error> {
    // POP-14: delayedProcessing delivers only messages old enough.
    let visible_before = (c.options.delayed_processing > 0)
        .then(|| now - Duration::seconds(c.options.delayed_processing as i64));
    let secs = q.lease_seconds.unwrap_or(c.options.lease_time) as i64;
    let span = |sql| {
        sqlx::query(sql)
            .bind(c.id)
            .bind(now)
            .bind(visible_before)
            .bind(budget)
            .bind(q.consumer_group.as_str())
    };
    let claim = match lease_id {
        Some(l) => span(&CLAIM_LEASE)
            .bind(l)
            .bind(now + Duration::seconds(secs))
            .bind(secs * 1000),
        None => span(&CLAIM_AUTO_ACK),
    };
    claim.fetch_all(&mut *tx).await
}

/// POP-2: a pop that claimed nothing because other transactions held the locks of
/// `skipped` asks each again, waiting for its lock this time: the holder may have been
/// a pop that only looked at the partition and leased another, and a partition is
/// skipped only for a live lease. Each ask is a transaction of its own holding no other
/// lock, so no two pops can wait on each other; its "now" is its own.
async fn second_pass(
    pool: &PgPool,
    skipped: Vec<Candidate>,
    q: &PopQuery,
    lease_id: Option<Uuid>,
    lease_str: &str,
    cap: u32,
) -> Result<(Vec<(Uuid, String)>, Vec<PopMessage>), sqlx::Error> {
    let group = q.consumer_group.as_str();
    let (mut budget, mut claimed, mut messages) = (q.batch as i64, Vec::new(), Vec::new());
    for c in skipped {
        if budget == 0 || claimed.len() as u32 >= cap {
            break;
        }
        let mut tx = pool.begin().await?;
        sqlx::query(&format!("SELECT pg_advisory_xact_lock({PAIR_KEY_SQL})"))
            .bind(c.id)
            .bind(group)
            .execute(&mut *tx)
            .await?;
        let now = super::db_now(&mut tx).await?;
        let rows = claim(&mut tx, &c, q, lease_id, now, budget).await?;
        tx.commit().await?;
        if rows.is_empty() {
            continue;
        }
        messages.extend(
            rows.iter()
                .map(|r| message(r, 0, c.id, &c.name, lease_str, group)),
        );
        budget -= rows.len() as i64;
        claimed.push((c.id, c.name));
    }
    Ok((claimed, messages))
}

/// A claimed message from a claim's row, whose columns start at `at`.
fn message(
    r: &PgRow,
    at: usize,
    partition_id: Uuid,
    partition: &str,
    lease_id: &str,
    group: &str,
) -> PopMessage {
    let trace: Option<Uuid> = r.get(at + 3);
    PopMessage {
        id: r.get::<Uuid, _>(at + 1).to_string(),
        transaction_id: r.get(at + 2),
        trace_id: trace.map(|t| t.to_string()),
        data: r.get(at + 4),
        producer_sub: None,
        created_at: iso(r.get(at + 5)),
        partition_id: partition_id.to_string(),
        partition: partition.to_string(),
        lease_id: lease_id.to_string(),
        consumer_group: group.to_string(),
    }
}

/// Where a pop's claims run.
enum Claims {
    /// Not in a transaction yet: nothing was set up, the head read the candidates.
    NotYet(PoolConnection<Postgres>),
    /// In the transaction that set up the queue or the subscription.
    Tx(Transaction<'static, Postgres>),
}

/// How many messages a queue-route pop could take now (POP-15's "under-full" test):
/// unconsumed messages of the claimable partitions, at most `batch` each, over at most
/// `partitions` of them. Visibility delays are not counted, so the estimate can only be
/// high, which makes a pop stop waiting early, never late.
pub(crate) async fn claimable(
    pool: &PgPool,
    route: &PopRoute,
    q: &PopQuery,
) -> Result<u32, sqlx::Error> {
    let PopRoute::Queue(name) = route else {
        return Ok(0);
    };
    let n: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(n), 0)::bigint FROM (
           SELECT LEAST(p.last_offset - COALESCE(c.committed, 0), $3) AS n
           FROM queen_partitions p JOIN queen_queues qq ON qq.id = p.queue_id
           LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = $2
           WHERE qq.name = $1 AND p.last_offset > COALESCE(c.committed, 0)
             AND (c.lease_deadline IS NULL OR c.lease_deadline <= now())
             AND (c.not_before IS NULL OR c.not_before <= now())
           ORDER BY n DESC LIMIT $4) s",
    )
    .bind(name)
    .bind(&q.consumer_group)
    .bind(q.batch as i64)
    .bind(q.partitions.map_or(i64::MAX, |p| p as i64))
    .fetch_one(pool)
    .await?;
    Ok(n.min(q.batch as i64) as u32)
}

/// POP-13: the first pop of a named group on a queue records its subscription and seeds
/// a cursor on every partition that exists then. A concurrent first pop waits on the
/// subscription row's insert, so seeding happens once and before any claim.
async fn subscribe(
    conn: &mut PgConnection,
    qid: i64,
    q: &PopQuery,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let known: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM queen_subscriptions WHERE queue_id = $1 AND consumer_group = $2)")
        .bind(qid)
        .bind(&q.consumer_group)
        .fetch_one(&mut *conn)
        .await?;
    if known {
        return Ok(());
    }
    let inserted = sqlx::query(
        "INSERT INTO queen_subscriptions (queue_id, consumer_group, mode, from_value, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING",
    )
    .bind(qid)
    .bind(&q.consumer_group)
    .bind(&q.subscription_mode)
    .bind(&q.subscription_from)
    .bind(now)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Ok(());
    }
    // [PROJECT] subscriptionFrom (`now` or a valid time) wins over subscriptionMode; an
    // unparseable time is ignored; `new` skips the backlog; anything else is `all`.
    let from_time =
        parse_iso(&q.subscription_from).and_then(DateTime::<Utc>::from_timestamp_millis);
    let skip_backlog =
        q.subscription_from == "now" || (from_time.is_none() && q.subscription_mode == "new");
    sqlx::query(
        "INSERT INTO queen_cursors (partition_id, consumer_group, committed)
         SELECT p.id, $2,
                CASE WHEN $3 THEN p.last_offset
                     WHEN $4::timestamptz IS NOT NULL THEN COALESCE(
                        (SELECT min(m.\"offset\") - 1 FROM queen_messages m WHERE m.partition_id = p.id AND m.created_at >= $4),
                        p.last_offset)
                     ELSE 0 END
         FROM queen_partitions p WHERE p.queue_id = $1
         ON CONFLICT DO NOTHING",
    )
    .bind(qid)
    .bind(&q.consumer_group)
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
        assert_eq!(params(HEAD), vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(params(CANDIDATES), vec![1, 2, 3, 4]);
        assert_eq!(params(&CLAIM_LEASE), vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(params(&CLAIM_AUTO_ACK), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn the_function_returns_the_columns_pop_reads() {
        // Head (5) + candidate (6) + tried (1) + message (6), as migration 0004 declares.
        let migration = include_str!("../../migrations/0004_pop_head_function.sql");
        let returns = migration
            .split_once(") RETURNS TABLE (")
            .and_then(|(_, rest)| rest.split_once(") LANGUAGE"))
            .expect("the function's RETURNS TABLE")
            .0;
        assert_eq!(returns.matches("r_").count(), TRIED + 1 + 6);
    }
}
