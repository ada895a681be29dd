//! The analytics view (PROTOCOL.md MGMT-13): counts per bucket from the times the state
//! holds, when those times are uncertain.
//!
//! The model knows a message's `createdAt` only as the interval of its push, and "now"
//! only as the interval of the read. Where "now" decides the answer's shape (whether a
//! window with a default end is empty or too long, which bucket the end falls in), the
//! [`Ctx`] chooses, so a checker explores each possibility. Where a message's own time
//! straddles a bucket's edge, that bucket's count is left open (`sym::any`) rather
//! than multiplying worlds per message.

use super::state::State;
use super::views::sym;
use crate::choice::Ctx;
use crate::time::{Millis, Stamp};
use crate::wire::*;
use serde_json::Value;

/// Whether a moment lies in `[lo, hi)`: `Some` when it is certain either way.
fn inside(t: Stamp, lo: Stamp, hi: Stamp) -> Option<bool> {
    if lo.hi <= t.lo && t.hi < hi.lo {
        Some(true)
    } else if t.hi < lo.lo || t.lo >= hi.hi {
        Some(false)
    } else {
        None
    }
}

/// Counts the moments certainly in `[lo, hi)`; `None` when one of them may or may not be.
fn count(times: &[Stamp], lo: Stamp, hi: Stamp) -> Option<u64> {
    times.iter().try_fold(0u64, |n, t| {
        inside(*t, lo, hi).map(|yes| n + u64::from(yes))
    })
}

/// Per bucket, the moments of the window `[from, to)` in it: `None` for a bucket that one
/// of them may or may not fall in. One pass over the moments, whatever the buckets.
fn tally(
    times: &[Stamp],
    (from, to): (Stamp, Stamp),
    starts: &[Millis],
    interval: Interval,
) -> Vec<Option<u64>> {
    let mut counts = vec![Some(0u64); starts.len()];
    let last = starts.len() as i64 - 1;
    let index =
        |t: Millis| ((interval.floor(t) - starts[0]) / interval.millis()).clamp(0, last) as usize;
    for t in times {
        let (a, b) = (index(t.lo), index(t.hi));
        match inside(*t, from, to) {
            Some(false) => {}
            Some(true) if a == b => counts[a] = counts[a].map(|n| n + 1),
            _ => counts[a..=b].iter_mut().for_each(|c| *c = None),
        }
    }
    counts
}

/// Narrows "now" until the bucket holding `now + off` is known, and returns its start.
fn settle_floor(ctx: &mut Ctx, off: Millis, interval: Interval) -> Millis {
    let low = interval.floor(ctx.now.lo + off);
    let mut edge = interval.floor(ctx.now.hi + off);
    while edge > low {
        if ctx.reached(Stamp::exact(edge - off)) {
            return edge;
        }
        edge -= interval.millis();
    }
    low
}

/// The window's ends as stamps, with "now" narrowed so that its buckets are known; the
/// 400 when the window is empty or too long.
fn window(q: &AnalyticsQuery, ctx: &mut Ctx) -> Result<(Stamp, Stamp, Vec<Millis>), WireError> {
    if let (Some(from), None) = (q.from, q.to) {
        // The default end is just after now: the window is empty unless now reached `from`.
        if !ctx.reached(Stamp::exact(from)) {
            return Err(buckets(from, from, q.interval).unwrap_err());
        }
    }
    if q.to.is_none() {
        // The last bucket holds now; the first, when `from` is the default, now + 1 - 24 h.
        settle_floor(ctx, 0, q.interval);
        if q.from.is_none() {
            settle_floor(ctx, 1 - DEFAULT_ANALYTICS_WINDOW, q.interval);
        }
    }
    let to = q.to.map_or(ctx.now.plus(1), Stamp::exact);
    let from = q
        .from
        .map_or(to.plus(-DEFAULT_ANALYTICS_WINDOW), Stamp::exact);
    // Every choice inside the stamps gives the same buckets now; any one stands for all.
    let starts = buckets(from.lo, to.hi, q.interval)?;
    Ok((from, to, starts))
}

