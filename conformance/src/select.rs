//! Which entries a run covers (`run --only`, `--rule`, `--skip`): a broker author
//! re-running the cases of one rule, or leaving out a family their broker does not
//! offer yet, needs a selection that means exactly what it says. A substring match
//! (`pop-1` also picking `pop-10`) or an id that silently selects nothing would make a
//! CI job pass for the wrong reason, so every selector is exact and must select
//! something; an entry left out by the selection is not in the reports at all (it is not
//! "skipped": skipped means selected but not runnable against this broker).
//!
//! A selector is one of:
//! - a case id (`ack-6/retry-spends-no-retry-budget`), exactly;
//! - a family (`ack-6`, or `ack-6/`): every case whose id starts with `ack-6/`;
//! - a pattern with `*` (`ack-*/retry-*`), matched against the whole id;
//! - `rule:ACK-6`: every case citing the rule;
//! - `capability:dedup`: every case using the capability;
//! - `level:seed`: every case at that level.
//!
//! Case ids, families and patterns also select the two entries that are not catalog
//! cases: `lockstep/property-run` (family `lockstep`) and
//! `concurrent/linearizable-and-drained` (family `concurrent`). Rule, capability and
//! level selectors select catalog cases only. Matching ignores case.

use crate::case::{Capability, Case};
use crate::rules::{Level, RuleId};

/// One `--only`/`--skip` value.
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    /// A case id, family or pattern, lower-cased; `*` matches any run of characters.
    Id(String),
    /// A PROTOCOL.md rule id.
    Rule(RuleId),
    /// A capability.
    Capability(Capability),
    /// A level.
    Level(Level),
}

/// What an entry offers a selector to match on.
pub struct Entry<'a> {
    /// The entry's id.
    pub id: &'a str,
    /// The rule ids it checks.
    pub rules: &'a [RuleId],
    /// The level of its rules (`None`: no level, as for the property run).
    pub level: Option<Level>,
    /// The capabilities it needs.
    pub(crate) capabilities: Vec<Capability>,
}

impl<'a> Entry<'a> {
    /// What a case offers to match on.
    pub fn case(case: &'a Case) -> Entry<'a> {
        Entry {
            id: case.id,
            rules: case.rules,
            level: Some(case.level),
            capabilities: case.capabilities().collect(),
        }
    }

    /// An entry that is not a catalog case (the property run, the concurrent scenario).
    pub fn named(id: &'a str) -> Entry<'a> {
        Entry {
            id,
            rules: &[],
            level: None,
            capabilities: vec![],
        }
    }
}

impl Selector {
    /// Parses one selector; an unknown rule, capability or level is an error.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let s = s.trim();
        let (kind, value) = s.split_once(':').unwrap_or(("", s));
        match kind.to_ascii_lowercase().as_str() {
            "rule" => RuleId::parse(value)
                .map(Selector::Rule)
                .ok_or_else(|| format!("{s}: no rule {value} (see `queen-conformance rules`)")),
            "capability" => Capability::parse(&value.to_ascii_lowercase())
                .map(Selector::Capability)
                .ok_or_else(|| {
                    let all: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
                    format!("{s}: no capability {value} (one of {})", all.join(", "))
                }),
            "level" => Level::ALL
                .into_iter()
                .find(|l| l.as_str().eq_ignore_ascii_case(value))
                .map(Selector::Level)
                .ok_or_else(|| format!("{s}: no level {value} (seed, project or open)")),
            "" if !value.is_empty() => Ok(Selector::Id(value.to_ascii_lowercase())),
            _ => Err(format!(
                "{s}: a selector is a case id, a family (ack-6), a pattern with *, \
                 or rule:ID, capability:NAME, level:LEVEL"
            )),
        }
    }

    /// Whether the entry matches this selector.
    pub fn matches(&self, e: &Entry) -> bool {
        match self {
            Selector::Id(p) => id_matches(p, &e.id.to_ascii_lowercase()),
            Selector::Rule(r) => e.rules.contains(r),
            Selector::Capability(c) => e.capabilities.contains(c),
            Selector::Level(l) => e.level == Some(*l),
        }
    }
}

fn id_matches(pattern: &str, id: &str) -> bool {
    if pattern.contains('*') {
        return glob(pattern.as_bytes(), id.as_bytes());
    }
    match pattern.strip_suffix('/') {
        Some(family) => id.starts_with(family) && id[family.len()..].starts_with('/'),
        None if pattern.contains('/') => pattern == id,
        None => id.starts_with(pattern) && id[pattern.len()..].starts_with('/'),
    }
}

/// Whole-string match where `*` stands for any run of bytes.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// A run's selection: entries matching any `only` selector (every entry when there is
/// none) and no `skip` selector.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// `--only`: when any is given, only entries matching one of them run.
    pub only: Vec<Selector>,
    /// `--skip`: entries matching any of them are left out.
    pub skip: Vec<Selector>,
}

impl Selection {
    /// Every entry.
    pub fn all() -> Selection {
        Selection::default()
    }

    /// Parses the flags' values (each may hold several, comma-separated) and checks
    /// that every selector selects at least one of `entries`, so a typo fails at once.
    pub fn parse(only: &[String], skip: &[String], entries: &[Entry]) -> Result<Selection, String> {
        let parse_all = |flag: &str, values: &[String]| -> Result<Vec<Selector>, String> {
            let mut out = Vec::new();
            for v in values.iter().flat_map(|v| v.split(',')) {
                let sel = Selector::parse(v).map_err(|e| format!("{flag} {e}"))?;
                if !entries.iter().any(|e| sel.matches(e)) {
                    return Err(format!(
                        "{flag} {v} selects nothing (see `queen-conformance list`)"
                    ));
                }
                out.push(sel);
            }
            Ok(out)
        };
        Ok(Selection {
            only: parse_all("--only", only)?,
            skip: parse_all("--skip", skip)?,
        })
    }

