//! Group commit for pushes: concurrent push requests share one transaction.
//!
//! A push answers 201 only after its transaction commits, and a commit costs a WAL
//! flush; with many small pushes in flight that flush, not the SQL, bounds throughput.
//! Each request goes to the writer its first queue hashes to, or a large request to one
//! partition to its partition's (see [`Group`]), and a very large one is written on its
//! own, outside the writers (see [`ALONE_ITEMS`]); a writer
//! takes whatever has accumulated (up to `PUSH_BATCH_ITEMS` items), writes it in one
//! transaction and answers every request from it.
//! A lone request is written at once, so coalescing only happens under load. Requests
//! keep their arrival order inside a transaction, so dedup and offsets behave as if
//! they had been committed one after the other (PUSH-5, PUSH-6). If a shared
//! transaction fails for a reason other than the database being away, each request is
//! retried on its own, so one bad request cannot fail its neighbours.

use super::db::Db;
use super::minted::{self, Minted};
use super::rows::unreachable;
use super::write::{answers, write_at, Capacity};
use crate::prepared::Prepared;
use crate::recoveries::Recoveries;
use crate::seal::Sealer;
use crate::wakes::Wakes;
use chrono::{DateTime, Utc};
use queen_reference::wire::{PushResult, PushStatus};
use sqlx::pool::PoolConnection;
use sqlx::{Acquire, PgConnection, Postgres};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Why a write failed, as much as the push route needs to know.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The database cannot be reached: spool (PUSH-7).
    #[error("database unreachable: {0}")]
    Unreachable(String),
    /// PostgreSQL broke a deadlock by aborting us: try again.
    #[error("deadlock")]
    Deadlock,
    /// RET-5: a queue would pass its maxSize; nothing was written.
    #[error("{}", .0.message)]
    Full(queen_reference::wire::WireError),
    #[error("{0}")]
    Other(String),
}

impl From<sqlx::Error> for WriteError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            _ if unreachable(&e) => WriteError::Unreachable(e.to_string()),
            sqlx::Error::Database(d) if d.code().as_deref() == Some("40P01") => {
                WriteError::Deadlock
            }
            _ => WriteError::Other(e.to_string()),
        }
    }
}

/// `Ok(None)`: push maintenance is on, spool instead.
type Reply = Result<Option<Vec<PushResult>>, WriteError>;

struct Job {
    /// Shared with the route, which keeps them to retry or spool.
    items: Arc<Vec<Prepared>>,
    reply: oneshot::Sender<Reply>,
}

/// The handle push routes submit to: one queue of requests per writer.
///
/// A request goes to the writer its first queue hashes to (a large request to a single
/// partition, to its partition's: see [`lane`]). Pushes to one queue lock the
/// same partition rows, so two writers working on them would only wait on each other;
/// one writer takes them all, in bigger shared transactions, while other queues'
/// pushes are written in parallel by the other writers (decision record 0025).
pub(crate) struct Group {
    writers: Vec<mpsc::Sender<Job>>,
    /// The running task of each writer, for [`Group::abort_writer`].
    running: Vec<Running>,
    /// Writers that died and were started again (component `push-writer`).
    recoveries: Arc<Recoveries>,
    /// For requests large enough to be written on their own.
    pool: Db,
    wakes: Arc<Wakes>,
    /// ENC-2: seals the payloads of queues with `encryptionEnabled`.
    seal: Option<Arc<Sealer>>,
}

/// The component name of a push writer in `/health` (HEALTH-3).
const WRITER: &str = "push-writer";

/// Requests of at least this many items are written in a transaction of their own,
/// outside the writers: a writer is shared by every queue that hashes to it, and one
/// large write would hold all of them up for as long as it takes. A request this
/// large fills a transaction by itself, so sharing one would gain nothing.
const ALONE_ITEMS: usize = 1000;

