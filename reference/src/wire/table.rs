//! Every route of the protocol in one table: its method and path, who may call it, the
//! rule that names its answer and the short name people read.
//!
//! A route used to be known in many places at once: the parser's dispatch, the access
//! levels, the checker's rule for a missing route and the shape it prints, a request's
//! short name. Each of those now reads this table, and a request names its route
//! ([`Request::route`]), so adding a route means adding its row, its parse, its answer in
//! the model and the engines, a case and its rule in the spec.

use super::auth::Access;
use super::{ManageRequest, PopRoute, Request};
use crate::rules::*;

/// One row of [`ROUTES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// What the route does, the key other tables and the parser name it by.
    pub id: RouteId,
    /// The HTTP method: `GET`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path with its variable segments in braces (`/api/v1/lease/{leaseId}/extend`).
    pub path: &'static str,
    /// Who may call it (AUTH-3).
    pub access: Access,
    /// The rule that names its answer: what a broker without the route breaks.
    pub rule: RuleId,
    /// The operation's short name, for labels a person reads (metrics, a timeline).
    pub name: &'static str,
}

/// Every route, by what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteId {
    /// `POST /api/v1/push` (section 2).
    Push,
    /// `GET /api/v1/pop?namespace=&task=`: the discovery pop (POP-10).
    PopDiscovery,
    /// `GET /api/v1/pop/queue/{queue}`: the queue-scoped pop (POP-5).
    PopQueue,
    /// `GET /api/v1/pop/queue/{queue}/partition/{partition}`: the partition pop (POP-5).
    PopPartition,
    /// `POST /api/v1/ack`: one acknowledgment (section 4).
    Ack,
    /// `POST /api/v1/ack/batch`: several acknowledgments (section 4).
    AckBatch,
    /// `POST /api/v1/lease/{leaseId}/extend` (section 5).
    Extend,
    /// `POST /api/v1/transaction` (section 7).
    Transaction,
    /// `POST /api/v1/configure` (section 8).
    Configure,
    /// `DELETE /api/v1/resources/queues/{queue}` (DEL-1).
    DeleteQueue,
    /// `GET /api/v1/dlq`: the dead-letter listing (DLQ-2).
    Dlq,
    /// `GET /api/v1/system/maintenance`: the push maintenance switch (MAINT-1).
    GetPushMaintenance,
    /// `POST /api/v1/system/maintenance`: sets the push maintenance switch (MAINT-1).
    SetPushMaintenance,
    /// `GET /api/v1/system/maintenance/pop`: the pop maintenance switch (MAINT-2).
    GetPopMaintenance,
    /// `POST /api/v1/system/maintenance/pop`: sets the pop maintenance switch (MAINT-2).
    SetPopMaintenance,
    /// `GET /health` (HEALTH-1).
    Health,
    /// `GET /api/v1/resources/overview` (MGMT-4).
    Overview,
    /// `GET /api/v1/status` (MGMT-5).
    Status,
    /// `GET /api/v1/resources/queues` (MGMT-4).
    Queues,
    /// `GET /api/v1/status/queues` (MGMT-5).
    StatusQueues,
    /// `GET /api/v1/resources/queues/{queue}` (MGMT-4).
    Queue,
    /// `GET /api/v1/status/queues/{queue}` (MGMT-5).
    StatusQueue,
    /// `GET /api/v1/resources/queues/{queue}/depth` (MGMT-4).
    Depth,
    /// `GET /api/v1/resources/partitions` (MGMT-4).
    Partitions,
    /// `GET /api/v1/resources/namespaces` (MGMT-4).
    Namespaces,
    /// `GET /api/v1/resources/tasks` (MGMT-4).
    Tasks,
    /// `GET /api/v1/consumer-groups` (MGMT-3).
    Groups,
    /// `GET /api/v1/consumer-groups/lagging` (MGMT-3).
    Lagging,
    /// `GET /api/v1/consumer-groups/{group}` (MGMT-3).
    Group,
    /// `GET /api/v1/status/analytics` (MGMT-13).
    Analytics,
    /// `GET /api/v1/messages`: the peek (MGMT-6).
    Messages,
    /// `GET /api/v1/status/queues/{queue}/messages`: the peek of one queue (MGMT-5).
    QueueMessages,
    /// `GET /api/v1/messages/{partitionId}/{transactionId}` (MGMT-7).
    Message,
    /// `POST /api/v1/consumer-groups/{group}/queues/{queue}/seek` (MGMT-8).
    Seek,
    /// `POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek` (MGMT-8).
    SeekPartition,
    /// `POST /api/v1/consumer-groups/{group}/subscription` (MGMT-8).
    Subscription,
    /// `POST /api/v1/messages/{partitionId}/{transactionId}/retry` (MGMT-12).
    Retry,
    /// `DELETE /api/v1/messages/{partitionId}/{transactionId}` (MGMT-11).
    DeleteMessage,
    /// `DELETE /api/v1/consumer-groups/{group}` (MGMT-9).
    DeleteGroup,
    /// `DELETE /api/v1/consumer-groups/{group}/queues/{queue}` (MGMT-9).
    DeleteGroupQueue,
}

