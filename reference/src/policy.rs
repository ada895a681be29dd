//! The project's choice at every OPEN point.
//!
//! Where PROTOCOL.md allows several behaviours, the model used as a checker accepts
//! all of them; used as a deterministic engine (our in-memory broker, unit tests) it
//! follows a [`Policy`]. The default policy is this project's choice, the one our
//! server implements, so that model and server agree answer for answer. Each field
//! names the rule it settles.

/// A point where the model may branch. Time comparisons whose outcome the request's
/// time interval does not decide are `Time`; the rest are OPEN points of the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChoicePoint {
    /// An uncertain comparison with a deadline (section 13).
    Time,
    /// ACK-8: acking a message older than the dedup window. 0 = resolve, 1 = unresolvable.
    AckBeyondDedupWindow,
    /// ACK step 7: ack without `leaseId` for a group with no cursor.
    /// 0 = `unresolvable`, 1 = commit.
    AckWithoutCursor,
    /// POP-8 read for the partition route: a partition-route pop on an unknown queue.
    /// 0 = create the queue row, 1 = create nothing. [PROJECT decision: OPEN here]
    PartitionPopCreatesQueue,
    // ---- PROJECT points another broker plausibly decides otherwise; 0 = ours. A
    // checker explores the alternative only when not strict (see `Ctx::project`).
    /// ACK-5 \[PROJECT\]: the live lease id with an offset outside its span.
    /// 0 = `invalid or expired lease`, 1 = accepted as a valid ack.
    AckOutsideSpan,
    /// ACK step 3 \[PROJECT\]: 0 = at most one retry charged per call, 1 = every
    /// failed offset of the call is charged one retry.
    AckChargesEveryFailure,
    /// ACK step 5 \[PROJECT\]: 0 = the lease is kept while part of its span stays
    /// uncommitted and nothing comes back, 1 = any accepted ack releases it.
    AckReleasesOnPartialCommit,
    /// TXN-2 \[PROJECT\]: 0 = an ack answering `success:false` aborts the transaction,
    /// 1 = the transaction commits and reports that ack's failure in its results.
    TxnKeepsFailedAck,
    /// TXN-6 \[PROJECT\]: 0 = a transaction whose required lease is not live is refused,
    /// 1 = the broker does not check `requiredLeases` and runs it.
    TxnIgnoresRequiredLeases,
    /// POP-13 \[PROJECT\]: 0 = the first pop records the group's subscription (later
    /// partitions start at their beginning), 1 = every pop seeds the partitions the
    /// group has no cursor on yet with that pop's subscription parameters.
    SubscriptionPerPartition,
    /// TXN-4 \[PROJECT\]: 0 = a transaction with a push is refused (503) while push
    /// maintenance is on, 1 = it is written as if maintenance were off.
    TxnWritesUnderMaintenance,
    /// ENC-2 [OPEN for the checker: the broker's key is its operator's setting]: a
    /// configure with `encryptionEnabled: true`. 0 = configured (a broker with a key),
    /// 1 = refused 400 (a broker without one).
    EncryptionRefused,
    /// RET-3 [OPEN inside the window]: a message removable for less than the broker's
    /// retention interval. 0 = removed (as soon as it may be), 1 = still there.
    RetentionLate,
    /// RET-3 \[PROJECT\]: 0 = a message past its age limit and the retention interval is
    /// removed, 1 = the broker does not remove it (nor anything after).
    RetentionIgnored,
    /// RET-2 \[PROJECT\]: 0 = `retentionSeconds`/`completedRetentionSeconds` remove nothing
    /// without `retentionEnabled`, 1 = the broker removes by them anyway.
    RetentionUngated,
    /// RET-5 \[PROJECT\]: 0 = a push past `maxSize` is refused 429, 1 = it is written.
    MaxSizeIgnored,
    /// RET-4 \[PROJECT\]: 0 = a message retention removed deduplicates nothing, 1 = a push
    /// with its transactionId within the window is still a duplicate.
    DedupRemoved,
    /// MGMT-11 \[PROJECT\]: 0 = one message is deleted by its address, 1 = the delete is
    /// refused with 405 and changes nothing.
    MessageDeleteRefused,
    /// MAINT-3 [OPEN inside the bound]: a spool whose replay may still be running.
    /// 0 = replayed by now (ours: before the switch answers), 1 = not yet.
    SpoolReplayLate,
}

/// How an absent `payload` is stored (PUSH-9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AbsentPayload {
    /// Stored as JSON `null` (our server).
    #[default]
    Null,
    /// Stored as `{}`.
    EmptyObject,
}

/// What a plain push does with a `traceId` (PUSH-9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PlainPushTrace {
    /// Dropped: pop shows `null`. The seed (`pop-routes.md`: "`null` unless the message
    /// was written by a transaction that supplied one") describes this, and the seed
    /// wins over PROTOCOL.md's "(our server) stores it"; see the issue note.
    #[default]
    Drop,
    /// Stored and returned by pop.
    Keep,
}