impl Group {
    /// Starts `workers` writers on `pool`.
    pub fn spawn(
        pool: Db,
        wakes: Arc<Wakes>,
        workers: usize,
        max_items: usize,
        recoveries: Arc<Recoveries>,
        seal: Option<Arc<Sealer>>,
    ) -> (Group, Vec<tokio::task::JoinHandle<()>>) {
        let (mut writers, mut running, mut tasks) = (Vec::new(), Vec::new(), Vec::new());
        for lane in 0..workers.max(1) {
            let (tx, rx) = mpsc::channel::<Job>(8192);
            writers.push(tx);
            let current = Running::default();
            running.push(current.clone());
            let (pool, wakes, recoveries) = (pool.clone(), wakes.clone(), recoveries.clone());
            let seal = seal.clone();
            let rx = Arc::new(tokio::sync::Mutex::new(rx));
            tasks.push(tokio::spawn(supervise(
                lane,
                recoveries,
                current,
                move || {
                    let seal = seal.clone();
                    worker(
                        pool.clone(),
                        wakes.clone(),
                        rx.clone(),
                        max_items.max(1),
                        seal,
                    )
                },
            )));
        }
        (
            Group {
                writers,
                running,
                recoveries,
                pool,
                wakes,
                seal,
            },
            tasks,
        )
    }

    /// Writers that died and were started again since the engine started.
    pub fn restarts(&self) -> u64 {
        self.recoveries.count(WRITER)
    }

    /// Ends writer `lane`'s task as a panic would (for tests of the supervision).
    pub fn abort_writer(&self, lane: usize) {
        if let Some(h) = self.running[lane].lock().expect("writer handle").as_ref() {
            h.abort();
        }
    }