/// The createdAt of every retained message and the filing time of every dead letter, of
/// the queues the query keeps to.
fn times(st: &State, q: &AnalyticsQuery) -> (Vec<Stamp>, Vec<Stamp>) {
    let kept = |queue: &str| {
        st.queues
            .get(queue)
            .is_some_and(|x| q.keeps(&x.name, &x.namespace, &x.task))
    };
    let created = st
        .live_partitions()
        .filter(|p| kept(&p.queue))
        .flat_map(|p| p.retained_after(p.floor).map(|o| st.created(p.at(o))))
        .collect();
    let filed = st
        .dead_letters
        .iter()
        .filter(|d| st.part(d.part).is_some_and(|p| kept(&p.queue)))
        .map(|d| d.failed_at)
        .collect();
    (created, filed)
}

/// MGMT-13's answer, with an open count wherever a time straddles an edge.
pub(crate) fn analytics(st: &State, q: &AnalyticsQuery, ctx: &mut Ctx) -> Result<Value, WireError> {
    let (from, to, starts) = window(q, ctx)?;
    let (created, filed) = times(st, q);
    let ingested = tally(&created, (from, to), &starts, q.interval);
    let dead = tally(&filed, (from, to), &starts, q.interval);
    let mut view = Analytics::of((from.lo, to.lo), q.interval, &starts, |b| {
        let i = ((b - starts[0]) / q.interval.millis()) as usize;
        (ingested[i].unwrap_or(0), dead[i].unwrap_or(0))
    });
    view.from = sym::time(from);
    view.to = sym::time(to);
    let mut v = serde_json::to_value(&view).expect("views serialize");
    for (i, start) in starts.iter().enumerate() {
        let b = &mut v["buckets"][i];
        b["timestamp"] = Value::String(sym::time(Stamp::exact(*start)));
        open_unless(&mut b["ingested"], ingested[i]);
        open_unless(&mut b["deadLettered"], dead[i]);
    }
    open_unless(&mut v["totals"]["ingested"], count(&created, from, to));
    open_unless(&mut v["totals"]["deadLettered"], count(&filed, from, to));
    Ok(v)
}

/// Writes a count that is certain, or the symbol that allows any.
fn open_unless(slot: &mut Value, n: Option<u64>) {
    *slot = n.map_or_else(|| Value::String(sym::any()), Value::from);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_a_time_may_fall_in_or_not_is_open() {
        let w = (Stamp::exact(0), Stamp::exact(180_000));
        let starts = [0, 60_000, 120_000];
        let times = [
            Stamp::between(10, 20),
            Stamp::between(59_990, 60_010),
            Stamp::between(130_000, 130_001),
            Stamp::between(179_990, 180_010),
        ];
        assert_eq!(
            tally(&times, w, &starts, Interval::Minute),
            [None, None, None],
            "an edge between the first two, the window's end in the last"
        );
        assert_eq!(
            tally(&times[..1], w, &starts, Interval::Minute),
            [Some(1), Some(0), Some(0)]
        );
        assert_eq!(count(&times[..3], w.0, w.1), Some(3));
    }

    #[test]
    fn a_time_on_an_edge_is_open_and_one_clear_of_it_is_counted() {
        let (lo, hi) = (Stamp::exact(100), Stamp::exact(200));
        assert_eq!(count(&[Stamp::between(120, 130)], lo, hi), Some(1));
        assert_eq!(count(&[Stamp::between(200, 230)], lo, hi), Some(0));
        assert_eq!(count(&[Stamp::between(90, 99)], lo, hi), Some(0));
        assert_eq!(count(&[Stamp::between(190, 210)], lo, hi), None);
        assert_eq!(count(&[Stamp::between(90, 110)], lo, hi), None);
    }
}
