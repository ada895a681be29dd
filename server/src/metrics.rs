//! Operational metrics in the Prometheus text format, at `GET /metrics/prometheus`.
//!
//! One registry per served application (not a process-wide one), so that several
//! servers in one process, as in the tests, each count only their own. The spool's
//! gauges are read from the engine when scraped; the counters are bumped where the
//! event happens: a connection refused at the cap (CONN-1), a request over the item
//! limit (LIMIT-1), an internal error answered 500 (ERR-1).

use crate::spool::SpoolState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The application's metrics: a cheap handle to share.
pub struct Metrics {
    registry: Registry,
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
        let r = &mut registry;
        Metrics {
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
