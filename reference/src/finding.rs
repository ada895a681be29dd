//! Findings: one way a broker departed from the protocol, named by the one rule it breaks.
//!
//! A conformance run against another team's broker is only useful if one departure does
//! not hide the rest. So the checker does not stop at the first answer it dislikes: where
//! the broker's answer differs from every allowed one only in what it *says* (a status
//! code, a missing or mistyped field, an error text, a shape) and what it *did* can still
//! be read, the checker records a [`Finding`] on the world and goes on from the state that
//! matches what the broker did. Only a difference in state ends a check.
//!
//! The same type records the PROJECT alternatives a lax checker explores (a broker that
//! decided a PROJECT point otherwise, [`Kind::Alternative`]), so a report has one list of
//! departures, each at the level of its rule.

use crate::rules::{Level, RuleId};
use serde::Serialize;

/// What kind of departure a finding is. Every kind but [`Kind::Alternative`],
/// [`Kind::Claim`], [`Kind::Cause`], [`Kind::State`] and [`Kind::RouteMissing`] is
/// answer-only: the broker did what the model says and only said it differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Another HTTP status than the rule's, in the same class (2xx for 2xx, 4xx for 4xx).
    Status,
    /// A field the answer must carry is absent.
    MissingField,
    /// A field has another JSON type.
    MistypedField,
    /// A field carries another value than the model's, without another state behind it.
    Value,
    /// An error text differs from the one the rule names.
    ErrorText,
    /// The answer is wrapped or laid out differently (an array for an object, ...).
    Shape,
    /// The route answered 404/405/501: the broker lacks it; nothing was done.
    RouteMissing,
    /// A flag that reports state (`leaseReleased`, `dlq`, `noop`) says otherwise than the
    /// model's outcome; the state itself is judged by what later answers show.
    Flag,
    /// A pop claimed less than the request allowed (a smaller batch or fewer partitions).
    Claim,
    /// A diagnosed cause: a named variant ([`crate::variant::Variant`]) explains what
    /// the broker did where no allowed behaviour does; checking went on under it.
    Cause,
    /// A PROJECT point decided the other way, with the state that follows from it.
    Alternative,
    /// What the broker did differs from every allowed outcome: the case (or lockstep
    /// sequence) ended there, as a divergence.
    State,
}

impl Kind {
    /// Every kind, in report order.
    pub(crate) const ALL: [Kind; 12] = [
        Kind::Status,
        Kind::MissingField,
        Kind::MistypedField,
        Kind::Value,
        Kind::ErrorText,
        Kind::Shape,
        Kind::Flag,
        Kind::RouteMissing,
        Kind::Claim,
        Kind::Cause,
        Kind::Alternative,
        Kind::State,
    ];

