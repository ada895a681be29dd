//! Pop (PROTOCOL.md section 3): which partitions are claimable, which are claimed,
//! the lease or the autoAck commit, and subscription seeding.

use super::outcome::{Outcome, PopOut};
use super::state::{Cursor, Lease, PartH, Partition, State};
use crate::choice::Ctx;
use crate::policy::{ChoicePoint, PopOrder};
use crate::rules::{RuleId, ACK_6, MGMT_11, POP_1, POP_14, POP_18, POP_2, POP_3, RET_3};
use crate::time::{parse_iso, Millis, Stamp, Tri};
use crate::variant::Variant;
use crate::wire::{PopQuery, PopRoute, QueueOptions, QUEUE_MODE};

/// A pop request, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct PopRequest {
    /// Which pop route was called, with its path's names.
    pub route: PopRoute,
    /// The pop's query, defaults applied.
    pub query: PopQuery,
}

/// A partition that could be claimed now, and how many messages it would give.
#[derive(Clone, Copy, Debug)]
struct Claimable {
    part: PartH,
    committed: u32,
    available: u32,
    /// `createdAt` of the oldest unconsumed message (POP-4 policy order).
    oldest: Stamp,
}

/// Why a partition can deliver nothing to a group now: the rule that holds it back, so a
/// broker that claims it anyway is told which rule it broke, not only that it was not
/// claimable.
#[derive(Clone, Copy, Debug)]
struct Held {
    part: PartH,
    rule: RuleId,
    why: &'static str,
}

/// What a pop may claim, and why each other partition in its scope may not.
#[derive(Default)]
struct Scope {
    claimable: Vec<Claimable>,
    held: Vec<Held>,
}

impl Scope {
    fn add(&mut self, c: Result<Claimable, Held>) {
        match c {
            Ok(c) => self.claimable.push(c),
            Err(h) => self.held.push(h),
        }
    }
}

/// Runs a pop. `order` is the sequence of partitions a broker was observed to claim
/// (a checker passes it; POP-4 lets the broker choose). Without it the policy order
/// applies: oldest unconsumed message first, ties by queue and partition name.
pub fn pop(st: &mut State, req: &PopRequest, order: Option<&[PartH]>, ctx: &mut Ctx) -> Outcome {
    // MAINT-2 / POP-6: pop maintenance answers a bare 204 and touches nothing.
    if st.pop_maintenance && !ctx.deviates(Variant::PopMaintenanceIgnored) {
        return Outcome::PopEmpty;
    }
    let q = &req.query;
    let group = q.consumer_group.as_str();
    let (scope_queue, scope) = match &req.route {
        PopRoute::Queue(name) => {
            // POP-8: an unknown queue gets its configuration row, then 204.
            ensure_implicit(st, name, ctx);
            subscribe(st, name, q, ctx);
            (name.clone(), scope_in(st, name, None, group, ctx))
        }
        PopRoute::Partition(name, pname) => {
            if !st.queues.contains_key(name) {
                if ctx.choose(ChoicePoint::PartitionPopCreatesQueue, 2) == 1 {
                    return Outcome::PopEmpty;
                }
                ensure_implicit(st, name, ctx);
            }
            subscribe(st, name, q, ctx);
            (name.clone(), scope_in(st, name, Some(pname), group, ctx))
        }
        PopRoute::Discovery { namespace, task } => {
            // A broker with the variant matches the namespace alone when both are given.
            let any_task = namespace.is_some()
                && task.is_some()
                && ctx.deviates(Variant::DiscoveryIgnoresTask);
            let names: Vec<String> = st
                .queues
                .values()
                .filter(|qq| namespace.as_ref().is_none_or(|n| &qq.namespace == n))
                .filter(|qq| any_task || task.as_ref().is_none_or(|t| &qq.task == t))
                .map(|qq| qq.name.clone())
                .collect();
            let mut parts = Vec::new();
            for name in &names {
                subscribe(st, name, q, ctx);
                parts.extend(with_options(st, name));
            }
            parts.sort_by_key(|(ph, _)| *ph);
            let mut scope = Scope::default();
            for (ph, opts) in &parts {
                scope.add(claimable(st, *ph, opts, group, ctx));
            }
            (String::new(), scope)
        }
    };

    let cap = match req.route {
        PopRoute::Partition(..) => 1,
        _ => match q.partitions {
            Some(c) if !ctx.deviates(Variant::PartitionCapIgnored) => c,
            _ => u32::MAX,
        },
    };
    let batch = match ctx.deviates(Variant::BatchIgnored) {
        true => u32::MAX,
        false => q.batch,
    };
    let chosen = match order {
        Some(order) => match check_order(&scope, order, batch, cap) {
            Ok(c) => c,
            Err((rule, why)) => return Outcome::PopIllegal(rule, why),
        },
        None => {
            let newest_first = ctx
                .policy_ref()
                .is_some_and(|p| p.pop_order == PopOrder::NewestPartitionFirst);
            policy_order(st, scope.claimable, batch, cap, newest_first)
        }
    };
    if chosen.is_empty() {
        return Outcome::PopEmpty;
    }

    let leased = !q.auto_ack || ctx.deviates(Variant::AutoAckIgnored);
    let lease = leased.then(|| st.mint_lease());
    let mut budget = batch;
    let mut messages = Vec::new();
    for c in &chosen {
        let n = c.available.min(budget);
        budget -= n;
        // The span ends at the last message delivered; deleted offsets inside it pass
        // with it (MGMT-11).
        let p = st.part(c.part).expect("claimable");
        let start = messages.len();
        messages.extend(
            p.retained_after(c.committed)
                .take(n as usize)
                .map(|o| (c.part, o)),
        );
        let end = messages[start..].last().expect("a claim delivers").1;
        let lease_secs = match q.lease_seconds {
            Some(s) if !ctx.deviates(Variant::LeaseSecondsIgnored) => s,
            _ => {
                let qn = &st.part(c.part).expect("claimable").queue;
                st.queues[qn].options.lease_time
            }
        };
        let duration_ms = lease_secs as i64 * 1000;
        let cursor = st.cursor_mut(c.part, group);
        // Any expired lease is gone now (ACK-7: expiry charges nothing).
        if cursor.lease.take().is_some() && ctx.deviates(Variant::ExpiryChargesRetry) {
            *cursor.retries.entry(cursor.committed + 1).or_insert(0) += 1;
        }
        cursor.not_before = None;
        match lease {
            // POP-7: autoAck commits inside the pop; no lease.
            None => {
                cursor.committed = end;
                cursor.retries = cursor.retries.split_off(&(end + 1));
            }
            Some(id) => {
                cursor.lease = Some(Lease {
                    id,
                    end,
                    deadline: ctx.now.plus(duration_ms),
                    duration_ms,
                });
            }
        }
    }
    Outcome::Pop(PopOut {
        queue: scope_queue,
        first: chosen[0].part,
        lease,
        group: group.to_string(),
        messages,
        partitions_claimed: chosen.len() as u32,
    })
}