/// ACK step 6: a completion above the new cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BlockedCompletion {
    /// `success:true, noop:false` (our server).
    #[default]
    Success,
    /// `success:false` with an error.
    Failure,
}

/// Which claimable partitions a queue-scoped or discovery pop takes first (POP-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PopOrder {
    /// The partition whose oldest unconsumed message is oldest (the memory engine; the
    /// PostgreSQL engine goes round robin, which the checker follows the same way).
    #[default]
    OldestFirst,
    /// The most recently created partition first: another legal choice, used to
    /// prove the checker follows the broker's choice instead of predicting it.
    NewestPartitionFirst,
}

/// The project's choices; `Policy::default()` ([`Policy::ours`]) is what our server does,
/// but for [`PopOrder`]: our memory engine takes the oldest partition first, our
/// PostgreSQL engine goes round robin (POP-4 leaves the order open), and the checker
/// follows whichever order the broker took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// What an absent `payload` is stored as (PUSH-9).
    pub absent_payload: AbsentPayload,
    /// Whether a plain push's `traceId` is returned or dropped (PUSH-9).
    pub plain_push_trace: PlainPushTrace,
    /// How a completion above a blocked cursor is answered (ACK step 6).
    pub blocked_completion: BlockedCompletion,
    /// Which claimable partitions a queue-scoped or discovery pop takes first (POP-4).
    pub pop_order: PopOrder,
    /// Alternative index taken at [`ChoicePoint::AckBeyondDedupWindow`].
    pub ack_beyond_dedup_window: u32,
    /// Alternative index taken at [`ChoicePoint::AckWithoutCursor`].
    pub ack_without_cursor: u32,
    /// Alternative index taken at [`ChoicePoint::PartitionPopCreatesQueue`].
    pub partition_pop_creates_queue: u32,
    /// Alternative index taken at [`ChoicePoint::AckOutsideSpan`] (PROJECT; 0 = ours).
    pub ack_outside_span: u32,
    /// Alternative index taken at [`ChoicePoint::AckChargesEveryFailure`] (PROJECT).
    pub ack_charges_every_failure: u32,
    /// Alternative index taken at [`ChoicePoint::AckReleasesOnPartialCommit`] (PROJECT).
    pub ack_releases_on_partial_commit: u32,
    /// Alternative index taken at [`ChoicePoint::TxnKeepsFailedAck`] (PROJECT).
    pub txn_keeps_failed_ack: u32,
    /// Alternative index taken at [`ChoicePoint::TxnIgnoresRequiredLeases`] (PROJECT).
    pub txn_ignores_required_leases: u32,
    /// Alternative index taken at [`ChoicePoint::SubscriptionPerPartition`] (PROJECT).
    pub subscription_per_partition: u32,
    /// Alternative index taken at [`ChoicePoint::TxnWritesUnderMaintenance`] (PROJECT).
    pub txn_writes_under_maintenance: u32,
    /// Alternative index taken at [`ChoicePoint::EncryptionRefused`].
    pub encryption_refused: u32,
    /// Alternative index taken at [`ChoicePoint::RetentionLate`].
    pub retention_late: u32,
    /// Alternative index taken at [`ChoicePoint::RetentionIgnored`] (PROJECT).
    pub retention_ignored: u32,
    /// Alternative index taken at [`ChoicePoint::RetentionUngated`] (PROJECT).
    pub retention_ungated: u32,
    /// Alternative index taken at [`ChoicePoint::MaxSizeIgnored`] (PROJECT).
    pub max_size_ignored: u32,
    /// Alternative index taken at [`ChoicePoint::DedupRemoved`] (PROJECT).
    pub dedup_removed: u32,
    /// Alternative index taken at [`ChoicePoint::MessageDeleteRefused`] (PROJECT).
    pub message_delete_refused: u32,
    /// Deviations played (none for ours): an engine that breaks rules on purpose, to
    /// show that the checker names each [`crate::variant::Variant`] as the cause.
    pub variants: crate::variant::VariantSet,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::ours()
    }
}

impl Policy {
    /// Our choice at every point: what our server does, read by both engines (a
    /// constant, so an engine's hot path holds it without building it).
    pub const fn ours() -> Policy {
        Policy {
            absent_payload: AbsentPayload::Null,
            plain_push_trace: PlainPushTrace::Drop,
            blocked_completion: BlockedCompletion::Success,
            pop_order: PopOrder::OldestFirst,
            ack_beyond_dedup_window: 0,
            ack_without_cursor: 0,
            partition_pop_creates_queue: 0,
            ack_outside_span: 0,
            ack_charges_every_failure: 0,
            ack_releases_on_partial_commit: 0,
            txn_keeps_failed_ack: 0,
            txn_ignores_required_leases: 0,
            subscription_per_partition: 0,
            txn_writes_under_maintenance: 0,
            encryption_refused: 0,
            retention_late: 0,
            retention_ignored: 0,
            retention_ungated: 0,
            max_size_ignored: 0,
            dedup_removed: 0,
            message_delete_refused: 0,
            variants: crate::variant::VariantSet::EMPTY,
        }
    }