const fn row(
    id: RouteId,
    method: &'static str,
    path: &'static str,
    access: Access,
    rule: RuleId,
    name: &'static str,
) -> Route {
    Route {
        id,
        method,
        path,
        access,
        rule,
        name,
    }
}

use Access::{Admin, ReadOnly, ReadWrite};
use RouteId as R;

/// The table. A path is matched against the rows in order, so a literal segment comes
/// before a variable one in the same place (`lagging` before `{group}`).
pub const ROUTES: &[Route] = &[
    row(R::Push, "POST", "/api/v1/push", ReadWrite, PUSH_1, "push"),
    row(
        R::PopDiscovery,
        "GET",
        "/api/v1/pop",
        ReadWrite,
        POP_10,
        "pop",
    ),
    row(
        R::PopQueue,
        "GET",
        "/api/v1/pop/queue/{queue}",
        ReadWrite,
        POP_5,
        "pop",
    ),
    row(
        R::PopPartition,
        "GET",
        "/api/v1/pop/queue/{queue}/partition/{partition}",
        ReadWrite,
        POP_5,
        "pop",
    ),
    row(R::Ack, "POST", "/api/v1/ack", ReadWrite, ACK_0, "ack"),
    row(
        R::AckBatch,
        "POST",
        "/api/v1/ack/batch",
        ReadWrite,
        ACK_0,
        "ack",
    ),
    row(
        R::Extend,
        "POST",
        "/api/v1/lease/{leaseId}/extend",
        ReadWrite,
        LEASE_2,
        "extend",
    ),
    row(
        R::Transaction,
        "POST",
        "/api/v1/transaction",
        ReadWrite,
        TXN_1,
        "txn",
    ),
    row(
        R::Configure,
        "POST",
        "/api/v1/configure",
        ReadWrite,
        CFG_1,
        "configure",
    ),
    row(
        R::DeleteQueue,
        "DELETE",
        "/api/v1/resources/queues/{queue}",
        Admin,
        DEL_1,
        "delete",
    ),
    row(R::Dlq, "GET", "/api/v1/dlq", ReadOnly, DLQ_2, "dlq"),
    row(
        R::GetPushMaintenance,
        "GET",
        "/api/v1/system/maintenance",
        Admin,
        MAINT_1,
        "maintenance",
    ),
    row(
        R::SetPushMaintenance,
        "POST",
        "/api/v1/system/maintenance",
        Admin,
        MAINT_1,
        "maintenance",
    ),
    row(
        R::GetPopMaintenance,
        "GET",
        "/api/v1/system/maintenance/pop",
        Admin,
        MAINT_2,
        "pop-maintenance",
    ),
    row(
        R::SetPopMaintenance,
        "POST",
        "/api/v1/system/maintenance/pop",
        Admin,
        MAINT_2,
        "pop-maintenance",
    ),
    row(R::Health, "GET", "/health", ReadOnly, HEALTH_1, "health"),
    row(
        R::Overview,
        "GET",
        "/api/v1/resources/overview",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Status,
        "GET",
        "/api/v1/status",
        ReadOnly,
        MGMT_5,
        "manage",
    ),
    row(
        R::Queues,
        "GET",
        "/api/v1/resources/queues",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::StatusQueues,
        "GET",
        "/api/v1/status/queues",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Queue,
        "GET",
        "/api/v1/resources/queues/{queue}",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::StatusQueue,
        "GET",
        "/api/v1/status/queues/{queue}",
        ReadOnly,
        MGMT_5,
        "manage",
    ),
    row(
        R::Depth,
        "GET",
        "/api/v1/resources/queues/{queue}/depth",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Partitions,
        "GET",
        "/api/v1/resources/partitions",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Namespaces,
        "GET",
        "/api/v1/resources/namespaces",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Tasks,
        "GET",
        "/api/v1/resources/tasks",
        ReadOnly,
        MGMT_4,
        "manage",
    ),
    row(
        R::Groups,
        "GET",
        "/api/v1/consumer-groups",
        ReadOnly,
        MGMT_3,
        "manage",
    ),
    row(
        R::Lagging,
        "GET",
        "/api/v1/consumer-groups/lagging",
        ReadOnly,
        MGMT_3,
        "manage",
    ),
    row(
        R::Group,
        "GET",
        "/api/v1/consumer-groups/{group}",
        ReadOnly,
        MGMT_3,
        "manage",
    ),
    row(
        R::Analytics,
        "GET",
        "/api/v1/status/analytics",
        ReadOnly,
        MGMT_13,
        "manage",
    ),
    row(
        R::Messages,
        "GET",
        "/api/v1/messages",
        ReadOnly,
        MGMT_6,
        "manage",
    ),
    row(
        R::QueueMessages,
        "GET",
        "/api/v1/status/queues/{queue}/messages",
        ReadOnly,
        MGMT_6,
        "manage",
    ),
    row(
        R::Message,
        "GET",
        "/api/v1/messages/{partitionId}/{transactionId}",
        ReadOnly,
        MGMT_7,
        "manage",
    ),
    row(
        R::Seek,
        "POST",
        "/api/v1/consumer-groups/{group}/queues/{queue}/seek",
        ReadWrite,
        MGMT_8,
        "manage-write",
    ),
    row(
        R::SeekPartition,
        "POST",
        "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
        ReadWrite,
        MGMT_8,
        "manage-write",
    ),
    row(
        R::Subscription,
        "POST",
        "/api/v1/consumer-groups/{group}/subscription",
        ReadWrite,
        MGMT_8,
        "manage-write",
    ),
    row(
        R::Retry,
        "POST",
        "/api/v1/messages/{partitionId}/{transactionId}/retry",
        ReadWrite,
        MGMT_12,
        "manage-write",
    ),
    row(
        R::DeleteMessage,
        "DELETE",
        "/api/v1/messages/{partitionId}/{transactionId}",
        Admin,
        MGMT_11,
        "manage-write",
    ),
    row(
        R::DeleteGroup,
        "DELETE",
        "/api/v1/consumer-groups/{group}",
        Admin,
        MGMT_9,
        "manage-write",
    ),
    row(
        R::DeleteGroupQueue,
        "DELETE",
        "/api/v1/consumer-groups/{group}/queues/{queue}",
        Admin,
        MGMT_9,
        "manage-write",
    ),
];

