//! What the model says a broker answers: wire answers with symbolic parts.
//!
//! Ids minted by the broker appear as handles ([`MsgH`], [`PartH`], [`LeaseH`]), times
//! as [`Stamp`]s, and OPEN alternatives that do not change the state as flags on the
//! answer (e.g. [`AckOut::may_fail`]). An engine renders an outcome into a concrete
//! wire answer ([`crate::engine`]); a checker matches a broker's answer against it
//! ([`crate::checker`]).

use super::state::{LeaseH, MsgH, PartH};
use crate::time::Stamp;
use crate::wire::{AckResult, ConfigureResponse, DeleteResponse, PushStatus, WireError};

/// The model's answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// 400 (or 413) with `{"error": ...}`; nothing changed.
    Rejected(WireError),
    /// The exact 400 of POP-10.
    DiscoveryRejected,
    /// 201 array (PUSH-1).
    Push(Vec<PushOut>),
    /// 204 with no body (POP-6).
    PopEmpty,
    /// 200 pop answer (POP-5).
    Pop(PopOut),
    /// A pop the model cannot accept: the observed choice of partitions is illegal.
    PopIllegal(crate::rules::RuleId, String),
    /// 200 array (section 4).
    Ack(Vec<AckOut>),
    /// 200 extend answer (LEASE-2).
    Extend(ExtendOut),
    /// 200 transaction answer (TXN-3).
    Txn(TxnOut),
    /// 200 configure answer.
    Configure(ConfigureResponse),
    /// 200 delete answer (DEL-1).
    Delete(DeleteResponse),
    /// 200 dead-letter listing (DLQ-2).
    Dlq(DlqOut),
    /// 200 push maintenance state (MAINT-1).
    Maintenance {
        /// Whether push maintenance is on (`maintenanceMode`).
        enabled: bool,
        /// The items in the spool (`bufferedMessages`).
        buffered: u64,
    },
    /// 200 pop maintenance state (MAINT-2).
    PopMaintenance {
        /// Whether pop maintenance is on (`popMaintenanceMode`).
        enabled: bool,
    },
    /// 200 health (HEALTH-1).
    Health,
    /// 200 management answer (section 17), judged under `rule`: the wire view as JSON,
    /// with the symbols of `super::views::sym` where ids and times go.
    View {
        /// The rule the answer is judged under.
        rule: crate::rules::RuleId,
        /// The route it answers, which names the view's type.
        route: crate::wire::RouteId,
        /// The wire view as JSON, with symbols where ids and times go.
        value: serde_json::Value,
    },
}

/// One push result.
#[derive(Clone, Debug, PartialEq)]
pub struct PushOut {
    /// The item's place in the request (`index`).
    pub index: usize,
    /// The message written (`queued`) or found (`duplicate`); `None` for `buffered`,
    /// whose id the model does not tie to the message written at replay.
    pub msg: Option<MsgH>,
    /// The item's transactionId, given or minted (`transaction_id`).
    pub transaction_id: String,
    /// The broker minted `transaction_id` (it must be a UUID).
    pub(crate) minted_txn: bool,
    /// The name of the queue the item went to (`queueName`).
    pub queue: String,
    /// What became of the item (`status`).
    pub status: PushStatus,
}

/// A delivered batch.
#[derive(Clone, Debug, PartialEq)]
pub struct PopOut {
    /// The queue from the path; `""` on discovery.
    pub queue: String,
    /// The first claimed partition (top-level `partition`/`partitionId`).
    pub(crate) first: PartH,
    /// `None` with `autoAck` (then `leaseId` is `""`).
    pub lease: Option<LeaseH>,
    /// The group the pop read for (`consumerGroup`).
    pub group: String,
    /// Messages in delivery order: `(partition, offset)`.
    pub messages: Vec<(PartH, u32)>,
    /// How many partitions the pop claimed (`partitionsClaimed`).
    pub partitions_claimed: u32,
}

/// One ack result: the expected item, plus the OPEN alternative of ACK step 6.
#[derive(Clone, Debug, PartialEq)]
pub struct AckOut {
    /// The wire item as the model expects it.
    pub result: AckResult,
    /// `success:false` with any error is also accepted (ACK step 6 OPEN).
    pub may_fail: bool,
    /// The `(partition, group)` whose lease the call released, on an item that says so
    /// (a checker follows a broker that kept it, see `checker::answer`).
    pub(crate) released: Option<(PartH, String)>,
}

/// An extend answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtendOut {
    /// The lease id the call named (`leaseId`).
    pub lease_id: String,
    /// How many live leases with that id were renewed (LEASE-1).
    pub renewed: u32,
    /// The renewed deadline (`expiresAt`); `None` when nothing was renewed.
    pub expires_at: Option<Stamp>,
    /// The extend named no `seconds`: each lease renewed by its own duration (LEASE-3).
    pub(crate) own_duration: bool,
}

/// One transaction result.
#[derive(Clone, Debug, PartialEq)]
pub enum TxnItemOut {
    /// A pushed item's result.
    Push(PushOut),
    /// An ack's result.
    Ack(AckOut),
}

/// A transaction answer; `results` is empty when it aborted.
#[derive(Clone, Debug, PartialEq)]
pub struct TxnOut {
    /// Whether every operation committed (TXN-1).
    pub success: bool,
    /// One per pushed item and per ack, in order; empty when aborted.
    pub results: Vec<TxnItemOut>,
    /// Why the transaction aborted, if it did.
    pub error: Option<String>,
    /// The rule that decided `success`: the one that aborted it, or, when it committed,
    /// the one a broker that refused it would depart from (TXN-2, TXN-6). A `success`
    /// that differs is that rule's finding, not TXN-1's: all or nothing is judged by
    /// what the broker kept.
    pub rule: crate::rules::RuleId,
}

/// A dead-letter listing: the records by index into [`super::State::dead_letters`].
#[derive(Clone, Debug, PartialEq)]
pub struct DlqOut {
    /// The page's dead letters, as indexes into the state's records.
    pub items: Vec<usize>,
    /// How many dead letters match, over all pages.
    pub total: u64,
    /// How many of those are of messages retention removed, and of messages an operator
    /// deleted: a listing that leaves them out lost the copies RET-4 and MGMT-11 keep.
    pub gone: (u64, u64),
    /// The page size used.
    pub limit: u32,
    /// How many matching rows come before the page.
    pub offset: u64,
}