    /// The kind's kebab-case name, as reports and `--accept RULE:kind` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Status => "status",
            Kind::MissingField => "missing-field",
            Kind::MistypedField => "mistyped-field",
            Kind::Value => "value",
            Kind::ErrorText => "error-text",
            Kind::Shape => "shape",
            Kind::RouteMissing => "route-missing",
            Kind::Flag => "flag",
            Kind::Claim => "claim",
            Kind::Cause => "cause",
            Kind::Alternative => "alternative",
            Kind::State => "state",
        }
    }

    /// The kind named `s` (as [`Kind::as_str`] spells it), if any.
    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// Whether the broker only *said* something differently (its state is the model's).
    pub fn answer_only(self) -> bool {
        !matches!(
            self,
            Kind::RouteMissing | Kind::Claim | Kind::Cause | Kind::Alternative | Kind::State
        )
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way a broker departed from a rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Finding {
    /// The one rule this departure breaks.
    pub rule: RuleId,
    /// What sort of departure it is.
    pub kind: Kind,
    /// How binding the departure is: its rule's level, PROJECT for the PROJECT half of a
    /// rule marked with two levels and for every [`Kind::Alternative`], SEED for a route
    /// the broker lacks whatever the route's rule (no level of the spec allows leaving a
    /// route out).
    pub level: Level,
    /// What the broker did (the same text for every instance of one departure).
    pub what: String,
    /// Where in the answer, as a JSON path (`$[0].noop`), when it is one place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The first instance seen (e.g. the value the broker sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Finding {
    /// A finding of `kind` under `rule`, at the level that kind of departure has under that rule.
    pub fn new(rule: RuleId, kind: Kind, what: impl Into<String>) -> Finding {
        let level = match kind {
            Kind::RouteMissing => Level::Seed,
            Kind::Alternative => Level::Project,
            _ => rule.level(),
        };
        Finding {
            rule,
            kind,
            level,
            what: what.into(),
            path: None,
            example: None,
        }
    }

    /// With an instance of the departure.
    pub fn example(mut self, e: impl Into<String>) -> Finding {
        self.example = Some(e.into());
        self
    }

    /// At a JSON path of the answer.
    pub(crate) fn at(mut self, path: impl Into<String>) -> Finding {
        self.path = Some(path.into());
        self
    }

    /// At another level than its rule's (the PROJECT half of a two-level rule).
    pub fn at_level(mut self, level: Level) -> Finding {
        self.level = level;
        self
    }

    /// The identity under which instances are grouped (rule, kind, what).
    pub fn key(&self) -> (RuleId, Kind, &str) {
        (self.rule, self.kind, &self.what)
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]: {}", self.rule, self.kind, self.what)?;
        if let Some(p) = &self.path {
            write!(f, " at {p}")?;
        }
        if let Some(e) = &self.example {
            write!(f, " (e.g. {e})")?;
        }
        Ok(())
    }
}

/// Adds `d` to `into` unless a finding with the same rule, kind and text is there already.
/// Returns whether it was new.
pub(crate) fn note(into: &mut Vec<Finding>, d: Finding) -> bool {
    if into.iter().any(|x| x.key() == d.key()) {
        return false;
    }
    into.push(d);
    true
}

/// A deviation the user declared known (`--accept RULE-ID[:kind]`, or a variant's name
/// for one diagnosed cause): the checker treats it as allowed everywhere, so every other
/// rule is still checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Accept {
    /// The rule whose departures are accepted.
    pub rule: RuleId,
    /// `None`: every kind of departure from that rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// One diagnosed cause only (a [`crate::variant::Variant`]'s name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) variant: Option<crate::variant::Variant>,
}

impl Accept {
    /// The accept of every departure of `kind` from `rule`.
    pub(crate) fn of(rule: RuleId, kind: Option<Kind>) -> Accept {
        Accept {
            rule,
            kind,
            variant: None,
        }
    }

    /// The accept of one diagnosed cause.
    pub(crate) fn variant(v: crate::variant::Variant) -> Accept {
        Accept {
            rule: v.rule(),
            kind: Some(Kind::Cause),
            variant: Some(v),
        }
    }

    /// What accepts `f` alone and its like: its variant for a cause, else its rule and kind.
    pub fn for_finding(f: &Finding) -> Accept {
        match crate::variant::Variant::all().find(|v| f.kind == Kind::Cause && names(f, *v)) {
            Some(v) => Accept::variant(v),
            None => Accept::of(f.rule, Some(f.kind)),
        }
    }

    /// Parses `RULE-ID`, `RULE-ID:kind` or a variant's name.
    pub fn parse(s: &str) -> Result<Accept, String> {
        if let Some(v) = crate::variant::Variant::parse(s) {
            return Ok(Accept::variant(v));
        }
        let (rule, kind) = match s.split_once(':') {
            Some((r, k)) => (r, Some(k)),
            None => (s, None),
        };
        let rule = RuleId::parse(rule).ok_or_else(|| format!("unknown rule id {rule:?}"))?;
        let kind = match kind {
            None => None,
            Some(k) => Some(Kind::parse(k).ok_or_else(|| {
                let all: Vec<_> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown kind {k:?}; known: {}", all.join(", "))
            })?),
        };
        Ok(Accept::of(rule, kind))
    }