/// POP-8, PUSH-2: an unknown queue's row with the implicit defaults (leaseTime 60).
pub(crate) fn ensure_implicit(st: &mut State, name: &str, ctx: &mut Ctx) {
    if st.queues.contains_key(name) {
        return;
    }
    let mut options = QueueOptions::implicit();
    if ctx.deviates(Variant::ImplicitLease300) {
        options.lease_time = 300;
    }
    st.ensure_queue(name, options);
}

/// What each partition of `queue` (or just `only`) can deliver now, in name order, and
/// what holds the others back.
fn scope_in(st: &State, queue: &str, only: Option<&str>, group: &str, ctx: &mut Ctx) -> Scope {
    let q = &st.queues[queue];
    let parts: Vec<PartH> = match only {
        Some(name) => q.partitions.get(name).copied().into_iter().collect(),
        None => q.partitions.values().copied().collect(),
    };
    let mut scope = Scope::default();
    for ph in parts {
        scope.add(claimable(st, ph, &q.options, group, ctx));
    }
    scope
}

/// The partitions of `queue`, each with its queue's options (discovery).
fn with_options(st: &State, queue: &str) -> Vec<(PartH, QueueOptions)> {
    let q = &st.queues[queue];
    q.partitions.values().map(|h| (*h, q.options)).collect()
}

