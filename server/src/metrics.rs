//! Operational metrics in the Prometheus text format, at `GET /metrics/prometheus`.
//!
//! One registry per served application (not a process-wide one), so that several
//! servers in one process, as in the tests, each count only their own. The spool's
//! gauges are read from the engine when scraped; the counters are bumped where the
//! event happens: a connection refused at the cap (CONN-1), a request over the item
//! limit (LIMIT-1), an internal error answered 500 (ERR-1).

use crate::spool::SpoolState;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};

/// A request's labels: its operation (`Request::name`, a closed set, or `other` for
/// what did not parse) and its status class, so the label sets stay few.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: &'static str,
    pub status: &'static str,
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
    /// Long polls parked now.
    pub parked: Gauge,
    pool_size: Gauge,
    pool_idle: Gauge,
    /// Totals for the JSON `/metrics` (MGMT-10), by operation.
    totals: Totals,
    spool_items: Gauge,
    spool_bytes: Gauge,
    spool_capacity: Gauge,
    spool_stuck: Gauge,
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

/// The counts `/metrics` answers as JSON.
#[derive(Default)]
struct Totals {
    requests: AtomicU64,
    errors: AtomicU64,
    pushes: AtomicU64,
    pops: AtomicU64,
    acks: AtomicU64,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("queen");
        let gauge = |r: &mut Registry, name: &str, help: &str| {
            let g = Gauge::default();
            r.register(name, help, g.clone());
            g
        };
        let counter = |r: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            r.register(name, help, c.clone());
            c
        };
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by operation and status class",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "request_duration_seconds",
            "Time from a request's head to its answer, by operation (long polls included)",
            latency.clone(),
        );
        let r = &mut registry;
        Metrics {
            started: std::time::Instant::now(),
            requests,
            latency,
            parked: gauge(r, "parked_polls", "Long polls parked now"),
            pool_size: gauge(
                r,
                "db_pool_connections",
                "Database connections open in the pool",
            ),
            pool_idle: gauge(r, "db_pool_idle", "Database connections idle in the pool"),
            totals: Totals::default(),
            spool_items: gauge(
                r,
                "spool_items",
                "Pushed items waiting in the spool for replay",
            ),
            spool_bytes: gauge(r, "spool_bytes", "Bytes waiting in the spool for replay"),
            spool_capacity: gauge(r, "spool_capacity_bytes", "The spool's capacity"),
            spool_stuck: gauge(
                r,
                "spool_replay_stuck",
                "1 while the spool's replay keeps failing with the database up",
            ),
            connections_refused: counter(
                r,
                "connections_refused",
                "Connections refused at the connection cap",
            ),
            over_item_limit: counter(
                r,
                "requests_over_item_limit",
                "Requests refused for carrying too many items",
            ),
            internal_errors: counter(r, "internal_errors", "Requests answered 500"),
            unauthenticated: counter(
                r,
                "requests_unauthenticated",
                "Requests refused 401: no valid token",
            ),
            forbidden: counter(
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

    /// The database pool's connections (open, idle), for an engine that has a pool.
    pub fn set_pool(&self, open: u32, idle: u32) {
        self.pool_size.set(i64::from(open));
        self.pool_idle.set(i64::from(idle));
    }

    /// The text exposition, with the spool's gauges as they are now (absent without a
    /// spool).
    pub fn render(&self, spool: Option<SpoolState>) -> String {
        if let Some(s) = spool {
            self.spool_items.set(s.items as i64);
            self.spool_bytes.set(s.bytes as i64);
            self.spool_capacity.set(s.capacity as i64);
            self.spool_stuck.set(s.stuck as i64);
        }
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
