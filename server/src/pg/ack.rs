//! Acknowledgment (PROTOCOL.md section 4). Step 1 (resolution, ACK-3, ACK-5) reads the
//! rows; steps 2–6 are the reference model's [`decide`]; the decision is written back
//! under the `(partition, group)` advisory lock.

use super::{db_now, ok};
use crate::wakes::Wakes;
use chrono::{DateTime, Duration, Utc};
use queen_reference::model::ack::{decide, PairView, ValidAck};
use queen_reference::wire::{
    AckItem, AckResult, AckStatus, HttpResponse, ERR_ALREADY_COMMITTED, ERR_INVALID_LEASE,
    ERR_UNRESOLVABLE,
};
use serde_json::Value;
use sqlx::{PgConnection, PgPool, Row};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The ack routes: one transaction for the whole call.
pub(crate) async fn ack_route(
    pool: &PgPool,
    wakes: &Wakes,
    items: Vec<AckItem>,
) -> Result<HttpResponse, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (results, touched) = ack(&mut tx, &items).await?;
    tx.commit().await?;
    for q in touched {
        wakes.ring(&q);
    }
    Ok(ok(&results))
}

fn answer(index: usize, txn: &str, success: bool, error: Option<&str>, noop: bool) -> AckResult {
    AckResult::new(index, txn, success, error, noop)
}

/// A `(partition, group)`: the unit an ack call is evaluated and locked in.
type Pair = (Uuid, String);

/// A cursor row as step 1 and the decision need it.
struct CursorRow {
    committed: i64,
    lease_id: Option<Uuid>,
    lease_end: Option<i64>,
    lease_deadline: Option<DateTime<Utc>>,
    retries: BTreeMap<u32, u32>,
}

