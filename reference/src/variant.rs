//! Variants: named, realistic ways a broker breaks exactly one rule, for diagnosis.
//!
//! A broker that ignores `?leaseSeconds` shows it first as a pop that finds nothing and
//! later as an ack after "expiry" that succeeds: symptoms under POP-2 and ACK-5. The rule it
//! breaks is POP-9. To name that cause, the model itself can behave like such a broker:
//! each [`Variant`] is a point in the operation code (asked through `Ctx::deviates`, the
//! same way a PROJECT alternative is asked through `Ctx::project`) or a way of reading the
//! request (`Variant::reads`). When no allowed behaviour explains a broker's answer, the
//! checker replays what it saw under each variant and keeps the smallest set that explains
//! the answer and everything before it; that set is the cause, reported once under the
//! variant's rule, and checking goes on under it.
//!
//! A variant is data: its rule, a stable name and what the broker does. The table
//! [`VARIANTS`] is the library; a [`VariantSet`] is a small bitset of them (a world's
//! diagnosed causes, or the variants a deterministic engine plays).

use crate::rules::*;
use crate::wire::HttpRequest;

/// One realistic deviation from one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    // ---- pop
    /// The broker ignores `leaseSeconds`: a pop's lease lasts the queue's leaseTime. Breaks POP-9.
    LeaseSecondsIgnored,
    /// The broker ignores `autoAck=true`: the pop leases instead of committing. Breaks POP-7.
    AutoAckIgnored,
    /// The broker ignores `delayedProcessing`: messages are delivered at once. Breaks POP-14.
    DelayIgnored,
    /// The broker ignores `windowBuffer`: a partition written to just now is delivered. Breaks
    /// POP-14.
    WindowBufferIgnored,
    /// The broker ignores `partitions`: one pop claims every claimable partition. Breaks POP-3.
    PartitionCapIgnored,
    /// The broker ignores `subscriptionMode=new`: a new group starts at the oldest message. Breaks
    /// POP-13.
    SubscriptionNewIgnored,
    /// An expired lease spends one retry of its first message. Breaks ACK-7.
    ExpiryChargesRetry,
    /// A queue created by a push or a pop gets leaseTime 300 instead of 60. Breaks PUSH-2.
    ImplicitLease300,
    /// The broker ignores `batch`: a pop delivers every message of the partitions it claims. Breaks
    /// POP-3.
    BatchIgnored,
    /// A discovery pop given `namespace` and `task` matches the namespace alone. Breaks POP-10.
    DiscoveryIgnoresTask,
    // ---- push
    /// A transactionId stays a duplicate forever: the dedup window is never applied. Breaks PUSH-5.
    DedupWithoutWindow,
    /// A push repeating a transactionId within the window is written again. Breaks PUSH-5.
    DedupIgnored,
    // ---- ack
    /// An ack that commits the whole leased span keeps the lease until it expires. Breaks ACK-1.
    CompletionKeepsLease,
    /// A `failed` or `retry` ack keeps the lease until it expires, so what comes back waits for it.
    /// Breaks ACK-6.
    FailureKeepsLease,
    /// A failure signal at or below the cursor is accepted and moves the cursor back. Breaks ACK-3.
    FailureBelowCursorMovesBack,
    /// A `retry` ack spends a retry like `failed`. Breaks ACK-6.
    RetryCharged,
    /// `retryLimit` N allows N+1 failure-driven redeliveries before the dead letter. Breaks DLQ-1.
    RetryLimitOffByOne,
    /// Every failed offset of one call after the first is dead-lettered at once. Breaks DLQ-1.
    EveryFailureDeadLettered,
    /// A later completion moves the cursor past a failure of the same call. Breaks ACK-2.
    FailureNotClamping,
    /// A call that completes a message of a partition ignores its failure signals there. Breaks
    /// ACK-2.
    FailureDroppedBySuccess,
    /// An ack carrying an expired lease id is accepted. Breaks ACK-5.
    ExpiredLeaseAccepted,
    /// An ack without `leaseId` is refused as an invalid lease instead of being accepted unchecked.
    /// Breaks ACK-5.
    AckWithoutLeaseRefused,
    /// A failed message comes back at once, without waiting `retryDelay`. Breaks ACK-6.
    RetryDelayIgnored,
    /// `failed` spends no retry: a message that keeps failing never becomes a dead letter. Breaks
    /// DLQ-1.
    FailureNeverCharged,
    /// A `dlq` ack commits the message without filing a dead letter. Breaks ACK-6.
    DlqStatusCommits,
    // ---- lease
    /// An extend adds its seconds to the current deadline instead of to now. Breaks LEASE-1.
    ExtendFromDeadline,
    /// An extend renews a lease that has already expired. Breaks LEASE-1.
    ExtendRevivesExpired,
    // ---- configure, delete, maintenance, transactions
    /// An extend renews by the lease's own duration whatever `seconds` it is given. Breaks LEASE-1.
    ExtendIgnoresSeconds,
    /// An extend sets the deadline to now + seconds even when that shortens the lease. Breaks
    /// LEASE-1.
    ExtendShortens,
    /// Deleting a queue keeps its partitions, messages and cursors. Breaks DEL-1.
    DeleteKeepsMessages,
    /// Pushes under push maintenance are written at once instead of buffered. Breaks MAINT-1.
    PushMaintenanceIgnored,
    /// Pops under pop maintenance deliver as usual. Breaks MAINT-2.
    PopMaintenanceIgnored,
    /// A transaction that aborts (an ack fails, or a required lease is not live) still
    /// writes its pushes. Breaks TXN-1.
    TxnNotAtomic,
    // ---- how the request is read
    /// The broker does not percent-decode names in paths: `a%20b` names the queue `a%20b`. Breaks
    /// WIRE-2.
    PathNotDecoded,
    /// The broker reads `partitions` 0 or negative as 1 instead of no cap. Breaks POP-3.
    PartitionsZeroAsOne,
}

