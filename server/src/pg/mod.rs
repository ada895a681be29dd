//! `PgBroker`: the PostgreSQL engine.
//!
//! What the spec makes atomic is one database transaction: a push's items, an ack call's
//! decisions, a transaction's operations, one partition's claim; a pop's head is one
//! round trip, its set-up (queue, subscription) another. The schema (tables in `server/migrations`,
//! functions in `server/sql`, both embedded and applied at start: `schema.rs`) keeps
//! partitions as append-only logs with offsets and one cursor row per
//! `(partition, group)` that also carries the lease.
//!
//! Concurrency, across any number of server processes on one database:
//! * pushes lock the partition rows they append to (`SELECT ... FOR UPDATE`, in a
//!   canonical order), so offsets follow commit order (PUSH-6);
//! * a pop and an ack on the same `(partition, group)` serialize on a transaction-level
//!   advisory lock keyed by that pair: pops *try* it and skip the partition when it is
//!   held (POP-2: leased partitions are skipped, not waited on), acks and extends wait
//!   for it. Keying the lock on the pair rather than on the cursor row works before the
//!   row exists and never blocks pushes or other groups (`pair.rs`;
//!   `docs/decisions/0004-postgres-concurrency.md`).
//!
//! The rules the model decides, the model decides here too: ack step 1 and steps 2–6
//! ([`queen_reference::model::ack::step_one`], [`queen_reference::model::ack::decide`]),
//! the retry bookkeeping and PUSH-5's duplicate test; the engine reads and writes rows.

mod ack;
mod admin;
mod analytics;
mod db;
mod deletion;
mod groups;
mod hosts;
mod lease;
mod listen;
mod minted;
mod notify;
mod pair;
mod peek;
mod pop;
pub(crate) mod push;
mod queues;
mod redrive;
mod retention;
mod rows;
mod schema;
mod txn;
mod views;
mod write;
mod writers;

pub use crate::prepared::Prepared;
pub use rows::unreachable;
use rows::{logged, refused_for_good};
pub use schema::SQL_OVERRIDE_ENV;

use crate::broker::{Broker, PoolStats, Popped};
use crate::config::Config;
use crate::spool::{ChunkLimits, Spool, SpoolState};
use crate::wakes::Wakes;
use async_trait::async_trait;
use queen_reference::wire::{Answer, ManageRequest, PopQuery, PopRoute, Request};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use schema::MIGRATOR;

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error("cannot open the spool: {0}")]
    Spool(#[source] std::io::Error),
    #[error("{0}")]
    Encryption(String),
}

/// The PostgreSQL engine: a cheap handle around the shared state.
#[derive(Clone)]
pub struct PgBroker {
    inner: Arc<Inner>,
}

struct Inner {
    /// Connections, counting who waits for one; a parked pop holds none (POP-11).
    pool: db::Db,
    /// Bells for parked pops, rung by local pushes and by `LISTEN` for remote ones.
    wakes: Arc<Wakes>,
    /// The group-commit writers pushes are written through.
    writers: writers::Group,
    /// Pushes accepted while the database cannot take them (PUSH-7).
    spool: Spool,
    /// How the spool's replay goes (PUSH-10, HEALTH-2).
    replay: Replay,
    /// Failures the engine recovered from (HEALTH-3).
    recoveries: Arc<crate::recoveries::Recoveries>,
    /// Until when (ms since the epoch) pushes go straight to the spool, because the
    /// database was just found unreachable; saves every push an acquire timeout.
    down_until: std::sync::atomic::AtomicI64,
    /// Where each group's next pop starts walking a queue's partitions (POP-4).
    rotation: pop::Rotation,
    /// Messages set aside since start because no consumer could read them (POP-16).
    set_aside: std::sync::atomic::AtomicU64,
    /// ENC-2: the broker's key (`QUEEN_ENCRYPTION_KEY`), sealing and opening the payloads
    /// of queues with `encryptionEnabled`; `None` refuses such queues.
    seal: Option<Arc<crate::seal::Sealer>>,
    /// Background tasks (the listener, the spool replayer), stopped on drop.
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The spool's replay: one at a time, in bounded chunks, with its failures counted so
/// that a replay that cannot make progress shows in `/health` (HEALTH-2).
struct Replay {
    /// Held while a replay runs.
    running: tokio::sync::Mutex<()>,
    limits: ChunkLimits,
    /// Chunks that failed in a row while the database answered.
    failures: std::sync::atomic::AtomicU32,
    /// A chunk was refused for good: lines go one at a time until the refused one is
    /// found and quarantined (PUSH-12).
    one_by_one: std::sync::atomic::AtomicBool,
}

/// Failed chunks in a row, with the database answering, after which a replay is stuck.
const STUCK_AFTER: u32 = 3;

impl Drop for Inner {
    fn drop(&mut self) {
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
    }
}

/// A pooled connection idle this long is pinged before it is used again.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pool's connection options: a host's, with every statement planned generically.
///
/// Every statement here finds its rows by key (a queue's name, a partition id, an offset
/// range), so the generic plan is the right one: forcing it saves the five custom plans
/// PostgreSQL tries first and keeps it from re-planning every run once the tables grow,
/// inside our PL/pgSQL functions too. JIT compilation is off because it only pays for
/// long analytic queries, and the management reads' cost estimates over many cursors
/// triggered it, spending more time compiling than executing.
fn tune(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("plan_cache_mode", "force_generic_plan"), ("jit", "off")])
}