    /// [`Selection::parse`] against every entry a run can have: the catalog, the
    /// property run and the concurrent scenario.
    pub fn for_run(only: &[String], skip: &[String]) -> Result<Selection, String> {
        let catalog = crate::catalog::all();
        let mut entries: Vec<Entry> = catalog.iter().map(Entry::case).collect();
        entries.push(Entry::named(crate::lockstep::LOCKSTEP_ID));
        entries.push(Entry::named(crate::concurrent::CONCURRENT_ID));
        Selection::parse(only, skip, &entries)
    }

    /// Whether the entry is selected: matched by `only` (when given) and by no `skip`.
    pub(crate) fn covers(&self, e: &Entry) -> bool {
        (self.only.is_empty() || self.only.iter().any(|s| s.matches(e)))
            && !self.skip.iter().any(|s| s.matches(e))
    }

    /// Whether any entry is left out.
    pub fn is_partial(&self) -> bool {
        !self.only.is_empty() || !self.skip.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules;

    fn ids(sel: &Selection) -> Vec<&'static str> {
        crate::catalog::all()
            .iter()
            .filter(|c| sel.covers(&Entry::case(c)))
            .map(|c| c.id)
            .collect()
    }

    fn entries() -> Vec<Entry<'static>> {
        let all: &'static [Case] = Box::leak(crate::catalog::all().into_boxed_slice());
        all.iter().map(Entry::case).collect()
    }

    fn only(v: &[&str]) -> Result<Selection, String> {
        let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        Selection::parse(&v, &[], &entries())
    }

    #[test]
    fn a_family_is_not_a_prefix_of_another_family() {
        let picked = ids(&only(&["pop-1"]).unwrap());
        assert!(!picked.is_empty());
        assert!(
            picked.iter().all(|id| id.starts_with("pop-1/")),
            "{picked:?}"
        );
        // Upper case, as `rules` prints ids, and a trailing slash mean the same.
        assert_eq!(ids(&only(&["POP-1"]).unwrap()), picked);
        assert_eq!(ids(&only(&["pop-1/"]).unwrap()), picked);
    }

    #[test]
    fn a_case_id_selects_that_case_only() {
        let id = crate::catalog::all()[0].id;
        assert_eq!(ids(&only(&[id]).unwrap()), vec![id]);
    }

    #[test]
    fn a_pattern_matches_the_whole_id() {
        let picked = ids(&only(&["ack-6/retry-*"]).unwrap());
        assert!(picked.len() >= 2, "{picked:?}");
        assert!(picked.iter().all(|id| id.starts_with("ack-6/retry-")));
        assert!(only(&["ack-6/retry-"]).is_err(), "a case id is exact");
    }

    #[test]
    fn rule_capability_and_level_select_what_cases_declare() {
        let by_rule = ids(&only(&["rule:ack-6"]).unwrap());
        let all = crate::catalog::all();
        for c in &all {
            assert_eq!(
                by_rule.contains(&c.id),
                c.rules.contains(&rules::ACK_6),
                "{}",
                c.id
            );
        }
        let dedup = ids(&only(&["capability:dedup"]).unwrap());
        assert!(dedup.iter().all(|id| all
            .iter()
            .any(|c| c.id == *id && c.capabilities().any(|k| k == Capability::Dedup))));
        let open = ids(&only(&["level:OPEN"]).unwrap());
        assert!(!open.is_empty());
        assert!(open
            .iter()
            .all(|id| all.iter().any(|c| c.id == *id && c.level == Level::Open)));
    }

    #[test]
    fn skip_removes_from_what_only_selects() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let sel =
            Selection::parse(&v(&["rule:ACK-6"]), &v(&["ack-6/retry-*"]), &entries()).unwrap();
        let picked = ids(&sel);
        assert!(!picked.is_empty());
        assert!(picked.iter().all(|id| !id.starts_with("ack-6/retry-")));
        let everything_but =
            Selection::parse(&[], &v(&["level:project,level:open"]), &entries()).unwrap();
        let all = crate::catalog::all();
        for c in &all {
            assert_eq!(ids(&everything_but).contains(&c.id), c.level == Level::Seed);
        }
    }

    #[test]
    fn a_selector_that_selects_nothing_or_does_not_parse_is_an_error() {
        for bad in [
            "pop-99",
            "rule:NOPE-1",
            "capability:teleport",
            "level:gold",
            "frob:x",
            "",
        ] {
            let e = only(&[bad]).unwrap_err();
            assert!(e.starts_with("--only"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_property_run_and_the_scenario_are_selected_by_id_only() {
        let lockstep = Entry::named("lockstep/property-run");
        let sel = |s: &str| Selection {
            only: vec![Selector::parse(s).unwrap()],
            skip: vec![],
        };
        assert!(sel("lockstep").covers(&lockstep));
        assert!(sel("lockstep/property-run").covers(&lockstep));
        assert!(!sel("rule:ACK-2").covers(&lockstep));
        assert!(!sel("concurrent").covers(&lockstep));
        assert!(Selection::all().covers(&lockstep));
    }
}
