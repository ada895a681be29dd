//! `LISTEN` for other processes: their pushes ring our bells (POP-11), and their
//! maintenance switches make us replay our spool or wake our pops.

use super::{Inner, PgBroker};
use crate::wakes::Wakes;
use sqlx::postgres::PgListener;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Runs until the broker is dropped; reconnects after errors.
pub(crate) fn spawn(
    url: String,
    broker: Weak<Inner>,
    wakes: Arc<Wakes>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if broker.upgrade().is_none() {
                return;
            }
            match listen(&url, &broker, &wakes).await {
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

async fn listen(url: &str, broker: &Weak<Inner>, wakes: &Wakes) -> Result<(), sqlx::Error> {
    let mut l = PgListener::connect(url).await?;
    l.listen_all(["queen_push", "queen_switch"]).await?;
    loop {
        let n = l.recv().await?;
        match n.channel() {
            "queen_push" => wakes.ring(n.payload()),
            _ => {
                wakes.ring_all();
                if n.payload() == "push_maintenance=false" {
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
