//! The wire protocol as an OpenAPI 3.1 document, for a broker author's own tooling
//! (client generators, request validators, API explorers). Every answer's schema is
//! generated from the wire type that answer is rendered from, so the document cannot
//! drift from what the broker sends; request bodies, which the wire layer parses by hand
//! for exact error messages, are described by the schema-only types below. Each
//! operation names its row of the route table ([`super::ROUTES`]), which alone holds its
//! method, path and access level; a test holds that every row has one. Our broker
//! serves the document at `/openapi.json`; `spec/openapi.json` is its checked-in copy,
//! and a test validates every wire snapshot against it.

mod manage;

use super::*;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};
use RouteId as R;

/// `POST /api/v1/push`.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct PushBody {
    /// At most the broker's item limit (`MAX_ITEMS`, 10,000 by default).
    items: Vec<PushItemBody>,
}

/// One message to push (PUSH-1).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct PushItemBody {
    /// The queue; created on first push.
    queue: String,
    /// The partition (`Default` when absent).
    partition: Option<String>,
    /// Dedup key within the queue's dedup window; minted (UUIDv7) when absent.
    transaction_id: Option<String>,
    /// A UUID carried to every delivery.
    trace_id: Option<String>,
    /// Any JSON value; absent is null.
    payload: Option<Value>,
}

/// How an ack settles a message (ACK-0): a status string, or `true` (completed) and
/// `false` (failed); absent or null is completed.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum AckStatusBody {
    Status(AckStatus),
    Bool(bool),
}

/// `POST /api/v1/ack`, and one item of a batch.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct AckBody {
    transaction_id: String,
    partition_id: String,
    status: Option<AckStatusBody>,
    /// The lease the message was delivered under.
    lease_id: Option<String>,
    /// Why it failed (kept with a dead letter).
    error: Option<String>,
    /// Absent: queue mode.
    consumer_group: Option<String>,
}

/// `POST /api/v1/ack/batch`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct AckBatchBody {
    consumer_group: Option<String>,
    acknowledgments: Vec<AckBody>,
}

/// `POST /api/v1/lease/{leaseId}/extend` (LEASE-3: no body means the lease's own
/// duration).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ExtendBody {
    seconds: Option<u32>,
}

/// One operation of a transaction.
#[derive(JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
#[allow(dead_code)]
enum TxnOpBody {
    Push { items: Vec<PushItemBody> },
    Ack(AckBody),
}

/// `POST /api/v1/transaction`: all or nothing (TXN-1).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct TxnBody {
    operations: Vec<TxnOpBody>,
    /// Leases that must still be live for the transaction to apply.
    required_leases: Option<Vec<String>>,
}

/// Queue options a configure call sets; the others keep their values (CFG-2).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct OptionsBody {
    lease_time: Option<u32>,
    retry_limit: Option<u32>,
    retry_delay: Option<u32>,
    dedup_window_seconds: Option<u32>,
    delayed_processing: Option<u32>,
    window_buffer: Option<u32>,
    min_pop_wait_time: Option<u32>,
    max_size: Option<u64>,
    retention_seconds: Option<u32>,
    completed_retention_seconds: Option<u32>,
    encryption_enabled: Option<bool>,
    priority: Option<i32>,
}

/// `POST /api/v1/configure`.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ConfigureBody {
    queue: String,
    /// Derived from a dotted queue name when absent.
    namespace: Option<String>,
    task: Option<String>,
    options: Option<OptionsBody>,
}

/// `POST /api/v1/system/maintenance` and `.../maintenance/pop`.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct MaintenanceBody {
    enabled: bool,
}

/// Where an operation is served: a row of the route table, or a route the server answers
/// outside the protocol's requests (its JSON metrics).
#[derive(Clone, Copy)]
pub(super) enum At {
    /// A route of [`super::ROUTES`]: its method and path come from there.
    Route(RouteId),
    /// Method, path and answer of a route outside the table.
    Outside(&'static str, &'static str, Reply),
}

impl At {
    fn method(self) -> &'static str {
        match self {
            At::Route(r) => r.route().method,
            At::Outside(method, ..) => method,
        }
    }

    fn path(self) -> &'static str {
        match self {
            At::Route(r) => r.route().path,
            At::Outside(_, path, _) => path,
        }
    }

    fn reply(self) -> Reply {
        match self {
            At::Route(r) => r.route().reply,
            At::Outside(.., reply) => reply,
        }
    }

    fn body(self) -> Body {
        match self {
            At::Route(r) => r.route().body,
            At::Outside(..) => Body::Empty,
        }
    }
}