impl RouteId {
    /// This route's row.
    pub fn route(self) -> &'static Route {
        ROUTES
            .iter()
            .find(|r| r.id == self)
            .expect("every route has its row")
    }
}

/// The route that `method` and `segments` (a path split at `/`, not yet decoded) name,
/// with the path's variable segments in order.
pub fn find<'a>(method: &str, segments: &[&'a str]) -> Option<(&'static Route, Vec<&'a str>)> {
    ROUTES.iter().filter(|r| r.method == method).find_map(|r| {
        let pattern: Vec<&str> = r.path.split('/').skip(1).collect();
        if pattern.len() != segments.len() {
            return None;
        }
        let mut vars = Vec::new();
        for (p, s) in pattern.iter().zip(segments) {
            if p.starts_with('{') {
                vars.push(*s);
            } else if p != s {
                return None;
            }
        }
        Some((r, vars))
    })
}

impl Request {
    /// The route this request is sent on (a queue listing on its `resources` path).
    pub fn route(&self) -> RouteId {
        match self {
            Request::Push(_) => R::Push,
            Request::Pop { route, .. } => match route {
                PopRoute::Discovery { .. } => R::PopDiscovery,
                PopRoute::Queue(_) => R::PopQueue,
                PopRoute::Partition(..) => R::PopPartition,
            },
            Request::Ack(_) => R::Ack,
            Request::AckBatch(_) => R::AckBatch,
            Request::Extend(_) => R::Extend,
            Request::Transaction(_) => R::Transaction,
            Request::Configure(_) => R::Configure,
            Request::DeleteQueue(_) => R::DeleteQueue,
            Request::Dlq(_) => R::Dlq,
            Request::GetPushMaintenance => R::GetPushMaintenance,
            Request::SetPushMaintenance(_) => R::SetPushMaintenance,
            Request::GetPopMaintenance => R::GetPopMaintenance,
            Request::SetPopMaintenance(_) => R::SetPopMaintenance,
            Request::Health => R::Health,
            Request::Manage(m) => m.route(),
        }
    }

