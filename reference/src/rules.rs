//! The rule ids of PROTOCOL.md as typed constants, with their levels.
//!
//! The model, the checker, the conformance cases and the reports all name rules; a typo
//! in a string would silently attribute a finding to no rule, so every rule is a
//! [`RuleId`] constant here and the table [`RULES`] says how binding each one is.
//!
//! A rule marked with two levels in the spec (e.g. ACK-0 "\[SEED\] ... \[PROJECT\] ...") is
//! listed at its first, most binding level; the cases that check only the PROJECT half
//! carry the PROJECT level themselves. CFG-2 carries no marker in the spec; its defaults
//! come from the seeds' configure documentation, so it is treated as SEED. The steps of
//! section 4's ack evaluation \[PROJECT\] that the model explores as alternatives have ids
//! of their own, `ACK-STEP-<n>`.

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
    /// The level as PROTOCOL.md writes it (`SEED`, `PROJECT`, `OPEN`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Seed => "SEED",
            Level::Project => "PROJECT",
            Level::Open => "OPEN",
        }
    }

    /// Every level, most binding first.
    pub const ALL: [Level; 3] = [Level::Seed, Level::Project, Level::Open];
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule id of PROTOCOL.md (`ACK-2`): only the constants below exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(&'static str);

impl RuleId {
    /// The id as PROTOCOL.md writes it (`POP-13`).
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The rule's entry in [`RULES`].
    pub fn rule(self) -> &'static Rule {
        RULES
            .iter()
            .find(|r| r.id == self)
            .expect("every RuleId constant is in RULES")
    }

    /// The level of the rule, as PROTOCOL.md gives it.
    pub fn level(self) -> Level {
        self.rule().level
    }

    /// The constant with this id (`"ACK-2"`), case-insensitively.
    pub fn parse(s: &str) -> Option<RuleId> {
        RULES
            .iter()
            .map(|r| r.id)
            .find(|id| id.0.eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for RuleId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl PartialEq<&str> for RuleId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// One rule of PROTOCOL.md.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The rule's id (`ACK-5`).
    pub id: RuleId,
    /// How binding the rule is.
    pub level: Level,
    /// The rule in a few words, as reports show it.
    pub title: &'static str,
}

/// The rule constants, named as in the spec with `_` for `-`.
pub mod ids {
    use super::RuleId;

    /// omitted group is __QUEUE_MODE__, an ordinary group
    pub const PROTO_GROUP_1: RuleId = RuleId("PROTO-GROUP-1");
    /// 201, one result per item, in order
    pub const PUSH_1: RuleId = RuleId("PUSH-1");
    /// push creates queue, Default partition, config row; leaseTime 60
    pub const PUSH_2: RuleId = RuleId("PUSH-2");
    /// a push request is atomic; missing partition is Default
    pub const PUSH_3: RuleId = RuleId("PUSH-3");
    /// missing transactionId is minted and returned
    pub const PUSH_4: RuleId = RuleId("PUSH-4");
    /// dedup within the window, per partition
    pub const PUSH_5: RuleId = RuleId("PUSH-5");
    /// offsets follow request order, requests commit order
    pub const PUSH_6: RuleId = RuleId("PUSH-6");
    /// maintenance or no database: buffered, replayed in order
    pub const PUSH_7: RuleId = RuleId("PUSH-7");
    /// bad input is 400 and writes nothing; oversized body 413
    pub const PUSH_8: RuleId = RuleId("PUSH-8");
    /// absent payload null or {}; plain-push traceId kept or dropped
    pub const PUSH_9: RuleId = RuleId("PUSH-9");
    /// a full spool refuses with 503 and Retry-After; replay in committed chunks
    pub const PUSH_10: RuleId = RuleId("PUSH-10");
    /// every accepted payload can be delivered: nesting limit, no lone surrogates
    pub const PUSH_11: RuleId = RuleId("PUSH-11");
    /// a spooled push the database refuses for good is quarantined; the rest replays
    pub const PUSH_12: RuleId = RuleId("PUSH-12");
    /// a duplicate item carries the original message's message_id
    pub const PUSH_13: RuleId = RuleId("PUSH-13");
    /// data is the pushed payload verbatim, digits and key order included
    pub const POP_17: RuleId = RuleId("POP-17");
    /// out-of-range subscription times; the first pop records the group's subscription
    pub const POP_18: RuleId = RuleId("POP-18");
    /// a pop never commits what it did not answer; undeliverable messages are set aside
    pub const POP_16: RuleId = RuleId("POP-16");
    /// escapes in paths and query strings decode to UTF-8, or the request is 400
    pub const WIRE_1: RuleId = RuleId("WIRE-1");
    /// names in paths are percent-decoded
    pub const WIRE_2: RuleId = RuleId("WIRE-2");
    /// a pop never removes; leases (committed, end] in offset order
    pub const POP_1: RuleId = RuleId("POP-1");
    /// claimable: visible message past cursor and no live lease
    pub const POP_2: RuleId = RuleId("POP-2");
    /// batch is shared across partitions; partitions caps claims
    pub const POP_3: RuleId = RuleId("POP-3");
    /// which claimable partitions a pop chooses
    pub const POP_4: RuleId = RuleId("POP-4");
    /// 200 answer shape
    pub const POP_5: RuleId = RuleId("POP-5");
    /// nothing delivered: bare 204
    pub const POP_6: RuleId = RuleId("POP-6");
    /// autoAck commits inside the pop; no lease
    pub const POP_7: RuleId = RuleId("POP-7");
    /// pop on unknown queue creates its row and answers 204
    pub const POP_8: RuleId = RuleId("POP-8");
    /// lease deadline from leaseSeconds or the queue's leaseTime
    pub const POP_9: RuleId = RuleId("POP-9");
    /// discovery needs a scope; unparseable parameters are 400
    pub const POP_10: RuleId = RuleId("POP-10");
    /// long poll parks and is woken by a push
    pub const POP_11: RuleId = RuleId("POP-11");
    /// createdAt is the write time, ISO-8601 UTC with Z
    pub const POP_12: RuleId = RuleId("POP-12");
    /// subscription seeding of new cursors
    pub const POP_13: RuleId = RuleId("POP-13");
    /// visibility: delayedProcessing and windowBuffer
    pub const POP_14: RuleId = RuleId("POP-14");
    /// minPopWaitTime bounds
    pub const POP_15: RuleId = RuleId("POP-15");
    /// well-formed ack calls answer 200; malformed 400
    pub const ACK_0: RuleId = RuleId("ACK-0");
    /// cumulative commit
    pub const ACK_1: RuleId = RuleId("ACK-1");
    /// a failure is never skipped by a later success
    pub const ACK_2: RuleId = RuleId("ACK-2");
    /// no faked acks: noop, already committed, unresolvable
    pub const ACK_3: RuleId = RuleId("ACK-3");
    /// one leased batch per (partition, group) at a time
    pub const ACK_4: RuleId = RuleId("ACK-4");
    /// wrong or expired lease is refused
    pub const ACK_5: RuleId = RuleId("ACK-5");
    /// completed, failed, retry, dlq
    pub const ACK_6: RuleId = RuleId("ACK-6");
    /// lease expiry never spends retry budget
    pub const ACK_7: RuleId = RuleId("ACK-7");
    /// ack resolves the newest message with that transactionId
    pub const ACK_8: RuleId = RuleId("ACK-8");
    /// a malformed ack call is 400 and changes nothing
    pub const ACK_9: RuleId = RuleId("ACK-9");
    /// a live lease id with an offset outside its span is an invalid lease
    pub const ACK_10: RuleId = RuleId("ACK-10");
    /// an ack call charges at most one retry; later failures come back uncharged
    pub const ACK_STEP_3: RuleId = RuleId("ACK-STEP-3");
    /// the lease is released when anything comes back or the cursor reaches the span's end
    pub const ACK_STEP_5: RuleId = RuleId("ACK-STEP-5");
    /// extend renews every live lease with the id, never shortens
    pub const LEASE_1: RuleId = RuleId("LEASE-1");
    /// extend is always 200; read the body
    pub const LEASE_2: RuleId = RuleId("LEASE-2");
    /// seconds optional; non-positive seconds is 400
    pub const LEASE_3: RuleId = RuleId("LEASE-3");
    /// retryLimit N allows N redeliveries
    pub const DLQ_1: RuleId = RuleId("DLQ-1");
    /// dead letters per (message, group); listing shape
    pub const DLQ_2: RuleId = RuleId("DLQ-2");
    /// all operations commit together or none does
    pub const TXN_1: RuleId = RuleId("TXN-1");
    /// acks inside follow section 4; a failing ack aborts
    pub const TXN_2: RuleId = RuleId("TXN-2");
    /// answer shape; empty operations is 400
    pub const TXN_3: RuleId = RuleId("TXN-3");
    /// a transaction with a push is refused with 503 while pushes would spool
    pub const TXN_4: RuleId = RuleId("TXN-4");
    /// kv or timers operations in a transaction are 400, never ignored
    pub const TXN_5: RuleId = RuleId("TXN-5");
    /// every required lease must be live, else the transaction is refused whole
    pub const TXN_6: RuleId = RuleId("TXN-6");
    /// configure is a full replace
    pub const CFG_1: RuleId = RuleId("CFG-1");
    /// option defaults
    pub const CFG_2: RuleId = RuleId("CFG-2");
    /// derived namespace/task; bad options are 400
    pub const CFG_3: RuleId = RuleId("CFG-3");
    /// delete removes everything; says whether it existed
    pub const DEL_1: RuleId = RuleId("DEL-1");
    /// health answers healthy and connected
    pub const HEALTH_1: RuleId = RuleId("HEALTH-1");
    /// health reports the spool; a stuck replay is unhealthy
    pub const HEALTH_2: RuleId = RuleId("HEALTH-2");
    /// health lists the components recovered from a failure within the last minute
    pub const HEALTH_3: RuleId = RuleId("HEALTH-3");
    /// push maintenance spools and replays
    pub const MAINT_1: RuleId = RuleId("MAINT-1");
    /// pop maintenance answers bare 204
    pub const MAINT_2: RuleId = RuleId("MAINT-2");
    /// the replay after push maintenance finishes within 3 s
    pub const MAINT_3: RuleId = RuleId("MAINT-3");
    /// a request carries at most the configured number of items; more is 413
    pub const LIMIT_1: RuleId = RuleId("LIMIT-1");
    /// an internal error is a generic 500 with a request id; pops answer 204
    pub const ERR_1: RuleId = RuleId("ERR-1");
    /// slow clients are timed out; connections are capped; parked pops exempt
    pub const CONN_1: RuleId = RuleId("CONN-1");
    /// SIGTERM: stop accepting, answer parked pops, finish in-flight, flush, exit
    pub const STOP_1: RuleId = RuleId("STOP-1");
    /// with authentication on, a pop needs the read-write level
    pub const AUTH_1: RuleId = RuleId("AUTH-1");
    /// producerSub is the sub of the token that pushed the message, else null
    pub const AUTH_2: RuleId = RuleId("AUTH-2");
    /// every route has a level: public, read-only, read-write, admin
    pub const AUTH_3: RuleId = RuleId("AUTH-3");
    /// 401 without a valid token, 403 below the level, before anything else; nothing changes
    pub const AUTH_4: RuleId = RuleId("AUTH-4");
    /// our server's token settings (algorithms, keys, claims, skew, public paths)
    pub const AUTH_5: RuleId = RuleId("AUTH-5");
    /// no caller is admitted above its level: a security failure at SEED level
    pub const AUTH_6: RuleId = RuleId("AUTH-6");
    /// encryption is invisible on the wire: data comes back as pushed
    pub const ENC_1: RuleId = RuleId("ENC-1");
    /// stored encrypted; without a key, encryptionEnabled is refused 400
    pub const ENC_2: RuleId = RuleId("ENC-2");
    /// our server's key; an undecryptable message answers 500 and stays
    pub const ENC_3: RuleId = RuleId("ENC-3");
    /// our embedded database keeps a key of its own; with DATABASE_URL a key must be given
    pub const ENC_4: RuleId = RuleId("ENC-4");
    /// only retention removes messages; a removed message is never delivered again
    pub const RET_1: RuleId = RuleId("RET-1");
    /// what is removable: age limits, completed retention, the retentionEnabled gate, prefixes
    pub const RET_2: RuleId = RuleId("RET-2");
    /// removal is allowed from the deadline and certain by deadline plus the interval
    pub const RET_3: RuleId = RuleId("RET-3");
    /// a removal moves cursors, shrinks leases, makes acks unresolvable, ends dedup
    pub const RET_4: RuleId = RuleId("RET-4");
    /// maxSize refuses a push past the limit with 429 and Retry-After; nothing is written
    pub const RET_5: RuleId = RuleId("RET-5");
    /// configure stores and echoes the option keys it does not act on
    pub const CFG_4: RuleId = RuleId("CFG-4");
    /// management reads change nothing; an unknown queue, group or message is 404
    pub const MGMT_1: RuleId = RuleId("MGMT-1");
    /// listings are pages: bounded limit and offset (else 400), total, a stable order
    pub const MGMT_2: RuleId = RuleId("MGMT-2");
    /// consumer groups with their queues, lag, lag in seconds and state; lagging groups
    pub const MGMT_3: RuleId = RuleId("MGMT-3");
    /// resources: overview, queues, one queue, depth, partitions, namespaces, tasks
    pub const MGMT_4: RuleId = RuleId("MGMT-4");
    /// status: the overview with the maintenance switches, queue statistics
    pub const MGMT_5: RuleId = RuleId("MGMT-5");
    /// peek: messages listed with their state for a group, nothing leased
    pub const MGMT_6: RuleId = RuleId("MGMT-6");
    /// one message by partitionId and transactionId, with every group's state
    pub const MGMT_7: RuleId = RuleId("MGMT-7");
    /// seek moves a group's cursors to the end or to a time, releasing its leases
    pub const MGMT_8: RuleId = RuleId("MGMT-8");
    /// group delete removes its cursors and, with deleteMetadata, its subscriptions
    pub const MGMT_9: RuleId = RuleId("MGMT-9");
    /// metrics: JSON at /metrics, the Prometheus text at /metrics/prometheus
    pub const MGMT_10: RuleId = RuleId("MGMT-10");
    /// one message is deleted by its address; it is no longer retained
    pub const MGMT_11: RuleId = RuleId("MGMT-11");
    /// a dead letter's retry puts its message back at the end of its partition
    pub const MGMT_12: RuleId = RuleId("MGMT-12");
    /// analytics: per bucket of a window, the messages created and the dead letters filed
    pub const MGMT_13: RuleId = RuleId("MGMT-13");
    /// health carries the broker's version and uptime
    pub const HEALTH_4: RuleId = RuleId("HEALTH-4");
    /// brokers on one database are one system; a broker's own figures are per broker
    pub const CLUSTER_1: RuleId = RuleId("CLUSTER-1");
    /// a push on one broker wakes a pop parked on another
    pub const CLUSTER_2: RuleId = RuleId("CLUSTER-2");
    /// a stopped broker's spool is adopted and replayed by another
    pub const CLUSTER_3: RuleId = RuleId("CLUSTER-3");
    /// several database hosts: writes go to the primary, a promotion is followed
    pub const CLUSTER_4: RuleId = RuleId("CLUSTER-4");
    /// routes outside this protocol (key-value store, locks, timers, reads by offset)
    pub const SCOPE_1: RuleId = RuleId("SCOPE-1");
}

pub use ids::*;

/// Rules about how a broker operates under faults and load (its spool's capacity, its
/// limits, internal errors, slow clients, shutdown). A black-box case cannot provoke
/// them without knowing the broker's configuration or killing it, so they are checked
/// by the server's own tests and the fault scenarios, not by conformance cases.
pub const OPERATIONAL: &[RuleId] = &[
    PUSH_10, PUSH_12, POP_16, HEALTH_2, HEALTH_3, LIMIT_1, ERR_1, CONN_1, STOP_1, AUTH_5, ENC_3,
    ENC_4, CLUSTER_3, CLUSTER_4,
];
/// Rules a conformance case cannot state through the suite's typed requests (a query
/// pair is text, so it cannot carry bytes that are not UTF-8): our server's tests check
/// them.
pub const UNTYPED: &[RuleId] = &[WIRE_1];
/// Rules that put something outside what the suite judges: no case can check them, and
/// our server's tests check what our server answers there.
pub const UNJUDGED: &[RuleId] = &[SCOPE_1];

use Level::{Open, Project, Seed};

/// Every rule id of PROTOCOL.md, in the order of the spec.
pub const RULES: &[Rule] = &[
    Rule {
        id: PROTO_GROUP_1,
        level: Seed,
        title: "omitted group is __QUEUE_MODE__, an ordinary group",
    },
    Rule {
        id: PUSH_1,
        level: Seed,
        title: "201, one result per item, in order",
    },
    Rule {
        id: PUSH_2,
        level: Seed,
        title: "push creates queue, Default partition, config row; leaseTime 60",
    },
    Rule {
        id: PUSH_3,
        level: Project,
        title: "a push request is atomic; missing partition is Default",
    },
    Rule {
        id: PUSH_4,
        level: Seed,
        title: "missing transactionId is minted and returned",
    },
    Rule {
        id: PUSH_5,
        level: Seed,
        title: "dedup within the window, per partition",
    },
    Rule {
        id: PUSH_6,
        level: Seed,
        title: "offsets follow request order, requests commit order",
    },
    Rule {
        id: PUSH_7,
        level: Seed,
        title: "maintenance or no database: buffered, replayed in order",
    },
    Rule {
        id: PUSH_8,
        level: Project,
        title: "bad input is 400 and writes nothing; oversized body 413",
    },
    Rule {
        id: PUSH_9,
        level: Open,
        title: "absent payload null or {}; plain-push traceId kept or dropped",
    },
    Rule {
        id: PUSH_10,
        level: Project,
        title: "a full spool refuses with 503 and Retry-After; replay in committed chunks",
    },
    Rule {
        id: PUSH_11,
        level: Project,
        title: "every accepted payload can be delivered: nesting limit, no lone surrogates",
    },
    Rule {
        id: PUSH_13,
        level: Project,
        title: "a duplicate item carries the original message's message_id",
    },
    Rule {
        id: POP_17,
        level: Project,
        title: "data is the pushed payload verbatim, digits and key order included",
    },
    Rule {
        id: POP_18,
        level: Project,
        title: "out-of-range subscription times; the first pop records the group's subscription",
    },
    Rule {
        id: PUSH_12,
        level: Project,
        title: "a spooled push the database refuses for good is quarantined; the rest replays",
    },
    Rule {
        id: POP_16,
        level: Project,
        title: "a pop never commits what it did not answer; undeliverable messages are set aside",
    },
    Rule {
        id: WIRE_1,
        level: Project,
        title: "escapes in paths and query strings decode to UTF-8, or the request is 400",
    },
    Rule {
        id: WIRE_2,
        level: Project,
        title: "names in paths are percent-decoded",
    },
    Rule {
        id: POP_1,
        level: Seed,
        title: "a pop never removes; leases (committed, end] in offset order",
    },
    Rule {
        id: POP_2,
        level: Seed,
        title: "claimable: visible message past cursor and no live lease",
    },
    Rule {
        id: POP_3,
        level: Seed,
        title: "batch is shared across partitions; partitions caps claims",
    },
    Rule {
        id: POP_4,
        level: Open,
        title: "which claimable partitions a pop chooses",
    },
    Rule {
        id: POP_5,
        level: Seed,
        title: "200 answer shape",
    },
    Rule {
        id: POP_6,
        level: Seed,
        title: "nothing delivered: bare 204",
    },
    Rule {
        id: POP_7,
        level: Seed,
        title: "autoAck commits inside the pop; no lease",
    },
    Rule {
        id: POP_8,
        level: Seed,
        title: "pop on unknown queue creates its row and answers 204",
    },
    Rule {
        id: POP_9,
        level: Seed,
        title: "lease deadline from leaseSeconds or the queue's leaseTime",
    },
    Rule {
        id: POP_10,
        level: Seed,
        title: "discovery needs a scope; unparseable parameters are 400",
    },
    Rule {
        id: POP_11,
        level: Seed,
        title: "long poll parks and is woken by a push",
    },
    Rule {
        id: POP_12,
        level: Seed,
        title: "createdAt is the write time, ISO-8601 UTC with Z",
    },
    Rule {
        id: POP_13,
        level: Seed,
        title: "subscription seeding of new cursors",
    },
    Rule {
        id: POP_14,
        level: Seed,
        title: "visibility: delayedProcessing and windowBuffer",
    },
    Rule {
        id: POP_15,
        level: Seed,
        title: "minPopWaitTime bounds",
    },
    Rule {
        id: ACK_0,
        level: Seed,
        title: "well-formed ack calls answer 200; malformed 400",
    },
    Rule {
        id: ACK_1,
        level: Seed,
        title: "cumulative commit",
    },
    Rule {
        id: ACK_2,
        level: Seed,
        title: "a failure is never skipped by a later success",
    },
    Rule {
        id: ACK_3,
        level: Seed,
        title: "no faked acks: noop, already committed, unresolvable",
    },
    Rule {
        id: ACK_4,
        level: Seed,
        title: "one leased batch per (partition, group) at a time",
    },
    Rule {
        id: ACK_5,
        level: Seed,
        title: "wrong or expired lease is refused",
    },
    Rule {
        id: ACK_6,
        level: Seed,
        title: "completed, failed, retry, dlq",
    },
    Rule {
        id: ACK_7,
        level: Seed,
        title: "lease expiry never spends retry budget",
    },
    Rule {
        id: ACK_8,
        level: Project,
        title: "ack resolves the newest message with that transactionId",
    },
    Rule {
        id: ACK_9,
        level: Project,
        title: "a malformed ack call is 400 and changes nothing",
    },
    Rule {
        id: ACK_10,
        level: Project,
        title: "a live lease id with an offset outside its span is an invalid lease",
    },
    Rule {
        id: ACK_STEP_3,
        level: Project,
        title: "an ack call charges at most one retry; later failures come back uncharged",
    },
    Rule {
        id: ACK_STEP_5,
        level: Project,
        title:
            "the lease is released when anything comes back, a message failed, or the cursor reaches the span's end",
    },
    Rule {
        id: LEASE_1,
        level: Seed,
        title: "extend renews every live lease with the id, never shortens",
    },
    Rule {
        id: LEASE_2,
        level: Seed,
        title: "extend is always 200; read the body",
    },
    Rule {
        id: LEASE_3,
        level: Project,
        title: "seconds optional; non-positive seconds is 400",
    },
    Rule {
        id: DLQ_1,
        level: Seed,
        title: "retryLimit N allows N redeliveries",
    },
    Rule {
        id: DLQ_2,
        level: Project,
        title: "dead letters per (message, group); listing shape",
    },
    Rule {
        id: TXN_1,
        level: Seed,
        title: "all operations commit together or none does",
    },
    Rule {
        id: TXN_2,
        level: Project,
        title: "acks inside follow section 4; a failing ack aborts",
    },
    Rule {
        id: TXN_3,
        level: Project,
        title: "answer shape; empty operations is 400",
    },
    Rule {
        id: TXN_4,
        level: Project,
        title: "a transaction with a push is refused with 503 while pushes would spool",
    },
    Rule {
        id: TXN_5,
        level: Project,
        title: "kv or timers operations in a transaction are 400, never ignored",
    },
    Rule {
        id: TXN_6,
        level: Project,
        title: "every required lease must be live, else the transaction is refused whole",
    },
    Rule {
        id: CFG_1,
        level: Seed,
        title: "configure is a full replace",
    },
    Rule {
        id: CFG_2,
        level: Seed,
        title: "option defaults",
    },
    Rule {
        id: CFG_3,
        level: Project,
        title: "derived namespace/task; bad options are 400",
    },
    Rule {
        id: DEL_1,
        level: Project,
        title: "delete removes everything; says whether it existed",
    },
    Rule {
        id: HEALTH_1,
        level: Project,
        title: "health answers healthy and connected",
    },
    Rule {
        id: HEALTH_2,
        level: Project,
        title: "health reports the spool; a stuck replay is unhealthy",
    },
    Rule {
        id: HEALTH_3,
        level: Project,
        title: "health lists the components recovered from a failure within the last minute",
    },
    Rule {
        id: MAINT_1,
        level: Seed,
        title: "push maintenance spools and replays",
    },
    Rule {
        id: MAINT_2,
        level: Seed,
        title: "pop maintenance answers bare 204",
    },
    Rule {
        id: MAINT_3,
        level: Project,
        title: "the replay after push maintenance finishes within 3 s",
    },
    Rule {
        id: LIMIT_1,
        level: Project,
        title: "a request carries at most the configured number of items; more is 413",
    },
    Rule {
        id: ERR_1,
        level: Project,
        title: "an internal error is a generic 500 with a request id; pops answer 204",
    },
    Rule {
        id: CONN_1,
        level: Project,
        title: "slow clients are timed out; connections are capped; parked pops exempt",
    },
    Rule {
        id: STOP_1,
        level: Project,
        title: "SIGTERM: stop accepting, answer parked pops, finish in-flight, flush, exit",
    },
    Rule {
        id: AUTH_1,
        level: Seed,
        title: "with authentication on, a pop needs the read-write level",
    },
    Rule {
        id: AUTH_2,
        level: Seed,
        title: "producerSub is the sub of the token that pushed the message, else null",
    },
    Rule {
        id: AUTH_3,
        level: Project,
        title: "every route has a level: public, read-only, read-write, admin",
    },
    Rule {
        id: AUTH_4,
        level: Project,
        title: "401 without a valid token, 403 below the level, before anything else",
    },
    Rule {
        id: AUTH_5,
        level: Project,
        title: "our server's token settings: algorithms, keys, claims, skew, public paths",
    },
    Rule {
        id: AUTH_6,
        level: Seed,
        title: "no caller is admitted above its level: a security failure at SEED level",
    },
    Rule {
        id: ENC_1,
        level: Seed,
        title: "encryption is invisible on the wire: data comes back as pushed",
    },
    Rule {
        id: ENC_2,
        level: Project,
        title: "stored encrypted; without a key, encryptionEnabled is refused 400",
    },
    Rule {
        id: ENC_3,
        level: Project,
        title: "our server's key; an undecryptable message answers 500 and stays",
    },
    Rule {
        id: ENC_4,
        level: Project,
        title:
            "our embedded database keeps a key of its own; with DATABASE_URL a key must be given",
    },
    Rule {
        id: RET_1,
        level: Seed,
        title: "only retention removes messages; a removed message is never delivered again",
    },
    Rule {
        id: RET_2,
        level: Project,
        title: "what is removable: age limits, completed retention, the retentionEnabled gate",
    },
    Rule {
        id: RET_3,
        level: Project,
        title: "removal is allowed from the deadline and certain by deadline plus the interval",
    },
    Rule {
        id: RET_4,
        level: Project,
        title: "a removal moves cursors, shrinks leases, makes acks unresolvable, ends dedup",
    },
    Rule {
        id: RET_5,
        level: Project,
        title: "maxSize refuses a push past the limit with 429 and Retry-After",
    },
    Rule {
        id: CFG_4,
        level: Project,
        title: "configure stores and echoes the option keys it does not act on",
    },
    Rule {
        id: MGMT_1,
        level: Project,
        title: "management reads change nothing; an unknown queue, group or message is 404",
    },
    Rule {
        id: MGMT_2,
        level: Project,
        title: "listings are pages: bounded limit and offset (else 400), total, a stable order",
    },
    Rule {
        id: MGMT_3,
        level: Project,
        title: "consumer groups with their queues, lag, lag in seconds and state; lagging groups",
    },
    Rule {
        id: MGMT_4,
        level: Project,
        title: "resources: overview, queues, one queue, depth, partitions, namespaces, tasks",
    },
    Rule {
        id: MGMT_5,
        level: Project,
        title: "status: the overview with the maintenance switches, queue statistics",
    },
    Rule {
        id: MGMT_6,
        level: Project,
        title: "peek: messages listed with their state for a group, nothing leased",
    },
    Rule {
        id: MGMT_7,
        level: Project,
        title: "one message by partitionId and transactionId, with every group's state",
    },
    Rule {
        id: MGMT_8,
        level: Project,
        title: "seek moves a group's cursors to the end or to a time, releasing its leases",
    },
    Rule {
        id: MGMT_9,
        level: Project,
        title: "group delete removes its cursors and, with deleteMetadata, its subscriptions",
    },
    Rule {
        id: MGMT_10,
        level: Project,
        title: "metrics: JSON at /metrics, the Prometheus text at /metrics/prometheus",
    },
    Rule {
        id: MGMT_11,
        level: Project,
        title: "one message is deleted by its address; it is no longer retained",
    },
    Rule {
        id: MGMT_12,
        level: Project,
        title: "a dead letter's retry puts its message back at the end of its partition",
    },
    Rule {
        id: MGMT_13,
        level: Project,
        title: "analytics: per bucket of a window, the messages created and the dead letters filed",
    },
    Rule {
        id: HEALTH_4,
        level: Project,
        title: "health carries the broker's version and uptime",
    },
    Rule {
        id: CLUSTER_1,
        level: Project,
        title: "brokers on one database are one system; a broker's own figures are per broker",
    },
    Rule {
        id: CLUSTER_2,
        level: Project,
        title: "a push on one broker wakes a pop parked on another",
    },
    Rule {
        id: CLUSTER_3,
        level: Project,
        title: "a stopped broker's spool is adopted and replayed by another",
    },
    Rule {
        id: CLUSTER_4,
        level: Project,
        title: "several database hosts: writes go to the primary, a promotion is followed",
    },
    Rule {
        id: SCOPE_1,
        level: Open,
        title: "routes outside the protocol may be offered and are not judged",
    },
];

/// The level of a divergence naming `rules`: the most binding one (SEED when none).
pub fn level_of(rules: &[RuleId]) -> Level {
    rules.iter().map(|r| r.level()).min().unwrap_or(Level::Seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_parse_back() {
        let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
        for r in RULES {
            assert_eq!(RuleId::parse(r.id.as_str()), Some(r.id));
        }
        assert_eq!(RuleId::parse("ack-2"), Some(ACK_2));
        assert_eq!(RuleId::parse("ACK-99"), None);
    }

    #[test]
    fn levels_and_ids_read_as_the_spec_writes_them() {
        let names: Vec<String> = Level::ALL.iter().map(|l| l.to_string()).collect();
        assert_eq!(names, ["SEED", "PROJECT", "OPEN"]);
        assert!(ACK_2 == "ACK-2");
        assert!(ACK_2 != "ACK-3");
    }

    #[test]
    fn levels_order_seed_first() {
        assert_eq!(level_of(&[PUSH_8, ACK_1]), Level::Seed);
        assert_eq!(level_of(&[PUSH_8, TXN_3]), Level::Project);
        assert_eq!(level_of(&[]), Level::Seed);
        assert_eq!(ACK_STEP_3.level(), Level::Project);
    }
}
