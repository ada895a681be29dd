//! `LISTEN` for other processes: their pushes ring our bells (POP-11), their
//! maintenance switches make us replay our spool or wake our pops, and their listeners'
//! hellos tell our notifier that someone else listens (`notify.rs`).

use super::admin::Switch;
use super::notify::{Peers, HELLO, LISTENER_NAME};
use super::{Inner, PgBroker};
use crate::wakes::Wakes;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Runs until the broker is dropped; reconnects after errors, to wherever the pool
/// connects now (after a failover, the new primary).
pub(crate) fn spawn(
    pool: PgPool,
    broker: Weak<Inner>,
    wakes: Arc<Wakes>,
    peers: Arc<Peers>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if broker.upgrade().is_none() {
                return;
            }
            match listen(&pool, &broker, &wakes, &peers).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!("LISTEN connection lost, reconnecting: {e}");
                    // Anything may have happened meanwhile: let parked pops re-check.
                    wakes.ring_all();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    })
}

async fn listen(
    pool: &PgPool,
    broker: &Weak<Inner>,
    wakes: &Wakes,
    peers: &Peers,
) -> Result<(), sqlx::Error> {
    // A connection of its own, beside the pool's, opened as the pool opens them now, and
    // named so that other brokers can tell it listens.
    let own = PgPoolOptions::new().max_connections(1).connect_lazy_with(
        (*pool.connect_options())
            .clone()
            .application_name(LISTENER_NAME),
    );
    let mut l = PgListener::connect_with(&own).await?;
    l.listen_all(["queen_push", "queen_switch", HELLO]).await?;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut l)
        .await?;
    peers.listening_as(pid);
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(HELLO)
        .execute(&mut l)
        .await?;
    loop {
        // A lost connection: start over from the pool's current options.
        let Some(n) = l.try_recv().await? else {
            return Err(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "the connection closed",
            )));
        };
        match n.channel() {
            "queen_push" => wakes.ring_here(n.payload()),
            HELLO => peers.hello_from(n.process_id()),
            _ => {
                wakes.ring_all();
                if n.payload() == Switch::PushMaintenance.notification(false) {
                    let Some(b) = PgBroker::from_weak(broker) else {
                        return Ok(());
                    };
                    tokio::spawn(async move {
                        b.replay_spool().await;
                    });
                }
            }
        }
    }
}