/// POP-2, POP-14, ACK-4, ACK-6: what `(partition, group)` can deliver now, or the rule
/// that holds it back.
fn claimable(
    st: &State,
    ph: PartH,
    opts: &QueueOptions,
    group: &str,
    ctx: &mut Ctx,
) -> Result<Claimable, Held> {
    let held = |rule, why| Held {
        part: ph,
        rule,
        why,
    };
    let Some(p) = st.part(ph) else {
        return Err(held(POP_2, "the partition is gone"));
    };
    let (committed, lease, not_before) = match p.cursors.get(group) {
        Some(c) => (c.committed, c.lease.as_ref(), c.not_before),
        None => (p.floor, None, None),
    };
    let Some(first) = p.retained_after(committed).next() else {
        // A message that was there and is gone: delivering it breaks the rule that
        // removed it, whatever else it breaks.
        return Err(if p.floor > 0 && committed <= p.floor {
            held(
                RET_3,
                "retention removed its messages up to the group's cursor",
            )
        } else if p.end() > committed {
            held(MGMT_11, "its messages past the group's cursor were deleted")
        } else if p.floor > 0 {
            held(
                POP_2,
                "the group committed all of it; retention removed messages below its cursor, and a removal moves only the cursors below it (RET-4)",
            )
        } else {
            held(POP_2, "nothing is left past the group's cursor")
        });
    };
    if let Some(l) = lease {
        if ctx.now_before(l.deadline) {
            // Leased partitions are skipped, not waited on.
            return Err(held(POP_2, "the group holds a live lease on it"));
        }
    }
    if let Some(t) = not_before {
        if ctx.now_before(t) {
            return Err(held(
                ACK_6,
                "a failed span comes back only after retryDelay",
            ));
        }
    }
    if opts.window_buffer > 0 && !ctx.deviates(Variant::WindowBufferIgnored) {
        let Some(w) = p.last_write else {
            return Err(held(POP_2, "nothing was ever written to it"));
        };
        if ctx.now_before(st.writes[w as usize].plus(opts.window_buffer as i64 * 1000)) {
            return Err(held(POP_14, "it was written to within its windowBuffer"));
        }
    }
    let delay_ms = match opts.delayed_processing {
        s if s > 0 && !ctx.deviates(Variant::DelayIgnored) => s as i64 * 1000,
        _ => 0,
    };
    let available = if delay_ms > 0 {
        let mut n = 0;
        for off in p.retained_after(committed) {
            if ctx.now_before(st.created(p.at(off)).plus(delay_ms)) {
                break;
            }
            n += 1;
        }
        n
    } else {
        // Without a delay every message above the cursor is available.
        p.count_after(committed)
    };
    if available == 0 {
        return Err(held(
            POP_14,
            "its next message is younger than delayedProcessing",
        ));
    }
    Ok(Claimable {
        part: ph,
        committed,
        available,
        oldest: st.created(p.at(first)),
    })
}

/// POP-3, POP-4 (our choice): oldest unconsumed message first, budget spent
/// partition by partition, at most `cap` partitions.
fn policy_order(
    st: &State,
    mut claimable: Vec<Claimable>,
    batch: u32,
    cap: u32,
    newest_first: bool,
) -> Vec<Claimable> {
    // Keys are unique (they end with the handle or the partition's queue and name): an
    // unstable sort orders alike. Ties on age go by name, not by which partition was
    // created first, so states that differ only in that order choose alike.
    if newest_first {
        claimable.sort_unstable_by_key(|c| std::cmp::Reverse(c.part));
    } else {
        let named = |c: &Claimable| st.part(c.part).map(|p| (&p.queue, &p.name));
        claimable.sort_unstable_by(|a, b| (a.oldest.lo, named(a)).cmp(&(b.oldest.lo, named(b))));
    }
    let mut budget = batch;
    let mut taken = 0;
    for c in &claimable {
        if budget == 0 || taken >= cap {
            break;
        }
        budget -= c.available.min(budget);
        taken += 1;
    }
    claimable.truncate(taken as usize);
    claimable
}

