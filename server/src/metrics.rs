//! Operational metrics in the Prometheus text format, at `GET /metrics/prometheus`.
//!
//! One registry per served application (not a process-wide one), so that several
//! servers in one process, as in the tests, each count only their own. The spool's
//! gauges are read from the engine when scraped; the counters are bumped where the
//! event happens: a connection refused at the cap (CONN-1), a request over the item
//! limit (LIMIT-1), an internal error answered 500 (ERR-1).

use crate::broker::PoolStats;
use crate::spool::SpoolState;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::{AtomicU64, Ordering};

/// A request's labels: its operation (`Request::name`, a closed set, or `other` for
/// what did not parse) and its status class, so the label sets stay few.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: &'static str,
    pub status: &'static str,
}

/// What an operation's answer said: a push item's status, a pop's delivery, an ack
/// item's success (closed sets).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

/// A queue's series (at most `METRICS_TOP` of them).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

/// A (group, queue) pair's series (at most `METRICS_TOP` of them).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub group: String,
    pub queue: String,
}

/// A latency's labels: the operation only.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
}

/// The application's metrics: a cheap handle to share.
pub struct Metrics {
    registry: Registry,
    /// When the application started (MGMT-10, HEALTH-4: uptime).
    pub started: std::time::Instant,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    pushed: Family<OutcomeLabels, Counter>,
    popped: Family<OutcomeLabels, Counter>,
    popped_messages: Counter,
    acked: Family<OutcomeLabels, Counter>,
    backlogs: Backlogs,
    queues_total: Gauge,
    /// Long polls parked now.
    pub parked: Gauge,
    pool_size: Gauge,
    pool_idle: Gauge,
    pool_waiting: Gauge,
    /// Totals for the JSON `/metrics` (MGMT-10), by operation.
    totals: Totals,
    spool: SpoolGauges,
    /// POP-16: messages set aside because no consumer could read them.
    set_aside: Counter,
    /// CONN-1: connections answered 503 at the connection cap.
    pub connections_refused: Counter,
    /// LIMIT-1: requests answered 413 for carrying too many items.
    pub over_item_limit: Counter,
    /// ERR-1: requests answered 500.
    pub internal_errors: Counter,
    /// AUTH-4: requests refused 401 (no valid token) and 403 (below the route's level).
    pub unauthenticated: Counter,
    pub forbidden: Counter,
}

/// The per-queue and per-group series of the deepest queues and most lagging groups.
struct Backlogs {
    queue_unconsumed: Family<QueueLabels, Gauge>,
    queue_messages: Family<QueueLabels, Gauge>,
    group_lag: Family<GroupLabels, Gauge>,
    group_lag_seconds: Family<GroupLabels, Gauge>,
}

impl Backlogs {
    fn register(r: &mut Registry) -> Backlogs {
        Backlogs {
            queue_unconsumed: add(
                r,
                "queue_unconsumed",
                "Unconsumed messages (RET-5) of the METRICS_TOP deepest queues",
            ),
            queue_messages: add(r, "queue_messages", "Retained messages of the same queues"),
            group_lag: add(
                r,
                "group_lag",
                "Messages behind of the METRICS_TOP most lagging (group, queue) pairs (MGMT-3)",
            ),
            group_lag_seconds: add(
                r,
                "group_lag_seconds",
                "Age of the oldest message those pairs have not committed",
            ),
        }
    }
}

/// The spool's gauges (PUSH-7, PUSH-10, PUSH-12), set as each exposition is rendered.
struct SpoolGauges {
    items: Gauge,
    bytes: Gauge,
    capacity: Gauge,
    stuck: Gauge,
    /// PUSH-12: items in the spool's quarantine.
    quarantined: Gauge,
}

