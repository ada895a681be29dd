//! Time as data.
//!
//! The model never reads a clock: every operation is told what time it is. Against a
//! live broker that time is only known to lie between sending a request and reading
//! its answer (PROTOCOL.md section 13), so a moment is a closed interval of
//! milliseconds, [`Stamp`]. A deterministic engine uses exact stamps (`lo == hi`).
//! Deadlines derived from an uncertain "now" (lease deadlines, retry delays) are
//! uncertain by the same amount, and comparisons between uncertain moments are
//! three-valued ([`Tri`]); the caller decides how to branch on `Maybe`.
//!
//! What feeds the model its time (an engine serving requests, a client timing them) reads
//! the wall clock through [`wall_clock_ms`], the workspace's one reader of it; nothing in
//! `model` or `checker` calls it (a test holds that).

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// Milliseconds since the Unix epoch, the unit of every time in the model.
pub type Millis = i64;

/// The wall clock in milliseconds since the Unix epoch (0 before it), for engines and
/// clients that tell the model what time it is; the model itself never calls it.
pub fn wall_clock_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

/// A moment known to lie in `[lo, hi]` (milliseconds, both ends included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stamp {
    /// The earliest the moment may be, in milliseconds since the Unix epoch.
    pub lo: Millis,
    /// The latest the moment may be, in milliseconds since the Unix epoch.
    pub(crate) hi: Millis,
}

/// The answer to a comparison between uncertain moments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tri {
    /// True for every moment the stamps allow.
    Yes,
    /// False for every moment the stamps allow.
    No,
    /// True for some moments the stamps allow and false for others.
    Maybe,
}

impl Stamp {
    /// An exactly known moment.
    pub const fn exact(t: Millis) -> Stamp {
        Stamp { lo: t, hi: t }
    }

    /// A moment somewhere in `[lo, hi]`; the ends are swapped if given backwards.
    pub(crate) fn between(lo: Millis, hi: Millis) -> Stamp {
        if lo <= hi {
            Stamp { lo, hi }
        } else {
            Stamp { lo: hi, hi: lo }
        }
    }

    /// Whether the moment is known exactly (`lo == hi`).
    pub(crate) fn is_exact(&self) -> bool {
        self.lo == self.hi
    }

    /// This moment shifted by `ms` (a deadline `now + duration`).
    pub(crate) fn plus(&self, ms: Millis) -> Stamp {
        Stamp {
            lo: self.lo.saturating_add(ms),
            hi: self.hi.saturating_add(ms),
        }
    }

    /// Whether this moment is strictly before `other`.
    pub(crate) fn before(&self, other: &Stamp) -> Tri {
        if self.hi < other.lo {
            Tri::Yes
        } else if self.lo >= other.hi {
            Tri::No
        } else {
            Tri::Maybe
        }
    }

    /// Whether `t` (an exact time, e.g. parsed from an answer) can be this moment,
    /// allowing `slack` milliseconds either side.
    pub(crate) fn admits(&self, t: Millis, slack: Millis) -> bool {
        t >= self.lo.saturating_sub(slack) && t <= self.hi.saturating_add(slack)
    }

    /// The smallest moment holding both, when together they leave no gap (they overlap
    /// or touch): then "in `self` or in `other`" is exactly "in the hull".
    pub(crate) fn hull(&self, other: &Stamp) -> Option<Stamp> {
        let gapless = self.lo.max(other.lo) <= self.hi.min(other.hi).saturating_add(1);
        gapless.then(|| Stamp {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        })
    }

    /// Narrow to what is also known from `other`; keeps `self` if they are disjoint
    /// (the caller has already decided they are consistent).
    pub(crate) fn intersect(&self, other: &Stamp) -> Stamp {
        let lo = self.lo.max(other.lo);
        let hi = self.hi.min(other.hi);
        if lo <= hi {
            Stamp { lo, hi }
        } else {
            *self
        }
    }
}

