//! Telling other processes which queues to wake (CLUSTER-2): the queues this process's
//! bells were rung for, sent with `pg_notify('queen_push', queue)` after the write that
//! rang them has committed, never inside it, and only while another process listens.
//!
//! PostgreSQL lets one notifying transaction commit at a time: it takes a database-wide
//! lock before its commit and holds it through the commit's flush. Pushes and acks that
//! notified inside their own transactions therefore flushed one after another instead of
//! sharing flushes. Here one task gathers the queues rung meanwhile and notifies them in
//! one statement on a connection that does not wait for its commit's flush: a wake-up is
//! a hint, and one lost in a crash leaves a parked pop to its timeout, never a message
//! lost. A broker alone on its database sends nothing at all.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::mpsc::UnboundedReceiver;

/// The `application_name` of every broker's `LISTEN` connection, by which brokers find
/// each other.
pub(crate) const LISTENER_NAME: &str = "queen-listener";

/// The channel a listener announces itself on once it listens, so that the brokers
/// already running start telling it of their pushes at once.
pub(crate) const HELLO: &str = "queen_hello";

/// How long what is known about other listeners is trusted before it is read again.
const PEERS_FRESH: Duration = Duration::from_secs(1);

/// Whether another process listens, as the last read of the database and any hello since
/// say.
#[derive(Default)]
pub(crate) struct Peers {
    others: AtomicBool,
    /// The backend pid of this process's own listener (0: not connected).
    own: AtomicI32,
}

impl Peers {
    /// This process's listener connected as backend `pid`.
    pub(crate) fn listening_as(&self, pid: i32) {
        self.own.store(pid, Ordering::Relaxed);
    }

    /// A listener announced itself from backend `pid`.
    pub(crate) fn hello_from(&self, pid: u32) {
        if pid as i32 != self.own.load(Ordering::Relaxed) {
            self.others.store(true, Ordering::Relaxed);
        }
    }
}

/// Sends what arrives on `rung` until every sender is gone.
pub(crate) fn spawn(
    pool: &PgPool,
    peers: Arc<Peers>,
    mut rung: UnboundedReceiver<String>,
) -> tokio::task::JoinHandle<()> {
    // A connection of its own, opened as the pool opens them (after a failover, to the new
    // primary), whose commits do not wait for their flush.
    let own = PgPoolOptions::new().max_connections(1).connect_lazy_with(
        (*pool.connect_options())
            .clone()
            .options([("synchronous_commit", "off")]),
    );
    tokio::spawn(async move {
        let mut read_at: Option<Instant> = None;
        while let Some(first) = rung.recv().await {
            let mut queues = BTreeSet::from([first]);
            while let Ok(q) = rung.try_recv() {
                queues.insert(q);
            }
            if read_at.is_none_or(|t| t.elapsed() >= PEERS_FRESH) {
                read_at = Some(Instant::now());
                if let Err(e) = read_peers(&own, &peers).await {
                    tracing::warn!("could not read which other processes listen: {e}");
                    peers.others.store(true, Ordering::Relaxed);
                }
            }
            if peers.others.load(Ordering::Relaxed) {
                send(&own, queues.into_iter().collect()).await;
            }
        }
    })
}

/// Reads whether a listener other than this process's own is connected.
async fn read_peers(own: &PgPool, peers: &Peers) -> Result<(), sqlx::Error> {
    let others: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                        WHERE application_name = $1 AND pid <> $2 AND datname = current_database())",
    )
    .bind(LISTENER_NAME)
    .bind(peers.own.load(Ordering::Relaxed))
    .fetch_one(own)
    .await?;
    peers.others.store(others, Ordering::Relaxed);
    Ok(())
}

/// One statement notifying every queue in `queues`.
async fn send(own: &PgPool, queues: Vec<String>) {
    let sent = sqlx::query("SELECT count(pg_notify('queen_push', q)) FROM unnest($1::text[]) AS q")
        .bind(&queues)
        .execute(own)
        .await;
    if let Err(e) = sent {
        // A database this connection cannot reach has dropped the listeners' connections
        // too, and each rings every bell when it is back.
        tracing::warn!(
            "could not notify other processes of {} queues: {e}",
            queues.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
