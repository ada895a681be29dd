//! Rounds into figures: every workload's median and range over the rounds, every broker
//! figure as a ratio to the database's limits measured in the same round, and the
//! targets a release is held to, each with its verdict.
//!
//! Ratios are taken round by round (a broker figure over the ceiling measured just before
//! it), then their median: a machine that slows down for a round slows both sides of the
//! ratio, which is why the ceiling runs alternate with the broker's.

use crate::report::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;

/// The ceiling figures a broker figure is divided by.
pub const BULK_LIMIT: &str = "pg-ceiling-copy-4s";
pub const FLUSH_LIMIT: &str = "pg-flush";
pub const SINGLE_ROW_LIMIT: &str = "pg-ceiling-insert-1";
pub const CONSUME_LIMIT: &str = "pg-ceiling-consume";

/// A median with the range it came from.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

impl Spread {
    /// `None` for no values (NaNs are left out: a figure a round could not measure).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            rounds: n,
        })
    }
}

/// One round's outcomes by workload name.
pub struct Round<'a>(BTreeMap<&'a str, &'a Outcome>);

impl<'a> Round<'a> {
    pub fn new(outcomes: &'a [Outcome]) -> Self {
        Round(outcomes.iter().map(|o| (o.workload.as_str(), o)).collect())
    }

    fn value(&self, workload: &str) -> Option<f64> {
        self.0.get(workload).map(|o| o.value)
    }

    fn detail(&self, workload: &str, key: &str) -> Option<f64> {
        self.0.get(workload)?.details.get(key)?.as_f64()
    }

    fn ratio(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.value(a)? / self.value(b)?)
    }
}

/// A workload's figure over the rounds, with its ratios to the limits.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub workload: String,
    pub unit: String,
    pub value: Spread,
    /// Over the 4-session COPY rate (throughput workloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_bulk_limit: Option<Spread>,
    /// Over the flush rate (throughput workloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_flush_limit: Option<Spread>,
}

/// What a target compares.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    AtLeast,
    AtMost,
}

/// One target: a figure computed from each round, and the bound its median must meet.
#[derive(Debug, Serialize)]
pub struct Verdict {
    pub target: &'static str,
    pub bound: Bound,
    pub limit: f64,
    pub unit: &'static str,
    pub measured: Option<Spread>,
    /// `None` when a round lacked what the target needs (a workload not run).
    pub met: Option<bool>,
}

type Measure = fn(&Round) -> Option<f64>;

/// Every target: its name, how a round measures it, its bound and unit.
fn targets() -> Vec<(&'static str, Measure, Bound, f64, &'static str)> {
    use Bound::*;
    vec![
        (
            "push batch 100 / COPY 4 sessions",
            |r| r.ratio("push-batch", BULK_LIMIT),
            AtLeast,
            1.0,
            "×",
        ),
        (
            "push single / single-row INSERT",
            |r| r.ratio("push-single", SINGLE_ROW_LIMIT),
            AtLeast,
            2.0,
            "×",
        ),
        (
            "consume / raw-SQL consume (claim + ack, both flushed)",
            |r| r.ratio("consume", CONSUME_LIMIT),
            AtLeast,
            0.8,
            "×",
        ),
        (
            "consume / push batch 100",
            |r| r.ratio("consume", "push-batch"),
            AtLeast,
            0.6,
            "×",
        ),
        (
            "wake-up p99 after the push's answer, 200 ms parked",
            |r| r.detail("wake-latency-200ms", "after_push_p99_ms"),
            AtMost,
            3.0,
            "ms",
        ),
        (
            "wake-up p99 after the push's answer, 2 s parked",
            |r| r.detail("wake-latency-2000ms", "after_push_p99_ms"),
            AtMost,
            3.0,
            "ms",
        ),
        (
            "wake-up p99 end to end over push p99, 200 ms parked",
            |r| end_to_end_excess(r, "wake-latency-200ms"),
            AtMost,
            2.0,
            "ms",
        ),
        (
            "wake-up p99 end to end over push p99, 2 s parked",
            |r| end_to_end_excess(r, "wake-latency-2000ms"),
            AtMost,
            2.0,
            "ms",
        ),
        (
            "parked polls not woken",
            |r| Some(r.detail("parked-polls", "polls")? - r.value("parked-polls")?),
            AtMost,
            0.0,
            "polls",
        ),
        (
            "database connections with the polls parked",
            |r| r.detail("parked-polls", "db_connections"),
            AtMost,
            10.0,
            "conns",
        ),
        (
            "broker RSS with the polls parked",
            |r| r.detail("parked-polls", "server_rss_mib"),
            AtMost,
            150.0,
            "MiB",
        ),
        (
            "conformance suite, catalog and strict lockstep 24×40",
            |r| r.value("suite"),
            AtMost,
            60.0,
            "s",
        ),
        (
            "per-pop rate, 1 message in each of many partitions / one partition",
            |r| r.ratio("drain-many-partitions", "drain-one-partition"),
            AtLeast,
            1.0,
            "×",
        ),
    ]
}

