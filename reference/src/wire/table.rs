//! Every route of the protocol in one table: its method and path, who may call it, the
//! rule that names its answer, the short name people read, the wire types of the body it
//! reads and the answer it gives, and which queues a call on it touches.
//!
//! The parser's dispatch, the access levels, the checker's rule for a missing route and
//! the shape it prints, a request's short name, the typing of a management answer, the
//! OpenAPI document and the live watcher's choice of queue all read this table, and a
//! request names its route ([`Request::route`]), so adding a route means adding its row,
//! its parse, its answer in the model and the engines, a case and its rule in the spec.

use super::auth::Access;
use super::view::{View, ViewKind};
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
    /// The body it reads.
    pub body: Body,
    /// What it answers with when it succeeds.
    pub reply: Reply,
    /// Which queues a call on it touches.
    pub scope: Scope,
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

#[allow(clippy::too_many_arguments)]
const fn row(
    id: RouteId,
    method: &'static str,
    access: Access,
    rule: RuleId,
    name: &'static str,
    body: Body,
    reply: Reply,
    scope: Scope,
    path: &'static str,
) -> Route {
    Route {
        id,
        method,
        path,
        access,
        rule,
        name,
        body,
        reply,
        scope,
    }
}

/// The JSON body a route reads, by the wire type that describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// No body is read.
    Empty,
    /// A push's items (PUSH-1).
    Push,
    /// One acknowledgment (section 4).
    Ack,
    /// Several acknowledgments.
    AckBatch,
    /// An optional duration (LEASE-3: none means the lease's own).
    Extend,
    /// Operations applied together (TXN-1).
    Transaction,
    /// A queue and its options (CFG-1).
    Configure,
    /// A maintenance switch's new state.
    Switch,
    /// Where a group's cursors go (MGMT-8).
    Seek,
    /// The time a group reads from (MGMT-8).
    Subscription,
    /// Any JSON object, not read (MGMT-12).
    Ignored,
}

impl Body {
    /// Whether a call must send the body (LEASE-3 lets an extend leave it out).
    pub fn required(self) -> bool {
        !matches!(self, Body::Empty | Body::Extend)
    }
}

/// Which queues a call on a route touches: what a reader that judges each queue on its
/// own (the live watcher) needs to put a call on its queue, or to know it cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The queue the path's variable segment `n` names.
    PathQueue(usize),
    /// The queues the push items name.
    PushItems,
    /// The queues of the query's `namespace` and `task` (POP-10).
    Namespace,
    /// The queue of the acknowledged message's partition (the body is the item).
    Ack,
    /// The queues of the acknowledged messages' partitions (`acknowledgments`).
    AckBatch,
    /// The queue the lease the path's segment `n` names was granted on.
    PathLease(usize),
    /// The queues of a transaction's pushes and acks.
    Transaction,
    /// The body's `queue`.
    BodyQueue,
    /// The query's `queue`; a read across queues without it.
    QueryQueue,
    /// The queue of the partition the path's segment `n` names.
    PathPartition(usize),
    /// Every queue: a broker-wide write.
    Broker,
    /// A read across queues, or no queue at all.
    Across,
}

/// The wire type of a route's successful answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// One [`PushResult`](super::PushResult) per item.
    Pushed,
    /// A [`PopResponse`](super::PopResponse).
    Popped,
    /// One [`AckResult`](super::AckResult) per acknowledgment.
    Acked,
    /// An [`ExtendResponse`](super::ExtendResponse).
    Extended,
    /// A [`TxnResponse`](super::TxnResponse).
    Transaction,
    /// A [`ConfigureResponse`](super::ConfigureResponse).
    Configured,
    /// A [`DeleteResponse`](super::DeleteResponse).
    QueueDeleted,
    /// A [`DlqResponse`](super::DlqResponse).
    DeadLetters,
    /// A [`MaintenanceResponse`](super::MaintenanceResponse).
    PushSwitch,
    /// A [`PopMaintenanceResponse`](super::PopMaintenanceResponse).
    PopSwitch,
    /// A [`HealthResponse`](super::HealthResponse).
    Health,
    /// A management view (section 17).
    View(ViewKind),
}