/// Formats milliseconds as ISO-8601 UTC with a literal `Z` (POP-12), millisecond precision.
pub fn format_iso(t: Millis) -> String {
    match Utc.timestamp_millis_opt(t).single() {
        Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => "1970-01-01T00:00:00.000Z".to_string(),
    }
}

/// Parses an ISO-8601 / RFC 3339 timestamp to milliseconds, truncating finer digits.
/// A missing offset is read as UTC, the way PostgreSQL's `timestamptz` input does for
/// a session at UTC. Returns `None` for anything else (POP-13: ignored, not an error).
pub fn parse_iso(s: &str) -> Option<Millis> {
    parse_any_iso(s).filter(|ms| (MIN_USABLE_MS..=MAX_USABLE_MS).contains(ms))
}

/// The first and last millisecond of the years 0001 to 9999: a time outside them has
/// no four-digit ISO-8601 year, and PostgreSQL's range ends not far beyond, so it is
/// as unusable as an unparseable one (POP-13).
const MIN_USABLE_MS: Millis = -62_135_596_800_000;
const MAX_USABLE_MS: Millis = 253_402_300_799_999;

fn parse_any_iso(s: &str) -> Option<Millis> {
    let s = s.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.timestamp_millis());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
    ] {
        if let Ok(naive) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(naive.and_utc().timestamp_millis());
        }
    }
    if let Ok(dt) = DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f%#z") {
        return Some(dt.timestamp_millis());
    }
    None
}

/// Whether a timestamp string from an answer has the required shape: ISO-8601 UTC
/// ending in a literal `Z` (POP-12).
pub fn is_iso_utc_z(s: &str) -> bool {
    s.ends_with('Z') && DateTime::parse_from_rfc3339(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_exact_only_when_it_is_one_instant() {
        assert!(Stamp::exact(5).is_exact());
        assert!(!Stamp::between(5, 6).is_exact());
        assert_eq!(
            Stamp::between(6, 5),
            Stamp::between(5, 6),
            "ends in either order"
        );
    }

    /// POP-13: a time outside the years 0001 to 9999 is ignored like an unparseable one.
    #[test]
    fn pop_13_a_time_outside_four_digit_years_is_unusable() {
        assert_eq!(parse_iso("-200000-01-01T00:00:00"), None);
        assert_eq!(parse_iso("+200000-01-01T00:00:00Z"), None);
        assert_eq!(parse_iso("0001-01-01T00:00:00Z"), Some(MIN_USABLE_MS));
        assert_eq!(parse_iso("9999-12-31T23:59:59.999Z"), Some(MAX_USABLE_MS));
    }

    #[test]
    fn iso_round_trip_and_shape() {
        let t = 1_785_402_161_118; // 2026-07-30T09:02:41.118Z
        let s = format_iso(t);
        assert!(is_iso_utc_z(&s), "{s}");
        assert_eq!(parse_iso(&s), Some(t));
        assert_eq!(
            parse_iso("2026-07-30T11:02:44.512873Z"),
            Some(parse_iso("2026-07-30T11:02:44.512Z").unwrap())
        );
        assert_eq!(parse_iso("yesterday"), None);
        assert!(!is_iso_utc_z("2026-07-30T11:02:44+02:00"));
    }

    #[test]
    fn comparisons_are_three_valued() {
        let a = Stamp::between(10, 20);
        assert_eq!(a.before(&Stamp::exact(21)), Tri::Yes);
        assert_eq!(a.before(&Stamp::exact(10)), Tri::No);
        assert_eq!(a.before(&Stamp::exact(15)), Tri::Maybe);
        assert_eq!(Stamp::exact(5).before(&Stamp::exact(5)), Tri::No);
        assert_eq!(a.plus(5), Stamp::between(15, 25));
        assert!(a.admits(22, 2) && !a.admits(23, 2));
    }
}
