//! Transactions (PROTOCOL.md section 7): pushes and acks in one database transaction,
//! rolled back as a whole when any ack would answer `success:false` (TXN-2).

use super::db::Db;
use super::write;
use crate::prepared::Prepared;
use crate::seal::Sealer;
use crate::wakes::Wakes;
use queen_reference::model::txn::TXN_MAINTENANCE_ERROR;
use queen_reference::wire::{
    lease_not_held, rolled_back, Answer, TxnOp, TxnRequest, TxnResponse, TxnResult,
};
use sqlx::PgConnection;
use uuid::Uuid;

/// TXN-4's answer while the database cannot be reached.
pub(crate) const AWAY_ERROR: &str =
    "the database cannot be reached: a transaction cannot be spooled; try again later";

pub(crate) async fn transaction(
    pool: &Db,
    wakes: &Wakes,
    req: &TxnRequest,
    spooling: bool,
    seal: Option<&Sealer>,
) -> Result<Answer, sqlx::Error> {
    // TXN-4: a transaction cannot be spooled as a unit; while pushes spool, one with a
    // push is refused for now (the route adds Retry-After).
    let pushes = req.operations.iter().any(|o| matches!(o, TxnOp::Push(_)));
    if pushes && spooling {
        return Ok(Answer::error(503, TXN_MAINTENANCE_ERROR));
    }
    let id = Uuid::now_v7().to_string();
    let mut tx = pool.begin().await?;
    let refused = match refusal(&mut tx, req, pushes).await? {
        Some(r) => Err(r),
        None => run(&mut tx, req, seal).await?,
    };
    let (results, mut queues) = match refused {
        Ok(done) => done,
        // TXN-2: everything is rolled back, and before answering: a dropped transaction
        // rolls back lazily, keeping the (partition, group) lock an ack took, and a pop
        // sent right after this answer would find the partition locked and skip it.
        Err(r) => {
            tx.rollback().await?;
            return Ok(match r {
                Refusal::Maintenance => Answer::error(503, TXN_MAINTENANCE_ERROR),
                Refusal::Full(e) => Answer::error(e.status, e.message),
                Refusal::Abort(error) => Answer::Transaction(TxnResponse {
                    transaction_id: id,
                    success: false,
                    results: vec![],
                    error: Some(rolled_back(&error)),
                }),
            });
        }
    };
    tx.commit().await?;
    queues.sort();
    queues.dedup();
    for q in queues {
        wakes.ring(&q);
    }
    Ok(Answer::Transaction(TxnResponse {
        transaction_id: id,
        success: true,
        results,
        error: None,
    }))
}

/// Why a transaction is not committed.
enum Refusal {
    /// TXN-4: push maintenance is on and the transaction pushes.
    Maintenance,
    /// TXN-2: aborted, with the reason the answer gives.
    Abort(String),
    /// RET-5: a push would take a queue past its maxSize.
    Full(queen_reference::wire::WireError),
}

/// What must hold before any operation runs: no push under maintenance (TXN-4), and
/// every required lease live (TXN-6).
async fn refusal(
    tx: &mut PgConnection,
    req: &TxnRequest,
    pushes: bool,
) -> Result<Option<Refusal>, sqlx::Error> {
    // "Now" and the maintenance switch in one round trip, as the push writers read them.
    let (now, maintenance): (chrono::DateTime<chrono::Utc>, bool) =
        sqlx::query_as("SELECT now(), s.push_maintenance FROM queen_switch_state s")
            .fetch_one(&mut *tx)
            .await?;
    if pushes && maintenance {
        return Ok(Some(Refusal::Maintenance));
    }
    for l in &req.required_leases {
        let live: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM queen_cursors WHERE lease_id = $1 AND queen_lease_live(lease_deadline, $2))")
            .bind(l.uuid())
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        if !live {
            return Ok(Some(Refusal::Abort(lease_not_held(l))));
        }
    }
    Ok(None)
}

/// Runs the operations in order: their results and the queues to wake, or the abort of
/// the first ack that fails (TXN-2).
async fn run(
    tx: &mut PgConnection,
    req: &TxnRequest,
    seal: Option<&Sealer>,
) -> Result<Result<(Vec<TxnResult>, Vec<String>), Refusal>, sqlx::Error> {
    let (mut results, mut queues) = (Vec::new(), Vec::new());
    // Consecutive push operations are written as one: the same items in the same order
    // in the same transaction, so dedup and offsets come out as if written one by one,
    // at the cost of one write instead of one per operation.
    let mut pending: Vec<Prepared> = Vec::new();
    for (i, op) in req.operations.iter().enumerate() {
        if !matches!(op, TxnOp::Push(_)) && !pending.is_empty() {
            if let Err(full) =
                write_pushes(tx, &mut pending, &mut results, &mut queues, seal).await?
            {
                return Ok(Err(Refusal::Full(full)));
            }
        }
        match op {
            // The traceId of a transaction's push is kept (PUSH-9, seed pop-routes.md).
            TxnOp::Push(items) => {
                pending.extend(items.iter().map(|it| Prepared::from_item(it.clone(), true)))
            }
            TxnOp::Ack(item) => {
                let (mut r, touched) = super::ack::ack(tx, std::slice::from_ref(item)).await?;
                let mut r = r.remove(0);
                if !r.success {
                    let why = r.error.take().unwrap_or_default();
                    let what = format!(
                        "operations[{i}]: ack of {} failed: {why}",
                        item.transaction_id
                    );
                    return Ok(Err(Refusal::Abort(what)));
                }
                r.index = results.len();
                results.push(TxnResult::Ack(r));
                queues.extend(touched);
            }
        }
    }
    if !pending.is_empty() {
        if let Err(full) = write_pushes(tx, &mut pending, &mut results, &mut queues, seal).await? {
            return Ok(Err(Refusal::Full(full)));
        }
    }
    Ok(Ok((results, queues)))
}

/// Writes the pushed items gathered so far and appends their results, or answers
/// RET-5's refusal.
async fn write_pushes(
    tx: &mut PgConnection,
    pending: &mut Vec<Prepared>,
    results: &mut Vec<TxnResult>,
    queues: &mut Vec<String>,
    seal: Option<&Sealer>,
) -> Result<Result<(), queen_reference::wire::WireError>, sqlx::Error> {
    let items = pending.iter().collect::<Vec<_>>();
    let written = match write::write(tx, &items, seal, write::Capacity::Enforced).await? {
        Ok(w) => w,
        Err(full) => return Ok(Err(full)),
    };
    for mut r in written {
        r.index = results.len();
        results.push(TxnResult::Push(r));
    }
    queues.extend(pending.drain(..).map(|p| p.queue));
    Ok(Ok(()))
}
