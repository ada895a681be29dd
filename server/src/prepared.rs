//! A pushed item once the broker has decided its ids: what the push writers write and
//! what the spool keeps on disk.
//!
//! It lives outside both so that neither depends on the other: the spool stores these as
//! they are, and a replay hands them back to the engine unchanged (the same message id,
//! so a replayed chunk can tell which of its items are already stored).

use queen_reference::wire::{Payload, RawJson};
use serde_json::Value;
use uuid::Uuid;

/// One item ready to be written: every id decided. The spool stores these as they are.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Prepared {
    pub queue: String,
    pub partition: String,
    /// The payload's text, written as it is (a spool written when this was a tree reads
    /// back the same).
    pub data: RawJson,
    pub transaction_id: String,
    /// The broker minted `transaction_id`: it cannot be a duplicate.
    pub minted: bool,
    pub trace_id: Option<Uuid>,
    pub message_id: Uuid,
    /// AUTH-2: the `sub` of the token that pushed it (absent in a spool written before
    /// the broker kept it).
    #[serde(default)]
    pub producer_sub: Option<String>,
}

impl Prepared {
    /// Decides the ids of a request item. `keep_trace`: a transaction keeps `traceId`; a
    /// plain push drops it (PUSH-9, as the seed `pop-routes.md` describes).
    pub fn from_item(item: queen_reference::wire::PushItem, keep_trace: bool) -> Prepared {
        let (transaction_id, minted) = match item.transaction_id {
            Some(t) => (t, false),
            None => (Uuid::now_v7().to_string(), true),
        };
        Prepared {
            queue: item.queue,
            partition: item.partition,
            // PUSH-9 [OPEN]: an absent payload is stored as null.
            data: match item.payload {
                Payload::Absent => RawJson::from_value(&Value::Null),
                Payload::Given(v) => v,
            },
            transaction_id,
            minted,
            trace_id: if keep_trace {
                item.trace_id
                    .as_deref()
                    .and_then(|t| Uuid::parse_str(t).ok())
            } else {
                None
            },
            message_id: Uuid::now_v7(),
            producer_sub: item.producer_sub,
        }
    }
}