    /// Whether this acceptance covers the finding `f`.
    pub fn covers(&self, f: &Finding) -> bool {
        self.rule == f.rule
            && self.kind.is_none_or(|k| k == f.kind)
            && self.variant.is_none_or(|v| names(f, v))
    }
}

/// Whether the cause finding `f` names the variant `v` (its text ends with the name).
pub(crate) fn names(f: &Finding, v: crate::variant::Variant) -> bool {
    f.what.ends_with(&format!("({})", v.name()))
}

impl std::fmt::Display for Accept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(v) = self.variant {
            return write!(f, "{v}");
        }
        match self.kind {
            Some(k) => write!(f, "{}:{k}", self.rule),
            None => write!(f, "{}", self.rule),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::*;

    #[test]
    fn only_what_the_broker_said_is_answer_only() {
        let said: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.answer_only()).collect();
        assert_eq!(
            said,
            vec![
                Kind::Status,
                Kind::MissingField,
                Kind::MistypedField,
                Kind::Value,
                Kind::ErrorText,
                Kind::Shape,
                Kind::Flag
            ]
        );
    }

    #[test]
    fn findings_and_accepts_read_as_rule_kind_and_what() {
        let f = Finding::new(PUSH_1, Kind::Value, "`queueName` differs")
            .at("$[0].queueName")
            .example("\"x\"");
        assert_eq!(
            f.to_string(),
            "PUSH-1 [value]: `queueName` differs at $[0].queueName (e.g. \"x\")"
        );
        assert_eq!(
            Finding::new(POP_5, Kind::Shape, "an array").to_string(),
            "POP-5 [shape]: an array"
        );
        assert_eq!(
            Accept::parse("push-1:status").unwrap().to_string(),
            "PUSH-1:status"
        );
        assert_eq!(Accept::parse("POP-5").unwrap().to_string(), "POP-5");
    }

    #[test]
    fn accept_parses_rule_and_kind() {
        let a = Accept::parse("push-1:status").unwrap();
        assert_eq!(a, Accept::of(PUSH_1, Some(Kind::Status)));
        let v = Accept::parse("lease-seconds-ignored").unwrap();
        assert_eq!((v.rule, v.kind), (POP_9, Some(Kind::Cause)));
        assert_eq!(v.to_string(), "lease-seconds-ignored");
        let cause = Finding::new(POP_9, Kind::Cause, "x (lease-seconds-ignored)");
        assert!(v.covers(&cause));
        assert_eq!(Accept::for_finding(&cause), v);
        assert!(!v.covers(&Finding::new(POP_9, Kind::Cause, "y (implicit-lease-300)")));
        assert!(a.covers(&Finding::new(PUSH_1, Kind::Status, "200")));
        assert!(!a.covers(&Finding::new(PUSH_1, Kind::Value, "x")));
        assert!(Accept::parse("PUSH-1")
            .unwrap()
            .covers(&Finding::new(PUSH_1, Kind::Value, "x")));
        assert!(Accept::parse("PUSH-99").is_err());
        assert!(Accept::parse("PUSH-1:loud")
            .unwrap_err()
            .contains("known: status"));
    }

    #[test]
    fn note_keeps_one_finding_per_rule_kind_and_text() {
        let mut v = vec![];
        assert!(note(
            &mut v,
            Finding::new(ACK_3, Kind::MissingField, "no noop").example("a")
        ));
        assert!(!note(
            &mut v,
            Finding::new(ACK_3, Kind::MissingField, "no noop").example("b")
        ));
        assert!(note(
            &mut v,
            Finding::new(ACK_3, Kind::ErrorText, "no noop")
        ));
        assert_eq!(v.len(), 2);
        assert_eq!(
            Finding::new(POP_10, Kind::RouteMissing, "404").level,
            Level::Seed
        );
        assert_eq!(Finding::new(TXN_3, Kind::Shape, "x").level, Level::Project);
    }
}
