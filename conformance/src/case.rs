//! What a conformance case is: a named, rule-tagged scenario run on its own
//! [`Session`], plus how it can fail.
//!
//! Cases are plain async functions registered in the catalog with their id (e.g.
//! `ack-2/failure-clamps-later-success`), the PROTOCOL.md rule ids they check, their
//! level and the capability they need. A case passes when every exchange was accepted
//! by the reference model (the session checks each one) and its own assertions held.

use crate::rules::{level_of, Level, RuleId};
use crate::session::Session;
use queen_reference::checker::Divergence;
use queen_reference::finding::Finding;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

/// A part of the protocol a broker may or may not offer; `--without` skips cases
/// needing it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    Core,
    Configure,
    Dedup,
    DeadLetter,
    Transactions,
    Discovery,
    LongPoll,
    Subscription,
    Visibility,
    Maintenance,
    LeaseExtend,
    Delete,
    BadInput,
    /// The suite can stop and start the broker's database (only when it started the
    /// broker itself on its own PostgreSQL cluster; see `database.rs`).
    DatabaseControl,
    /// The broker has authentication on and the suite holds its tokens (`--jwt-secret`,
    /// or `--token-admin/--token-rw/--token-ro`; section 14).
    Auth,
    /// The broker removes messages by age and bounds queues (section 16).
    Retention,
    /// The broker serves the management and observability routes (section 17).
    Management,
}

impl Capability {
    pub const ALL: [Capability; 17] = [
        Capability::Core,
        Capability::Configure,
        Capability::Dedup,
        Capability::DeadLetter,
        Capability::Transactions,
        Capability::Discovery,
        Capability::LongPoll,
        Capability::Subscription,
        Capability::Visibility,
        Capability::Maintenance,
        Capability::LeaseExtend,
        Capability::Delete,
        Capability::BadInput,
        Capability::DatabaseControl,
        Capability::Auth,
        Capability::Retention,
        Capability::Management,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Core => "core",
            Capability::Configure => "configure",
            Capability::Dedup => "dedup",
            Capability::DeadLetter => "dead-letter",
            Capability::Transactions => "transactions",
            Capability::Discovery => "discovery",
            Capability::LongPoll => "long-poll",
            Capability::Subscription => "subscription",
            Capability::Visibility => "visibility",
            Capability::Maintenance => "maintenance",
            Capability::LeaseExtend => "lease-extend",
            Capability::Delete => "delete",
            Capability::BadInput => "bad-input",
            Capability::DatabaseControl => "database-control",
            Capability::Auth => "auth",
            Capability::Retention => "retention",
            Capability::Management => "management",
        }
    }

    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a case failed.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The broker answered something no allowed behaviour produces.
    Diverged {
        /// Index of the exchange in the transcript.
        step: usize,
        divergence: Box<Divergence>,
    },
    /// The model could not decide (too many possible states): never a pass.
    Inconclusive { step: usize, why: String },
    /// A case's own assertion on top of the model (e.g. a wake-up time, POP-11).
    Assertion { message: String, rules: Vec<RuleId> },
    /// The broker could not be reached or answered something that is not HTTP/JSON.
    Transport(String),
    /// The case did not finish in time.
    Timeout(u64),
    /// Every answer was allowed, but only with findings on the case's own rules (answer-
    /// only differences, or PROJECT points decided otherwise when the model is not
    /// strict). Only PROJECT ones: the broker "differs on project-resolved points".
    Findings(Vec<Finding>),
    /// The broker stopped answering during the run; this case was cut short.
    TargetDown(String),
}

