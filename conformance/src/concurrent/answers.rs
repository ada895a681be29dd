//! Lenient reading of the answers a concurrent history recorded, for the invariants and
//! the drain (not for the linearizability search, which holds answers to the model).
//!
//! An independent broker may differ from PROTOCOL.md on details that say nothing about
//! what happened: a push answered 200 instead of 201, an ack item without `noop`, a
//! capitalised error text. Reading answers strictly turned such details into false
//! findings (a push answered 200 was "not written", so its message became a phantom; an
//! ack whose items lacked `noop` was "refused", so the lease it released became a double
//! lease). So each answer is read field by field, and what cannot be read is *unknown*
//! (maybe applied), never "certainly not applied": the invariants stay sound under
//! unknown outcomes, so an unreadable answer can only make them claim less.

use super::history::Answer;
use queen_reference::time::{parse_iso, Millis};
use queen_reference::wire::{HttpResponse, PushStatus};
use serde_json::Value;

fn is_2xx(a: &HttpResponse) -> bool {
    (200..300).contains(&a.status)
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// One message of a pop answer: what the invariants and the acks need of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Popped {
    /// The message's `transactionId`.
    pub transaction_id: String,
    /// The id of the partition it was popped from (what an ack names).
    pub partition_id: String,
    /// The partition's name (from the message, else the top level when it names the
    /// same partition id); `None` when the answer does not say.
    pub partition: Option<String>,
    /// `""` when the answer names none (an `autoAck` delivery).
    pub lease_id: String,
}

/// What a pop answer says was delivered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PopRead {
    /// 204, or a 2xx whose `messages` is an empty array: nothing delivered.
    Empty,
    /// A 2xx whose `messages` is an array of readable messages.
    Delivered(Vec<Popped>),
    /// Unknown, or an answer that cannot be read: something may have been leased that
    /// the history cannot name.
    Blind,
}

/// Reads a pop answer leniently (any 2xx status, extra or missing keys).
pub(crate) fn read_pop(answer: &Answer) -> PopRead {
    let Answer::Known(a) = answer else {
        return PopRead::Blind;
    };
    if a.status == 204 {
        return PopRead::Empty;
    }
    let Some(body) = a.body.as_ref().filter(|_| is_2xx(a)) else {
        return PopRead::Blind;
    };
    let Some(list) = body.get("messages").and_then(Value::as_array) else {
        return PopRead::Blind;
    };
    let msgs: Option<Vec<Popped>> = list.iter().map(|m| popped(body, m)).collect();
    match msgs {
        Some(m) if m.is_empty() => PopRead::Empty,
        Some(m) => PopRead::Delivered(m),
        // A message the history cannot name: as if the answer were lost.
        None => PopRead::Blind,
    }
}

fn popped(top: &Value, m: &Value) -> Option<Popped> {
    let partition_id = text(m, "partitionId")?;
    let same_as_top = text(top, "partitionId").as_deref() == Some(partition_id.as_str());
    Some(Popped {
        transaction_id: text(m, "transactionId")?,
        partition: text(m, "partition")
            .or_else(|| same_as_top.then(|| text(top, "partition")).flatten()),
        lease_id: text(m, "leaseId")
            .or_else(|| text(top, "leaseId"))
            .unwrap_or_default(),
        partition_id,
    })
}

/// What a push answer says of one item; `status` is `None` when unreadable.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PushItemRead {
    /// The item's `status` (`queued`, `buffered`, `duplicate`).
    pub status: Option<PushStatus>,
    /// The item's `transactionId`, when the answer gives one.
    pub transaction_id: Option<String>,
}

/// What a push answer says.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PushRead {
    /// No usable answer: every item written or not.
    Unknown,
    /// A 4xx: nothing written (bad input, PUSH-8).
    Refused,
    /// A 2xx array: one entry per result item, in order.
    Items(Vec<PushItemRead>),
}

/// Reads a push answer: any 2xx whose body is an array of per-item results counts as
/// answered, whatever its exact status (PUSH-1 says 201).
pub(crate) fn read_push(answer: &Answer) -> PushRead {
    let Answer::Known(a) = answer else {
        return PushRead::Unknown;
    };
    if (400..500).contains(&a.status) {
        return PushRead::Refused;
    }
    match a
        .body
        .as_ref()
        .filter(|_| is_2xx(a))
        .and_then(Value::as_array)
    {
        Some(items) => PushRead::Items(
            items
                .iter()
                .map(|r| PushItemRead {
                    status: r
                        .get("status")
                        .and_then(Value::as_str)
                        .and_then(push_status),
                    transaction_id: text(r, "transaction_id").or_else(|| text(r, "transactionId")),
                })
                .collect(),
        ),
        None => PushRead::Unknown,
    }
}

fn push_status(s: &str) -> Option<PushStatus> {
    [
        ("queued", PushStatus::Queued),
        ("duplicate", PushStatus::Duplicate),
        ("buffered", PushStatus::Buffered),
    ]
    .into_iter()
    .find(|(name, _)| s.eq_ignore_ascii_case(name))
    .map(|(_, st)| st)
}

