//! `--expect-failures FILE`: case ids a broker is known to fail. Listed cases may fail
//! without failing the run; a listed case that passes fails the run as stale, so the
//! file never hides a fixed bug; `--fix` rewrites the file to what failed.
//!
//! Format: one case id per line; `#` starts a comment. The property run is
//! `lockstep/property-run`.

use std::collections::BTreeSet;
use std::path::Path;

/// Reads the listed ids.
pub fn load(path: &Path) -> std::io::Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Writes `ids` (what failed in this run) as the new expectation file.
pub fn write(path: &Path, ids: &BTreeSet<String>) -> std::io::Result<()> {
    let mut s = String::from(
        "# Expected failures for queen-conformance (--expect-failures).\n\
         # Listed cases may fail; a listed case that passes fails the run (stale entry).\n\
         # Rewritten by --fix.\n",
    );
    for id in ids {
        s.push_str(id);
        s.push('\n');
    }
    std::fs::write(path, s)
}