/// The wake-up's end-to-end p99 minus the push's own p99.
fn end_to_end_excess(r: &Round, workload: &str) -> Option<f64> {
    Some(r.detail(workload, "p99_ms")? - r.detail(workload, "push_p99_ms")?)
}

/// The figures of every workload (in the order first run) and the targets' verdicts.
pub fn summarize(rounds: &[Vec<Outcome>]) -> (Vec<Figure>, Vec<Verdict>) {
    let views: Vec<Round> = rounds.iter().map(|r| Round::new(r)).collect();
    let mut names: Vec<(&str, &str)> = Vec::new();
    for o in rounds.iter().flatten() {
        if !names.iter().any(|(n, _)| *n == o.workload) {
            names.push((&o.workload, &o.unit));
        }
    }
    let figures = names
        .into_iter()
        .filter_map(|(name, unit)| {
            let value = Spread::of(views.iter().filter_map(|r| r.value(name)))?;
            let throughput = unit == "msgs/s";
            let ratio_to = |limit: &str| {
                throughput
                    .then(|| Spread::of(views.iter().filter_map(|r| r.ratio(name, limit))))
                    .flatten()
            };
            Some(Figure {
                workload: name.to_string(),
                unit: unit.to_string(),
                value,
                to_bulk_limit: ratio_to(BULK_LIMIT),
                to_flush_limit: ratio_to(FLUSH_LIMIT),
            })
        })
        .collect();
    let verdicts = targets()
        .into_iter()
        .map(|(target, measure, bound, limit, unit)| {
            let measured = Spread::of(views.iter().filter_map(measure));
            let met = measured.as_ref().map(|m| match bound {
                Bound::AtLeast => m.median >= limit,
                Bound::AtMost => m.median <= limit,
            });
            Verdict {
                target,
                bound,
                limit,
                unit,
                measured,
                met,
            }
        })
        .collect();
    (figures, verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn o(workload: &str, value: f64, unit: &str) -> Outcome {
        Outcome {
            workload: workload.into(),
            value,
            unit: unit.into(),
            details: json!({}),
        }
    }

    #[test]
    fn medians_and_ranges_ignore_unmeasured_rounds() {
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]).unwrap(),
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0,
                rounds: 3
            }
        );
        assert_eq!(Spread::of([4.0, f64::NAN, 2.0]).unwrap().median, 3.0);
        assert!(Spread::of([f64::NAN]).is_none());
    }

    #[test]
    fn ratios_are_taken_round_by_round_then_their_median() {
        // Round 1: push 100 over COPY 200 = 0.5; round 2: 300 over 200 = 1.5; round 3: 1.0.
        let rounds: Vec<Vec<Outcome>> = [(100.0, 200.0), (300.0, 200.0), (100.0, 100.0)]
            .iter()
            .map(|&(push, copy)| {
                vec![
                    o(BULK_LIMIT, copy, "rows/s"),
                    o(FLUSH_LIMIT, 50.0, "commits/s"),
                    o("push-batch", push, "msgs/s"),
                ]
            })
            .collect();
        let (figures, verdicts) = summarize(&rounds);
        let push = figures.iter().find(|f| f.workload == "push-batch").unwrap();
        assert_eq!(push.to_bulk_limit.as_ref().unwrap().median, 1.0);
        assert_eq!(push.to_flush_limit.as_ref().unwrap().max, 6.0);
        assert!(figures
            .iter()
            .find(|f| f.workload == BULK_LIMIT)
            .unwrap()
            .to_bulk_limit
            .is_none());
        let v = verdicts
            .iter()
            .find(|v| v.target.starts_with("push batch"))
            .unwrap();
        assert_eq!(v.met, Some(true));
        // A target whose workloads did not run has no verdict.
        assert!(verdicts
            .iter()
            .find(|v| v.target.starts_with("consume"))
            .unwrap()
            .met
            .is_none());
    }
}
