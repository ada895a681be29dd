//! What the management reads show (PROTOCOL.md MGMT-1..7, MGMT-13): figures computed
//! from the state, which every function here takes by shared reference, so a read cannot
//! change it (MGMT-1).
//!
//! A view is built as the wire type an engine answers, then turned into JSON with
//! symbols where the model does not know the concrete value: a partition's or a
//! message's id, a time. [`crate::render`] replaces them (an engine with its real ids
//! and exact times, a checker with what it has learnt); `sym` writes them. What
//! depends on the clock (whether a lease is live, whether a group lags by N seconds) is
//! decided through the [`Ctx`], so a checker with an uncertain "now" explores both.

use super::capacity::partition_unconsumed;
use super::state::{MsgH, PartH, Partition, State};
use crate::choice::Ctx;
use crate::time::Stamp;
use crate::wire::*;
use serde_json::Value;

/// The symbols of a view (see the module doc).
pub(crate) mod sym {
    use super::*;

    /// The marker that opens every symbol: no client writes it at the start of a string.
    const MARK: char = '\u{1}';

    /// The symbol standing for partition `h`'s `partitionId`.
    pub fn part(h: PartH) -> String {
        format!("{MARK}part:{}", h.0)
    }

    /// The symbol standing for message `h`'s `id`.
    pub fn msg(h: MsgH) -> String {
        format!("{MARK}msg:{}", h.0)
    }

    /// The symbol standing for the moment `t`, an ISO-8601 time on the wire.
    pub(crate) fn time(t: Stamp) -> String {
        format!("{MARK}time:{}:{}", t.lo, t.hi)
    }

    /// A value the protocol leaves open (PUSH-9): any answer is allowed.
    pub(crate) fn any() -> String {
        format!("{MARK}any")
    }

    /// What a symbol stands for.
    #[derive(Debug, PartialEq)]
    pub(crate) enum Sym {
        /// A partition's `partitionId`.
        Part(PartH),
        /// A message's `id`.
        Msg(MsgH),
        /// A moment, rendered as an ISO-8601 time.
        Time(Stamp),
        /// A value the protocol leaves open (PUSH-9): any answer is allowed.
        Any,
    }

    /// What the string `s` stands for, when it is a symbol.
    pub(crate) fn read(s: &str) -> Option<Sym> {
        let rest = s.strip_prefix(MARK)?;
        let (kind, arg) = rest.split_once(':').unwrap_or((rest, ""));
        match kind {
            "part" => arg.parse().ok().map(|n| Sym::Part(PartH(n))),
            "msg" => arg.parse().ok().map(|n| Sym::Msg(MsgH(n))),
            "time" => {
                let (lo, hi) = arg.split_once(':')?;
                Some(Sym::Time(Stamp::between(
                    lo.parse().ok()?,
                    hi.parse().ok()?,
                )))
            }
            "any" => Some(Sym::Any),
            _ => None,
        }
    }
}

/// The keys whose numbers depend on the broker's clock (a checker does not compare them).
pub(crate) const MEASURED_KEYS: &[&str] = &["lagSeconds", "uptimeSeconds"];