/// Evaluates and applies one ack call in the caller's transaction. Returns the answers
/// and the queues where something became claimable again (to wake parked pops).
pub(crate) async fn ack(
    conn: &mut PgConnection,
    items: &[AckItem],
) -> Result<(Vec<AckResult>, Vec<String>), sqlx::Error> {
    let now = db_now(conn).await?;
    let mut out: Vec<Option<AckResult>> = vec![None; items.len()];
    // Resolve partitions (with their queue's options) and transactionIds to offsets.
    let pids: Vec<Uuid> = items
        .iter()
        .filter_map(|i| Uuid::parse_str(&i.partition_id).ok())
        .collect();
    let parts: HashMap<Uuid, (String, queen_reference::wire::QueueOptions)> = sqlx::query(
        "SELECT p.id, q.name, q.options FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id WHERE p.id = ANY($1)",
    )
    .bind(&pids)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.get(0), (r.get(1), super::options_of(r.get(2)))))
    .collect();
    let (kp, kt): (Vec<Uuid>, Vec<String>) = items
        .iter()
        .filter_map(|i| {
            Uuid::parse_str(&i.partition_id)
                .ok()
                .map(|p| (p, i.transaction_id.clone()))
        })
        .unzip();
    // ACK-8: the newest message of the partition with that transactionId.
    let offsets: HashMap<(Uuid, String), i64> = sqlx::query(
        "SELECT DISTINCT ON (m.partition_id, m.transaction_id) m.partition_id, m.transaction_id, m.\"offset\"
         FROM queen_messages m JOIN unnest($1::uuid[], $2::text[]) AS k(p, t) ON m.partition_id = k.p AND m.transaction_id = k.t
         ORDER BY m.partition_id, m.transaction_id, m.\"offset\" DESC",
    )
    .bind(&kp)
    .bind(&kt)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| ((r.get(0), r.get(1)), r.get(2)))
    .collect();

    // Items by (partition, group), in first-appearance order; unresolvable ones answered.
    let mut pairs: Vec<(Pair, Vec<(usize, i64)>)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let pid = Uuid::parse_str(&it.partition_id)
            .ok()
            .filter(|p| parts.contains_key(p));
        let off = pid.and_then(|p| offsets.get(&(p, it.transaction_id.clone())).copied());
        match (pid, off) {
            (Some(p), Some(o)) => {
                let key = (p, it.consumer_group.clone());
                match pairs.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, v)) => v.push((i, o)),
                    None => pairs.push((key, vec![(i, o)])),
                }
            }
            _ => {
                out[i] = Some(answer(
                    i,
                    &it.transaction_id,
                    false,
                    Some(ERR_UNRESOLVABLE),
                    false,
                ))
            }
        }
    }
    // Lock pairs in a canonical order so two calls never wait on each other in a cycle.
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by(|a, b| pairs[*a].0.cmp(&pairs[*b].0));
    let mut touched = Vec::new();
    // Dead letters, filed after the loop in the order the call first names each pair
    // (DLQ-2's filing order, as the model files them), not in the locking order.
    let mut dead = Vec::new();
    for pi in order {
        let ((pid, group), list) = &pairs[pi];
        super::pair::lock(conn, *pid, group).await?;
        let cursor = read_cursor(conn, *pid, group).await?;
        let (queue, opts) = &parts[pid];
        // Step 1 for the items of this pair.
        let mut valid: Vec<(usize, i64)> = Vec::new();
        for &(i, off) in list {
            let it = &items[i];
            let txn = it.transaction_id.as_str();
            let Some(c) = &cursor else {
                // Step 7 [OPEN], ours: no cursor and no lease is unresolvable; with a
                // lease nothing can be live, so ACK-5 answers below.
                out[i] = Some(match it.lease_id {
                    None => answer(i, txn, false, Some(ERR_UNRESOLVABLE), false),
                    Some(_) => answer(i, txn, false, Some(ERR_INVALID_LEASE), false),
                });
                continue;
            };
            if off <= c.committed {
                // ACK-3: never faked.
                out[i] = Some(if it.status == AckStatus::Completed {
                    answer(i, txn, true, None, true)
                } else {
                    answer(i, txn, false, Some(ERR_ALREADY_COMMITTED), false)
                });
                continue;
            }
            if let Some(l) = &it.lease_id {
                let live = c
                    .lease_id
                    .is_some_and(|id| Uuid::parse_str(l).is_ok_and(|l| l == id))
                    && c.lease_deadline.is_some_and(|d| d > now)
                    && c.lease_end.is_some_and(|e| off <= e);
                if !live {
                    out[i] = Some(answer(i, txn, false, Some(ERR_INVALID_LEASE), false));
                    continue;
                }
            }
            valid.push((i, off));
        }
        let Some(c) = cursor else { continue };
        if valid.is_empty() {
            continue;
        }
        let view = PairView {
            committed: c.committed as u32,
            retries: &c.retries,
            lease: c
                .lease_end
                .map(|end| (end as u32, c.lease_deadline.is_some_and(|d| d > now))),
            retry_limit: opts.retry_limit,
        };
        let acks: Vec<ValidAck> = valid
            .iter()
            .map(|&(i, off)| ValidAck {
                index: i,
                offset: off as u32,
                status: items[i].status,
                error: items[i].error.as_deref(),
            })
            .collect();
        let d = decide(&view, &acks);
        // Apply: cursor, charged retry, retry delay, lease, dead letters.
        let mut retries = c.retries.clone();
        if let Some(off) = d.charged {
            *retries.entry(off).or_insert(0) += 1;
        }
        let retries: BTreeMap<u32, u32> = retries.split_off(&(d.new_cursor + 1));
        let retries_json = Value::Object(
            retries
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
        .bind(d.new_cursor as i64)
        .bind(retries_json)
        .bind(not_before)
        .bind(d.release)
        .execute(&mut *conn)
        .await?;
        for (off, error, retry_count) in &d.dead {
            dead.push((pi, *pid, group.clone(), *off, error.clone(), *retry_count));
        }
        if d.release {
            touched.push(queue.clone());
            sqlx::query("SELECT pg_notify('queen_push', $1)")
                .bind(queue)
                .execute(&mut *conn)
                .await?;
        }
        for &(i, dlq, _blocked) in &d.items {
            // ACK step 6 [OPEN], ours: a blocked completion answers success, not noop.
            let mut r = answer(i, &items[i].transaction_id, true, None, false);
            r.lease_released = d.released_live;
            r.dlq = dlq;
            out[i] = Some(r);
        }
    }
    dead.sort_by_key(|d| d.0);
    for (_, pid, group, off, error, retry_count) in dead {
        sqlx::query(
            "INSERT INTO queen_dead_letters (partition_id, \"offset\", consumer_group, error_message, retry_count, failed_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(pid)
        .bind(off as i64)
        .bind(group)
        .bind(error)
        .bind(retry_count as i32)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok((
        out.into_iter()
            .map(|o| o.expect("every item answered"))
            .collect(),
        touched,
    ))
}

async fn read_cursor(
    conn: &mut PgConnection,
    pid: Uuid,
    group: &str,
) -> Result<Option<CursorRow>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT committed, lease_id, lease_end, lease_deadline, retries FROM queen_cursors WHERE partition_id = $1 AND consumer_group = $2",
    )
    .bind(pid)
    .bind(group)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|r| {
        let retries: Value = r.get(4);
        CursorRow {
            committed: r.get(0),
            lease_id: r.get(1),
            lease_end: r.get(2),
            lease_deadline: r.get(3),
            retries: retries
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.parse().ok()?, v.as_u64()? as u32)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }))
}