/// A variant's entry in the library.
#[derive(Clone, Copy, Debug)]
pub struct Def {
    /// The variant this entry describes.
    pub(crate) variant: Variant,
    /// The one rule the variant breaks (a diagnosed cause is filed under it, at its level).
    pub rule: RuleId,
    /// A stable kebab-case name (`--accept` and reports use it).
    pub name: &'static str,
    /// What such a broker does, as a report says it.
    pub what: &'static str,
}

use Variant::*;

const fn def(variant: Variant, rule: RuleId, name: &'static str, what: &'static str) -> Def {
    Def {
        variant,
        rule,
        name,
        what,
    }
}

/// The library of variants, in [`Variant`] order.
pub const VARIANTS: &[Def] = &[
    def(LeaseSecondsIgnored, POP_9, "lease-seconds-ignored",
        "the broker ignores `leaseSeconds`: a pop's lease lasts the queue's leaseTime"),
    def(AutoAckIgnored, POP_7, "auto-ack-ignored",
        "the broker ignores `autoAck=true`: the pop leases instead of committing"),
    def(DelayIgnored, POP_14, "delayed-processing-ignored",
        "the broker ignores `delayedProcessing`: messages are delivered at once"),
    def(WindowBufferIgnored, POP_14, "window-buffer-ignored",
        "the broker ignores `windowBuffer`: a partition written to just now is delivered"),
    def(PartitionCapIgnored, POP_3, "partition-cap-ignored",
        "the broker ignores `partitions`: one pop claims every claimable partition"),
    def(SubscriptionNewIgnored, POP_13, "subscription-new-ignored",
        "the broker ignores `subscriptionMode=new`: a new group starts at the oldest message"),
    def(ExpiryChargesRetry, ACK_7, "expiry-charges-retry",
        "an expired lease spends one retry of its first message"),
    def(ImplicitLease300, PUSH_2, "implicit-lease-300",
        "a queue created by a push or a pop gets leaseTime 300 instead of 60"),
    def(BatchIgnored, POP_3, "batch-ignored",
        "the broker ignores `batch`: a pop delivers every message of the partitions it claims"),
    def(DiscoveryIgnoresTask, POP_10, "discovery-ignores-task",
        "a discovery pop given `namespace` and `task` matches the namespace alone"),
    def(DedupWithoutWindow, PUSH_5, "dedup-without-window",
        "a transactionId stays a duplicate forever: the dedup window is never applied"),
    def(DedupIgnored, PUSH_5, "dedup-ignored",
        "a push repeating a transactionId within the window is written again"),
    def(CompletionKeepsLease, ACK_1, "completion-keeps-lease",
        "an ack that commits the whole leased span keeps the lease until it expires"),
    def(FailureKeepsLease, ACK_6, "failure-keeps-lease",
        "a `failed` or `retry` ack keeps the lease until it expires, so what comes back waits for it"),
    def(FailureBelowCursorMovesBack, ACK_3, "failure-below-cursor-moves-back",
        "a failure signal at or below the cursor is accepted and moves the cursor back"),
    def(RetryCharged, ACK_6, "retry-charged",
        "a `retry` ack spends a retry like `failed`"),
    def(RetryLimitOffByOne, DLQ_1, "retry-limit-off-by-one",
        "retryLimit N allows N+1 failure-driven redeliveries before the dead letter"),
    def(EveryFailureDeadLettered, DLQ_1, "every-failure-dead-lettered",
        "every failed offset of one call after the first is dead-lettered at once"),
    def(FailureNotClamping, ACK_2, "failure-not-clamping",
        "a later completion moves the cursor past a failure of the same call"),
    def(FailureDroppedBySuccess, ACK_2, "failure-dropped-by-success",
        "a call that completes a message of a partition ignores its failure signals there"),
    def(ExpiredLeaseAccepted, ACK_5, "expired-lease-accepted",
        "an ack carrying an expired lease id is accepted"),
    def(AckWithoutLeaseRefused, ACK_5, "ack-without-lease-refused",
        "an ack without `leaseId` is refused as an invalid lease instead of being accepted unchecked"),
    def(RetryDelayIgnored, ACK_6, "retry-delay-ignored",
        "a failed message comes back at once, without waiting `retryDelay`"),
    def(FailureNeverCharged, DLQ_1, "failure-never-charged",
        "`failed` spends no retry: a message that keeps failing never becomes a dead letter"),
    def(DlqStatusCommits, ACK_6, "dlq-status-commits",
        "a `dlq` ack commits the message without filing a dead letter"),
    def(ExtendFromDeadline, LEASE_1, "extend-from-deadline",
        "an extend adds its seconds to the current deadline instead of to now"),
    def(ExtendRevivesExpired, LEASE_1, "extend-revives-expired",
        "an extend renews a lease that has already expired"),
    def(ExtendIgnoresSeconds, LEASE_1, "extend-ignores-seconds",
        "an extend renews by the lease's own duration whatever `seconds` it is given"),
    def(ExtendShortens, LEASE_1, "extend-shortens",
        "an extend sets the deadline to now + seconds even when that shortens the lease"),
    def(DeleteKeepsMessages, DEL_1, "delete-keeps-messages",
        "deleting a queue keeps its partitions, messages and cursors"),
    def(PushMaintenanceIgnored, MAINT_1, "push-maintenance-ignored",
        "pushes under push maintenance are written at once instead of buffered"),
    def(PopMaintenanceIgnored, MAINT_2, "pop-maintenance-ignored",
        "pops under pop maintenance deliver as usual"),
    def(TxnNotAtomic, TXN_1, "transaction-not-atomic",
        "a transaction that aborts still writes its pushes"),
    def(PathNotDecoded, WIRE_2, "path-not-decoded",
        "the broker does not percent-decode names in paths: `a%20b` names the queue `a%20b`"),
    def(PartitionsZeroAsOne, POP_3, "partitions-zero-as-one",
        "the broker reads `partitions` 0 or negative as 1 instead of no cap"),
];