/// The answer to a management read, or its 404.
pub(crate) fn read(
    st: &State,
    req: &ManageRequest,
    part: Option<PartH>,
    ctx: &mut Ctx,
) -> Result<Value, WireError> {
    let v = match req {
        ManageRequest::Overview => json(&overview(st)),
        ManageRequest::Status => json(&StatusView {
            overview: overview(st),
            push_maintenance: st.push_maintenance,
            pop_maintenance: st.pop_maintenance,
        }),
        ManageRequest::Queues {
            namespace,
            task,
            page,
        } => {
            let rows = queues_in_order(st)
                .filter(|q| namespace.as_ref().is_none_or(|n| &q.namespace == n))
                .filter(|q| task.as_ref().is_none_or(|t| &q.task == t))
                .map(|q| summary(st, &q.name));
            let (queues, total) = page.cut(rows);
            json(&QueuesPage {
                queues,
                page: PageInfo::new(*page, total),
            })
        }
        ManageRequest::Queue(name) => json(&detail(st, name)?),
        ManageRequest::StatusQueue { queue, page } => {
            let queue_view = detail(st, queue)?;
            let (partitions, total) = page.cut(partitions_of(st, queue).map(partition_row));
            json(&StatusQueue {
                queue: queue_view,
                partitions,
                page: PageInfo::new(*page, total),
            })
        }
        ManageRequest::Depth { queue, group, page } => {
            json(&depth(st, queue, group.as_deref(), *page)?)
        }
        ManageRequest::Partitions { queue, page } => {
            let rows = queues_in_order(st)
                .filter(|q| queue.as_ref().is_none_or(|n| &q.name == n))
                .flat_map(|q| partitions_of(st, &q.name))
                .map(partition_row);
            let (partitions, total) = page.cut(rows);
            json(&PartitionsPage {
                partitions,
                page: PageInfo::new(*page, total),
            })
        }
        ManageRequest::Namespaces(page) => {
            json(&Namespaces::of(counted(st, |q| q.namespace.clone()), *page))
        }
        ManageRequest::Tasks(page) => json(&Tasks::of(counted(st, |q| q.task.clone()), *page)),
        ManageRequest::Groups(page) => {
            let names = group_names(st);
            let (names, total) = page.cut(names);
            let groups = names.into_iter().map(|g| group(st, &g, ctx)).collect();
            json(&GroupsPage {
                consumer_groups: groups,
                page: PageInfo::new(*page, total),
            })
        }
        ManageRequest::Group(name) => {
            if !group_names(st).contains(name) {
                return Err(no_such_group(name));
            }
            json(&group(st, name, ctx))
        }
        ManageRequest::Lagging {
            min_lag_seconds,
            page,
        } => json(&lagging(st, *min_lag_seconds, *page, ctx)),
        ManageRequest::Messages(q) => {
            if let Some(queue) = q
                .queue
                .as_ref()
                .filter(|n| q.in_path && !st.queues.contains_key(*n))
            {
                return Err(no_such_queue(queue));
            }
            json(&messages(st, q, ctx))
        }
        ManageRequest::Analytics(q) => super::analytics::analytics(st, q, ctx)?,
        ManageRequest::Message {
            partition_id,
            transaction_id,
        } => json(&message(st, part, partition_id, transaction_id, ctx)?),
        ManageRequest::Seek { .. }
        | ManageRequest::Subscription { .. }
        | ManageRequest::Retry { .. }
        | ManageRequest::DeleteGroup { .. }
        | ManageRequest::DeleteMessage { .. } => unreachable!("writes are not views"),
    };
    Ok(v)
}

fn json<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("views serialize")
}

/// Queues by name, bytewise (MGMT-2).
fn queues_in_order(st: &State) -> impl Iterator<Item = &super::state::Queue> {
    st.queues.values()
}

/// A queue's partitions by name, bytewise (MGMT-2).
pub(crate) fn partitions_of<'s>(st: &'s State, queue: &str) -> impl Iterator<Item = &'s Partition> {
    st.queues
        .get(queue)
        .into_iter()
        .flat_map(|q| q.partitions.values())
        .filter_map(move |h| st.part(*h))
}

fn retained(p: &Partition) -> u64 {
    u64::from(p.count_after(p.floor))
}

/// A group's lag on a partition it reads: the retained messages after its cursor.
fn lag(p: &Partition, committed: u32) -> u64 {
    u64::from(p.count_after(committed))
}

fn overview(st: &State) -> Overview {
    let parts: Vec<&Partition> = st.live_partitions().collect();
    Overview {
        queues: st.queues.len() as u64,
        partitions: parts.len() as u64,
        messages: parts.iter().map(|p| retained(p)).sum(),
        unconsumed: parts.iter().map(|p| partition_unconsumed(p)).sum(),
        consumer_groups: group_names(st).len() as u64,
        dead_letters: st.dead_letters.len() as u64,
    }
}

fn summary(st: &State, name: &str) -> QueueSummary {
    let q = &st.queues[name];
    let parts: Vec<&Partition> = partitions_of(st, name).collect();
    let mut groups: Vec<&String> = parts.iter().flat_map(|p| p.cursors.keys()).collect();
    groups.sort();
    groups.dedup();
    QueueSummary {
        name: q.name.clone(),
        namespace: q.namespace.clone(),
        task: q.task.clone(),
        partitions: parts.len() as u64,
        messages: parts.iter().map(|p| retained(p)).sum(),
        unconsumed: parts.iter().map(|p| partition_unconsumed(p)).sum(),
        consumer_groups: groups.len() as u64,
        dead_letters: st
            .dead_letters
            .iter()
            .filter(|d| st.part(d.part).is_some_and(|p| p.queue == name))
            .count() as u64,
    }
}

fn detail(st: &State, name: &str) -> Result<QueueDetail, WireError> {
    let q = st.queues.get(name).ok_or_else(|| no_such_queue(name))?;
    Ok(QueueDetail {
        summary: summary(st, name),
        options: EchoedOptions {
            known: q.options,
            extra: q.extra.clone(),
        },
    })
}

fn partition_row(p: &Partition) -> PartitionRow {
    PartitionRow {
        id: sym::part(p.handle),
        queue: p.queue.clone(),
        name: p.name.clone(),
        messages: retained(p),
        last_offset: u64::from(p.end()),
        consumer_groups: p.cursors.len() as u64,
    }
}

