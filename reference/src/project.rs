//! Differences on PROJECT points: where a broker departs from a decision this project
//! made where the seeds are silent (PROTOCOL.md preamble, rules marked [PROJECT]).
//!
//! A checker that is not strict accepts such an answer, or follows such a state change,
//! and records a [`ProjectDiff`] instead of diverging, so a conformance report can list
//! the broker as "differs on project-resolved points" rather than failing it on a SEED
//! case. A strict checker (our own server's tests) rejects them like any divergence.

use serde::Serialize;

/// One way a broker differed from a PROJECT decision.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ProjectDiff {
    /// The PROTOCOL.md rule id that decides the point (e.g. `PUSH-5`). The steps of
    /// section 4's ack evaluation [PROJECT] have no rule id of their own; they are
    /// named `ACK-STEP-<n>`.
    pub rule: &'static str,
    /// What the broker did instead of the project's decision (the same text for every
    /// instance of one kind of departure).
    pub what: String,
    /// The first instance seen (e.g. the answer's body), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl ProjectDiff {
    pub fn new(rule: &'static str, what: impl Into<String>) -> ProjectDiff {
        ProjectDiff {
            rule,
            what: what.into(),
            example: None,
        }
    }

    /// With an instance of the departure.
    pub fn example(mut self, e: impl Into<String>) -> ProjectDiff {
        self.example = Some(e.into());
        self
    }
}

impl std::fmt::Display for ProjectDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.what)?;
        if let Some(e) = &self.example {
            write!(f, " (e.g. {e})")?;
        }
        Ok(())
    }
}

/// Adds `d` to `into` unless a difference of the same rule and kind is there already.
pub fn note(into: &mut Vec<ProjectDiff>, d: ProjectDiff) {
    if !into.iter().any(|x| x.rule == d.rule && x.what == d.what) {
        into.push(d);
    }
}
