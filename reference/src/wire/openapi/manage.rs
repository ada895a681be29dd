//! The management and observability operations of the document (PROTOCOL.md section
//! 17), each answer's schema generated from the view type it is rendered from.

use super::{g_ref, param, At, Op};
use crate::wire::*;
use schemars::JsonSchema;
use serde_json::Value;
use RouteId as R;

/// `POST /api/v1/consumer-groups/{group}/subscription` (MGMT-8).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(super) struct SubscriptionBody {
    /// ISO-8601: where the group reads from on every queue it reads.
    subscription_timestamp: String,
}

/// `POST /api/v1/consumer-groups/{group}/queues/{queue}/seek` (MGMT-8): one of the two.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(super) struct SeekBody {
    /// `true`: to each partition's last offset.
    to_end: Option<bool>,
    /// ISO-8601: to the last message created before it.
    timestamp: Option<String>,
}

fn page() -> Vec<Value> {
    vec![
        param(
            "limit",
            "query",
            "integer",
            "Page size, 1 to 1000 (default 100).",
        ),
        param("offset", "query", "integer", "Rows to skip (default 0)."),
    ]
}

fn read(route: RouteId, summary: &'static str, params: Vec<Value>) -> Op {
    Op {
        at: At::Route(route),
        summary,
        params,
        ok: (200, "The view."),
        errors: vec![
            (
                400,
                "A malformed parameter; nothing changed.",
                Some(g_ref("ErrorBody")),
            ),
            (
                404,
                "The queue, group or message named does not exist.",
                Some(g_ref("ErrorBody")),
            ),
        ],
    }
}

