//! What a conformance case is: a named, rule-tagged scenario run on its own
//! [`Session`], plus how it can fail.
//!
//! Cases are plain async functions registered in the catalog with their id (e.g.
//! `ack-2/failure-clamps-later-success`), the PROTOCOL.md rule ids they check, their
//! level and the capability they need. A case passes when every exchange was accepted
//! by the reference model (the session checks each one) and its own assertions held.

pub use crate::failure::{join, Failure};
use crate::rules::{Level, RuleId};
use crate::session::Session;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

/// A part of the protocol a broker may or may not offer; `--without` skips cases
/// needing it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
// Variant docs only for rustdoc: a doc attribute would turn a name of the plain `enum`
// of spec/report.schema.json into a `oneOf` entry of its own; `cargo doc` checks them.
#[cfg_attr(not(doc), allow(missing_docs))]
pub enum Capability {
    #[cfg_attr(
        doc,
        doc = "Push, pop and ack on a queue: what every broker must serve."
    )]
    Core,
    #[cfg_attr(
        doc,
        doc = "Queue options set with `POST /api/v1/configure` (section 8)."
    )]
    Configure,
    #[cfg_attr(
        doc,
        doc = "Push deduplication by `transactionId` within the dedup window (PUSH-5)."
    )]
    Dedup,
    #[cfg_attr(doc, doc = "Retries and the dead-letter queue (section 6).")]
    DeadLetter,
    #[cfg_attr(
        doc,
        doc = "Atomic pushes and acks in one `POST /api/v1/transaction` (section 7)."
    )]
    Transactions,
    #[cfg_attr(
        doc,
        doc = "Discovery pops across queues by `namespace` or `task` (POP-10)."
    )]
    Discovery,
    #[cfg_attr(
        doc,
        doc = "Long polls with `wait=true`, and `minPopWaitTime` (POP-11, POP-15)."
    )]
    LongPoll,
    #[cfg_attr(doc, doc = "Subscription modes of a new consumer group (POP-13).")]
    Subscription,
    #[cfg_attr(doc, doc = "Delayed processing and the window buffer on pop (POP-14).")]
    Visibility,
    #[cfg_attr(doc, doc = "The maintenance switches of section 11.")]
    Maintenance,
    #[cfg_attr(
        doc,
        doc = "Lease extension with `POST /api/v1/lease/{leaseId}/extend` (section 5)."
    )]
    LeaseExtend,
    #[cfg_attr(
        doc,
        doc = "Queue deletion with `DELETE /api/v1/resources/queues/{queue}` (section 9)."
    )]
    Delete,
    #[cfg_attr(doc, doc = "400 answers to malformed requests (PUSH-8).")]
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
    /// Every capability, in the order `list` and the reports show them.
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

    /// The capability's kebab-case name, as `--without` and the reports spell it.
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

    /// The capability with this kebab-case name, if any.
    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// The case's id, `<rule family>-<n>/<what it checks>` (e.g. `ack-2/failure-clamps-later-success`).
    pub id: &'static str,
    /// The PROTOCOL.md rule ids the case checks.
    pub rules: &'static [RuleId],
    /// The level of the rules checked: it decides whether a failure fails the run.
    pub level: Level,
    /// The capability the case needs (it is skipped when that is excluded).
    pub capability: Capability,
    /// Further capabilities the case uses (it is skipped when any is excluded).
    pub needs: &'static [Capability],
    /// Touches global state (maintenance switches): runs alone, after the others.
    pub(crate) exclusive: bool,
    /// Reads a broker's own figures (its spool): with several brokers, every request
    /// goes to the first (CLUSTER-1).
    pub(crate) one_broker: bool,
    /// The case's body, run against a session on the target.
    pub run: CaseFn,
}

impl Case {
    /// A case with no further capabilities, run alongside others, on any broker of a cluster.
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

    /// The case also needs these capabilities.
    pub fn needs(mut self, caps: &'static [Capability]) -> Case {
        self.needs = caps;
        self
    }

    /// The case runs alone, with no other case at the same time.
    pub(crate) fn exclusive(mut self) -> Case {
        self.exclusive = true;
        self
    }

    /// Every capability the case needs, its own first.
    pub(crate) fn capabilities(&self) -> impl Iterator<Item = Capability> + '_ {
        std::iter::once(self.capability).chain(self.needs.iter().copied())
    }
}
