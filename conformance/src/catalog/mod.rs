//! The catalog: every named case, by part of the protocol. At least one case per rule
//! id of PROTOCOL.md (a unit test holds the catalog to that).
//!
//! Each case is an async function over a [`Session`](crate::session::Session); the
//! session checks every exchange against the reference model, so a case only steers
//! the broker into the state it is about and adds the assertions the model cannot
//! make (wake-up times, "this scenario really happened").

mod ack;
mod admin;
mod auth;
mod bad_input;
mod configure;
mod dlq;
mod lease;
mod manage;
mod outage;
mod pop;
mod push;
mod retention;
mod txn;

use crate::case::Case;

/// Registers async case functions with their id, rules, level and capability:
/// `f: "id", [RULE_1], Seed, Core, needs [Configure], alone = true;` (`alone`: the
/// case touches broker-wide state and runs by itself).
macro_rules! cases {
    ($( $f:ident : $id:literal, [$($r:ident),*], $lvl:ident, $cap:ident
        $(, needs [$($n:ident),*])? $(, alone = $alone:literal)?
        $(, one_broker = $one:literal)? ;)*) => {
        vec![$({
            #[allow(unused_mut)]
            let mut c = $crate::case::Case::new(
                $id,
                &[$($crate::rules::$r),*],
                $crate::rules::Level::$lvl,
                $crate::case::Capability::$cap,
                |s| Box::pin($f(s)),
            );
            $( c = c.needs(&[$($crate::case::Capability::$n),*]); )?
            $( if $alone { c = c.exclusive(); } )?
            $( c.one_broker = $one; )?
            c
        }),*]
    };
}
pub(crate) use cases;

/// Every case, in catalog order.
pub fn all() -> Vec<Case> {
    let mut v = Vec::new();
    v.extend(push::cases());
    v.extend(pop::cases());
    v.extend(ack::cases());
    v.extend(lease::cases());
    v.extend(dlq::cases());
    v.extend(txn::cases());
    v.extend(configure::cases());
    v.extend(admin::cases());
    v.extend(manage::cases());
    v.extend(bad_input::cases());
    v.extend(outage::cases());
    v.extend(auth::cases());
    v.extend(retention::cases());

    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RULES;
    use std::collections::BTreeSet;

    #[test]
    fn every_rule_has_a_case_and_every_case_names_known_rules() {
        let cases = all();
        let mut covered = BTreeSet::new();
        for c in &cases {
            assert!(!c.rules.is_empty(), "{} names no rule", c.id);
            covered.extend(c.rules.iter().copied());
        }
        // The ack evaluation's steps are checked by every ack case, not named by one;
        // operational rules by the server's tests and the fault scenarios.
        let missing: Vec<_> = RULES
            .iter()
            .map(|r| r.id)
            .filter(|id| !covered.contains(id) && !id.as_str().starts_with("ACK-STEP-"))
            .filter(|id| !crate::rules::OPERATIONAL.contains(id))
            .filter(|id| !crate::rules::UNTYPED.contains(id))
            .filter(|id| !crate::rules::UNJUDGED.contains(id))
            .collect();
        assert!(missing.is_empty(), "rules without a case: {missing:?}");
    }

    #[test]
    fn ids_are_unique_and_well_formed() {
        let cases = all();
        let mut seen = BTreeSet::new();
        for c in &cases {
            assert!(seen.insert(c.id), "duplicate case id {}", c.id);
            assert!(
                c.id.contains('/')
                    && c.id.chars().all(|ch| ch.is_ascii_lowercase()
                        || ch.is_ascii_digit()
                        || "-/".contains(ch)),
                "case id {} is not like `ack-2/failure-clamps-later-success`",
                c.id
            );
        }
    }

    /// Every rule id of the spec has one level: no SEED rule's paragraph carries a
    /// PROJECT or OPEN sentence, and no PROJECT rule's a SEED one, so a check that cites
    /// a SEED id enforces a SEED sentence. (A PROJECT rule may name an OPEN point inside
    /// it: neither fails a lax run.)
    #[test]
    fn every_rule_of_the_spec_has_one_level() {
        let text = crate::version::SPEC_TEXT;
        let markers = ["[SEED", "[PROJECT", "[OPEN"];
        // A rule is its list item: from "- ID [LEVEL]" to the next item or heading.
        let mut mixed = Vec::new();
        let mut rule: Option<(String, String)> = None;
        let mut check = |r: &Option<(String, String)>| {
            if let Some((id, para)) = r {
                let n = |m: &str| para.matches(m).count();
                let seed = n("[SEED");
                let other = n("[PROJECT") + n("[OPEN");
                if (seed > 0 && other > 0) || seed > 1 {
                    mixed.push(format!("{id}: {seed} SEED and {other} other markers"));
                }
            }
        };
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let opens = line.starts_with("- ")
                && words
                    .get(2)
                    .is_some_and(|w| markers.iter().any(|m| w.starts_with(m)));
            if opens || !line.starts_with("  ") {
                check(&rule);
                rule = opens.then(|| (words[1].to_string(), line.to_string()));
            } else if let Some((_, para)) = &mut rule {
                para.push_str(line);
            }
        }
        check(&rule);
        assert!(
            mixed.is_empty(),
            "rules with more than one level: {mixed:?}"
        );
    }

    /// The rule list matches the repository's normative spec, `spec/PROTOCOL.md`.
    #[test]
    fn rule_table_matches_the_spec() {
        let text = crate::version::SPEC_TEXT;
        // A rule id opens a list item ("- ACK-2 [SEED] ...") or carries a level marker
        // inline ("(PROTO-GROUP-1 [SEED])").
        let is_id = |t: &str| {
            t.contains('-')
                && t.starts_with(|c: char| c.is_ascii_uppercase())
                && t.ends_with(|c: char| c.is_ascii_digit())
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
        };
        let mut ids = BTreeSet::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (k, w) in words.iter().enumerate() {
                let t = w.trim_start_matches('(');
                let marked = words.get(k + 1).is_some_and(|n| {
                    ["[SEED]", "[PROJECT]", "[OPEN]"]
                        .iter()
                        .any(|m| n.starts_with(m))
                });
                let item = k == 1 && words[0] == "-";
                if is_id(t) && (marked || item) {
                    ids.insert(t.to_string());
                }
            }
        }
        // The steps of section 4's evaluation are numbered there, not given ids.
        let ours: BTreeSet<String> = RULES
            .iter()
            .map(|r| r.id.to_string())
            .filter(|id| !id.starts_with("ACK-STEP-"))
            .collect();
        assert_eq!(ids, ours, "rule ids in PROTOCOL.md vs rules.rs");
    }
}
