//! Lease extend (PROTOCOL.md section 5).

use super::ack::LeaseRef;
use super::outcome::ExtendOut;
use super::state::State;
use crate::choice::Ctx;
use crate::time::Stamp;
use crate::variant::Variant;

/// LEASE-1: renews every live lease with that id, never shortening one; a lease that
/// is gone is not revived. `seconds` absent means each lease's own duration (LEASE-3).
pub(crate) fn extend(
    st: &mut State,
    lease: LeaseRef,
    lease_id: &str,
    seconds: Option<u32>,
    ctx: &mut Ctx,
) -> ExtendOut {
    let mut renewed = 0;
    let mut expires: Option<Stamp> = None;
    if let LeaseRef::Known(h) = lease {
        let holders = st.holders_of(h);
        for (ph, group) in holders {
            let Some(l) = st
                .part(ph)
                .and_then(|p| p.cursors.get(&group))
                .and_then(|c| c.lease.as_ref())
                .filter(|l| l.id == h)
            else {
                continue;
            };
            if !ctx.now_before(l.deadline) && !ctx.deviates(Variant::ExtendRevivesExpired) {
                continue;
            }
            let ms = match seconds {
                Some(s) if !ctx.deviates(Variant::ExtendIgnoresSeconds) => s as i64 * 1000,
                _ => l.duration_ms,
            };
            let wanted = match ctx.deviates(Variant::ExtendFromDeadline) {
                true => l.deadline.plus(ms),
                false => ctx.now.plus(ms),
            };
            let shortens = wanted.lo < l.deadline.hi && ctx.deviates(Variant::ExtendShortens);
            let l = st
                .part_mut(ph)
                .and_then(|p| p.cursors.get_mut(&group))
                .and_then(|c| c.lease.as_mut())
                .expect("checked above");
            l.deadline = match shortens {
                true => wanted,
                false => Stamp::between(l.deadline.lo.max(wanted.lo), l.deadline.hi.max(wanted.hi)),
            };
            renewed += 1;
            // [PROJECT] with several leases, `expiresAt` is the latest deadline.
            expires = Some(match expires {
                None => l.deadline,
                Some(e) => Stamp::between(e.lo.max(l.deadline.lo), e.hi.max(l.deadline.hi)),
            });
        }
    }
    ExtendOut {
        lease_id: lease_id.to_string(),
        renewed,
        expires_at: expires,
        own_duration: seconds.is_none(),
    }
}
