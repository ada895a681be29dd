//! The dashboard's series (PROTOCOL.md MGMT-13): counts per time bucket of a window.
//!
//! A broker keeps no time series of its own; the series are read from the times its
//! state already holds (a message's `createdAt`, a dead letter's filing time). What is
//! decided here, once for both engines and the model, is the window and its buckets:
//! the defaults, the UTC alignment, and which windows are refused.

use super::WireError;
use crate::time::{format_iso, parse_iso, Millis};
use serde::{Deserialize, Serialize};

/// The most buckets one answer lists (a day of minutes fits, with one to spare).
const MAX_ANALYTICS_BUCKETS: i64 = 1500;
/// How far `from` lies before `to` when it is absent.
pub(crate) const DEFAULT_ANALYTICS_WINDOW: Millis = 24 * 3600 * 1000;

/// A bucket's width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
// The variants' docs are left out of the `openapi` build: a doc on a unit variant
// would turn the schema's string `enum` into a `oneOf` (spec/openapi.json).
#[cfg_attr(feature = "openapi", allow(missing_docs))]
pub enum Interval {
    #[cfg_attr(not(feature = "openapi"), doc = "`minute`: one-minute buckets.")]
    Minute,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`hour`: one-hour buckets, the default."
    )]
    #[default]
    Hour,
    #[cfg_attr(
        not(feature = "openapi"),
        doc = "`day`: one-day buckets, aligned on UTC midnight."
    )]
    Day,
}

impl Interval {
    /// The interval named by an `interval` query value; `None` for anything but `minute`, `hour` or
    /// `day` (MGMT-13: 400).
    pub(crate) fn parse(s: &str) -> Option<Interval> {
        match s {
            "minute" => Some(Interval::Minute),
            "hour" => Some(Interval::Hour),
            "day" => Some(Interval::Day),
            _ => None,
        }
    }

    /// The interval's width in milliseconds.
    pub fn millis(self) -> Millis {
        match self {
            Interval::Minute => 60_000,
            Interval::Hour => 3_600_000,
            Interval::Day => 86_400_000,
        }
    }

    /// The start of the bucket holding `t`: UTC has no leap seconds in Unix time, so
    /// counting from the epoch aligns minutes, hours and days alike.
    pub(crate) fn floor(self, t: Millis) -> Millis {
        t.div_euclid(self.millis()) * self.millis()
    }
}

/// `GET /api/v1/status/analytics`, validated: the window's ends as given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AnalyticsQuery {
    /// `from`: the window's start, if given; else 24 hours before `to`.
    pub(crate) from: Option<Millis>,
    /// `to`: the window's end (exclusive), if given; else just after now.
    pub(crate) to: Option<Millis>,
    /// `interval`: the buckets' width; default `hour`.
    pub interval: Interval,
    /// The `queue` filter: only that queue's messages are counted.
    pub queue: Option<String>,
    /// The `namespace` filter: only queues in that namespace are counted.
    pub namespace: Option<String>,
    /// The `task` filter: only queues with that task are counted.
    pub task: Option<String>,
}

impl AnalyticsQuery {
    /// Parses the query string; a window given with both ends is checked here.
    pub(crate) fn parse(query: &[(String, String)]) -> Result<AnalyticsQuery, WireError> {
        let param = |key: &str| super::manage::param(query, key);
        let time = |key: &str| -> Result<Option<Millis>, WireError> {
            match param(key) {
                None => Ok(None),
                Some(v) => parse_iso(&v).map(Some).ok_or_else(|| {
                    WireError::bad(format!("{key} must be an ISO-8601 time, got {v:?}"))
                }),
            }
        };
        let interval = match param("interval") {
            None => Interval::default(),
            Some(v) => Interval::parse(&v).ok_or_else(|| {
                WireError::bad(format!("interval must be minute, hour or day, got {v:?}"))
            })?,
        };
        let q = AnalyticsQuery {
            from: time("from")?,
            to: time("to")?,
            interval,
            queue: param("queue"),
            namespace: param("namespace"),
            task: param("task"),
        };
        if let (Some(from), Some(to)) = (q.from, q.to) {
            buckets(from, to, interval)?;
        }
        Ok(q)
    }

    /// The window `[from, to)` with its defaults for a broker whose clock reads `now`:
    /// the default end is just after now, so what was created up to the read is inside.
    pub fn window(&self, now: Millis) -> (Millis, Millis) {
        let to = self.to.unwrap_or(now + 1);
        (self.from.unwrap_or(to - DEFAULT_ANALYTICS_WINDOW), to)
    }

    /// Whether a queue with these names is among those the query keeps to.
    pub(crate) fn keeps(&self, queue: &str, namespace: &str, task: &str) -> bool {
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        is(&self.queue, queue) && is(&self.namespace, namespace) && is(&self.task, task)
    }
}