impl Variant {
    /// How many variants the library holds (the length of [`VARIANTS`]).
    pub const COUNT: usize = 35;

    /// The variant's entry in [`VARIANTS`].
    pub fn def(self) -> &'static Def {
        &VARIANTS[self as usize]
    }

    /// The one rule the variant breaks.
    pub fn rule(self) -> RuleId {
        self.def().rule
    }

    /// The variant's stable kebab-case name.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Every variant, in library order.
    pub fn all() -> impl Iterator<Item = Variant> {
        VARIANTS.iter().map(|d| d.variant)
    }

    /// The variant named `name` (kebab-case, as [`Def::name`]).
    pub(crate) fn parse(name: &str) -> Option<Variant> {
        VARIANTS
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name.trim()))
            .map(|d| d.variant)
    }

    /// How a broker with this variant reads `req`, when that differs from the protocol's
    /// reading (`None` for a variant of the operation code, or one that changes nothing here).
    pub(crate) fn reads(self, req: &HttpRequest) -> Option<HttpRequest> {
        match self {
            PathNotDecoded if req.path.contains('%') => Some(HttpRequest {
                path: req.path.replace('%', "%25"),
                ..req.clone()
            }),
            PartitionsZeroAsOne => {
                let capless = |v: &str| v.trim().parse::<i64>().is_ok_and(|n| n <= 0);
                req.query
                    .iter()
                    .any(|(k, v)| k == "partitions" && capless(v))
                    .then(|| {
                        let mut r = req.clone();
                        for (k, v) in &mut r.query {
                            if k == "partitions" && capless(v) {
                                *v = "1".into();
                            }
                        }
                        r
                    })
            }
            _ => None,
        }
    }

    /// Whether this variant is a way of reading requests (see [`Variant::reads`]).
    pub(crate) fn is_reading(self) -> bool {
        matches!(self, PathNotDecoded | PartitionsZeroAsOne)
    }
}

