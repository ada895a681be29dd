//! Internal failures the broker recovered from, for `/health` (HEALTH-3).
//!
//! A push writer that dies is started again and a request that panics in the memory
//! engine leaves its state as it was, so the broker keeps serving; an operator should
//! still see that it is limping. Each component's failures are counted, and those of the
//! last minute make the health answer list the component as `degraded`.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How long after its last failure a component still shows as degraded.
pub const DEGRADED_FOR: Duration = Duration::from_secs(60);

/// The recovered failures of one engine, by component.
#[derive(Default)]
pub struct Recoveries {
    by_component: Mutex<BTreeMap<&'static str, Failures>>,
}

/// One component's failures.
struct Failures {
    count: u64,
    /// When the last one happened, for "within the last minute".
    last: Instant,
    /// The same moment on the wall clock, for the answer.
    last_at: SystemTime,
}

impl Recoveries {
    /// Notes that `component` failed and was recovered.
    pub fn record(&self, component: &'static str) {
        let mut map = self.by_component.lock().unwrap_or_else(|p| p.into_inner());
        let f = map.entry(component).or_insert(Failures {
            count: 0,
            last: Instant::now(),
            last_at: SystemTime::now(),
        });
        f.count += 1;
        f.last = Instant::now();
        f.last_at = SystemTime::now();
    }

    /// How often `component` failed since the engine started.
    pub fn count(&self, component: &str) -> u64 {
        let map = self.by_component.lock().unwrap_or_else(|p| p.into_inner());
        map.get(component).map_or(0, |f| f.count)
    }

    /// The components that failed within [`DEGRADED_FOR`] of `now`, as the health answer
    /// lists them: `{"component", "failures", "lastAt"}`.
    pub fn degraded(&self, now: Instant) -> Vec<Value> {
        let map = self.by_component.lock().unwrap_or_else(|p| p.into_inner());
        map.iter()
            .filter(|(_, f)| now.saturating_duration_since(f.last) < DEGRADED_FOR)
            .map(|(c, f)| {
                let at: chrono::DateTime<chrono::Utc> = f.last_at.into();
                json!({
                    "component": c,
                    "failures": f.count,
                    "lastAt": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_3_a_failure_shows_for_a_minute_and_is_counted_for_ever() {
        let r = Recoveries::default();
        assert!(r.degraded(Instant::now()).is_empty());
        r.record("push-writer");
        r.record("push-writer");
        let now = Instant::now();
        let listed = r.degraded(now);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0]["component"], "push-writer");
        assert_eq!(listed[0]["failures"], 2);
        assert!(
            r.degraded(now + DEGRADED_FOR).is_empty(),
            "a minute later it is over"
        );
        assert_eq!(r.count("push-writer"), 2);
        assert_eq!(r.count("engine"), 0);
    }
}