    /// The other alternative at every OPEN point: a legal broker unlike ours, used to
    /// prove that checks accept every allowed behaviour.
    pub fn alternative() -> Policy {
        Policy {
            absent_payload: AbsentPayload::EmptyObject,
            plain_push_trace: PlainPushTrace::Keep,
            blocked_completion: BlockedCompletion::Failure,
            ack_beyond_dedup_window: 1,
            ack_without_cursor: 1,
            partition_pop_creates_queue: 1,
            encryption_refused: 1,
            retention_late: 1,
            pop_order: PopOrder::NewestPartitionFirst,
            ..Policy::default()
        }
    }

    /// The other alternative at every PROJECT point modelled as a choice: a broker
    /// that differs from ours only on project-resolved points (a strict checker
    /// rejects it; a lax one lists the differences).
    pub fn project_alternative() -> Policy {
        Policy {
            ack_outside_span: 1,
            ack_charges_every_failure: 1,
            ack_releases_on_partial_commit: 1,
            txn_keeps_failed_ack: 1,
            txn_ignores_required_leases: 1,
            subscription_per_partition: 1,
            txn_writes_under_maintenance: 1,
            retention_ignored: 1,
            retention_ungated: 1,
            max_size_ignored: 1,
            dedup_removed: 1,
            message_delete_refused: 1,
            // Late inside the window too (an OPEN point), so that retention_ignored is
            // reached: a broker that keeps every message until the window ends.
            retention_late: 1,
            ..Policy::default()
        }
    }

    /// The alternative this policy takes at `point` (0 for time: an engine's times are exact).
    pub fn pick(&self, point: ChoicePoint) -> u32 {
        match point {
            ChoicePoint::Time | ChoicePoint::SpoolReplayLate => 0,
            ChoicePoint::AckBeyondDedupWindow => self.ack_beyond_dedup_window,
            ChoicePoint::AckWithoutCursor => self.ack_without_cursor,
            ChoicePoint::PartitionPopCreatesQueue => self.partition_pop_creates_queue,
            ChoicePoint::AckOutsideSpan => self.ack_outside_span,
            ChoicePoint::AckChargesEveryFailure => self.ack_charges_every_failure,
            ChoicePoint::AckReleasesOnPartialCommit => self.ack_releases_on_partial_commit,
            ChoicePoint::TxnKeepsFailedAck => self.txn_keeps_failed_ack,
            ChoicePoint::TxnIgnoresRequiredLeases => self.txn_ignores_required_leases,
            ChoicePoint::SubscriptionPerPartition => self.subscription_per_partition,
            ChoicePoint::TxnWritesUnderMaintenance => self.txn_writes_under_maintenance,
            ChoicePoint::EncryptionRefused => self.encryption_refused,
            ChoicePoint::RetentionLate => self.retention_late,
            ChoicePoint::RetentionIgnored => self.retention_ignored,
            ChoicePoint::RetentionUngated => self.retention_ungated,
            ChoicePoint::MaxSizeIgnored => self.max_size_ignored,
            ChoicePoint::DedupRemoved => self.dedup_removed,
            ChoicePoint::MessageDeleteRefused => self.message_delete_refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternatives_differ_from_ours_at_every_point_they_name() {
        let (alt, ours) = (Policy::alternative(), Policy::default());
        assert_ne!(alt.absent_payload, ours.absent_payload);
        assert_ne!(alt.plain_push_trace, ours.plain_push_trace);
        assert_ne!(alt.blocked_completion, ours.blocked_completion);
        assert_ne!(alt.pop_order, ours.pop_order);
        for point in [
            ChoicePoint::AckBeyondDedupWindow,
            ChoicePoint::AckWithoutCursor,
            ChoicePoint::PartitionPopCreatesQueue,
            ChoicePoint::EncryptionRefused,
            ChoicePoint::RetentionLate,
        ] {
            assert_eq!((alt.pick(point), ours.pick(point)), (1, 0), "{point:?}");
        }
        let project = Policy::project_alternative();
        for point in [
            ChoicePoint::AckOutsideSpan,
            ChoicePoint::AckChargesEveryFailure,
            ChoicePoint::AckReleasesOnPartialCommit,
            ChoicePoint::TxnKeepsFailedAck,
            ChoicePoint::TxnIgnoresRequiredLeases,
            ChoicePoint::SubscriptionPerPartition,
            ChoicePoint::TxnWritesUnderMaintenance,
            ChoicePoint::RetentionIgnored,
            ChoicePoint::RetentionUngated,
            ChoicePoint::MaxSizeIgnored,
            ChoicePoint::DedupRemoved,
            ChoicePoint::MessageDeleteRefused,
        ] {
            assert_eq!((project.pick(point), ours.pick(point)), (1, 0), "{point:?}");
            assert_eq!(
                alt.pick(point),
                0,
                "the OPEN alternative keeps our {point:?}"
            );
        }
        assert_eq!(ours.pick(ChoicePoint::Time), 0);
    }
}
