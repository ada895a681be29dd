//! Configure (section 8), queue delete (9), health (10), maintenance switches (11) and
//! the dead-letter listing (DLQ-2).

use super::db::Db;
use super::rows::iso;
use super::PgBroker;
use crate::seal::{shown, Sealer};
use queen_reference::wire::{
    Answer, ConfigureRequest, ConfigureResponse, DeadLetter, DeleteResponse, DlqQuery, DlqResponse,
    EchoedOptions, HealthResponse, MaintenanceResponse, PopMaintenanceResponse,
    ENCRYPTION_UNAVAILABLE, HEALTHY,
};
use uuid::Uuid;

/// CFG-1: full replace of the options, namespace and task; creates the queue if needed.
/// ENC-2: a broker without a key refuses `encryptionEnabled`, changing nothing.
pub(crate) async fn configure(
    pool: &Db,
    req: &ConfigureRequest,
    seal: Option<&Sealer>,
) -> Result<Answer, sqlx::Error> {
    if req.options.encryption_enabled && seal.is_none() {
        return Ok(Answer::error(400, ENCRYPTION_UNAVAILABLE));
    }
    // CFG-4: the keys this broker does not act on are stored in the same row, beside the
    // known options the SQL reads.
    let options = EchoedOptions {
        known: req.options,
        extra: req.extra.clone(),
    };
    sqlx::query(
        "INSERT INTO queen_queues (name, namespace, task, options) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET namespace = $2, task = $3, options = $4",
    )
    .bind(&req.queue)
    .bind(&req.namespace)
    .bind(&req.task)
    .bind(serde_json::to_value(&options).expect("serializes"))
    .execute(&mut *pool.acquire().await?)
    .await?;
    Ok(Answer::Configured(ConfigureResponse {
        configured: true,
        queue: req.queue.clone(),
        namespace: req.namespace.clone(),
        task: req.task.clone(),
        options,
    }))
}

/// DEL-1: the queue and everything under it.
///
/// Cursors, subscriptions and dead letters go by foreign-key cascade. Messages carry no
/// foreign key (migration 0003), so they are deleted here, in one transaction whose
/// statements each see what the one before waited for:
/// 1. lock the queue row, waiting for any push that is creating a partition under it
///    (its foreign-key check holds the row) and keeping new partitions out;
/// 2. delete the queue's partitions, waiting for any push holding one of them locked,
///    and keep them locked: no later push can write under them (it locks the row first
///    and finds it gone);
/// 3. delete those partitions' messages, with a snapshot taken after every such push
///    committed, and the queue row.
///
/// No message outlives its queue.
pub(crate) async fn delete_queue(pool: &Db, name: &str) -> Result<Answer, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let queue: Option<i64> =
        sqlx::query_scalar("SELECT id FROM queen_queues WHERE name = $1 FOR UPDATE")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(queue) = queue {
        let partitions: Vec<Uuid> =
            sqlx::query_scalar("DELETE FROM queen_partitions WHERE queue_id = $1 RETURNING id")
                .bind(queue)
                .fetch_all(&mut *tx)
                .await?;
        sqlx::query(
            "WITH m AS (DELETE FROM queen_messages WHERE partition_id = ANY($1))
             DELETE FROM queen_queues WHERE id = $2",
        )
        .bind(&partitions)
        .bind(queue)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Answer::Deleted(DeleteResponse {
        deleted: true,
        queue: name.to_string(),
        existed: queue.is_some(),
    }))
}

/// One dead letter with its message, as the listing reads it.
#[derive(sqlx::FromRow)]
struct DeadLetterRow {
    id: Uuid,
    transaction_id: String,
    partition_id: Uuid,
    partition: String,
    queue: String,
    consumer_group: String,
    error_message: Option<String>,
    retry_count: i32,
    data: super::rows::JsonText,
    sealed: bool,
    created_at: chrono::DateTime<chrono::Utc>,
    failed_at: chrono::DateTime<chrono::Utc>,
}