/// Every management operation.
pub(super) fn operations() -> Vec<Op> {
    let q = || param("queue", "path", "string", "The queue.");
    let grp = || param("group", "path", "string", "The consumer group.");
    let with = |mut a: Vec<Value>, b: Vec<Value>| {
        a.extend(b);
        a
    };
    let filters = || {
        vec![
            param(
                "namespace",
                "query",
                "string",
                "Only queues of this namespace.",
            ),
            param("task", "query", "string", "Only queues of this task."),
        ]
    };
    let mut ops = vec![
        read(R::Overview, "Broker-wide figures (MGMT-4).", vec![]),
        read(
            R::Status,
            "The overview with the maintenance switches (MGMT-5).",
            vec![],
        ),
        read(
            R::Queues,
            "A page of queues by name (MGMT-2, MGMT-4).",
            with(filters(), page()),
        ),
        read(
            R::StatusQueues,
            "The same page of queues (MGMT-5).",
            with(filters(), page()),
        ),
        read(
            R::Queue,
            "One queue's figures and options (MGMT-4).",
            vec![q()],
        ),
        read(
            R::StatusQueue,
            "One queue with a page of its partitions (MGMT-5).",
            with(vec![q()], page()),
        ),
        read(
            R::Depth,
            "The backlog per partition (MGMT-4).",
            with(
                vec![
                    q(),
                    param(
                        "group",
                        "query",
                        "string",
                        "One group's backlog; absent: the largest per partition.",
                    ),
                ],
                page(),
            ),
        ),
        read(
            R::Partitions,
            "A page of partitions (MGMT-4).",
            with(
                vec![param("queue", "query", "string", "Only this queue's.")],
                page(),
            ),
        ),
        read(
            R::Namespaces,
            "A page of namespaces with their queue counts (MGMT-4).",
            page(),
        ),
        read(
            R::Tasks,
            "A page of tasks with their queue counts (MGMT-4).",
            page(),
        ),
        read(
            R::Groups,
            "A page of consumer groups by name (MGMT-3).",
            page(),
        ),
        read(
            R::Lagging,
            "A page of the groups lagging by at least minLagSeconds on some queue (MGMT-3).",
            with(
                vec![param("minLagSeconds", "query", "integer", "Default 60.")],
                page(),
            ),
        ),
        read(R::Group, "One consumer group (MGMT-3).", vec![grp()]),
        read(
            R::Messages,
            "Peek: retained messages with their state for a group, nothing leased (MGMT-6).",
            with(
                vec![
                    param("queue", "query", "string", "Only this queue."),
                    param("partition", "query", "string", "Only this partition."),
                    param(
                        "consumerGroup",
                        "query",
                        "string",
                        "The group whose state is shown (default __QUEUE_MODE__).",
                    ),
                    param(
                        "status",
                        "query",
                        "string",
                        "pending, leased, completed or deadLettered.",
                    ),
                ],
                page(),
            ),
        ),
        read(
            R::QueueMessages,
            "Peek one queue's messages (MGMT-5, MGMT-6).",
            with(
                vec![
                    q(),
                    param("partition", "query", "string", "Only this partition."),
                    param(
                        "consumerGroup",
                        "query",
                        "string",
                        "The group whose state is shown (default __QUEUE_MODE__).",
                    ),
                    param(
                        "status",
                        "query",
                        "string",
                        "pending, leased, completed or deadLettered.",
                    ),
                ],
                page(),
            ),
        ),
        read(
            R::Analytics,
            "Per bucket of a window: messages created, dead letters filed (MGMT-13).",
            with(
                vec![
                    param(
                        "from",
                        "query",
                        "string",
                        "ISO-8601 start, included (default: 24 hours before to).",
                    ),
                    param(
                        "to",
                        "query",
                        "string",
                        "ISO-8601 end, excluded (default: just after now).",
                    ),
                    param(
                        "interval",
                        "query",
                        "string",
                        "minute, hour (default) or day; at most 1,500 buckets.",
                    ),
                    param("queue", "query", "string", "Only this queue."),
                ],
                filters(),
            ),
        ),
        read(
            R::Message,
            "One message with every reading group's state (MGMT-7).",
            vec![
                param("partitionId", "path", "string", "The partition's UUID."),
                param(
                    "transactionId",
                    "path",
                    "string",
                    "The message's transactionId.",
                ),
            ],
        ),
    ];
    ops.push(Op {
        at: At::Outside("GET", "/metrics", Reply::View(ViewKind::Metrics)),
        summary: "Counts since the broker started, as JSON (MGMT-10; the Prometheus text is at /metrics/prometheus).",
        params: vec![],
        ok: (200, "The counts."),
errors: vec![],
    });
    ops.push(Op {
        at: At::Route(R::Seek),
        summary: "Move a group's cursors on a queue to the end or to a time (MGMT-8).",
        params: vec![grp(), q()],
        ok: (200, "The cursors were set."),
        errors: vec![
            (
                400,
                "A malformed body; nothing changed.",
                Some(g_ref("ErrorBody")),
            ),
            (404, "The queue does not exist.", Some(g_ref("ErrorBody"))),
        ],
    });
    ops.push(Op {
        at: At::Route(R::SeekPartition),
        summary: "Move a group's cursor on one partition to the end or to a time (MGMT-8).",
        params: vec![
            grp(),
            q(),
            param("partition", "path", "string", "The partition."),
        ],
        ok: (200, "The cursor was set."),
        errors: vec![
            (
                400,
                "A malformed body; nothing changed.",
                Some(g_ref("ErrorBody")),
            ),
            (
                404,
                "The queue or partition does not exist.",
                Some(g_ref("ErrorBody")),
            ),
        ],
    });
    ops.push(Op {
        at: At::Route(R::Subscription),
        summary: "Seek a group to a time on every queue it reads (MGMT-8).",
        params: vec![grp()],
        ok: (200, "The cursors were set."),
        errors: vec![(
            400,
            "A malformed body; nothing changed.",
            Some(g_ref("ErrorBody")),
        )],
    });
    let message = || {
        vec![
            param("partitionId", "path", "string", "The partition's UUID."),
            param(
                "transactionId",
                "path",
                "string",
                "The message's transactionId.",
            ),
        ]
    };
    ops.push(Op {
        at: At::Route(R::Retry),
        summary: "Write a dead-lettered message again at the end of its partition (MGMT-12).",
        params: message(),
        ok: (200, "Written again; its dead letters are gone."),
        errors: vec![
            (
                400,
                "A partitionId that is not a UUID.",
                Some(g_ref("ErrorBody")),
            ),
            (
                404,
                "The message has no dead letter.",
                Some(g_ref("ErrorBody")),
            ),
            (
                429,
                "The queue is at its maxSize (RET-5).",
                Some(g_ref("ErrorBody")),
            ),
            (
                503,
                "Push maintenance is on, or the database is away.",
                Some(g_ref("ErrorBody")),
            ),
        ],
    });
    ops.push(Op {
        at: At::Route(R::DeleteMessage),
        summary: "Delete the newest retained message with the transactionId (MGMT-11).",
        params: message(),
        ok: (
            200,
            "Deleted: never delivered, counted or resolved again; its offset stays used.",
        ),
        errors: vec![
            (
                400,
                "A partitionId that is not a UUID.",
                Some(g_ref("ErrorBody")),
            ),
            (
                404,
                "No retained message with that transactionId in that partition.",
                Some(g_ref("ErrorBody")),
            ),
        ],
    });
    let delete_metadata = || {
        param(
            "deleteMetadata",
            "query",
            "boolean",
            "Also its subscriptions (default true).",
        )
    };
    for (route, summary, params) in [
        (
            R::DeleteGroup,
            "Delete a group's cursors on every queue (MGMT-9).",
            vec![grp(), delete_metadata()],
        ),
        (
            R::DeleteGroupQueue,
            "Delete a group's cursors on one queue (MGMT-9).",
            vec![grp(), q(), delete_metadata()],
        ),
    ] {
        ops.push(Op {
            at: At::Route(route),
            summary,
            params,
            ok: (200, "Deleted (0 when the group had none)."),
            errors: vec![(
                400,
                "A malformed parameter; nothing changed.",
                Some(g_ref("ErrorBody")),
            )],
        });
    }
    ops
}