impl SpoolGauges {
    fn register(r: &mut Registry) -> SpoolGauges {
        SpoolGauges {
            items: add(
                r,
                "spool_items",
                "Pushed items waiting in the spool for replay",
            ),
            bytes: add(r, "spool_bytes", "Bytes waiting in the spool for replay"),
            capacity: add(r, "spool_capacity_bytes", "The spool's capacity"),
            stuck: add(
                r,
                "spool_replay_stuck",
                "1 while the spool's replay keeps failing with the database up",
            ),
            quarantined: add(
                r,
                "spool_quarantined_items",
                "Spooled items the database refused for good, kept in the quarantine file",
            ),
        }
    }

    fn set(&self, s: &SpoolState) {
        self.items.set(s.items as i64);
        self.bytes.set(s.bytes as i64);
        self.capacity.set(s.capacity as i64);
        self.stuck.set(s.stuck as i64);
        self.quarantined.set(s.quarantined as i64);
    }
}

/// The counts `/metrics` answers as JSON.
#[derive(Default)]
struct Totals {
    requests: AtomicU64,
    errors: AtomicU64,
    pushes: AtomicU64,
    pops: AtomicU64,
    acks: AtomicU64,
}

/// A new series of kind `M`, registered under `name` with its help text.
fn add<M: Metric + Default + Clone>(r: &mut Registry, name: &str, help: &str) -> M {
    let m = M::default();
    r.register(name, help, m.clone());
    m
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("queen");
        let r = &mut registry;
        let requests = add(
            r,
            "requests",
            "Requests answered, by operation and status class",
        );
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        r.register(
            "request_duration_seconds",
            "Time from a request's head to its answer, by operation (long polls included)",
            latency.clone(),
        );
        Metrics {
            requests,
            latency,
            backlogs: Backlogs::register(r),
            queues_total: add(r, "queues", "Queues the broker holds"),
            pushed: add(
                r,
                "pushed_items",
                "Pushed items by status: queued, duplicate, buffered",
            ),
            popped: add(r, "pops", "Pop answers by outcome: delivered, empty"),
            popped_messages: add(r, "popped_messages", "Messages delivered by pops"),
            acked: add(
                r,
                "acked_items",
                "Acknowledgments by outcome: success, failure",
            ),
            started: std::time::Instant::now(),
            parked: add(r, "parked_polls", "Long polls parked now"),
            pool_size: add(
                r,
                "db_pool_connections",
                "Database connections open in the pool",
            ),
            pool_idle: add(r, "db_pool_idle", "Database connections idle in the pool"),
            pool_waiting: add(
                r,
                "db_pool_waiting",
                "Requests waiting for a database connection",
            ),
            totals: Totals::default(),
            spool: SpoolGauges::register(r),
            set_aside: add(
                r,
                "messages_set_aside",
                "Stored messages set aside as dead letters because no consumer could read them",
            ),
            connections_refused: add(
                r,
                "connections_refused",
                "Connections refused at the connection cap",
            ),
            over_item_limit: add(
                r,
                "requests_over_item_limit",
                "Requests refused for carrying too many items",
            ),
            internal_errors: add(r, "internal_errors", "Requests answered 500"),
            unauthenticated: add(
                r,
                "requests_unauthenticated",
                "Requests refused 401: no valid token",
            ),
            forbidden: add(
                r,
                "requests_forbidden",
                "Requests refused 403: the token is below the route's level",
            ),
            registry,
        }
    }

    /// Counts one answered request of operation `route` (a closed set of names).
    pub fn answered(&self, route: &'static str, status: u16, took: std::time::Duration) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.requests
            .get_or_create(&RequestLabels {
                route,
                status: class,
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels { route })
            .observe(took.as_secs_f64());
        let t = &self.totals;
        t.requests.fetch_add(1, Ordering::Relaxed);
        if status >= 500 {
            t.errors.fetch_add(1, Ordering::Relaxed);
        }
        let op = match route {
            "push" => Some(&t.pushes),
            "pop" => Some(&t.pops),
            "ack" => Some(&t.acks),
            _ => None,
        };
        if let Some(c) = op {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts what a push, pop or ack answered (by item where it has items).
    pub fn outcome(&self, answer: &queen_reference::wire::Answer) {
        use queen_reference::wire::{Answer, PushStatus};
        let by = |f: &Family<OutcomeLabels, Counter>, outcome: &'static str, n: u64| {
            f.get_or_create(&OutcomeLabels { outcome }).inc_by(n);
        };
        match answer {
            Answer::Pushed(items) => {
                for i in items {
                    let status = match i.status {
                        PushStatus::Queued => "queued",
                        PushStatus::Duplicate => "duplicate",
                        PushStatus::Buffered => "buffered",
                    };
                    by(&self.pushed, status, 1);
                }
            }
            Answer::Popped(p) => {
                by(&self.popped, "delivered", 1);
                self.popped_messages.inc_by(p.messages.len() as u64);
            }
            Answer::Empty => by(&self.popped, "empty", 1),
            Answer::Acked(items) => {
                let ok = items.iter().filter(|i| i.success).count() as u64;
                by(&self.acked, "success", ok);
                by(&self.acked, "failure", items.len() as u64 - ok);
            }
            _ => {}
        }
    }

    /// The per-queue and per-group series, replaced by the `top` deepest queues and most
    /// lagging (group, queue) pairs of the views (the first page of each).
    pub fn set_backlogs(
        &self,
        queues: Option<queen_reference::wire::QueuesPage>,
        groups: Option<queen_reference::wire::GroupsPage>,
        top: usize,
    ) {
        let b = &self.backlogs;
        b.queue_unconsumed.clear();
        b.queue_messages.clear();
        b.group_lag.clear();
        b.group_lag_seconds.clear();
        if let Some(page) = queues {
            self.queues_total.set(page.page.total as i64);
            let mut qs = page.queues;
            qs.sort_by(|a, b| b.unconsumed.cmp(&a.unconsumed).then(a.name.cmp(&b.name)));
            for q in qs.into_iter().take(top) {
                let l = QueueLabels { queue: q.name };
                b.queue_unconsumed
                    .get_or_create(&l)
                    .set(q.unconsumed as i64);
                b.queue_messages.get_or_create(&l).set(q.messages as i64);
            }
        }
        if let Some(page) = groups {
            let mut pairs: Vec<(String, queen_reference::wire::GroupQueue)> = page
                .consumer_groups
                .into_iter()
                .flat_map(|g| g.queues.into_iter().map(move |q| (g.name.clone(), q)))
                .collect();
            pairs.sort_by(|a, b| b.1.lag.cmp(&a.1.lag).then(a.0.cmp(&b.0)));
            for (group, q) in pairs.into_iter().take(top) {
                let l = GroupLabels {
                    group,
                    queue: q.queue,
                };
                b.group_lag.get_or_create(&l).set(q.lag as i64);
                b.group_lag_seconds
                    .get_or_create(&l)
                    .set(q.lag_seconds as i64);
            }
        }
    }

    /// MGMT-10: the JSON `/metrics`.
    pub fn json(&self) -> queen_reference::wire::MetricsView {
        let t = &self.totals;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        queen_reference::wire::MetricsView {
            uptime_seconds: self.started.elapsed().as_secs(),
            requests: get(&t.requests),
            errors: get(&t.errors),
            pushes: get(&t.pushes),
            pops: get(&t.pops),
            acks: get(&t.acks),
            parked_polls: self.parked.get().max(0) as u64,
            connections_refused: self.connections_refused.get(),
        }
    }

    /// The database pool's figures, for an engine that has a pool.
    pub fn set_pool(&self, pool: PoolStats) {
        self.pool_size.set(i64::from(pool.open));
        self.pool_idle.set(i64::from(pool.idle));
        self.pool_waiting.set(i64::from(pool.waiting));
    }

    /// The text exposition, with the spool's gauges as they are now (absent without a
    /// spool) and the engine's count of messages set aside.
    pub fn render(&self, spool: Option<SpoolState>, set_aside: u64) -> String {
        if let Some(s) = spool {
            self.spool.set(&s);
        }
        self.set_aside
            .inc_by(set_aside.saturating_sub(self.set_aside.get()));
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
