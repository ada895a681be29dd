//! Lease extend (PROTOCOL.md section 5): renews every live lease with the id, never
//! shortens one, never revives one (LEASE-1), under each pair's advisory lock so an
//! extend and a pop or ack on the same cursor serialize.

use super::db::Db;
use super::rows::{db_now, iso};
use chrono::{DateTime, Utc};
use queen_reference::wire::{Answer, ExtendRequest, ExtendResponse, ERR_LEASE_NOT_FOUND};
use sqlx::Row;
use uuid::Uuid;

pub(crate) async fn extend(pool: &Db, req: &ExtendRequest) -> Result<Answer, sqlx::Error> {
    let lease = req.lease_id.uuid();
    let mut tx = pool.begin().await?;
    let now = db_now(&mut tx).await?;
    let mut holders: Vec<(Uuid, String)> =
        sqlx::query("SELECT partition_id, consumer_group FROM queen_cursors WHERE lease_id = $1 AND queen_lease_live(lease_deadline, $2)")
            .bind(lease)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|r| (r.get("partition_id"), r.get("consumer_group")))
            .collect();
    holders.sort();
    let mut renewed = 0u32;
    let mut latest: Option<DateTime<Utc>> = None;
    for (pid, group) in holders {
        super::pair::lock(&mut tx, pid, &group).await?;
        // LEASE-3: no `seconds` means the lease's own duration.
        let deadline: Option<DateTime<Utc>> = sqlx::query_scalar(
            "UPDATE queen_cursors
             SET lease_deadline = GREATEST(lease_deadline, $4 + make_interval(secs => COALESCE($5::double precision, lease_duration_ms / 1000.0)))
             WHERE partition_id = $1 AND consumer_group = $2 AND lease_id = $3 AND queen_lease_live(lease_deadline, $4)
             RETURNING lease_deadline",
        )
        .bind(pid)
        .bind(&group)
        .bind(lease)
        .bind(now)
        .bind(req.seconds.map(|s| s as f64))
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(d) = deadline {
            renewed += 1;
            latest = Some(latest.map_or(d, |l| l.max(d)));
        }
    }
    tx.commit().await?;
    Ok(Answer::Extended(ExtendResponse {
        lease_id: req.lease_id.to_string(),
        success: renewed > 0,
        renewed,
        expires_at: latest.map(iso),
        error: (renewed == 0).then(|| ERR_LEASE_NOT_FOUND.to_string()),
    }))
}