/// The connection pool on the primary among `hosts`, sized and tuned for the broker.
async fn open_pool(hosts: &hosts::Hosts, config: &Config) -> Result<PgPool, StartError> {
    let primary = hosts.find().await.map_err(StartError::Connect)?;
    let writable = hosts.writable();
    PgPoolOptions::new()
        // DB_POOL_SIZE counts every connection the broker opens: the pool, and the
        // one `LISTEN` connection beside it.
        .max_connections(config.pool_size.saturating_sub(1).max(2))
        .acquire_timeout(Duration::from_secs(3))
        // sqlx pings every connection it hands out by default: a round trip before
        // each push, pop and ack, as long as the one statement of a push. Only a
        // connection idle for a while can have died unnoticed (a database restart),
        // so only such a one is pinged; a busy pool skips the ping.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        // Among several hosts, a connection that lands on a standby is refused, so
        // the pool only ever holds the primary's.
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if writable && !hosts::accepts_writes(conn).await? {
                    return Err(sqlx::Error::Configuration(
                        "the host does not accept writes (a standby)".into(),
                    ));
                }
                Ok(())
            })
        })
        .connect_with(tune(primary))
        .await
        .map_err(StartError::Connect)
}

impl PgBroker {
    /// Connects, applies the migrations, starts listening for other processes' pushes and
    /// replays any spool left behind.
    pub async fn connect(url: &str, config: &Config) -> Result<PgBroker, StartError> {
        let hosts = hosts::Hosts::parse(url).map_err(StartError::Connect)?;
        let pool = open_pool(&hosts, config).await?;
        let seal = match &config.encryption_key {
            Some(k) => Some(Arc::new(
                crate::seal::Sealer::from_hex(k).map_err(StartError::Encryption)?,
            )),
            None => None,
        };
        schema::apply(&pool).await?;
        let pool = db::Db::new(pool);
        let spool =
            Spool::open(&config.spool_dir, config.spool_max_bytes).map_err(StartError::Spool)?;
        let wakes = Arc::new(Wakes::new());
        // By default half the pool writes pushes; the rest serves pops, acks and the rest.
        let recoveries = Arc::new(crate::recoveries::Recoveries::default());
        let (writer_group, writer_tasks) = writers::Group::spawn(
            pool.clone(),
            wakes.clone(),
            config
                .push_writers
                .unwrap_or(config.pool_size as usize / 2)
                .max(1),
            config.push_batch_items as usize,
            recoveries.clone(),
            seal.clone(),
        );
        let broker = PgBroker {
            inner: Arc::new(Inner {
                pool,
                wakes,
                writers: writer_group,
                spool,
                replay: Replay {
                    running: Default::default(),
                    limits: ChunkLimits {
                        bytes: config.spool_chunk_bytes,
                        items: config.spool_chunk_items as usize,
                    },
                    failures: Default::default(),
                    one_by_one: Default::default(),
                },
                recoveries,
                seal,
                rotation: Default::default(),
                set_aside: Default::default(),
                down_until: Default::default(),
                tasks: Default::default(),
            }),
        };
        broker.start_tasks(hosts, config, writer_tasks);
        // A spool left behind is replayed by the replay loop: start-up does not wait.
        Ok(broker)
    }