/// DLQ-2: filters, filing order, one page; sealed payloads opened (ENC-1), or a 500
/// naming the cause when one cannot be (ENC-3). A message retention removed is listed
/// from the dead letter's own copy (RET-4).
pub(crate) async fn list_dlq(
    pool: &Db,
    q: &DlqQuery,
    seal: Option<&Sealer>,
) -> Result<Answer, sqlx::Error> {
    let total: i64 = sqlx::query_scalar(include_str!("../../sql/manage/dead_letters_count.sql"))
        .bind(&q.queue)
        .bind(&q.consumer_group)
        .bind(&q.partition)
        .fetch_one(&mut *pool.acquire().await?)
        .await?;
    let rows: Vec<DeadLetterRow> =
        sqlx::query_as(include_str!("../../sql/manage/dead_letters.sql"))
            .bind(&q.queue)
            .bind(&q.consumer_group)
            .bind(&q.partition)
            .bind(q.limit as i64)
            .bind(i64::try_from(q.offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *pool.acquire().await?)
            .await?;
    let messages = rows
        .into_iter()
        .map(|r| {
            let (data, data_error) = shown(seal, r.sealed, r.data.0)?;
            Ok(DeadLetter {
                id: r.id.to_string(),
                transaction_id: r.transaction_id,
                partition_id: r.partition_id.to_string(),
                partition: r.partition,
                queue: r.queue,
                consumer_group: r.consumer_group,
                error_message: r.error_message,
                retry_count: u32::try_from(r.retry_count).unwrap_or(0),
                data,
                data_error,
                created_at: iso(r.created_at),
                failed_at: iso(r.failed_at),
            })
        })
        .collect::<Result<Vec<_>, &str>>();
    let messages = match messages {
        Ok(m) => m,
        Err(why) => return Ok(Answer::error(500, why)),
    };
    Ok(Answer::Dlq(DlqResponse {
        messages,
        total: total as u64,
        limit: q.limit,
        offset: q.offset,
    }))
}

/// The maintenance switches (MAINT-1, MAINT-2), by the name their row has in
/// `queen_switches` and their column in the `queen_switch_state` view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Switch {
    /// Pushes are spooled instead of written.
    PushMaintenance,
    /// Pops answer empty.
    PopMaintenance,
}

impl Switch {
    /// The switch's row name, its view column and the prefix of its notification.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Switch::PushMaintenance => "push_maintenance",
            Switch::PopMaintenance => "pop_maintenance",
        }
    }

    /// The notification other processes get when this switch turns `on` or off.
    pub(crate) fn notification(self, on: bool) -> String {
        format!("{}={on}", self.name())
    }
}

/// A maintenance switch's state.
pub(crate) async fn switch(pool: &Db, which: Switch) -> Result<bool, sqlx::Error> {
    let (push, pop): (bool, bool) =
        sqlx::query_as("SELECT push_maintenance, pop_maintenance FROM queen_switch_state")
            .fetch_one(&mut *pool.acquire().await?)
            .await?;
    Ok(match which {
        Switch::PushMaintenance => push,
        Switch::PopMaintenance => pop,
    })
}

async fn set_switch(pool: &Db, which: Switch, on: bool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE queen_switches SET enabled = $2 WHERE name = $1")
        .bind(which.name())
        .bind(on)
        .execute(&mut *tx)
        .await?;
    // Other processes replay their spools / wake their pops when a switch turns off.
    sqlx::query("SELECT pg_notify('queen_switch', $1)")
        .bind(which.notification(on))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// MAINT-1: the switch and this process's spooled pushes.
pub(crate) async fn push_maintenance(b: &PgBroker) -> Result<Answer, sqlx::Error> {
    let on = switch(&b.inner.pool, Switch::PushMaintenance).await?;
    Ok(Answer::PushMaintenance(MaintenanceResponse {
        maintenance_mode: on,
        buffered_messages: b.inner.spool.pending() as u64,
    }))
}

/// MAINT-1: turning push maintenance off replays the spool before answering.
pub(crate) async fn set_push_maintenance(b: &PgBroker, on: bool) -> Result<Answer, sqlx::Error> {
    set_switch(&b.inner.pool, Switch::PushMaintenance, on).await?;
    if !on {
        b.replay_spool().await;
    }
    push_maintenance(b).await
}

/// MAINT-2.
pub(crate) async fn pop_maintenance(pool: &Db) -> Result<Answer, sqlx::Error> {
    let on = switch(pool, Switch::PopMaintenance).await?;
    Ok(Answer::PopMaintenance(PopMaintenanceResponse {
        pop_maintenance_mode: on,
    }))
}

pub(crate) async fn set_pop_maintenance(pool: &Db, on: bool) -> Result<Answer, sqlx::Error> {
    set_switch(pool, Switch::PopMaintenance, on).await?;
    pop_maintenance(pool).await
}

/// HEALTH-1: 200 when the database answers, 503 otherwise; HEALTH-2: with the spool's
/// state, and 503 while its replay is stuck.
pub(crate) async fn health(b: &PgBroker) -> Answer {
    let state = b.spool_state();
    let spool = Some(state.to_json());
    let answered = async {
        let mut conn = b.inner.pool.acquire().await?;
        sqlx::query("SELECT 1").execute(&mut *conn).await
    };
    let health = match answered.await {
        Ok(_) if !state.stuck => HealthResponse {
            spool,
            push_writer_restarts: Some(b.writer_restarts()),
            ..HealthResponse::new(HEALTHY, "connected")
        },
        Ok(_) => HealthResponse {
            spool,
            ..HealthResponse::new("unhealthy", "connected")
        },
        Err(e) => HealthResponse {
            error: Some(e.to_string()),
            spool,
            ..HealthResponse::new("unhealthy", "disconnected")
        },
    };
    Answer::Health(health)
}