fn depth(st: &State, queue: &str, group: Option<&str>, page: Page) -> Result<Depth, WireError> {
    if !st.queues.contains_key(queue) {
        return Err(no_such_queue(queue));
    }
    let rows = partitions_of(st, queue).filter_map(|p| {
        let pending = match group {
            Some(g) => p.cursors.get(g).map(|c| lag(p, c.committed))?,
            None if p.cursors.is_empty() => retained(p),
            None => p.cursors.values().map(|c| lag(p, c.committed)).max()?,
        };
        Some(PartitionDepth {
            partition: p.name.clone(),
            pending,
        })
    });
    Ok(Depth::of(queue, group, rows, page))
}

/// Namespaces or tasks by name, with how many queues have each.
fn counted(
    st: &State,
    key: impl Fn(&super::state::Queue) -> String,
) -> impl Iterator<Item = (String, u64)> {
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    for q in st.queues.values() {
        *by.entry(key(q)).or_default() += 1;
    }
    by.into_iter()
}

/// Every listed group by name: those reading a partition or holding a subscription.
fn group_names(st: &State) -> Vec<String> {
    let mut names: std::collections::BTreeSet<String> = Default::default();
    for p in st.live_partitions() {
        names.extend(p.cursors.keys().cloned());
    }
    for q in st.queues.values() {
        names.extend(q.subscriptions.iter().cloned());
    }
    names.into_iter().collect()
}

/// Whether the lease on `(p, group)` is live now.
fn lease_live(p: &Partition, group: &str, ctx: &mut Ctx) -> bool {
    match p.cursors.get(group).and_then(|c| c.lease.as_ref()) {
        Some(l) => ctx.now_before(l.deadline),
        None => false,
    }
}

/// The createdAt of the oldest retained message after the cursor, if any.
fn oldest_pending(st: &State, p: &Partition, committed: u32) -> Option<Stamp> {
    let next = p.retained_after(committed).next()?;
    Some(st.created(p.at(next)))
}

/// Whole seconds from `created` to now, as an engine with exact times sees them.
fn age_seconds(now: Stamp, created: Stamp) -> u64 {
    (now.lo - created.hi).max(0) as u64 / 1000
}

/// One group over every queue it reads or subscribed to, by queue name.
fn group(st: &State, name: &str, ctx: &mut Ctx) -> GroupView {
    let queues = queues_in_order(st)
        .filter(|q| {
            q.subscriptions.contains(name)
                || partitions_of(st, &q.name).any(|p| p.cursors.contains_key(name))
        })
        .map(|q| q.name.clone())
        .collect::<Vec<_>>();
    let rows = queues
        .iter()
        .map(|q| group_queue(st, name, q, ctx))
        .collect();
    GroupView::new(name.to_string(), rows)
}

fn group_queue(st: &State, group: &str, queue: &str, ctx: &mut Ctx) -> GroupQueue {
    let (mut partitions, mut total, mut leased, mut oldest) = (0, 0, 0, None::<Stamp>);
    for p in partitions_of(st, queue) {
        let Some(c) = p.cursors.get(group) else {
            continue;
        };
        partitions += 1;
        total += lag(p, c.committed);
        if lease_live(p, group, ctx) {
            leased += 1;
        }
        if let Some(t) = oldest_pending(st, p, c.committed) {
            oldest = Some(oldest.map_or(t, |o: Stamp| if t.hi < o.hi { t } else { o }));
        }
    }
    GroupQueue {
        queue: queue.to_string(),
        partitions,
        lag: total,
        lag_seconds: oldest.map_or(0, |t| age_seconds(ctx.now, t)),
        leased,
        state: GroupState::of(total, leased),
    }
}

/// MGMT-3: the groups lagging by at least `min` seconds on some queue, with those queues,
/// one page of them.
fn lagging(st: &State, min: u64, page: Page, ctx: &mut Ctx) -> Lagging {
    let mut out = Vec::new();
    for name in group_names(st) {
        let full = group(st, &name, ctx);
        let mut kept = Vec::new();
        for q in full.queues {
            if lags_by(st, &name, &q.queue, min, ctx) {
                kept.push(q);
            }
        }
        if !kept.is_empty() {
            out.push(GroupView::new(name, kept));
        }
    }
    Lagging::of(out, min, page)
}

/// Whether some partition of `queue` that `group` reads has a retained message after its
/// cursor created at least `min` seconds ago.
fn lags_by(st: &State, group: &str, queue: &str, min: u64, ctx: &mut Ctx) -> bool {
    let oldest: Vec<Stamp> = partitions_of(st, queue)
        .filter_map(|p| oldest_pending(st, p, p.cursors.get(group)?.committed))
        .collect();
    let limit = (min as i64).saturating_mul(1000);
    oldest.into_iter().any(|t| ctx.reached(t.plus(limit)))
}

