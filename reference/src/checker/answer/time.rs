//! The times an answer shows (POP-12). The format is only what the broker says, so a
//! wrong one is soft; the value must lie in the interval the request was handled in,
//! and is handed back so the caller can narrow the model's uncertain times.

use super::cx::Cx;
use super::Miss;
use crate::finding::{Finding, Kind};
use crate::rules::*;
use crate::time::{format_iso, is_iso_utc_z, parse_iso, Stamp};

/// A time's format (POP-12: ISO-8601 UTC with a literal Z, soft), and its value if it
/// parses at all.
pub(super) fn check_format(cx: &mut Cx, actual: &str, path: &str) -> Result<Option<i64>, Miss> {
    if !is_iso_utc_z(actual) {
        cx.soft(
            Finding::new(
                POP_12,
                Kind::Value,
                "a time is not ISO-8601 UTC with a literal Z",
            )
            .at(path.to_string())
            .example(actual.to_string()),
        )?;
    }
    Ok(parse_iso(actual))
}

pub(super) fn check_time(
    cx: &mut Cx,
    actual: &str,
    s: Stamp,
    path: &str,
) -> Result<Option<i64>, Miss> {
    let Some(t) = check_format(cx, actual, path)? else {
        return Ok(None);
    };
    if s.admits(t, 1) {
        return Ok(Some(t));
    }
    cx.soft(
        Finding::new(
            POP_12,
            Kind::Value,
            "a time lies outside the interval the request was handled in",
        )
        .at(path.to_string())
        .example(format!(
            "{actual} outside [{}, {}]",
            format_iso(s.lo),
            format_iso(s.hi)
        )),
    )?;
    Ok(None)
}