    /// Starts the background tasks: following the primary among several hosts, listening
    /// for other processes' pushes and telling them of ours, the spool's replay and the retention sweep; keeps
    /// their handles (and the writers') so that the broker can stop them.
    fn start_tasks(
        &self,
        hosts: hosts::Hosts,
        config: &Config,
        writers: Vec<tokio::task::JoinHandle<()>>,
    ) {
        let follower = tokio::spawn(hosts::follow(self.inner.pool.pool().clone(), hosts, tune));
        let peers = Arc::new(notify::Peers::default());
        let listener = listen::spawn(
            self.inner.pool.pool().clone(),
            self.clone_weak(),
            self.inner.wakes.clone(),
            peers.clone(),
        );
        let (forwarder, rung) = tokio::sync::mpsc::unbounded_channel();
        self.inner.wakes.forward_to(forwarder);
        let notifier = notify::spawn(self.inner.pool.pool(), peers, rung);
        let replayer = tokio::spawn(replay_loop(self.clone_weak()));
        let retention = tokio::spawn(retention::run(
            self.clone_weak(),
            retention::Schedule {
                interval: Duration::from_millis(config.retention_interval_ms),
                batch: config.retention_batch,
            },
        ));
        let mut tasks = self.inner.tasks.lock().expect("tasks lock");
        tasks.extend([listener, notifier, replayer, retention, follower]);
        tasks.extend(writers);
    }

    /// Ends push writer `lane` as a panic would; it is started again (tests).
    #[doc(hidden)]
    pub fn abort_push_writer(&self, lane: usize) {
        self.inner.writers.abort_writer(lane);
    }

    /// Forgets where every group's walk over a queue's partitions stands, so the next
    /// pops start at the first partition (tests: a double that concentrates its pops on
    /// the same partitions, as an engine with a fixed claim order does).
    #[doc(hidden)]
    pub fn reset_rotation(&self) {
        self.inner.rotation.reset();
    }

    /// Push writers that died and were started again.
    pub fn writer_restarts(&self) -> u64 {
        self.inner.writers.restarts()
    }

    /// Runs one retention round now, as the job does on its timer (tests): the number of
    /// messages removed.
    #[doc(hidden)]
    pub async fn retention_round(&self, batch: i64) -> Result<i64, sqlx::Error> {
        retention::sweep(&self.inner.pool, batch).await
    }

    /// The pool (tests inspect the tables through it).
    pub fn pool(&self) -> &PgPool {
        self.inner.pool.pool()
    }

    /// The broker's key, when it has one (ENC-2).
    fn seal(&self) -> Option<&crate::seal::Sealer> {
        self.inner.seal.as_deref()
    }