/// A message's state and charged retries for `group` (MGMT-6).
fn status_of(
    st: &State,
    p: &Partition,
    offset: u32,
    group: &str,
    ctx: &mut Ctx,
) -> (MessageStatus, u32, Option<String>) {
    if let Some(d) = st
        .dead_letters
        .iter()
        .find(|d| d.part == p.handle && d.offset == offset && d.group == group)
    {
        return (MessageStatus::DeadLettered, d.retry_count, d.error.clone());
    }
    let Some(c) = p.cursors.get(group) else {
        return (MessageStatus::Pending, 0, None);
    };
    let retries = c.retries.get(&offset).copied().unwrap_or(0);
    if offset <= c.committed {
        return (MessageStatus::Completed, retries, None);
    }
    let held = c.lease.as_ref().is_some_and(|l| offset <= l.end);
    if held && lease_live(p, group, ctx) {
        return (MessageStatus::Leased, retries, None);
    }
    (MessageStatus::Pending, retries, None)
}

fn core(st: &State, p: &Partition, offset: u32, ctx: &Ctx) -> MessageCore {
    use super::state::{Data, Trace};
    use crate::policy::{AbsentPayload, PlainPushTrace};
    let m = p.at(offset);
    let policy = ctx.policy_ref();
    MessageCore {
        id: sym::msg(m.msg),
        transaction_id: m.transaction_id.clone(),
        trace_id: match (&m.trace, policy) {
            (Trace::None, _) => None,
            (Trace::Kept(t), _) => Some(t.clone()),
            (Trace::Either(t), Some(pol)) => {
                (pol.plain_push_trace == PlainPushTrace::Keep).then(|| t.clone())
            }
            (Trace::Either(_), None) => Some(sym::any()),
        },
        partition_id: sym::part(p.handle),
        queue: p.queue.clone(),
        partition: p.name.clone(),
        data: match (&m.data, policy) {
            (Data::Value(v), _) => v.value(),
            (Data::Absent, Some(pol)) if pol.absent_payload == AbsentPayload::EmptyObject => {
                Value::Object(Default::default())
            }
            (Data::Absent, Some(_)) => Value::Null,
            (Data::Absent, None) => Value::String(sym::any()),
        },
        data_error: None,
        created_at: sym::time(st.created(m)),
        producer_sub: m.producer_sub.as_deref().map(str::to_string),
    }
}

/// MGMT-6: retained messages by queue, partition and offset, with their state for the group.
fn messages(st: &State, q: &MessageQuery, ctx: &mut Ctx) -> MessagesPage {
    let mut rows = Vec::new();
    for queue in queues_in_order(st).filter(|x| q.queue.as_ref().is_none_or(|n| &x.name == n)) {
        for p in partitions_of(st, &queue.name) {
            if q.partition.as_ref().is_some_and(|n| &p.name != n) {
                continue;
            }
            for offset in p.retained_after(p.floor) {
                let (status, retry_count, _) = status_of(st, p, offset, &q.group, ctx);
                if q.status.is_none_or(|s| s == status) {
                    rows.push((p.handle, offset, status, retry_count));
                }
            }
        }
    }
    let (rows, total) = q.page.cut(rows);
    MessagesPage {
        messages: rows
            .into_iter()
            .map(|(h, offset, status, retry_count)| MessageRow {
                message: core(st, st.part(h).expect("live"), offset, ctx),
                status,
                retry_count,
            })
            .collect(),
        page: PageInfo::new(q.page, total),
    }
}

/// MGMT-7: the newest retained message with the transactionId, and every reading group's
/// view of it.
fn message(
    st: &State,
    part: Option<PartH>,
    partition_id: &str,
    txn: &str,
    ctx: &mut Ctx,
) -> Result<MessageDetail, WireError> {
    let missing = || no_such_message(partition_id, txn);
    let p = part.and_then(|h| st.part(h)).ok_or_else(missing)?;
    let offset = p.txn_offset(txn).ok_or_else(missing)?;
    let groups = p
        .cursors
        .keys()
        .map(|g| {
            let (status, retry_count, error_message) = status_of(st, p, offset, g, ctx);
            let lease = p.cursors.get(g).and_then(|c| c.lease.as_ref());
            let lease_end = lease
                .filter(|_| status == MessageStatus::Leased)
                .map(|l| sym::time(l.deadline));
            let group = MessageGroup {
                group: g.clone(),
                status,
                retry_count,
                error_message,
            };
            (group, lease_end)
        })
        .collect();
    Ok(MessageDetail::new(core(st, p, offset, ctx), groups))
}