/// What an ack answer says of one item: `success` is read; the other flags are `None`
/// when the answer leaves them out.
#[derive(Clone, Debug, PartialEq)]
pub struct AckRead {
    /// Whether the ack answer says `success`.
    pub success: bool,
    /// The answer's `noop` flag: the ack changed nothing (section 4).
    pub noop: Option<bool>,
    /// The answer's `dlq` flag: the failure moved the message to the dead-letter queue (section 6).
    pub dlq: Option<bool>,
    /// The answer's `leaseReleased` flag: the ack released the partition's lease (section 4).
    pub lease_released: Option<bool>,
}

/// Reads an ack answer: per item of a 2xx array, `Some` when its `success` is a boolean
/// (whatever else is missing), `None` (unknown) otherwise. `None` for the whole answer
/// when it is unknown or not a 2xx array (a 201, a 400 to a well-formed call, a body that
/// is not an array): maybe applied, maybe not.
pub(crate) fn read_acks(answer: &Answer) -> Option<Vec<Option<AckRead>>> {
    let Answer::Known(a) = answer else {
        return None;
    };
    let items = a.body.as_ref().filter(|_| is_2xx(a))?.as_array()?;
    Some(
        items
            .iter()
            .map(|r| {
                let flag = |k: &str| r.get(k).and_then(Value::as_bool);
                Some(AckRead {
                    success: flag("success")?,
                    noop: flag("noop"),
                    dlq: flag("dlq"),
                    lease_released: flag("leaseReleased"),
                })
            })
            .collect(),
    )
}

/// What an extend answer says of a lease (LEASE-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtendRead {
    /// Renewed: live until this deadline (broker clock, ms).
    Live(Millis),
    /// Nothing renewed: the lease had expired or been released (never revived, LEASE-1).
    Gone,
    /// No usable answer.
    Unknown,
}

/// Reads an extend answer: a 2xx object with a boolean `success` (and, when true, a
/// readable `expiresAt`).
pub(crate) fn read_extend(answer: &Answer) -> ExtendRead {
    let Answer::Known(a) = answer else {
        return ExtendRead::Unknown;
    };
    let Some(body) = a.body.as_ref().filter(|_| is_2xx(a)) else {
        return ExtendRead::Unknown;
    };
    match body.get("success").and_then(Value::as_bool) {
        Some(false) => ExtendRead::Gone,
        Some(true) => body
            .get("expiresAt")
            .and_then(Value::as_str)
            .and_then(parse_iso)
            .map_or(ExtendRead::Unknown, ExtendRead::Live),
        None => ExtendRead::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known(status: u16, body: Value) -> Answer {
        Answer::Known(HttpResponse {
            status,
            body: Some(body),
        })
    }

    #[test]
    fn a_push_answered_200_with_item_statuses_is_answered() {
        let a = known(
            200,
            json!([{"status": "Queued", "transaction_id": "t"}, {"x": 1}]),
        );
        let PushRead::Items(items) = read_push(&a) else {
            panic!("answered")
        };
        assert_eq!(items[0].status, Some(PushStatus::Queued));
        assert_eq!(items[0].transaction_id.as_deref(), Some("t"));
        assert_eq!(items[1].status, None);
        assert_eq!(
            read_push(&known(200, json!({"ok": true}))),
            PushRead::Unknown
        );
        assert_eq!(
            read_push(&known(400, json!({"error": "x"}))),
            PushRead::Refused
        );
    }

    #[test]
    fn ack_items_are_read_by_their_success_alone() {
        let a = known(201, json!([{"success": true}, {"success": "yes"}]));
        let r = read_acks(&a).expect("a 2xx array");
        assert_eq!(
            r[0].as_ref().map(|i| (i.success, i.noop)),
            Some((true, None))
        );
        assert_eq!(r[1], None);
        assert_eq!(read_acks(&known(200, json!({"error": "Invalid"}))), None);
        assert_eq!(read_acks(&known(400, json!([{"success": false}]))), None);
    }

    #[test]
    fn a_pop_answer_with_messages_is_a_delivery_whatever_its_2xx() {
        let body = json!({"partitionId": "p1", "partition": "P", "leaseId": "l",
            "messages": [{"transactionId": "t", "partitionId": "p1"}]});
        let PopRead::Delivered(m) = read_pop(&known(202, body)) else {
            panic!("delivered")
        };
        assert_eq!(m[0].partition.as_deref(), Some("P"));
        assert_eq!(m[0].lease_id, "l");
        assert_eq!(
            read_pop(&known(200, json!({"messages": []}))),
            PopRead::Empty
        );
        assert_eq!(
            read_pop(&known(200, json!({"messages": [{}]}))),
            PopRead::Blind
        );
        assert_eq!(read_pop(&Answer::Unknown("timeout".into())), PopRead::Blind);
    }

    #[test]
    fn an_extend_answer_shows_the_deadline() {
        let live = known(
            200,
            json!({"success": true, "expiresAt": "2023-11-14T22:18:20.000Z"}),
        );
        assert_eq!(read_extend(&live), ExtendRead::Live(1_700_000_300_000));
        assert_eq!(
            read_extend(&known(200, json!({"success": false}))),
            ExtendRead::Gone
        );
        assert_eq!(read_extend(&known(404, json!({}))), ExtendRead::Unknown);
    }
}