impl serde::Serialize for Variant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of variants (a bitset: small and `Copy`, so a policy and a world carry it freely).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VariantSet(u64);

impl VariantSet {
    /// The set of no variants: the protocol as specified.
    pub const EMPTY: VariantSet = VariantSet(0);

    /// The set of the variants `vs`.
    pub fn of(vs: &[Variant]) -> VariantSet {
        vs.iter().fold(VariantSet::EMPTY, |s, v| s.with(*v))
    }

    /// This set with `v` added.
    pub(crate) fn with(self, v: Variant) -> VariantSet {
        VariantSet(self.0 | 1 << v as u64)
    }

    /// Whether `v` is in the set.
    pub(crate) fn contains(self, v: Variant) -> bool {
        self.0 & (1 << v as u64) != 0
    }

    /// Whether the set holds no variant.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The variants in either set.
    pub(crate) fn union(self, o: VariantSet) -> VariantSet {
        VariantSet(self.0 | o.0)
    }

    /// How many variants the set holds.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The set's variants, in library order.
    pub(crate) fn iter(self) -> impl Iterator<Item = Variant> {
        Variant::all().filter(move |v| self.contains(*v))
    }
}

/// `req` as a broker with the variants `set` reads it (the request itself when none of
/// them reads requests otherwise).
pub(crate) fn read_as(set: VariantSet, req: &HttpRequest) -> Option<HttpRequest> {
    let mut out: Option<HttpRequest> = None;
    for v in set.iter().filter(|v| v.is_reading()) {
        if let Some(r) = v.reads(out.as_ref().unwrap_or(req)) {
            out = Some(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_in_enum_order_with_unique_names_and_at_least_25_variants() {
        assert_eq!(VARIANTS.len(), Variant::COUNT);
        assert!(VARIANTS.len() >= 25);
        for (i, d) in VARIANTS.iter().enumerate() {
            assert_eq!(d.variant as usize, i, "{} out of order", d.name);
            assert_eq!(Variant::parse(d.name), Some(d.variant));
            assert!(!d.what.is_empty());
        }
        assert!(VARIANTS.len() <= 64, "a VariantSet is a u64");
    }

    #[test]
    fn a_set_holds_what_it_was_given() {
        let s = VariantSet::of(&[RetryCharged, PathNotDecoded]);
        assert!(s.contains(RetryCharged) && s.contains(PathNotDecoded));
        assert!(!s.contains(DedupIgnored));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![RetryCharged, PathNotDecoded]
        );
    }

    #[test]
    fn reading_variants_rewrite_only_what_they_misread() {
        let r = HttpRequest::get("/api/v1/pop/queue/a%20b", &[("partitions", "0")]);
        let raw = PathNotDecoded.reads(&r).unwrap();
        assert_eq!(raw.path, "/api/v1/pop/queue/a%2520b");
        assert!(PathNotDecoded
            .reads(&HttpRequest::get("/api/v1/pop/queue/ab", &[]))
            .is_none());
        let one = PartitionsZeroAsOne.reads(&r).unwrap();
        assert_eq!(one.query, vec![("partitions".to_string(), "1".to_string())]);
        assert!(PartitionsZeroAsOne
            .reads(&HttpRequest::get("/x", &[("partitions", "3")]))
            .is_none());
        let both = read_as(VariantSet::of(&[PathNotDecoded, PartitionsZeroAsOne]), &r).unwrap();
        assert_eq!(
            (both.path.as_str(), both.query[0].1.as_str()),
            ("/api/v1/pop/queue/a%2520b", "1")
        );
        assert!(read_as(VariantSet::of(&[RetryCharged]), &r).is_none());
    }
}
