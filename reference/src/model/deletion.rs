//! The delete of one message by its address (PROTOCOL.md MGMT-11).
//!
//! A partition is a log of offsets that cursors and lease spans point into, so a delete
//! cannot take an offset away: it marks it deleted. From then on the offset holds no
//! retained message, and everything that reads retained messages (claims, counts,
//! listings, ack resolution, dedup) passes over it. What pointed at the message moves
//! as it would for a removal by retention (RET-4).

use super::state::{MsgH, PartH, State};
use crate::wire::{no_such_message, WireError};

/// Deletes the newest retained message with `txn` in partition `part`; its handle.
pub(crate) fn delete_message(
    st: &mut State,
    part: Option<PartH>,
    partition_id: &str,
    txn: &str,
) -> Result<MsgH, WireError> {
    let missing = || no_such_message(partition_id, txn);
    let h = part.ok_or_else(missing)?;
    let p = st.part(h).ok_or_else(missing)?;
    let offset = p.txn_offset(txn).ok_or_else(missing)?;
    let msg = p.at(offset).msg;
    let p = st.part_mut(h).expect("exists");
    p.deleted.insert(offset);
    let deleted = &p.deleted;
    for c in p.cursors.values_mut() {
        c.retries.remove(&offset);
        // A span that ended at the message ends at its last remaining one, or goes.
        if let Some(l) = c.lease.as_mut().filter(|l| l.end == offset) {
            match (c.committed + 1..offset)
                .rev()
                .find(|o| !deleted.contains(o))
            {
                Some(end) => l.end = end,
                None => c.lease = None,
            }
        }
    }
    Ok(msg)
}
