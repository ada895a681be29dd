//! `--expect-failures FILE`: case ids a broker is known to fail, and deviations it is
//! known to have. Listed cases may fail without failing the run; a listed case that
//! passes fails the run as stale, so the file never hides a fixed bug; `--fix` rewrites
//! the file to what failed, keeping its `accept` lines.
//!
//! Format: one case id per line, or `accept RULE-ID[:kind]` (as `--accept`: that
//! deviation is allowed everywhere, so every other rule is still checked); `#` starts a
//! comment. The property run is `lockstep/property-run`.

use queen_reference::finding::Accept;
use std::collections::BTreeSet;
use std::path::Path;

/// What an expectations file lists.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    /// Ids of the cases expected to fail.
    pub cases: BTreeSet<String>,
    /// Findings accepted: they do not fail the run.
    pub accept: Vec<Accept>,
}

/// Reads the listed ids and accepted deviations.
pub fn load(path: &Path) -> Result<Expectations, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut out = Expectations::default();
    for (n, line) in text.lines().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        match l.strip_prefix("accept ") {
            Some(a) => out
                .accept
                .push(Accept::parse(a).map_err(|e| format!("line {}: {e}", n + 1))?),
            None => {
                out.cases.insert(l.to_string());
            }
        }
    }
    Ok(out)
}

/// Writes `ids` (what failed in this run) and `accept` as the new expectation file.
pub fn write(path: &Path, ids: &BTreeSet<String>, accept: &[Accept]) -> std::io::Result<()> {
    let mut s = String::from(
        "# Expected failures for queen-conformance (--expect-failures).\n\
         # Listed cases may fail; a listed case that passes fails the run (stale entry).\n\
         # `accept RULE-ID[:kind]` allows a known deviation everywhere (as --accept).\n\
         # Rewritten by --fix.\n",
    );
    for a in accept {
        s.push_str(&format!("accept {a}\n"));
    }
    for id in ids {
        s.push_str(id);
        s.push('\n');
    }
    std::fs::write(path, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_lines_and_case_ids_round_trip() {
        let p = std::env::temp_dir().join(format!("expect-{}.txt", std::process::id()));
        std::fs::write(&p, "push-1/x  # flaky\naccept PUSH-1:status\n\n").unwrap();
        let e = load(&p).unwrap();
        assert_eq!(e.cases.iter().collect::<Vec<_>>(), vec!["push-1/x"]);
        assert_eq!(e.accept[0].to_string(), "PUSH-1:status");
        write(&p, &e.cases, &e.accept).unwrap();
        let again = load(&p).unwrap();
        assert_eq!((again.cases, again.accept), (e.cases, e.accept));
        std::fs::write(&p, "accept NOPE-1\n").unwrap();
        assert!(load(&p).unwrap_err().contains("line 1"));
        let _ = std::fs::remove_file(&p);
    }
}
