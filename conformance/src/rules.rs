//! The rule ids of PROTOCOL.md with their levels, so every case, report and counter-
//! example can name the rules it checks and say how much a difference matters.
//!
//! A rule marked with two levels in the spec (e.g. ACK-0 "[SEED] ... [PROJECT] ...")
//! is listed at its first, most binding level; the cases that check only the PROJECT
//! half carry the PROJECT level themselves. CFG-2 carries no marker in the spec; its
//! defaults come from the seeds' configure documentation, so it is treated as SEED.

use serde::Serialize;

/// How binding a rule (or a case) is (PROTOCOL.md, preamble).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// Stated by the seed documents: a broker that breaks it is non-conformant.
    Seed,
    /// Resolved by this project where the seeds are silent: fails only with `--strict`.
    Project,
    /// Several behaviours are reasonable; the model accepts every one: never fails a run.
    Open,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Seed => "SEED",
            Level::Project => "PROJECT",
            Level::Open => "OPEN",
        }
    }

    pub const ALL: [Level; 3] = [Level::Seed, Level::Project, Level::Open];
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule of PROTOCOL.md.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub id: &'static str,
    pub level: Level,
    pub title: &'static str,
}

const fn r(id: &'static str, level: Level, title: &'static str) -> Rule {
    Rule { id, level, title }
}

use Level::{Open, Project, Seed};

/// Every rule id of PROTOCOL.md, in the order of the spec.
pub const RULES: &[Rule] = &[
    r(
        "PROTO-GROUP-1",
        Seed,
        "omitted group is __QUEUE_MODE__, an ordinary group",
    ),
    r("PUSH-1", Seed, "201, one result per item, in order"),
    r(
        "PUSH-2",
        Seed,
        "push creates queue, Default partition, config row; leaseTime 60",
    ),
    r(
        "PUSH-3",
        Project,
        "a push request is atomic; missing partition is Default",
    ),
    r(
        "PUSH-4",
        Seed,
        "missing transactionId is minted and returned",
    ),
    r("PUSH-5", Seed, "dedup within the window, per partition"),
    r(
        "PUSH-6",
        Seed,
        "offsets follow request order, requests commit order",
    ),
    r(
        "PUSH-7",
        Seed,
        "maintenance or no database: buffered, replayed in order",
    ),
    r(
        "PUSH-8",
        Project,
        "bad input is 400 and writes nothing; oversized body 413",
    ),
    r(
        "PUSH-9",
        Open,
        "absent payload null or {}; plain-push traceId kept or dropped",
    ),
    r(
        "POP-1",
        Seed,
        "a pop never removes; leases (committed, end] in offset order",
    ),
    r(
        "POP-2",
        Seed,
        "claimable: visible message past cursor and no live lease",
    ),
    r(
        "POP-3",
        Seed,
        "batch is shared across partitions; partitions caps claims",
    ),
    r("POP-4", Open, "which claimable partitions a pop chooses"),
    r("POP-5", Seed, "200 answer shape"),
    r("POP-6", Seed, "nothing delivered: bare 204"),
    r("POP-7", Seed, "autoAck commits inside the pop; no lease"),
    r(
        "POP-8",
        Seed,
        "pop on unknown queue creates its row and answers 204",
    ),
    r(
        "POP-9",
        Seed,
        "lease deadline from leaseSeconds or the queue's leaseTime",
    ),
    r(
        "POP-10",
        Seed,
        "discovery needs a scope; unparseable parameters are 400",
    ),
    r("POP-11", Seed, "long poll parks and is woken by a push"),
    r(
        "POP-12",
        Seed,
        "createdAt is the write time, ISO-8601 UTC with Z",
    ),
    r("POP-13", Seed, "subscription seeding of new cursors"),
    r(
        "POP-14",
        Seed,
        "visibility: delayedProcessing and windowBuffer",
    ),
    r("POP-15", Seed, "minPopWaitTime bounds"),
    r(
        "ACK-0",
        Seed,
        "well-formed ack calls answer 200; malformed 400",
    ),
    r("ACK-1", Seed, "cumulative commit"),
    r(
        "ACK-2",
        Seed,
        "a failure is never skipped by a later success",
    ),
    r(
        "ACK-3",
        Seed,
        "no faked acks: noop, already committed, unresolvable",
    ),
    r(
        "ACK-4",
        Seed,
        "one leased batch per (partition, group) at a time",
    ),
    r("ACK-5", Seed, "wrong or expired lease is refused"),
    r("ACK-6", Seed, "completed, failed, retry, dlq"),
    r("ACK-7", Seed, "lease expiry never spends retry budget"),
    r(
        "ACK-8",
        Project,
        "ack resolves the newest message with that transactionId",
    ),
    r(
        "LEASE-1",
        Seed,
        "extend renews every live lease with the id, never shortens",
    ),
    r("LEASE-2", Seed, "extend is always 200; read the body"),
    r(
        "LEASE-3",
        Project,
        "seconds optional; non-positive seconds is 400",
    ),
    r("DLQ-1", Seed, "retryLimit N allows N redeliveries"),
    r(
        "DLQ-2",
        Project,
        "dead letters per (message, group); listing shape",
    ),
    r("TXN-1", Seed, "all operations commit together or none does"),
    r(
        "TXN-2",
        Project,
        "acks inside follow section 4; a failing ack aborts",
    ),
    r("TXN-3", Project, "answer shape; empty operations is 400"),
    r("CFG-1", Seed, "configure is a full replace"),
    r("CFG-2", Seed, "option defaults"),
    r(
        "CFG-3",
        Project,
        "derived namespace/task; bad options are 400",
    ),
    r(
        "DEL-1",
        Project,
        "delete removes everything; says whether it existed",
    ),
    r("HEALTH-1", Project, "health answers healthy and connected"),
    r("MAINT-1", Seed, "push maintenance spools and replays"),
    r("MAINT-2", Seed, "pop maintenance answers bare 204"),
];

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// The level of a divergence found by the model: SEED unless every rule the request
/// is judged by is PROJECT or OPEN.
pub fn level_of(rules: &[&str]) -> Level {
    rules
        .iter()
        .filter_map(|id| rule(id))
        .map(|r| r.level)
        .min()
        .unwrap_or(Level::Seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique() {
        let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }

    #[test]
    fn levels_order_seed_first() {
        assert_eq!(level_of(&["PUSH-8", "ACK-1"]), Level::Seed);
        assert_eq!(level_of(&["PUSH-8", "TXN-3"]), Level::Project);
        assert_eq!(level_of(&[]), Level::Seed);
    }
}