/// POP-3, POP-4: whether an observed claim order is one a broker may choose. Every
/// claimed partition must be claimable, each gets `min(available, budget left)`, the
/// budget is never spent to zero before the last one, and the broker stops only when
/// the budget or the cap is exhausted or nothing claimable is left.
fn check_order(
    scope: &Scope,
    order: &[PartH],
    batch: u32,
    cap: u32,
) -> Result<Vec<Claimable>, (RuleId, String)> {
    let claimable = &scope.claimable;
    let mut budget = batch;
    let mut out: Vec<Claimable> = Vec::new();
    for ph in order {
        let Some(c) = claimable.iter().find(|c| c.part == *ph) else {
            return Err(match scope.held.iter().find(|h| h.part == *ph) {
                Some(h) => (
                    h.rule,
                    format!(
                        "partition {ph:?} was not claimable for this group: {} ({})",
                        h.why,
                        h.rule.as_str()
                    ),
                ),
                None => (
                    POP_2,
                    format!("partition {ph:?} is not in this pop's scope (POP-2)"),
                ),
            });
        };
        if out.iter().any(|o| o.part == *ph) {
            return Err((POP_1, format!("partition {ph:?} claimed twice in one pop")));
        }
        if budget == 0 {
            return Err((
                POP_3,
                "claimed a partition after the batch budget was spent (POP-3)".into(),
            ));
        }
        if out.len() as u32 >= cap {
            return Err((POP_3, format!("claimed more than {cap} partitions (POP-3)")));
        }
        budget -= c.available.min(budget);
        out.push(*c);
    }
    let left = claimable
        .iter()
        .filter(|c| !out.iter().any(|o| o.part == c.part))
        .count();
    if budget > 0 && (out.len() as u32) < cap && left > 0 {
        return Err((
            POP_3,
            format!(
                "stopped after {} partition(s) with budget {budget} left and {left} claimable partition(s) unclaimed (POP-2, POP-3)",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// POP-13: the first pop of a named group on a queue records its subscription and
/// seeds a cursor on every partition that exists then. Queue mode is never seeded.
///
/// [PROJECT] alternative explored by a checker that is not strict: no recorded
/// subscription; every pop seeds the partitions the group has no cursor on yet with
/// that pop's parameters (asked only when that seeds something other than the start).
fn subscribe(st: &mut State, queue: &str, q: &PopQuery, ctx: &mut Ctx) {
    if q.consumer_group == QUEUE_MODE {
        return;
    }
    let parts: Vec<PartH> = st.queues[queue].partitions.values().copied().collect();
    if st.queues[queue].subscriptions.contains(&q.consumer_group) {
        let skips_backlog = subscription_start(&q.subscription_mode, &q.subscription_from)
            != SubscriptionStart::All;
        let unseeded = parts.iter().any(|ph| {
            st.part(*ph)
                .is_some_and(|p| p.end() > 0 && !p.cursors.contains_key(&q.consumer_group))
        });
        if !(skips_backlog
            && unseeded
            && ctx.project(
                ChoicePoint::SubscriptionPerPartition,
                POP_18,
                "seeded a partition created after the group's first pop with a later pop's subscription parameters (ours: it starts at its beginning)",
            ))
        {
            return;
        }
    }
    for ph in parts {
        let p = st.part(ph).expect("listed partition exists");
        if p.cursors.contains_key(&q.consumer_group) {
            continue;
        }
        let committed = seed_point(st, ph, &q.subscription_mode, &q.subscription_from, ctx);
        let p = st.part_mut(ph).expect("exists");
        let cursor = Cursor {
            committed,
            ..p.fresh_cursor()
        };
        p.cursors.insert(q.consumer_group.clone(), cursor);
    }
    if !st.queues[queue].subscriptions.contains(&q.consumer_group) {
        let queue = st.queue_mut(queue).expect("exists");
        queue.subscriptions.insert(q.consumer_group.clone());
    }
}

/// Where a subscription's new cursors start (POP-13), read from a pop's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubscriptionStart {
    /// `subscriptionFrom=now`: after the partition's last message.
    Now,
    /// `subscriptionFrom` a valid time: before the first message created at or after it.
    Since(Millis),
    /// `subscriptionMode=new`: after the partition's last message.
    New,
    /// Anything else, `all` included: at the oldest retained message (RET-4).
    All,
}

/// Where a new cursor starts (POP-13), decided once for both engines.
/// `subscriptionFrom` wins when it is `now` or a valid time [PROJECT: precedence over
/// `subscriptionMode`]; an unparseable time is ignored; `new` skips the backlog; any
/// other mode acts as `all`.
pub fn subscription_start(mode: &str, from: &str) -> SubscriptionStart {
    if from == "now" {
        SubscriptionStart::Now
    } else if let Some(t) = parse_iso(from) {
        SubscriptionStart::Since(t)
    } else if mode == "new" {
        SubscriptionStart::New
    } else {
        SubscriptionStart::All
    }
}

/// The offset a new cursor of partition `ph` starts at ([`subscription_start`]).
fn seed_point(st: &State, ph: PartH, mode: &str, from: &str, ctx: &mut Ctx) -> u32 {
    let p = st.part(ph).expect("exists");
    match subscription_start(mode, from) {
        SubscriptionStart::Now => p.end(),
        SubscriptionStart::Since(t) => last_before(st, p, t, ctx),
        SubscriptionStart::New if !ctx.deviates(Variant::SubscriptionNewIgnored) => p.end(),
        // "starts at the oldest retained message" (seed, RET-4).
        SubscriptionStart::New | SubscriptionStart::All => p.floor,
    }
}

/// The offset before the first retained message of `p` created at or after `t` (its end
/// when none is): where a subscription from a time, or a seek to one (MGMT-8), puts a cursor.
pub(crate) fn last_before(st: &State, p: &Partition, t: Millis, ctx: &mut Ctx) -> u32 {
    let t = Stamp::exact(t);
    for off in p.retained_after(p.floor) {
        // The first message written at or after `t`.
        match st.created(p.at(off)).before(&t) {
            Tri::Yes => continue,
            Tri::No => return off - 1,
            Tri::Maybe => {
                if ctx.choose(ChoicePoint::Time, 2) == 0 {
                    return off - 1;
                }
            }
        }
    }
    p.end()
}
