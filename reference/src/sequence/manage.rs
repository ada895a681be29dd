//! The management requests a sequence sends, chosen from the route table.
//!
//! Every route of [`ROUTES`] is decided here once: which requests a sequence sends on it
//! and what their answers depend on ([`Scope`]), or why it sends none. The choice a
//! generator makes is a row of the table and a variant of its parameters, and the
//! request's path is the row's pattern filled in, so a new route is a compile error
//! here until someone decides whether sequences exercise it.

use super::{Delivered, Names, GROUPS, PARTS};
use crate::wire::{HttpRequest, RouteId, QUEUE_MODE, ROUTES};
use serde_json::json;

/// What a management request's answer depends on, which decides where a sequence may
/// send it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// Reads only the sequence's own queues.
    Own,
    /// Changes the sequence's own queues: cursors moved, messages removed or written again.
    OwnWrite,
    /// Reads the whole broker, where other sequences' queues show.
    WholeBroker,
}

/// The requests a sequence sends on `route`, one scope per variant of its parameters;
/// none for a route sequences do not send this way.
fn variants(route: RouteId) -> &'static [Scope] {
    use RouteId as R;
    use Scope::*;
    match route {
        R::Queue
        | R::StatusQueue
        | R::Partitions
        | R::Messages
        | R::QueueMessages
        | R::Message
        | R::Analytics
        | R::StatusQueues => &[Own],
        // With the group named, then without (the lowest cursor's lag).
        R::Depth => &[Own, Own],
        // The sequence's namespace, then a page of every queue.
        R::Queues => &[Own, WholeBroker],
        R::Seek | R::SeekPartition | R::DeleteMessage | R::Retry | R::DeleteGroupQueue => {
            &[OwnWrite]
        }
        R::Overview | R::Status | R::Namespaces | R::Tasks | R::Groups | R::Group | R::Lagging => {
            &[WholeBroker]
        }
        // They name a group alone, and group names are shared by every sequence on a
        // broker, so one sequence would move another's cursors.
        R::Subscription | R::DeleteGroup => &[],
        // Sent as steps of their own, or (queue deletes, the switches, health) never by
        // a sequence, whose broker others share.
        R::Push
        | R::PopDiscovery
        | R::PopQueue
        | R::PopPartition
        | R::Ack
        | R::AckBatch
        | R::Extend
        | R::Transaction
        | R::Configure
        | R::DeleteQueue
        | R::Dlq
        | R::GetPushMaintenance
        | R::SetPushMaintenance
        | R::GetPopMaintenance
        | R::SetPopMaintenance
        | R::Health => &[],
    }
}

/// Every management request a generator may choose, in table order: the route and the
/// variant, for the scopes `allowed` admits.
pub(super) fn choices(allowed: impl Fn(Scope) -> bool) -> Vec<(RouteId, u8)> {
    ROUTES
        .iter()
        .flat_map(|r| {
            variants(r.id)
                .iter()
                .enumerate()
                .filter(|(_, s)| allowed(**s))
                .map(move |(v, _)| (r.id, v as u8))
        })
        .collect()
}

/// The path of `route` with its variable segments filled in, in order.
fn path(route: RouteId, vars: &[&str]) -> String {
    let mut vars = vars.iter();
    route
        .route()
        .path
        .split('/')
        .map(|s| match s.starts_with('{') {
            true => vars.next().copied().unwrap_or(s),
            false => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The request of variant `variant` on `route`, about queue `queue`, group `group` and
/// delivered message `d` (none: a request about a message is not sent).
pub(super) fn request(
    (route, variant): (RouteId, u8),
    names: &Names,
    (queue, group, pick): (u8, u8, u8),
    d: Option<&Delivered>,
) -> Option<HttpRequest> {
    use RouteId as R;
    let q = names.queue(queue);
    let g = GROUPS[group as usize % 3].unwrap_or(QUEUE_MODE);
    let get = |vars: &[&str], query: &[(&str, &str)]| HttpRequest::get(path(route, vars), query);
    let message = |d: &Delivered| {
        [
            d.message.partition_id.clone(),
            d.message.transaction_id.clone(),
        ]
    };
    Some(match (route, variant) {
        (R::Queue, _) => get(&[&q], &[]),
        (R::StatusQueue, _) => get(&[&q], &[("limit", "2")]),
        (R::Depth, 0) => get(&[&q], &[("group", g)]),
        (R::Depth, _) => get(&[&q], &[]),
        (R::Partitions, _) => get(&[], &[("queue", &q)]),
        (R::Messages, _) => get(&[], &[("queue", &q), ("consumerGroup", g), ("limit", "5")]),
        (R::QueueMessages, _) => get(&[&q], &[("limit", "5")]),
        (R::Queues | R::StatusQueues, 0) => get(&[], &[("namespace", &names.prefix)]),
        (R::Queues, _) => get(&[], &[("limit", "2"), ("offset", "1")]),
        (R::Message, _) => get(&message(d?).each_ref().map(String::as_str), &[]),
        (R::Analytics, _) => get(&[], &[("queue", &q)]),
        (R::Overview | R::Status | R::Namespaces | R::Tasks | R::Groups, _) => get(&[], &[]),
        (R::Group, _) => get(&[g], &[]),
        (R::Lagging, _) => get(&[], &[("minLagSeconds", "1")]),
        (R::DeleteMessage, _) => {
            HttpRequest::delete(path(route, &message(d?).each_ref().map(String::as_str)))
        }
        (R::Retry, _) => HttpRequest::post(
            path(route, &message(d?).each_ref().map(String::as_str)),
            &json!({}),
        ),
        (R::Seek, _) => HttpRequest::post(path(route, &[g, &q]), &json!({"toEnd": true})),
        (R::SeekPartition, _) => HttpRequest::post(
            path(route, &[g, &q, PARTS[pick as usize % 3]]),
            &json!({"toEnd": true}),
        ),
        (R::DeleteGroupQueue, _) => HttpRequest::delete(path(route, &[g, &q])),
        _ => return None,
    })
}

/// A step's label in a report: the kind of management request.
pub(super) fn label(route: RouteId) -> &'static str {
    match route {
        RouteId::DeleteMessage => "message delete",
        RouteId::Seek | RouteId::SeekPartition => "seek",
        RouteId::Retry => "message retry",
        RouteId::DeleteGroupQueue => "group delete",
        _ => "management read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant of every route builds a request on that route's own row.
    #[test]
    fn every_choice_is_sent_on_its_own_route() {
        let names = Names { prefix: "s".into() };
        let d = Delivered {
            message: serde_json::from_value(json!({
                "id": "m1", "transactionId": "t1", "traceId": null, "data": null,
                "producerSub": null, "createdAt": "2026-01-01T00:00:00.000Z",
                "partitionId": "00000000-0000-0000-0000-000000000001", "partition": "p0",
                "leaseId": "", "consumerGroup": "__QUEUE_MODE__",
            }))
            .expect("a delivered message"),
            group: 0,
            pop: 0,
        };
        for (route, variant) in choices(|_| true) {
            let req = request((route, variant), &names, (0, 1, 2), Some(&d))
                .unwrap_or_else(|| panic!("{route:?} variant {variant} builds no request"));
            let segs: Vec<&str> = req.path.split('/').skip(1).collect();
            let (found, _) = crate::wire::find(&req.method, &segs).expect("a route");
            assert_eq!(found.id, route, "{} {}", req.method, req.path);
        }
    }
}