use Access::{Admin, ReadOnly, ReadWrite};
use Body as B;
use Reply as A;
use RouteId as R;
use Scope as S;
use ViewKind as V;

/// The table. A path is matched against the rows in order, so a literal segment comes
/// before a variable one in the same place (`lagging` before `{group}`).
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    row(R::Push,               "POST",   ReadWrite, PUSH_1,   "push",            B::Push,         A::Pushed,                  S::PushItems,        "/api/v1/push"),
    row(R::PopDiscovery,       "GET",    ReadWrite, POP_10,   "pop",             B::Empty,        A::Popped,                  S::Namespace,        "/api/v1/pop"),
    row(R::PopQueue,           "GET",    ReadWrite, POP_5,    "pop",             B::Empty,        A::Popped,                  S::PathQueue(0),     "/api/v1/pop/queue/{queue}"),
    row(R::PopPartition,       "GET",    ReadWrite, POP_5,    "pop",             B::Empty,        A::Popped,                  S::PathQueue(0),     "/api/v1/pop/queue/{queue}/partition/{partition}"),
    row(R::Ack,                "POST",   ReadWrite, ACK_0,    "ack",             B::Ack,          A::Acked,                   S::Ack,              "/api/v1/ack"),
    row(R::AckBatch,           "POST",   ReadWrite, ACK_0,    "ack",             B::AckBatch,     A::Acked,                   S::AckBatch,         "/api/v1/ack/batch"),
    row(R::Extend,             "POST",   ReadWrite, LEASE_2,  "extend",          B::Extend,       A::Extended,                S::PathLease(0),     "/api/v1/lease/{leaseId}/extend"),
    row(R::Transaction,        "POST",   ReadWrite, TXN_1,    "txn",             B::Transaction,  A::Transaction,             S::Transaction,      "/api/v1/transaction"),
    row(R::Configure,          "POST",   ReadWrite, CFG_1,    "configure",       B::Configure,    A::Configured,              S::BodyQueue,        "/api/v1/configure"),
    row(R::DeleteQueue,        "DELETE", Admin,     DEL_1,    "delete",          B::Empty,        A::QueueDeleted,            S::PathQueue(0),     "/api/v1/resources/queues/{queue}"),
    row(R::Dlq,                "GET",    ReadOnly,  DLQ_2,    "dlq",             B::Empty,        A::DeadLetters,             S::QueryQueue,       "/api/v1/dlq"),
    row(R::GetPushMaintenance, "GET",    Admin,     MAINT_1,  "maintenance",     B::Empty,        A::PushSwitch,              S::Across,           "/api/v1/system/maintenance"),
    row(R::SetPushMaintenance, "POST",   Admin,     MAINT_1,  "maintenance",     B::Switch,       A::PushSwitch,              S::Broker,           "/api/v1/system/maintenance"),
    row(R::GetPopMaintenance,  "GET",    Admin,     MAINT_2,  "pop-maintenance", B::Empty,        A::PopSwitch,               S::Across,           "/api/v1/system/maintenance/pop"),
    row(R::SetPopMaintenance,  "POST",   Admin,     MAINT_2,  "pop-maintenance", B::Switch,       A::PopSwitch,               S::Broker,           "/api/v1/system/maintenance/pop"),
    row(R::Health,             "GET",    ReadOnly,  HEALTH_1, "health",          B::Empty,        A::Health,                  S::Across,           "/health"),
    row(R::Overview,           "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Overview),       S::Across,           "/api/v1/resources/overview"),
    row(R::Status,             "GET",    ReadOnly,  MGMT_5,   "manage",          B::Empty,        A::View(V::Status),         S::Across,           "/api/v1/status"),
    row(R::Queues,             "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Queues),         S::Across,           "/api/v1/resources/queues"),
    row(R::StatusQueues,       "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Queues),         S::Across,           "/api/v1/status/queues"),
    row(R::Queue,              "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Queue),          S::PathQueue(0),     "/api/v1/resources/queues/{queue}"),
    row(R::StatusQueue,        "GET",    ReadOnly,  MGMT_5,   "manage",          B::Empty,        A::View(V::StatusQueue),    S::PathQueue(0),     "/api/v1/status/queues/{queue}"),
    row(R::Depth,              "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Depth),          S::PathQueue(0),     "/api/v1/resources/queues/{queue}/depth"),
    row(R::Partitions,         "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Partitions),     S::QueryQueue,       "/api/v1/resources/partitions"),
    row(R::Namespaces,         "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Namespaces),     S::Across,           "/api/v1/resources/namespaces"),
    row(R::Tasks,              "GET",    ReadOnly,  MGMT_4,   "manage",          B::Empty,        A::View(V::Tasks),          S::Across,           "/api/v1/resources/tasks"),
    row(R::Groups,             "GET",    ReadOnly,  MGMT_3,   "manage",          B::Empty,        A::View(V::Groups),         S::Across,           "/api/v1/consumer-groups"),
    row(R::Lagging,            "GET",    ReadOnly,  MGMT_3,   "manage",          B::Empty,        A::View(V::Lagging),        S::Across,           "/api/v1/consumer-groups/lagging"),
    row(R::Group,              "GET",    ReadOnly,  MGMT_3,   "manage",          B::Empty,        A::View(V::Group),          S::Across,           "/api/v1/consumer-groups/{group}"),
    row(R::Analytics,          "GET",    ReadOnly,  MGMT_13,  "manage",          B::Empty,        A::View(V::Analytics),      S::Across,           "/api/v1/status/analytics"),
    row(R::Messages,           "GET",    ReadOnly,  MGMT_6,   "manage",          B::Empty,        A::View(V::Messages),       S::QueryQueue,       "/api/v1/messages"),
    row(R::QueueMessages,      "GET",    ReadOnly,  MGMT_6,   "manage",          B::Empty,        A::View(V::Messages),       S::PathQueue(0),     "/api/v1/status/queues/{queue}/messages"),
    row(R::Message,            "GET",    ReadOnly,  MGMT_7,   "manage",          B::Empty,        A::View(V::Message),        S::PathPartition(0), "/api/v1/messages/{partitionId}/{transactionId}"),
    row(R::Seek,               "POST",   ReadWrite, MGMT_8,   "manage-write",    B::Seek,         A::View(V::Seek),           S::PathQueue(1),     "/api/v1/consumer-groups/{group}/queues/{queue}/seek"),
    row(R::SeekPartition,      "POST",   ReadWrite, MGMT_8,   "manage-write",    B::Seek,         A::View(V::Seek),           S::PathQueue(1),     "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek"),
    row(R::Subscription,       "POST",   ReadWrite, MGMT_8,   "manage-write",    B::Subscription, A::View(V::Subscription),   S::Broker,           "/api/v1/consumer-groups/{group}/subscription"),
    row(R::Retry,              "POST",   ReadWrite, MGMT_12,  "manage-write",    B::Ignored,      A::View(V::Retry),          S::PathPartition(0), "/api/v1/messages/{partitionId}/{transactionId}/retry"),
    row(R::DeleteMessage,      "DELETE", Admin,     MGMT_11,  "manage-write",    B::Empty,        A::View(V::MessageDeleted), S::PathPartition(0), "/api/v1/messages/{partitionId}/{transactionId}"),
    row(R::DeleteGroup,        "DELETE", Admin,     MGMT_9,   "manage-write",    B::Empty,        A::View(V::GroupDeleted),   S::Broker,           "/api/v1/consumer-groups/{group}"),
    row(R::DeleteGroupQueue,   "DELETE", Admin,     MGMT_9,   "manage-write",    B::Empty,        A::View(V::GroupDeleted),   S::PathQueue(1),     "/api/v1/consumer-groups/{group}/queues/{queue}"),
];

impl View {
    /// The view `route` answers with, read from its JSON form; an error when `route` does
    /// not answer with a view or `v` is not its view.
    pub fn from_value(route: RouteId, v: serde_json::Value) -> Result<View, String> {
        match route.route().reply {
            Reply::View(kind) => {
                View::read(kind, v).map_err(|e| format!("not the view of {route:?}: {e}"))
            }
            _ => Err(format!("{route:?} answers no management view")),
        }
    }
}

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