    /// Writes one request's items (in a transaction shared with others under load, or
    /// of its own when large).
    pub async fn write(&self, items: Arc<Vec<Prepared>>) -> Reply {
        if items.len() >= ALONE_ITEMS {
            let (reply, answer_rx) = oneshot::channel();
            let all = items.iter().collect::<Vec<_>>();
            let result = write_all(&self.pool, &mut None, &all, self.seal.as_deref()).await;
            drop(all);
            answer(&self.wakes, vec![Job { items, reply }], result);
            return answer_rx
                .await
                .unwrap_or_else(|_| Err(WriteError::Other("the push answer was lost".into())));
        }
        let (reply, answer) = oneshot::channel();
        let writer = &self.writers[lane(&items) % self.writers.len()];
        if writer.send(Job { items, reply }).await.is_err() {
            return Err(WriteError::Other("the push writers stopped".into()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(WriteError::Other("the push writer stopped".into())))
    }
}

/// Requests of at least this many items, all to one partition, get a writer of their
/// own partition instead of their queue's.
const OWN_LANE_ITEMS: usize = 50;

/// Which writer takes a request: the one its first queue hashes to, or, for a large
/// request to a single partition, the one that (queue, partition) hashes to.
///
/// One writer per queue keeps small pushes coalesced into shared transactions. But one
/// writer is one PostgreSQL backend, and it bounds a queue's throughput however many
/// cores the database has. Large requests already make large statements on their own,
/// so they spread over the writers by partition and write in parallel (decision record
/// 0025 has the figures). Their partition rows keep offsets in commit order whichever
/// writer takes them (PUSH-6).
fn lane(items: &[Prepared]) -> usize {
    let mut h = std::hash::DefaultHasher::new();
    let Some(first) = items.first() else { return 0 };
    std::hash::Hash::hash(&first.queue, &mut h);
    if items.len() >= OWN_LANE_ITEMS
        && items
            .iter()
            .all(|i| i.queue == first.queue && i.partition == first.partition)
    {
        std::hash::Hash::hash(&first.partition, &mut h);
    }
    std::hash::Hasher::finish(&h) as usize
}

/// The abort handle of a writer's current task.
type Running = Arc<std::sync::Mutex<Option<tokio::task::AbortHandle>>>;

/// Runs writer `lane`, started again whenever its task dies (a panic, or an abort):
/// its queue of requests outlives it, so the requests after the failure are written
/// by the new task; those the dead one held get no answer, and their routes answer
/// 500 (nothing of them is acknowledged). Ends when the writer ends on its own (the
/// broker is gone).
async fn supervise<F, Fut>(lane: usize, recoveries: Arc<Recoveries>, current: Running, start: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let task = tokio::spawn(start());
        *current.lock().expect("writer handle") = Some(task.abort_handle());
        match task.await {
            Ok(()) => return,
            Err(e) => {
                recoveries.record(WRITER);
                tracing::error!("push writer {lane} died ({e}); starting it again");
            }
        }
    }
}

async fn worker(
    pool: Db,
    wakes: Arc<Wakes>,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Job>>>,
    max_items: usize,
    seal: Option<Arc<Sealer>>,
) {
    let seal = seal.as_deref();
    // Held for the task's life; a dead task's guard goes with it.
    let mut rx = rx.lock().await;
    // Kept from one write to the next while requests keep coming: the pool tests a
    // connection with a round trip each time one is given back, which a writer busy
    // under load need not pay; an idle writer gives it back for the pops and acks.
    let mut conn = None;
    loop {
        if rx.is_empty() {
            conn = None;
        }
        let jobs = {
            let Some(first) = rx.recv().await else { return };
            let mut n = first.items.len();
            let mut jobs = vec![first];
            while n < max_items {
                match rx.try_recv() {
                    Ok(j) => {
                        n += j.items.len();
                        jobs.push(j);
                    }
                    Err(_) => break,
                }
            }
            jobs
        };
        let all: Vec<&Prepared> = jobs.iter().flat_map(|j| j.items.iter()).collect();
        let result = write_all(&pool, &mut conn, &all, seal).await;
        drop(all);
        match result {
            // One request's failure or refusal must not fail its neighbours.
            Err(WriteError::Other(_) | WriteError::Full(_)) if jobs.len() > 1 => {
                for job in jobs {
                    let items = job.items.iter().collect::<Vec<_>>();
                    let r = write_all(&pool, &mut conn, &items, seal).await;
                    answer(&wakes, vec![job], r);
                }
            }
            r => answer(&wakes, jobs, r),
        }
    }
}

/// One transaction: the maintenance switch and "now" in one round trip, then the write;
/// or, when the broker minted every transactionId, one function call (see `minted.rs`).
/// Written on `conn`, taken from `pool` when empty and let go after any failure (it
/// may be the connection that failed).
async fn write_all(
    pool: &Db,
    conn: &mut Option<PoolConnection<Postgres>>,
    items: &[&Prepared],
    seal: Option<&Sealer>,
) -> Result<Option<Vec<PushResult>>, WriteError> {
    let c = match conn {
        Some(c) => c,
        None => conn.insert(pool.acquire().await?),
    };
    let result = write_on(c, items, seal).await;
    if result.is_err() {
        *conn = None;
    }
    result
}

async fn write_on(
    conn: &mut PgConnection,
    items: &[&Prepared],
    seal: Option<&Sealer>,
) -> Result<Option<Vec<PushResult>>, WriteError> {
    if minted::applies(items.iter().copied()) {
        match minted::write(conn, items).await? {
            // Minted ids cannot be duplicates (PUSH-5): every item is new.
            Minted::Written => return Ok(Some(answers(items.iter().copied(), PushStatus::Queued))),
            Minted::Maintenance => return Ok(None),
            // A queue or partition to create: the general path does it.
            Minted::Missing => {}
        }
    }
    let mut tx = conn.begin().await?;
    let (now, maintenance): (DateTime<Utc>, bool) =
        sqlx::query_as("SELECT now(), s.push_maintenance FROM queen_switch_state s")
            .fetch_one(&mut *tx)
            .await?;
    if maintenance {
        return Ok(None);
    }
    match write_at(&mut tx, items, now, seal, Capacity::Enforced).await? {
        Ok(out) => {
            tx.commit().await?;
            Ok(Some(out))
        }
        Err(full) => Err(WriteError::Full(full)),
    }
}

/// Splits a shared answer back into each request's own (indexes from 0) and rings the
/// bells of the queues written to.
fn answer(wakes: &Wakes, jobs: Vec<Job>, result: Result<Option<Vec<PushResult>>, WriteError>) {
    match result {
        Ok(Some(out)) => {
            let mut queues: Vec<&str> = out.iter().map(|r| r.queue_name.as_str()).collect();
            queues.sort_unstable();
            queues.dedup();
            for q in queues {
                wakes.ring(q);
            }
            let mut rest = out.into_iter();
            for job in jobs {
                let mine: Vec<PushResult> = rest
                    .by_ref()
                    .take(job.items.len())
                    .enumerate()
                    .map(|(i, mut r)| {
                        r.index = i;
                        r
                    })
                    .collect();
                let _ = job.reply.send(Ok(Some(mine)));
            }
        }
        other => {
            for job in jobs {
                let _ = job.reply.send(other.clone());
            }
        }
    }
}