impl Failure {
    /// A short kind name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Diverged { .. } => "divergence",
            Failure::Inconclusive { .. } => "inconclusive",
            Failure::Assertion { .. } => "assertion",
            Failure::Transport(_) => "transport",
            Failure::Timeout(_) => "timeout",
            Failure::Findings(_) if self.is_project_only() => "project-difference",
            Failure::Findings(_) => "finding",
            Failure::TargetDown(_) => "target-down",
        }
    }

    /// The rule ids this failure names.
    pub fn rules(&self) -> Vec<RuleId> {
        match self {
            Failure::Diverged { divergence, .. } => divergence.rules.clone(),
            Failure::Assertion { rules, .. } => rules.clone(),
            Failure::Findings(d) => {
                let mut r: Vec<RuleId> = d.iter().map(|d| d.rule).collect();
                r.sort();
                r.dedup();
                r
            }
            _ => vec![],
        }
    }

    /// How binding this failure is, for a case of level `case`: the level of the rules
    /// whose checks failed (a case's verdict is about the rules it broke, so a PROJECT
    /// rule never fails a SEED case as a SEED failure); a server error is SEED whatever
    /// the point, since no rule lets a broker answer 5xx to a request it must handle.
    pub fn level(&self, case: Level) -> Level {
        match self {
            Failure::Diverged { divergence, .. } if divergence.actual.status >= 500 => Level::Seed,
            Failure::Diverged { divergence, .. } => level_of(&divergence.rules),
            Failure::Findings(d) => d.iter().map(|f| f.level).min().unwrap_or(case),
            // A case's own assertion is as binding as the case says (a PROJECT case may
            // assert the PROJECT half of a two-level rule), and no more than its rules.
            Failure::Assertion { rules, .. } if !rules.is_empty() => level_of(rules).max(case),
            _ => case,
        }
    }

    /// One line.
    pub fn headline(&self) -> String {
        match self {
            Failure::Diverged { step, divergence } => {
                let allowed = allowed_statuses(&divergence.expected);
                let what = if allowed == divergence.actual.status.to_string() {
                    format!(
                        "{} with a body the model does not allow",
                        divergence.actual.status
                    )
                } else {
                    format!(
                        "{} where the model allows {allowed}",
                        divergence.actual.status
                    )
                };
                format!(
                    "exchange #{}: {} {} answered {what}",
                    step + 1,
                    divergence.request.method,
                    divergence.request.path,
                )
            }
            Failure::Inconclusive { step, why } => {
                format!("exchange #{}: the model cannot decide: {why}", step + 1)
            }
            Failure::Assertion { message, .. } => message.clone(),
            Failure::Transport(e) => format!("transport: {e}"),
            Failure::Timeout(s) => format!("did not finish within {s} s"),
            Failure::Findings(_) if self.is_project_only() => format!(
                "differs on project-resolved points: {}",
                join(&self.rules())
            ),
            Failure::Findings(_) => format!(
                "answers differ from the protocol on: {}",
                join(&self.rules())
            ),
            Failure::TargetDown(why) => why.clone(),
        }
    }

    /// Whether this is only a departure from PROJECT decisions (level PROJECT whatever
    /// the case's own level).
    pub fn is_project_only(&self) -> bool {
        matches!(self, Failure::Findings(d) if d.iter().all(|f| f.level == Level::Project))
    }

    /// The full explanation (several lines).
    pub fn details(&self) -> String {
        match self {
            Failure::Diverged { divergence, .. } => divergence.to_string(),
            Failure::Findings(d) => {
                let mut s = self.headline();
                for x in d {
                    s.push_str(&format!("\n  {x}"));
                }
                s
            }
            other => other.headline(),
        }
    }
}

fn allowed_statuses(expected: &[queen_reference::wire::HttpResponse]) -> String {
    let mut s: Vec<String> = expected.iter().map(|e| e.status.to_string()).collect();
    s.dedup();
    if s.is_empty() {
        "nothing (no state of the model is consistent)".into()
    } else {
        s.join(" or ")
    }
}

/// Rule ids as `A, B`.
pub fn join(rules: &[RuleId]) -> String {
    rules
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.details())
    }
}

/// What a case body returns.
pub type CaseResult = Result<(), Failure>;

/// A case body: an async function of its session.
pub type CaseFn =
    for<'a> fn(&'a mut Session) -> Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

/// One case of the catalog.
#[derive(Clone)]
pub struct Case {
    pub id: &'static str,
    pub rules: &'static [RuleId],
    pub level: Level,
    pub capability: Capability,
    /// Further capabilities the case uses (it is skipped when any is excluded).
    pub needs: &'static [Capability],
    /// Touches global state (maintenance switches): runs alone, after the others.
    pub exclusive: bool,
    /// Reads a broker's own figures (its spool): with several brokers, every request
    /// goes to the first (CLUSTER-1).
    pub one_broker: bool,
    pub run: CaseFn,
}

impl Case {
    pub fn new(
        id: &'static str,
        rules: &'static [RuleId],
        level: Level,
        capability: Capability,
        run: CaseFn,
    ) -> Case {
        Case {
            id,
            rules,
            level,
            capability,
            needs: &[],
            exclusive: false,
            one_broker: false,
            run,
        }
    }

    pub fn needs(mut self, caps: &'static [Capability]) -> Case {
        self.needs = caps;
        self
    }

    pub fn exclusive(mut self) -> Case {
        self.exclusive = true;
        self
    }

    /// Every capability the case needs, its own first.
    pub fn capabilities(&self) -> impl Iterator<Item = Capability> + '_ {
        std::iter::once(self.capability).chain(self.needs.iter().copied())
    }
}