/// One operation of the document: what the table does not hold about a route.
pub(super) struct Op {
    pub(super) at: At,
    pub(super) summary: &'static str,
    pub(super) params: Vec<Value>,
    /// The success status and what it means; its schema is the route's reply.
    pub(super) ok: (u16, &'static str),
    /// Status, description, schema (`None`: no body).
    pub(super) errors: Vec<(u16, &'static str, Option<Value>)>,
}

pub(super) fn param(name: &str, place: &str, ty: &str, what: &str) -> Value {
    json!({"name": name, "in": place, "required": place == "path",
           "description": what, "schema": {"type": ty}})
}

fn pop_query() -> Vec<Value> {
    vec![
        param("consumerGroup", "query", "string", "Absent: queue mode."),
        param(
            "batch",
            "query",
            "integer",
            "Most messages to lease (default 1).",
        ),
        param(
            "partitions",
            "query",
            "integer",
            "Most partitions to lease from.",
        ),
        param(
            "wait",
            "query",
            "boolean",
            "Long poll until a message or the timeout.",
        ),
        param("timeout", "query", "integer", "Long-poll timeout (ms)."),
        param(
            "leaseSeconds",
            "query",
            "integer",
            "Lease length (default: the queue's leaseTime).",
        ),
        param("autoAck", "query", "boolean", "Commit on delivery."),
        param(
            "subscriptionMode",
            "query",
            "string",
            "Where a new group starts.",
        ),
        param(
            "subscriptionFrom",
            "query",
            "string",
            "Where a new group starts (a timestamp).",
        ),
    ]
}

/// Every operation of the protocol (PROTOCOL.md sections 2 to 11).
fn operations(g: &mut SchemaGenerator) -> Vec<Op> {
    let err = || Some(g_ref("ErrorBody"));
    let bad = (400, "The request is malformed; nothing changed.", err());
    let q = || param("queue", "path", "string", "The queue.");
    vec![
        Op {
            at: At::Route(R::Push),
            summary: "Push messages (PUSH-1..PUSH-8).",
            params: vec![],
            ok: (201, "One result per item, in order."),
            errors: vec![
                bad.clone(),
                (413, "The body exceeds the broker's limit.", err()),
                (
                    429,
                    "A queue would pass its maxSize (RET-5); nothing written; see Retry-After.",
                    err(),
                ),
                (
                    503,
                    "The broker cannot take pushes now; retry later.",
                    err(),
                ),
            ],
        },
        pop_op(
            R::PopQueue,
            "Pop from any partition of a queue (POP-1..POP-9).",
            vec![q()],
        ),
        pop_op(
            R::PopPartition,
            "Pop from one partition.",
            vec![q(), param("partition", "path", "string", "The partition.")],
        ),
        Op {
            at: At::Route(R::PopDiscovery),
            summary: "Pop across the queues of a namespace or task (POP-10).",
            params: [
                param("namespace", "query", "string", "The namespace to pop from."),
                param("task", "query", "string", "The task to pop from."),
            ]
            .into_iter()
            .chain(pop_query())
            .collect(),
            ok: (200, "Leased messages."),
            errors: vec![
                (204, "Nothing to deliver.", None),
                (
                    400,
                    "No namespace or task, or a malformed parameter.",
                    Some(json!({"anyOf": [
                    g.subschema_for::<DiscoveryError>().to_value(), g_ref("ErrorBody")]})),
                ),
            ],
        },
        Op {
            at: At::Route(R::Ack),
            summary: "Acknowledge one message (ACK-0..ACK-8).",
            params: vec![],
            ok: (200, "One result."),
            errors: vec![bad.clone()],
        },
        Op {
            at: At::Route(R::AckBatch),
            summary: "Acknowledge several messages at once.",
            params: vec![],
            ok: (200, "One result per acknowledgment, in order."),
            errors: vec![bad.clone()],
        },
        Op {
            at: At::Route(R::Extend),
            summary: "Extend a live lease (LEASE-1..LEASE-3).",
            params: vec![param("leaseId", "path", "string", "The lease (a UUID).")],
            ok: (200, "Whether the lease was renewed, and until when."),
            errors: vec![bad.clone()],
        },
        Op {
            at: At::Route(R::Transaction),
            summary: "Pushes and acks applied together or not at all (TXN-1..TXN-3).",
            params: vec![],
            ok: (200, "Applied, or refused with nothing applied."),
            errors: vec![
                bad.clone(),
                (
                    429,
                    "A push would take a queue past its maxSize (RET-5); nothing applied.",
                    err(),
                ),
            ],
        },
        Op {
            at: At::Route(R::Configure),
            summary: "Create or configure a queue (CFG-1..CFG-4).",
            params: vec![],
            ok: (200, "The queue's options now."),
            errors: vec![bad.clone()],
        },
        Op {
            at: At::Route(R::DeleteQueue),
            summary: "Delete a queue and everything in it.",
            params: vec![q()],
            ok: (200, "Deleted (or already absent)."),
            errors: vec![bad.clone()],
        },
        Op {
            at: At::Route(R::Dlq),
            summary: "List dead letters (DLQ-1, DLQ-2).",
            params: vec![
                param("queue", "query", "string", "Only this queue."),
                param("consumerGroup", "query", "string", "Only this group."),
                param("partition", "query", "string", "Only this partition."),
                param("limit", "query", "integer", "Page size (default 100)."),
                param("offset", "query", "integer", "Entries to skip."),
            ],
            ok: (200, "A page of dead letters, oldest first."),
            errors: vec![bad.clone()],
        },
        maintenance(R::GetPushMaintenance, PUSH_MAINTENANCE),
        maintenance(R::SetPushMaintenance, PUSH_MAINTENANCE),
        maintenance(R::GetPopMaintenance, POP_MAINTENANCE),
        maintenance(R::SetPopMaintenance, POP_MAINTENANCE),
        Op {
            at: At::Route(R::Health),
            summary: "Whether the broker serves (HEALTH-1).",
            params: vec![],
            ok: (200, "Healthy."),
            errors: vec![(
                503,
                "Not serving (e.g. the database is down).",
                of::<HealthResponse>(g),
            )],
        },
    ]
}

fn pop_op(route: RouteId, summary: &'static str, mut params: Vec<Value>) -> Op {
    params.extend(pop_query());
    Op {
        at: At::Route(route),
        summary,
        params,
        ok: (200, "Leased messages."),
        errors: vec![
            (204, "Nothing to deliver (or pop maintenance).", None),
            (400, "A malformed parameter.", Some(g_ref("ErrorBody"))),
        ],
    }
}

const PUSH_MAINTENANCE: &str = "Push maintenance: pushes are buffered (MAINT-1).";
const POP_MAINTENANCE: &str = "Pop maintenance: pops answer 204 (MAINT-2).";

/// The `GET` or `POST` of one maintenance switch (the body is read on `POST` only).
fn maintenance(route: RouteId, summary: &'static str) -> Op {
    Op {
        at: At::Route(route),
        summary,
        params: vec![],
        ok: (200, "The switch's state now."),
        errors: vec![(
            400,
            "The request is malformed; nothing changed.",
            Some(g_ref("ErrorBody")),
        )],
    }
}

/// The schema of a route's answer, from the wire type the table names.
fn reply_schema(reply: Reply, g: &mut SchemaGenerator) -> Value {
    match reply {
        Reply::Pushed => schema::<Vec<PushResult>>(g),
        Reply::Popped => schema::<PopResponse>(g),
        Reply::Acked => schema::<Vec<AckResult>>(g),
        Reply::Extended => schema::<ExtendResponse>(g),
        Reply::Transaction => schema::<TxnResponse>(g),
        Reply::Configured => schema::<ConfigureResponse>(g),
        Reply::QueueDeleted => schema::<DeleteResponse>(g),
        Reply::DeadLetters => schema::<DlqResponse>(g),
        Reply::PushSwitch => schema::<MaintenanceResponse>(g),
        Reply::PopSwitch => schema::<PopMaintenanceResponse>(g),
        Reply::Health => schema::<HealthResponse>(g),
        Reply::View(kind) => kind.schema(g),
    }
}

/// The schema of the body a route reads, from the schema-only type that describes it.
fn body_schema(body: Body, g: &mut SchemaGenerator) -> Option<Value> {
    match body {
        Body::Empty => None,
        Body::Push => of::<PushBody>(g),
        Body::Ack => of::<AckBody>(g),
        Body::AckBatch => of::<AckBatchBody>(g),
        Body::Extend => of::<ExtendBody>(g),
        Body::Transaction => of::<TxnBody>(g),
        Body::Configure => of::<ConfigureBody>(g),
        Body::Switch => of::<MaintenanceBody>(g),
        Body::Seek => of::<manage::SeekBody>(g),
        Body::Subscription => of::<manage::SubscriptionBody>(g),
        Body::Ignored => Some(json!({"type": "object", "description": "Ignored."})),
    }
}

/// The schema of `T`, a reference into the document's components.
fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

/// [`schema`] for a place that may have none.
pub(super) fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Option<Value> {
    Some(schema::<T>(g))
}

pub(super) fn g_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn operation(op: &Op, g: &mut SchemaGenerator) -> Value {
    let (method, path) = (op.at.method(), op.at.path());
    let mut responses = Map::new();
    let (status, what) = op.ok;
    let ok = Some(reply_schema(op.at.reply(), g));
    for (status, what, schema) in std::iter::once(&(status, what, ok)).chain(&op.errors) {
        let mut r = json!({"description": what});
        if let Some(s) = schema {
            r["content"] = json!({"application/json": {"schema": s}});
        }
        responses.insert(status.to_string(), r);
    }
    // Section 14: with authentication on, every route but the public ones takes a
    // bearer token of its level (AUTH-3) and may answer 401 or 403 (AUTH-4); with it off
    // (the default) no token is needed, hence the empty alternative.
    let level = super::required(method, path, &DEFAULT_PUBLIC_PATHS);
    if level != Access::Public {
        for (status, what) in [
            (
                "401",
                "AUTH-4: authentication is on and the token is missing or invalid",
            ),
            (
                "403",
                "AUTH-4: the token is valid but below the route's level",
            ),
        ] {
            responses.insert(
                status.to_string(),
                json!({"description": what,
                       "content": {"application/json": {"schema": g_ref("ErrorBody")}}}),
            );
        }
    }
    let mut o = json!({"summary": op.summary, "responses": responses});
    if level != Access::Public {
        o["security"] = json!([{}, {"bearerAuth": []}]);
        o["x-queen-level"] = json!(level.as_str());
    }
    if !op.params.is_empty() {
        o["parameters"] = Value::Array(op.params.clone());
    }
    if let (Some(b), "POST") = (body_schema(op.at.body(), g), method) {
        o["requestBody"] = json!({"required": op.at.body().required(),
            "content": {"application/json": {"schema": b}}});
    }
    o
}

/// The OpenAPI 3.1 document of the protocol, for spec version `spec_version`.
pub fn document(spec_version: &str) -> Value {
    let mut g = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let _ = g.subschema_for::<ErrorBody>();
    let mut ops = operations(&mut g);
    ops.extend(manage::operations());
    let mut paths = Map::new();
    for op in &ops {
        let entry = paths.entry(op.at.path()).or_insert_with(|| json!({}));
        entry[op.at.method().to_ascii_lowercase()] = operation(op, &mut g);
    }
    // By name, so the checked-in document does not move when operations are reordered.
    let mut schemas: Vec<(String, Value)> = g.take_definitions(true).into_iter().collect();
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    let schemas: Map<String, Value> = schemas.into_iter().collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Queen wire protocol",
            "version": spec_version,
            "description": "The HTTP protocol of Queen-compatible brokers, as specified by \
                spec/PROTOCOL.md (rule ids in the summaries). Generated from the reference \
                model's wire types."
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {
                "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "Only when the broker has authentication on (PROTOCOL.md \
                    section 14): any valid token reads, read-write or admin writes and pops, \
                    admin runs maintenance and deletes (AUTH-3)."
            }},
        },
    })
}

/// [`document`] as the text of `spec/openapi.json`.
pub fn text(spec_version: &str) -> String {
    let mut t = serde_json::to_string_pretty(&document(spec_version)).expect("serializes");
    t.push('\n');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the route table is documented exactly once.
    #[test]
    fn every_route_has_one_operation() {
        let mut g = SchemaGenerator::default();
        let mut ops = operations(&mut g);
        ops.extend(manage::operations());
        for r in ROUTES {
            let n = ops
                .iter()
                .filter(|o| matches!(o.at, At::Route(id) if id == r.id))
                .count();
            assert_eq!(n, 1, "{:?} is documented {n} times", r.id);
        }
    }
}