    /// The operation's short name, for labels a person reads (a timeline's bars).
    pub fn name(&self) -> &'static str {
        self.route().route().name
    }
}

impl ManageRequest {
    /// The route this management request is sent on.
    pub fn route(&self) -> RouteId {
        use ManageRequest as M;
        match self {
            M::Overview => R::Overview,
            M::Status => R::Status,
            M::Queues { .. } => R::Queues,
            M::Queue(_) => R::Queue,
            M::StatusQueue { .. } => R::StatusQueue,
            M::Depth { .. } => R::Depth,
            M::Partitions { .. } => R::Partitions,
            M::Namespaces(_) => R::Namespaces,
            M::Tasks(_) => R::Tasks,
            M::Groups(_) => R::Groups,
            M::Group(_) => R::Group,
            M::Lagging { .. } => R::Lagging,
            M::Messages(q) if q.in_path => R::QueueMessages,
            M::Messages(_) => R::Messages,
            M::Analytics(_) => R::Analytics,
            M::Message { .. } => R::Message,
            M::Seek {
                partition: Some(_), ..
            } => R::SeekPartition,
            M::Seek { .. } => R::Seek,
            M::Subscription { .. } => R::Subscription,
            M::Retry { .. } => R::Retry,
            M::DeleteMessage { .. } => R::DeleteMessage,
            M::DeleteGroup { queue: Some(_), .. } => R::DeleteGroupQueue,
            M::DeleteGroup { .. } => R::DeleteGroup,
        }
    }

    /// The rule that names this request's answer.
    pub fn rule(&self) -> RuleId {
        self.route().route().rule
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A concrete path of `route`: each variable segment filled in.
    fn sample(route: &Route) -> String {
        route
            .path
            .split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn every_row_is_found_by_its_own_path_and_ids_are_unique() {
        for r in ROUTES {
            let path = sample(r);
            let segments: Vec<&str> = path.split('/').skip(1).collect();
            let (found, _) = find(r.method, &segments).unwrap();
            assert_eq!(
                found.id, r.id,
                "{} {path} is taken by an earlier row",
                r.method
            );
            assert_eq!(
                ROUTES.iter().filter(|o| o.id == r.id).count(),
                1,
                "{:?}",
                r.id
            );
        }
        assert!(find("GET", &["api", "v1", "nowhere"]).is_none());
    }
}