/// The starts of the buckets that meet `[from, to)`, oldest first; the 400 of a window
/// that is empty or holds too many buckets.
pub fn buckets(from: Millis, to: Millis, interval: Interval) -> Result<Vec<Millis>, WireError> {
    if from >= to {
        return Err(WireError::bad(format!(
            "from ({}) must be before to ({})",
            format_iso(from),
            format_iso(to)
        )));
    }
    let (first, last) = (interval.floor(from), interval.floor(to - 1));
    let n = (last - first) / interval.millis() + 1;
    if n > MAX_ANALYTICS_BUCKETS {
        return Err(WireError::bad(format!(
            "the window holds {n} buckets of an {interval:?}, more than {MAX_ANALYTICS_BUCKETS}: \
             narrow it or widen the interval"
        )));
    }
    Ok((0..n).map(|i| first + i * interval.millis()).collect())
}

/// The answer of MGMT-13.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Analytics {
    /// `from`: the window's start, ISO-8601 UTC.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub(crate) from: String,
    /// `to`: the window's end (exclusive), ISO-8601 UTC.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub(crate) to: String,
    /// `interval`: the buckets' width.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub interval: Interval,
    /// `buckets`: every bucket that meets the window, oldest first, empty ones included.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub buckets: Vec<AnalyticsBucket>,
    /// `totals`: the buckets' counts summed.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub totals: AnalyticsTotals,
}

/// One bucket: what happened from `timestamp` to the next bucket, inside the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AnalyticsBucket {
    /// `timestamp`: the bucket's start, ISO-8601 UTC.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub timestamp: String,
    /// Retained messages created then.
    pub ingested: u64,
    /// Dead-letter records filed then.
    pub dead_lettered: u64,
}

/// The counts of every bucket summed (MGMT-13).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(description = ""))]
pub struct AnalyticsTotals {
    /// `ingested`: retained messages created in the window.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub ingested: u64,
    /// `deadLettered`: dead-letter records filed in the window.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub dead_lettered: u64,
}

impl Analytics {
    /// The answer from the window and each bucket's counts, by bucket start.
    pub fn of(
        (from, to): (Millis, Millis),
        interval: Interval,
        starts: &[Millis],
        counts: impl Fn(Millis) -> (u64, u64),
    ) -> Analytics {
        let buckets: Vec<AnalyticsBucket> = starts
            .iter()
            .map(|&b| {
                let (ingested, dead_lettered) = counts(b);
                AnalyticsBucket {
                    timestamp: format_iso(b),
                    ingested,
                    dead_lettered,
                }
            })
            .collect();
        let totals = AnalyticsTotals {
            ingested: buckets.iter().map(|b| b.ingested).sum(),
            dead_lettered: buckets.iter().map(|b| b.dead_lettered).sum(),
        };
        Analytics {
            from: format_iso(from),
            to: format_iso(to),
            interval,
            buckets,
            totals,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Millis = 3_600_000;

    #[test]
    fn buckets_are_aligned_in_utc_and_meet_the_window() {
        let from = 10 * H + 1;
        assert_eq!(
            buckets(from, 12 * H, Interval::Hour).unwrap(),
            [10 * H, 11 * H]
        );
        assert_eq!(
            buckets(from, 12 * H + 1, Interval::Hour).unwrap(),
            [10 * H, 11 * H, 12 * H]
        );
        assert_eq!(buckets(-1, 1, Interval::Day).unwrap(), [-24 * H, 0]);
    }

    #[test]
    fn empty_and_oversized_windows_are_refused() {
        assert_eq!(buckets(5, 5, Interval::Hour).unwrap_err().status, 400);
        assert_eq!(buckets(6, 5, Interval::Hour).unwrap_err().status, 400);
        let limit = MAX_ANALYTICS_BUCKETS * 60_000;
        assert!(buckets(0, limit, Interval::Minute).is_ok());
        assert_eq!(
            buckets(0, limit + 1, Interval::Minute).unwrap_err().status,
            400
        );
    }

    #[test]
    fn the_query_takes_defaults_and_refuses_what_it_cannot_read() {
        let q = |pairs: &[(&str, &str)]| {
            let v: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            AnalyticsQuery::parse(&v)
        };
        let d = q(&[]).unwrap();
        assert_eq!(d.interval, Interval::Hour);
        assert_eq!(d.window(100 * H), (76 * H + 1, 100 * H + 1));
        for bad in [
            &[("interval", "week")][..],
            &[("from", "yesterday")],
            &[("to", "2026-13-01T00:00:00Z")],
            &[
                ("from", "2026-01-02T00:00:00Z"),
                ("to", "2026-01-01T00:00:00Z"),
            ],
            &[
                ("from", "2026-01-01T00:00:00Z"),
                ("to", "2026-03-01T00:00:00Z"),
                ("interval", "minute"),
            ],
        ] {
            assert_eq!(q(bad).unwrap_err().status, 400, "{bad:?}");
        }
        let kept = q(&[("namespace", "n")]).unwrap();
        assert!(kept.keeps("n.q", "n", "q") && !kept.keeps("m.q", "m", "q"));
    }
}