    fn clone_weak(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    fn from_weak(w: &std::sync::Weak<Inner>) -> Option<PgBroker> {
        w.upgrade().map(|inner| PgBroker { inner })
    }

    /// Notes that the database did not answer: pushes spool directly for a second.
    pub(crate) fn mark_down(&self) {
        let until = crate::clock::now_ms() + 1000;
        self.inner
            .down_until
            .store(until, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a push must go to the spool without trying the database: it was just
    /// found away, or earlier pushes still wait in the spool (replay keeps their order).
    pub(crate) fn spool_first(&self) -> bool {
        self.inner.spool.pending() > 0
            || crate::clock::now_ms()
                < self
                    .inner
                    .down_until
                    .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Replays the spool, chunk by chunk, when push maintenance is off and the database
    /// answers. Returns whether the spool is empty afterwards.
    pub async fn replay_spool(&self) -> bool {
        // One replay at a time; a second caller waits for it, then finds what is left.
        let _only_one = self.inner.replay.running.lock().await;
        while self.inner.spool.pending() > 0 {
            match admin::switch(&self.inner.pool, admin::Switch::PushMaintenance).await {
                Ok(false) => {}
                _ => return false,
            }
            if let Err(e) = self.replay_chunk().await {
                if unreachable(&e) {
                    self.mark_down();
                } else {
                    self.inner.replay.failures.fetch_add(1, Ordering::SeqCst);
                }
                tracing::warn!("spool replay failed, will retry: {e}");
                return false;
            }
            self.inner.replay.failures.store(0, Ordering::SeqCst);
        }
        true
    }

    /// Writes the spool's next chunk in one transaction, then commits it in the spool. A
    /// chunk the database refuses for good is taken apart line by line, and the line it
    /// refuses is quarantined (PUSH-12), so one bad push never holds back the rest.
    async fn replay_chunk(&self) -> Result<(), sqlx::Error> {
        let (spool, replay) = (&self.inner.spool, &self.inner.replay);
        let one_by_one = replay.one_by_one.load(Ordering::SeqCst);
        let limits = match one_by_one {
            true => ChunkLimits { bytes: 0, items: 0 },
            false => replay.limits,
        };
        let Some(chunk) = spool.next_chunk(limits).await? else {
            return Ok(());
        };
        match write::replay(&self.inner.pool, &chunk.items, self.seal()).await {
            Ok(queues) => {
                spool.commit(chunk).await?;
                for q in queues {
                    self.inner.wakes.ring(&q);
                }
                Ok(())
            }
            Err(e) if refused_for_good(&e) && chunk.lines > 1 => {
                tracing::warn!("a spool chunk was refused ({e}); replaying it line by line");
                replay.one_by_one.store(true, Ordering::SeqCst);
                Ok(())
            }
            Err(e) if refused_for_good(&e) => {
                tracing::error!(
                    "a spooled push of {} items was refused for good ({e}); quarantined",
                    chunk.items.len()
                );
                spool.quarantine(chunk).await?;
                replay.one_by_one.store(false, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// HEALTH-2: the spool's depth and how its replay goes (`stuck`: the database
    /// answers, maintenance is off, and chunks keep failing).
    pub(crate) fn spool_state(&self) -> SpoolState {
        let spool = &self.inner.spool;
        SpoolState {
            items: spool.pending() as u64,
            bytes: spool.bytes(),
            capacity: spool.capacity(),
            stuck: spool.pending() > 0
                && self.inner.replay.failures.load(Ordering::SeqCst) >= STUCK_AFTER,
            quarantined: spool.quarantined() as u64,
        }
    }
}

/// Retries the spool every second while it holds anything (the database came back).
async fn replay_loop(weak: std::sync::Weak<Inner>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(b) = PgBroker::from_weak(&weak) else {
            return;
        };
        match b.inner.spool.adopt_orphans().await {
            Ok(0) => {}
            Ok(n) => tracing::info!("{n} spooled pushes of a stopped broker adopted"),
            Err(e) => tracing::warn!("cannot adopt a stopped broker's spool: {e}"),
        }
        if b.inner.spool.pending() > 0 {
            b.replay_spool().await;
        }
    }
}

impl PgBroker {
    /// One pop attempt in the current task. POP-6, ERR-1: an internal pop error (a queue
    /// deleted under the pop, say) is a bare 204. A database that cannot be reached is a
    /// 503 instead: the pop may have claimed before the connection broke, and a 204 would
    /// tell the client that nothing was there.
    async fn pop_here(&self, route: &PopRoute, query: &PopQuery) -> Popped {
        pop::pop(self, route, query).await.unwrap_or_else(|e| {
            if unreachable(&e) {
                self.mark_down();
                return Popped::Other(Answer::error(503, "the database cannot be reached"));
            }
            tracing::warn!("pop failed, answering 204: {e}");
            Popped::Empty
        })
    }

    /// Answers one request in the current task: cancelling it (dropping the future)
    /// mid-transaction is what [`Broker::call`] prevents.
    async fn call_here(&self, req: Request) -> Answer {
        let pool = &self.inner.pool;
        let result = match req {
            Request::Push(p) => return push::push_route(self, p).await,
            Request::Pop { route, query } => {
                return self.pop_here(&route, &query).await.into_answer()
            }
            Request::Ack(a) => ack::ack_route(pool, &self.inner.wakes, vec![a]).await,
            Request::AckBatch(list) => ack::ack_route(pool, &self.inner.wakes, list).await,
            Request::Extend(e) => lease::extend(pool, &e).await,
            Request::Transaction(t) => {
                let spooling = self.spool_first();
                match txn::transaction(pool, &self.inner.wakes, &t, spooling, self.seal()).await {
                    // TXN-4: the database is away; the transaction cannot wait in the spool.
                    Err(e) if unreachable(&e) => {
                        self.mark_down();
                        return Answer::error(503, txn::AWAY_ERROR);
                    }
                    other => other,
                }
            }
            Request::Configure(c) => admin::configure(pool, &c, self.seal()).await,
            Request::DeleteQueue(q) => admin::delete_queue(pool, &q).await,
            Request::Dlq(q) => admin::list_dlq(pool, &q, self.seal()).await,
            Request::GetPushMaintenance => admin::push_maintenance(self).await,
            Request::SetPushMaintenance(on) => admin::set_push_maintenance(self, on).await,
            Request::GetPopMaintenance => admin::pop_maintenance(pool).await,
            Request::SetPopMaintenance(on) => admin::set_pop_maintenance(pool, on).await,
            Request::Health => return admin::health(self).await,
            Request::Manage(ManageRequest::Seek {
                group,
                queue,
                partition,
                to,
            }) => {
                groups::seek(
                    pool,
                    &self.inner.wakes,
                    &group,
                    &queue,
                    partition.as_deref(),
                    to,
                )
                .await
            }
            Request::Manage(ManageRequest::Subscription { group, at }) => {
                groups::subscription(pool, &self.inner.wakes, &group, at).await
            }
            Request::Manage(ManageRequest::Retry {
                partition_id,
                transaction_id,
            }) => redrive::retry(self, &partition_id, &transaction_id).await,
            Request::Manage(ManageRequest::DeleteMessage {
                partition_id,
                transaction_id,
            }) => {
                deletion::delete_message(pool, &self.inner.wakes, &partition_id, &transaction_id)
                    .await
            }
            Request::Manage(ManageRequest::DeleteGroup {
                group,
                queue,
                delete_metadata,
            }) => {
                groups::delete_group(
                    pool,
                    &self.inner.wakes,
                    &group,
                    queue.as_deref(),
                    delete_metadata,
                )
                .await
            }
            Request::Manage(read) => views::read(pool, &read, self.seal()).await,
        };
        // The route logs the cause under the request id and answers without it (ERR-1).
        result.unwrap_or_else(|e| Answer::error(500, format!("database error: {e}")))
    }
}

#[async_trait]
impl Broker for PgBroker {
    /// Each request runs to its end in a task of its own, even when the client goes
    /// away (hyper then drops the handler's future). Dropped mid-transaction, a
    /// connection could go back to the pool still inside that transaction, and the next
    /// request on it would run inside someone else's transaction: a push's `createdAt`
    /// earlier than the push itself, or its "commit" undone by another request's
    /// rollback. A client that gave up sees its call as maybe-applied anyway.
    async fn call(&self, req: Request) -> Answer {
        let me = self.clone();
        match tokio::spawn(async move { me.call_here(req).await }).await {
            Ok(answer) => answer,
            Err(e) => Answer::error(500, format!("request task failed: {e}")),
        }
    }

    /// In a task of its own, for the reason [`Broker::call`] gives.
    async fn pop(&self, route: &PopRoute, query: &PopQuery) -> Popped {
        let (me, route, query) = (self.clone(), route.clone(), query.clone());
        match tokio::spawn(async move { me.pop_here(&route, &query).await }).await {
            Ok(popped) => popped,
            Err(e) => Popped::Other(Answer::error(500, format!("request task failed: {e}"))),
        }
    }

    fn wakes(&self) -> &Wakes {
        &self.inner.wakes
    }

    fn degraded(&self) -> Vec<serde_json::Value> {
        self.inner.recoveries.degraded(std::time::Instant::now())
    }

    async fn min_pop_wait(&self, queue: &str) -> Duration {
        let read = async {
            let mut conn = self.inner.pool.acquire().await?;
            sqlx::query_scalar(
                "SELECT (options->>'minPopWaitTime')::bigint FROM queen_queues WHERE name = $1",
            )
            .bind(queue)
            .fetch_optional(&mut *conn)
            .await
        };
        let ms: Option<i64> = read
            .await
            .unwrap_or_else(|e| logged(e, "reading minPopWaitTime", None))
            .flatten();
        Duration::from_millis(ms.unwrap_or(0).max(0) as u64)
    }

    async fn claimable(&self, route: &PopRoute, query: &PopQuery) -> u32 {
        pop::claimable(&self.inner.pool, route, query)
            .await
            .unwrap_or_else(|e| logged(e, "counting claimable messages", 0))
    }

    /// For wrappers that answer pops through [`Broker::call`]; this engine's own
    /// [`Broker::pop`] reads the switch in its head.
    async fn pop_paused(&self) -> bool {
        admin::switch(&self.inner.pool, admin::Switch::PopMaintenance)
            .await
            .unwrap_or_else(|e| logged(e, "reading the pop maintenance switch", false))
    }

    fn spool(&self) -> Option<SpoolState> {
        Some(self.spool_state())
    }

    fn set_aside(&self) -> u64 {
        self.inner.set_aside.load(Ordering::Relaxed)
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        let db = &self.inner.pool;
        Some(PoolStats {
            open: db.pool().size(),
            idle: db.pool().num_idle() as u32,
            waiting: db.waiting(),
        })
    }

    async fn shutdown(&self) {
        if self.inner.spool.pending() > 0 {
            self.replay_spool().await;
        }
        self.inner.spool.sync();
    }
}
