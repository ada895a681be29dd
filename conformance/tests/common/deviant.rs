//! Deviant brokers: our own correct broker (the memory engine served over HTTP) behind a
//! wire-level proxy that changes exactly one realistic behaviour.
//!
//! The suite is meant for independent, third-party brokers, and those rarely break the
//! protocol the way a test double inside our engine would: they differ on one point of
//! the wire (a status code, a key, a default, a path decoding) and are right everywhere
//! else. Each [`Deviation`] emulates such a broker, so a test can run the suite against it
//! and check that the report names exactly the rule that is broken, and nothing else.
//!
//! The proxy forwards method, path and query, body and `Content-Type` faithfully; a
//! deviation either rewrites the request on its way in ([`Proxy::before`], possibly
//! answering without forwarding) or the answer on its way out ([`Proxy::after`]).
//! Everything is deterministic: where a real broker would misbehave "sometimes", the
//! double misbehaves on a fixed rule (e.g. "the first pop within 300 ms of a push").
#![allow(dead_code)]

use super::{memory, serve};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use queen_reference::wire::{decode_segment, parse_ack, parse_ack_batch, parse_push, QUEUE_MODE};
use queen_server::app::Running;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::DuplexStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The one point on which a deviant broker differs from ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deviation {
    /// A framework default: every success is `200 OK`, and "nothing" is an empty list.
    Status200Everywhere,
    /// An ack result type that never had the `noop` field.
    AckWithoutNoop,
    /// Error strings written as sentences ("Already committed") instead of the wire tokens.
    CapitalisedErrors,
    /// A lease API that answers a list of renewals and insists on a request body.
    ExtendArrayAndEmptyBody400,
    /// A broker that never implemented the cross-queue discovery pop.
    NoDiscoveryRoute,
    /// A client-library default (`batch=1`) moved into the server, and `partitions=0` read
    /// as "the default" rather than "no cap".
    BatchDefault1,
    /// Implicitly created queues get the configure default lease (300 s) instead of 60 s.
    PushCreatedLease300,
    /// A dedup index that is never pruned: a transaction id is a duplicate forever.
    DedupForever,
    /// An ack of something already committed reports a fresh commit.
    AckMovesCursorBack,
    /// A lease that outlives its release for a moment (released asynchronously), while
    /// the answer says it was kept.
    LeaseKeptAfterAck,
    /// A request handler that panics on a non-UTF-8 body and takes the process down.
    CrashOnNonUtf8,
    /// A router that hands path segments to the engine without percent-decoding them.
    RawPathSegments,
    /// A read replica behind the pop path: a pop right after a push misses it.
    ReadYourWritesLag,
    /// Configure stores the namespace and task it was given, `""` when omitted, instead
    /// of deriving them from the dotted queue name.
    NamespaceNotDerived,
    /// The dead-letter listing in the shape of another API (`items`/`count`).
    DlqOtherShape,
    /// Timestamps formatted with a numeric offset (`+00:00`) instead of a literal `Z`.
    CreatedAtWithoutZ,
    /// A pop answer without the `partitionsClaimed` counter.
    PartitionsClaimedMissing,
    /// Rejections in the common `{"message": ...}` shape instead of `{"error": ...}`.
    ErrorKeyMessage,
    /// Configure as a merge (PATCH semantics): omitted options keep their previous value.
    ConfigureMergesOptions,
    /// The health check every framework template has: `{"status":"ok"}`.
    HealthStatusOk,
    /// A delete answer that does not say whether the queue existed.
    DeleteWithoutExisted,
    /// Push results serialized with the camelCase names of every other answer.
    PushAnswerCamelCase,
    /// A pop's `leaseSeconds` is dropped by a router that only knows the queue's lease.
    LeaseSecondsIgnored,
    /// Ack answers say `leaseReleased:false` although the lease was released.
    FlagsLie,
    /// A transaction answer without `transactionId` (a PROJECT difference met first in
    /// the case), and a transaction that aborts still writes its pushes (TXN-1, SEED).
    TxnShapeAndNotAtomic,
    /// Switching push maintenance off answers at once and replays 200 ms later: allowed.
    SlowSpoolReplay,
    /// Lease extends are never answered.
    ExtendNeverAnswered,
}

use Deviation::*;

impl Deviation {
    pub const ALL: [Deviation; 27] = [
        Status200Everywhere,
        AckWithoutNoop,
        CapitalisedErrors,
        ExtendArrayAndEmptyBody400,
        NoDiscoveryRoute,
        BatchDefault1,
        PushCreatedLease300,
        DedupForever,
        AckMovesCursorBack,
        LeaseKeptAfterAck,
        CrashOnNonUtf8,
        RawPathSegments,
        ReadYourWritesLag,
        NamespaceNotDerived,
        DlqOtherShape,
        CreatedAtWithoutZ,
        PartitionsClaimedMissing,
        ErrorKeyMessage,
        ConfigureMergesOptions,
        HealthStatusOk,
        DeleteWithoutExisted,
        PushAnswerCamelCase,
        LeaseSecondsIgnored,
        FlagsLie,
        TxnShapeAndNotAtomic,
        SlowSpoolReplay,
        ExtendNeverAnswered,
    ];

    /// A stable kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Status200Everywhere => "status-200-everywhere",
            AckWithoutNoop => "ack-without-noop",
            CapitalisedErrors => "capitalised-errors",
            ExtendArrayAndEmptyBody400 => "extend-array-and-empty-body-400",
            NoDiscoveryRoute => "no-discovery-route",
            BatchDefault1 => "batch-default-1",
            PushCreatedLease300 => "push-created-lease-300",
            DedupForever => "dedup-forever",
            AckMovesCursorBack => "ack-moves-cursor-back",
            LeaseKeptAfterAck => "lease-kept-after-ack",
            CrashOnNonUtf8 => "crash-on-non-utf8",
            RawPathSegments => "raw-path-segments",
            ReadYourWritesLag => "read-your-writes-lag",
            NamespaceNotDerived => "namespace-not-derived",
            DlqOtherShape => "dlq-other-shape",
            CreatedAtWithoutZ => "created-at-without-z",
            PartitionsClaimedMissing => "partitions-claimed-missing",
            ErrorKeyMessage => "error-key-message",
            ConfigureMergesOptions => "configure-merges-options",
            HealthStatusOk => "health-status-ok",
            DeleteWithoutExisted => "delete-without-existed",
            PushAnswerCamelCase => "push-answer-camel-case",
            LeaseSecondsIgnored => "lease-seconds-ignored",
            FlagsLie => "flags-lie",
            TxnShapeAndNotAtomic => "txn-shape-and-not-atomic",
            SlowSpoolReplay => "slow-spool-replay",
            ExtendNeverAnswered => "extend-never-answered",
        }
    }

    /// The PROTOCOL.md rule ids this double breaks.
    pub fn rules(self) -> &'static [&'static str] {
        match self {
            Status200Everywhere => &["PUSH-1", "POP-6"],
            AckWithoutNoop => &["ACK-3"],
            CapitalisedErrors => &["ACK-3", "ACK-5"],
            ExtendArrayAndEmptyBody400 => &["LEASE-2", "LEASE-3"],
            NoDiscoveryRoute => &["POP-10"],
            BatchDefault1 => &["POP-3"],
            // Seen at a lease's deadline (POP-9); the diagnosis names the cause, PUSH-2's
            // default for a queue a push creates.
            PushCreatedLease300 => &["PUSH-2"],
            DedupForever => &["PUSH-5", "RET-4"],
            AckMovesCursorBack => &["ACK-3"],
            // The ack's own answer (`leaseReleased`) is only what it says; the next pop
            // meets the kept lease, and the diagnosis names the causes: a completion
            // (ACK-1) and a failure (ACK-6) that do not release it; the flag it answers is
            // step 5's (ACK-STEP-5, an answer-only finding). The double also keeps
            // a lease across the queue's or the group's deletion, which no variant
            // explains: a pop that claims nothing (POP-2).
            LeaseKeptAfterAck => &["ACK-1", "ACK-6", "ACK-STEP-5", "POP-2"],
            CrashOnNonUtf8 => &["PUSH-8"],
            // Seen as a pop of the queue finding nothing; the diagnosis names WIRE-2.
            RawPathSegments => &["WIRE-2"],
            // The stale read also seeds a group's subscription on the stale view.
            ReadYourWritesLag => &["POP-2", "POP-18"],
            NamespaceNotDerived => &["CFG-3"],
            DlqOtherShape => &["DLQ-2"],
            CreatedAtWithoutZ => &["POP-12"],
            PartitionsClaimedMissing => &["POP-5"],
            // A 404 of a message route (a deleted message's view, its second delete) is
            // judged under MGMT-6, the route family's rule.
            ErrorKeyMessage => &[
                "PUSH-8", "PUSH-11", "ACK-9", "LEASE-3", "CFG-3", "TXN-3", "DLQ-2", "RET-5",
                "MGMT-3", "MGMT-4", "MGMT-6", "MGMT-12", "MGMT-13",
            ],
            ConfigureMergesOptions => &["CFG-1"],
            // The whole body is replaced: the version and uptime go too.
            HealthStatusOk => &["HEALTH-1", "HEALTH-4"],
            DeleteWithoutExisted => &["DEL-1"],
            PushAnswerCamelCase => &["PUSH-1"],
            LeaseSecondsIgnored => &["POP-9"],
            // What the flag reports is step 5's; the lease was in fact released.
            FlagsLie => &["ACK-STEP-5"],
            TxnShapeAndNotAtomic => &["TXN-3", "TXN-1"],
            // MAINT-3 allows a replay that runs for up to 3 s.
            SlowSpoolReplay => &[],
            // A request never answered breaks no rule the model can name: its cases fail
            // with the request and its curl line (see its own test).
            ExtendNeverAnswered => &[],
        }
    }

    /// The variants (`queen_reference::variant`) a diagnosis must name as this double's
    /// causes: every state departure it makes that a variant describes.
    pub fn causes(self) -> &'static [&'static str] {
        match self {
            PushCreatedLease300 => &["implicit-lease-300"],
            RawPathSegments => &["path-not-decoded"],
            LeaseSecondsIgnored => &["lease-seconds-ignored"],
            LeaseKeptAfterAck => &["completion-keeps-lease", "failure-keeps-lease"],
            TxnShapeAndNotAtomic => &["transaction-not-atomic"],
            _ => &[],
        }
    }

    /// True when only what the answers say differs, not what the broker did.
    pub fn answer_only(self) -> bool {
        matches!(
            self,
            Status200Everywhere
                | AckWithoutNoop
                | CapitalisedErrors
                | AckMovesCursorBack
                | DlqOtherShape
                | CreatedAtWithoutZ
                | PartitionsClaimedMissing
                | ErrorKeyMessage
                | HealthStatusOk
                | DeleteWithoutExisted
                | PushAnswerCamelCase
                | FlagsLie
        )
    }

    /// One sentence on what the double does.
    pub fn describe(self) -> &'static str {
        match self {
            Status200Everywhere => r#"Every 2xx answer is 200, and an empty pop answers 200 {"messages":[]} instead of a bare 204."#,
            AckWithoutNoop => "Ack answer items have no `noop` key.",
            CapitalisedErrors => r#"Ack item errors are capitalised ("Already committed", "Invalid or expired lease", "Unresolvable")."#,
            ExtendArrayAndEmptyBody400 => r#"Lease extension answers a one-element array, and an empty body is 400 "seconds is required"."#,
            NoDiscoveryRoute => r#"GET /api/v1/pop (discovery) answers 404 {"error":"not found"}."#,
            BatchDefault1 => "A pop without `batch` takes one message, and `partitions` 0 or negative caps at one partition.",
            PushCreatedLease300 => "Pops on a queue never configured lease for 300 s instead of the implicit queue's 60 s.",
            DedupForever => "A transaction id seen once in a partition is a duplicate forever, whatever the dedup window.",
            AckMovesCursorBack => "Re-acking at or below the cursor answers `noop:false`, as if it committed again.",
            LeaseKeptAfterAck => "An ack that releases the lease says `leaseReleased:false`, and the next pop of that queue and group within 2 s gets a 204.",
            CrashOnNonUtf8 => "A request body that is not UTF-8 kills the broker: no answer, and every later connection is refused.",
            RawPathSegments => "Queue and partition names in paths are not percent-decoded.",
            ReadYourWritesLag => "The first pop on a queue within 300 ms of a push to it does not see the push.",
            NamespaceNotDerived => r#"Configure without namespace/task stores "" for them instead of deriving them from the name."#,
            DlqOtherShape => r#"The dead-letter listing answers {"items", "count"} instead of {"messages", "total", "limit", "offset"}."#,
            CreatedAtWithoutZ => "Popped messages' `createdAt` ends in `+00:00` instead of `Z`.",
            PartitionsClaimedMissing => "Pop answers have no `partitionsClaimed`.",
            ErrorKeyMessage => r#"Rejections outside the pop routes answer {"message": e} instead of {"error": e}."#,
            ConfigureMergesOptions => "Configure merges the given options into the previous ones instead of replacing them all.",
            HealthStatusOk => r#"Health answers {"status":"ok"}."#,
            DeleteWithoutExisted => "Queue delete answers without `existed`.",
            PushAnswerCamelCase => "Push results carry `messageId`/`transactionId` instead of `message_id`/`transaction_id`.",
            LeaseSecondsIgnored => "Pops lease for the queue's leaseTime whatever `leaseSeconds` they name.",
            FlagsLie => "Ack answers say `leaseReleased:false` although the lease was released.",
            TxnShapeAndNotAtomic => "Transaction answers lack `transactionId`, and an aborted transaction still writes its pushes.",
            SlowSpoolReplay => "Switching push maintenance off answers at once; the replay follows 200 ms later.",
            ExtendNeverAnswered => "Lease extension requests are never answered.",
        }
    }
}

/// A running deviant broker: the memory engine's server and the proxy in front of it.
/// Dropping it stops both; [`DeviantBroker::stop`] also waits for the server.
pub struct DeviantBroker {
    /// The proxy's URL: what a test talks to.
    pub url: String,
    pub deviation: Deviation,
    upstream: String,
    life: Arc<watch::Sender<Life>>,
    proxy: tokio::task::JoinHandle<()>,
    server: Option<Running>,
}

impl DeviantBroker {
    /// The honest server behind the proxy (same state, no deviation).
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// Stops the proxy (every connection closes) and then the server, gracefully.
    pub async fn stop(mut self) {
        self.shut_proxy();
        if let Some(s) = self.server.take() {
            let _ = s.stop().await;
        }
    }

    fn shut_proxy(&self) {
        self.life.send_replace(Life::Closed);
        self.proxy.abort();
    }
}

impl Drop for DeviantBroker {
    fn drop(&mut self) {
        self.shut_proxy();
    }
}

/// Starts the memory-engine server plus the proxy for `d`.
pub async fn start(d: Deviation) -> DeviantBroker {
    let server = serve(Arc::new(memory())).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    let life = Arc::new(watch::channel(Life::Up).0);
    let proxy = Arc::new(Proxy {
        deviation: d,
        upstream: server.url(),
        client: reqwest::Client::new(),
        memory: Mutex::new(Memory::default()),
        life: life.clone(),
    });
    let app = axum::Router::new().fallback(handle).with_state(proxy);
    let listener = Mortal {
        inner: Some(listener),
        addr,
        life: life.clone(),
    };
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    DeviantBroker {
        url: format!("http://{addr}"),
        deviation: d,
        upstream: server.url(),
        life,
        proxy: task,
        server: Some(server),
    }
}

// ---------------------------------------------------------------------------------------
// A listener that can die: the crash of `crash-on-non-utf8`, and the guard's shutdown.

/// The proxy's life: `Closing` asks the listener to close; once it has, `Closed` also
/// drops every open connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    Up,
    Closing,
    Closed,
}

/// A TCP listener whose connections are relayed through in-process pipes, so that all
/// of them, idle keep-alives included, can be cut at once.
struct Mortal {
    inner: Option<TcpListener>,
    addr: SocketAddr,
    life: Arc<watch::Sender<Life>>,
}

impl axum::serve::Listener for Mortal {
    type Io = DuplexStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (DuplexStream, SocketAddr) {
        loop {
            let accepted = match &self.inner {
                None => std::future::pending().await,
                Some(l) => {
                    let mut life = self.life.subscribe();
                    tokio::select! {
                        biased;
                        _ = life.wait_for(|l| *l != Life::Up) => None,
                        a = l.accept() => Some(a),
                    }
                }
            };
            match accepted {
                None => {
                    // Close the port for good: later connections are refused.
                    self.inner = None;
                    self.life.send_replace(Life::Closed);
                }
                Some(Ok((tcp, addr))) => return (relay(tcp, self.life.subscribe()), addr),
                Some(Err(_)) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// Relays `tcp` to the returned pipe until either side closes or the proxy dies.
fn relay(mut tcp: TcpStream, mut life: watch::Receiver<Life>) -> DuplexStream {
    let _ = tcp.set_nodelay(true);
    let (mut near, far) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        // Biased: once dead, not one more byte goes out (the crashing request's answer).
        tokio::select! {
            biased;
            _ = life.wait_for(|l| *l == Life::Closed) => {}
            _ = tokio::io::copy_bidirectional(&mut tcp, &mut near) => {}
        }
    });
    far
}

// ---------------------------------------------------------------------------------------
// Requests, answers and routes.

/// A request as received, kept raw so that it is forwarded faithfully.
#[derive(Clone, Debug)]
struct Call {
    method: Method,
    /// Percent-encoded, as sent.
    path: String,
    query: Option<String>,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

impl Call {
    async fn read(req: axum::extract::Request) -> Call {
        let (parts, body) = req.into_parts();
        Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: parts.uri.query().map(str::to_string),
            content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
            body: axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default(),
        }
    }

    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    fn with_json(mut self, v: &Value) -> Call {
        self.body = serde_json::to_vec(v).expect("serializes").into();
        self
    }

    fn pairs(&self) -> Vec<(String, String)> {
        self.query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (p.to_string(), String::new()),
            })
            .collect()
    }

    /// The decoded value of the last `key` in the query (the one the broker reads).
    fn param(&self, key: &str) -> Option<String> {
        let pairs = self.pairs();
        let (_, v) = pairs.iter().rev().find(|(k, _)| form_decode(k) == key)?;
        Some(form_decode(v))
    }

    /// The same call with `key=value` in place of every `key` of the query.
    fn with_param(mut self, key: &str, value: &str) -> Call {
        let mut pairs = self.pairs();
        pairs.retain(|(k, _)| form_decode(k) != key);
        pairs.push((key.to_string(), value.to_string()));
        let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.query = Some(q.join("&"));
        self
    }

    /// The consumer group of a pop (omitted or empty: queue mode).
    fn group(&self) -> String {
        self.param("consumerGroup")
            .filter(|g| !g.is_empty())
            .unwrap_or_else(|| QUEUE_MODE.to_string())
    }
}

/// Decodes one `application/x-www-form-urlencoded` component.
fn form_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    decode_segment(&spaced).unwrap_or(spaced)
}

/// An answer as sent by the broker (or made up by the proxy): status and raw body.
#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    fn json(status: u16, v: &Value) -> Answer {
        Answer {
            status,
            body: serde_json::to_vec(v).expect("serializes"),
        }
    }

    fn error(status: u16, e: &str) -> Answer {
        Answer::json(status, &json!({ "error": e }))
    }

    fn no_content() -> Answer {
        Answer {
            status: 204,
            body: Vec::new(),
        }
    }

    fn value(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The answer with its JSON body changed by `f` (unchanged when it is not JSON).
    fn edit(self, f: impl FnOnce(&mut Value)) -> Answer {
        match self.value() {
            Some(mut v) => {
                f(&mut v);
                Answer::json(self.status, &v)
            }
            None => self,
        }
    }

    /// The answer with `f` applied to every object of a JSON array body (ack, push).
    fn edit_items(self, f: impl Fn(&mut Map<String, Value>)) -> Answer {
        self.edit(|v| {
            for item in v.as_array_mut().into_iter().flatten() {
                if let Some(o) = item.as_object_mut() {
                    f(o);
                }
            }
        })
    }

    /// The answer with `f` applied to every message of a 200 pop answer.
    fn edit_messages(self, f: impl Fn(&mut Map<String, Value>)) -> Answer {
        if self.status != 200 {
            return self;
        }
        self.edit(|v| {
            for m in v["messages"].as_array_mut().into_iter().flatten() {
                if let Some(o) = m.as_object_mut() {
                    f(o);
                }
            }
        })
    }

    /// JSON with its status, or nothing at all for a 204.
    fn render(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_GATEWAY);
        if status == StatusCode::NO_CONTENT || self.body.is_empty() {
            return status.into_response();
        }
        let ct = [(header::CONTENT_TYPE, "application/json")];
        (status, ct, self.body).into_response()
    }
}

/// The routes a deviation cares about.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Route {
    Push,
    /// `GET /api/v1/pop`.
    Discovery,
    /// The queue or partition pop route, with the decoded queue name.
    PopQueue(String),
    Ack,
    AckBatch,
    Extend,
    Configure,
    /// Queue delete, with the decoded queue name.
    Delete(String),
    Dlq,
    Health,
    /// `POST /api/v1/system/maintenance`.
    Maintenance,
    /// `GET /api/v1/system/maintenance`.
    MaintenanceRead,
    Transaction,
    Other,
}

impl Route {
    /// The route of `call`, found in the wire layer's one route table.
    fn of(call: &Call) -> Route {
        use queen_reference::wire::{find, RouteId as R};
        let segs: Vec<&str> = call.path.trim_end_matches('/').split('/').skip(1).collect();
        let Some((route, vars)) = find(call.method.as_str(), &segs) else {
            return Route::Other;
        };
        let name = |r: fn(String) -> Route| decode_segment(vars[0]).map_or(Route::Other, r);
        match route.id {
            R::Push => Route::Push,
            R::PopDiscovery => Route::Discovery,
            R::PopQueue | R::PopPartition => name(Route::PopQueue),
            R::Ack => Route::Ack,
            R::AckBatch => Route::AckBatch,
            R::Extend => Route::Extend,
            R::Configure => Route::Configure,
            R::DeleteQueue => name(Route::Delete),
            R::Dlq => Route::Dlq,
            R::Health => Route::Health,
            R::SetPushMaintenance => Route::Maintenance,
            R::GetPushMaintenance => Route::MaintenanceRead,
            R::Transaction => Route::Transaction,
            _ => Route::Other,
        }
    }

    fn is_pop(&self) -> bool {
        matches!(self, Route::Discovery | Route::PopQueue(_))
    }

    fn is_ack(&self) -> bool {
        matches!(self, Route::Ack | Route::AckBatch)
    }
}

// ---------------------------------------------------------------------------------------
// The proxy.

/// What the stateful deviations remember between requests.
#[derive(Default)]
struct Memory {
    /// Queues configured through `POST /api/v1/configure` (push-created-lease-300).
    configured: HashSet<String>,
    /// (queue, partition, transactionId) -> message_id of every pushed item (dedup-forever).
    seen: HashMap<(String, String, String), String>,
    /// partitionId -> queue, learnt from pop answers (lease-kept-after-ack).
    partition_queue: HashMap<String, String>,
    /// (queue, group) -> when an ack released its lease (lease-kept-after-ack).
    kept: HashMap<(String, String), Instant>,
    /// queue -> when it was last pushed to (read-your-writes-lag).
    pushed: HashMap<String, Instant>,
    /// queue -> its effective options (configure-merges-options).
    options: HashMap<String, Value>,
    /// Push maintenance is on: pushes are spooled, and dedup happens at replay, as on
    /// any broker with a spool (dedup-forever).
    maintenance: bool,
    /// Until when a delayed switch-off is still to reach the broker (slow-spool-replay).
    replaying_until: Option<Instant>,
}

struct Proxy {
    deviation: Deviation,
    upstream: String,
    client: reqwest::Client,
    memory: Mutex<Memory>,
    life: Arc<watch::Sender<Life>>,
}

/// What to do with a request.
enum Before {
    /// Answer it without forwarding.
    Answer(Answer),
    /// Forward this (possibly rewritten) request.
    Forward(Call, Plan),
}

/// What [`Proxy::before`] decided that [`Proxy::after`] needs.
enum Plan {
    Plain,
    /// dedup-forever: per request item, `None` if forwarded, else its synthetic answer.
    Dedup(Vec<Option<Value>>, Vec<(String, String)>),
}

fn forward(call: Call) -> Before {
    Before::Forward(call, Plan::Plain)
}

async fn handle(State(p): State<Arc<Proxy>>, req: axum::extract::Request) -> Response {
    let call = Call::read(req).await;
    let route = Route::of(&call);
    let answer = match p.before(call.clone(), &route).await {
        Before::Answer(a) => a,
        Before::Forward(out, plan) => {
            let a = p.send(&out).await;
            p.after(&call, &route, plan, a)
        }
    };
    answer.render()
}

impl Proxy {
    fn mem(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().expect("not poisoned")
    }

    /// Forwards `call` to the honest broker.
    async fn send(&self, call: &Call) -> Answer {
        let url = match &call.query {
            Some(q) => format!("{}{}?{q}", self.upstream, call.path),
            None => format!("{}{}", self.upstream, call.path),
        };
        let mut req = self.client.request(call.method.clone(), url);
        if let Some(ct) = &call.content_type {
            req = req.header(header::CONTENT_TYPE, ct.clone());
        }
        if !call.body.is_empty() {
            req = req.body(call.body.clone());
        }
        match req.send().await {
            Ok(resp) => Answer {
                status: resp.status().as_u16(),
                body: resp.bytes().await.unwrap_or_default().to_vec(),
            },
            Err(e) => Answer::error(502, &format!("upstream: {e}")),
        }
    }

    /// The deviations that act on the request: rewrite it, or answer it themselves.
    async fn before(&self, call: Call, route: &Route) -> Before {
        match (self.deviation, route) {
            (CrashOnNonUtf8, _) if std::str::from_utf8(&call.body).is_err() => {
                self.crash().await;
                Before::Answer(Answer::error(500, "crashed"))
            }
            (ExtendArrayAndEmptyBody400, Route::Extend)
                if call.body.iter().all(u8::is_ascii_whitespace) =>
            {
                Before::Answer(Answer::error(400, "seconds is required"))
            }
            (NoDiscoveryRoute, Route::Discovery) => Before::Answer(Answer::error(404, "not found")),
            (BatchDefault1, r) if r.is_pop() => forward(batch_default_1(call)),
            (PushCreatedLease300, Route::PopQueue(q)) => {
                let configured = self.mem().configured.contains(q);
                forward(lease_300(call, configured))
            }
            (DedupForever, Route::Push) if !self.mem().maintenance => self.dedup_plan(call),
            (DedupForever, Route::Maintenance) => {
                let on = call.json().and_then(|b| b["enabled"].as_bool());
                if let Some(on) = on {
                    self.mem().maintenance = on;
                }
                forward(call)
            }
            (LeaseKeptAfterAck, Route::PopQueue(q)) => self.lease_kept(call, q),
            (RawPathSegments, _) => forward(raw_path_segments(call)),
            (ReadYourWritesLag, Route::PopQueue(q)) => self.lag(call, q).await,
            (NamespaceNotDerived, Route::Configure) => forward(namespace_not_derived(call)),
            (ConfigureMergesOptions, Route::Configure) => forward(self.merge_options(call)),
            // A broker that parses `leaseSeconds` (a malformed one is still 400) and
            // then leases by the queue's leaseTime.
            (LeaseSecondsIgnored, r)
                if r.is_pop()
                    && call
                        .param("leaseSeconds")
                        .is_some_and(|s| s.trim().parse::<i64>().is_ok()) =>
            {
                forward(call.with_param("leaseSeconds", "0"))
            }
            (TxnShapeAndNotAtomic, Route::Transaction) => self.not_atomic(call).await,
            (SlowSpoolReplay, Route::Maintenance) => self.slow_replay(call).await,
            (ExtendNeverAnswered, Route::Extend) => {
                std::future::pending::<()>().await;
                unreachable!("never answered")
            }
            _ => forward(call),
        }
    }

    /// txn-shape-and-not-atomic: a transaction that aborts still writes its pushes.
    async fn not_atomic(&self, call: Call) -> Before {
        let a = self.send(&call).await;
        let aborted = a.value().is_some_and(|v| v["success"] == json!(false));
        if aborted {
            let items: Vec<Value> = call
                .json()
                .and_then(|b| b["operations"].as_array().cloned())
                .into_iter()
                .flatten()
                .filter(|o| o["type"] == json!("push"))
                .flat_map(|o| o["items"].as_array().cloned().unwrap_or_default())
                .collect();
            if !items.is_empty() {
                let push = Call {
                    method: Method::POST,
                    path: "/api/v1/push".into(),
                    query: None,
                    content_type: Some(HeaderValue::from_static("application/json")),
                    body: Bytes::new(),
                }
                .with_json(&json!({ "items": items }));
                self.send(&push).await;
            }
        }
        Before::Answer(a.edit(|v| {
            v.as_object_mut().map(|o| o.remove("transactionId"));
        }))
    }

    /// slow-spool-replay: a switch-off is answered at once and reaches the broker (which
    /// replays) 200 ms later; meanwhile the switch reads as off.
    async fn slow_replay(&self, call: Call) -> Before {
        let off = call.json().is_some_and(|b| b["enabled"] == json!(false));
        if !off {
            return forward(call);
        }
        let state = self
            .send(&Call {
                method: Method::GET,
                body: Bytes::new(),
                ..call.clone()
            })
            .await;
        let buffered = state
            .value()
            .map_or(json!(0), |v| v["bufferedMessages"].clone());
        self.mem().replaying_until = Some(Instant::now() + Duration::from_millis(200));
        let (client, upstream) = (self.client.clone(), self.upstream.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = client
                .post(format!("{upstream}{}", call.path))
                .header(header::CONTENT_TYPE, "application/json")
                .body(call.body.clone())
                .send()
                .await;
        });
        Before::Answer(Answer::json(
            200,
            &json!({"maintenanceMode": false, "bufferedMessages": buffered}),
        ))
    }

    /// The deviations that act on the answer (and what the stateful ones learn from it).
    fn after(&self, call: &Call, route: &Route, plan: Plan, a: Answer) -> Answer {
        match (self.deviation, route) {
            (Status200Everywhere, _) => status_200(a),
            (AckWithoutNoop, r) if r.is_ack() => a.edit_items(|i| {
                i.remove("noop");
            }),
            (CapitalisedErrors, r) if r.is_ack() => a.edit_items(capitalise_error),
            (ExtendArrayAndEmptyBody400, Route::Extend) if a.status == 200 => {
                a.edit(|v| *v = json!([v.take()]))
            }
            (PushCreatedLease300, _) => self.learn_configured(route, a),
            (DedupForever, Route::Push) => self.dedup_merge(plan, a),
            (DedupForever, Route::Delete(q)) => {
                self.mem().seen.retain(|(queue, _, _), _| queue != q);
                a
            }
            (AckMovesCursorBack, r) if r.is_ack() => a.edit_items(noop_false),
            (LeaseKeptAfterAck, Route::PopQueue(q)) => self.learn_partitions(q, a),
            (LeaseKeptAfterAck, r) if r.is_ack() => self.keep_lease(call, a),
            (ReadYourWritesLag, Route::Push) => self.note_push(a),
            (DlqOtherShape, Route::Dlq) if a.status == 200 => a.edit(dlq_other_shape),
            (CreatedAtWithoutZ, r) if r.is_pop() => a.edit_messages(created_at_offset),
            (PartitionsClaimedMissing, r) if r.is_pop() && a.status == 200 => a.edit(|v| {
                v.as_object_mut().map(|o| o.remove("partitionsClaimed"));
            }),
            (ErrorKeyMessage, r) if !r.is_pop() && (400..500).contains(&a.status) => {
                a.edit(error_to_message)
            }
            (ConfigureMergesOptions, _) => self.learn_options(route, a),
            (HealthStatusOk, Route::Health) if a.status == 200 => {
                Answer::json(200, &json!({"status": "ok"}))
            }
            (DeleteWithoutExisted, Route::Delete(_)) => a.edit(|v| {
                v.as_object_mut().map(|o| o.remove("existed"));
            }),
            (PushAnswerCamelCase, Route::Push) => a.edit_items(camel_case_push),
            (FlagsLie, r) if r.is_ack() => a.edit_items(|i| {
                if i.get("leaseReleased") == Some(&json!(true)) {
                    i.insert("leaseReleased".into(), json!(false));
                }
            }),
            (SlowSpoolReplay, Route::MaintenanceRead) => {
                let pending = self
                    .mem()
                    .replaying_until
                    .is_some_and(|t| Instant::now() < t);
                match pending {
                    true => a.edit(|v| v["maintenanceMode"] = json!(false)),
                    false => a,
                }
            }
            _ => a,
        }
    }

    /// crash-on-non-utf8: close the port, then cut every connection (this one included).
    async fn crash(&self) {
        self.life.send_replace(Life::Closing);
        let mut life = self.life.subscribe();
        let closed = life.wait_for(|l| *l == Life::Closed);
        let _ = tokio::time::timeout(Duration::from_secs(1), closed)
            .await
            .is_ok();
    }

    /// push-created-lease-300: remembers configured queues; a delete forgets one.
    fn learn_configured(&self, route: &Route, a: Answer) -> Answer {
        match route {
            Route::Configure if a.status == 200 => {
                if let Some(q) = a
                    .value()
                    .and_then(|v| v["queue"].as_str().map(str::to_string))
                {
                    self.mem().configured.insert(q);
                }
            }
            Route::Delete(q) if a.status == 200 => {
                self.mem().configured.remove(q);
            }
            _ => {}
        }
        a
    }

    /// dedup-forever: answers remembered items as duplicates and forwards the rest.
    fn dedup_plan(&self, call: Call) -> Before {
        let Some(mut body) = call.json() else {
            return forward(call);
        };
        let Ok(parsed) = parse_push(body.clone()) else {
            return forward(call);
        };
        let mem = self.mem();
        let slots: Vec<Option<Value>> = parsed
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let tx = item.transaction_id.clone()?;
                let key = (item.queue.clone(), item.partition.clone(), tx.clone());
                mem.seen.get(&key).map(|id| {
                    json!({"index": i, "message_id": id, "transaction_id": tx,
                           "queueName": item.queue, "status": "duplicate"})
                })
            })
            .collect();
        drop(mem);
        let targets = parsed
            .items
            .iter()
            .zip(&slots)
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| (i.queue.clone(), i.partition.clone()))
            .collect();
        if slots.iter().all(Option::is_some) && !slots.is_empty() {
            let all: Vec<Value> = slots.into_iter().flatten().collect();
            return Before::Answer(Answer::json(201, &Value::Array(all)));
        }
        let kept: Vec<Value> = body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(&slots)
            .filter(|(_, s)| s.is_none())
            .map(|(v, _)| v.clone())
            .collect();
        body["items"] = Value::Array(kept);
        Before::Forward(call.with_json(&body), Plan::Dedup(slots, targets))
    }

    /// dedup-forever: remembers what the broker wrote and merges the synthetic duplicates
    /// back in request order.
    fn dedup_merge(&self, plan: Plan, a: Answer) -> Answer {
        let Plan::Dedup(slots, targets) = plan else {
            return a;
        };
        let Some(Value::Array(answered)) = a.value().filter(|_| a.status == 201) else {
            return a;
        };
        let mut mem = self.mem();
        for (item, (queue, partition)) in answered.iter().zip(&targets) {
            if let (Some(tx), Some(id)) =
                (item["transaction_id"].as_str(), item["message_id"].as_str())
            {
                let key = (queue.clone(), partition.clone(), tx.to_string());
                mem.seen.entry(key).or_insert_with(|| id.to_string());
            }
        }
        let mut answered = answered.into_iter();
        let merged: Vec<Value> = slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| {
                let mut v = slot.or_else(|| answered.next()).unwrap_or(Value::Null);
                v["index"] = json!(i);
                v
            })
            .collect();
        Answer::json(201, &Value::Array(merged))
    }

    /// lease-kept-after-ack: the first pop of a (queue, group) within 2 s of an ack that
    /// released its lease finds the partition still leased.
    fn lease_kept(&self, call: Call, queue: &str) -> Before {
        let key = (queue.to_string(), call.group());
        match self.mem().kept.remove(&key) {
            Some(t) if t.elapsed() < Duration::from_secs(2) => Before::Answer(Answer::no_content()),
            _ => forward(call),
        }
    }

    /// lease-kept-after-ack: which queue each popped partition belongs to.
    fn learn_partitions(&self, queue: &str, a: Answer) -> Answer {
        if let (200, Some(v)) = (a.status, a.value()) {
            let mut mem = self.mem();
            for m in v["messages"].as_array().into_iter().flatten() {
                if let Some(p) = m["partitionId"].as_str() {
                    mem.partition_queue.insert(p.to_string(), queue.to_string());
                }
            }
        }
        a
    }

    /// lease-kept-after-ack: `leaseReleased:true` becomes false, and the lease is kept.
    fn keep_lease(&self, call: &Call, a: Answer) -> Answer {
        let items = match call.json() {
            Some(b) if call.path.ends_with("/batch") => parse_ack_batch(&b).ok(),
            Some(b) => parse_ack(&b).ok().map(|i| vec![i]),
            None => None,
        };
        let (Some(items), 200) = (items, a.status) else {
            return a;
        };
        let released: Vec<usize> = a
            .value()
            .and_then(|v| v.as_array().cloned())
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, i)| i["leaseReleased"] == json!(true))
            .map(|(n, _)| n)
            .collect();
        let mut mem = self.mem();
        for n in released {
            let Some(item) = items.get(n) else { continue };
            if let Some(q) = mem.partition_queue.get(item.partition_id.as_str()).cloned() {
                mem.kept
                    .insert((q, item.consumer_group.clone()), Instant::now());
            }
        }
        drop(mem);
        a.edit_items(|i| {
            if i.get("leaseReleased") == Some(&json!(true)) {
                i.insert("leaseReleased".into(), json!(false));
            }
        })
    }

    /// read-your-writes-lag: when each queue was last pushed to.
    fn note_push(&self, a: Answer) -> Answer {
        if let (201, Some(Value::Array(items))) = (a.status, a.value()) {
            let mut mem = self.mem();
            for q in items.iter().filter_map(|i| i["queueName"].as_str()) {
                mem.pushed.insert(q.to_string(), Instant::now());
            }
        }
        a
    }

    /// read-your-writes-lag: the first pop within 300 ms of a push misses it; a long poll
    /// sees it once the 300 ms are over.
    async fn lag(&self, call: Call, queue: &str) -> Before {
        // A request is validated before anything is read, stale or not.
        let decoded: Vec<(String, String)> = call
            .pairs()
            .iter()
            .map(|(k, v)| (form_decode(k), form_decode(v)))
            .collect();
        if queen_reference::wire::parse_pop_query(&decoded, 30_000).is_err() {
            return forward(call);
        }
        let Some(at) = self.mem().pushed.remove(queue) else {
            return forward(call);
        };
        let left = Duration::from_millis(300).saturating_sub(at.elapsed());
        if left.is_zero() {
            return forward(call);
        }
        let wait = call
            .param("wait")
            .is_some_and(|w| matches!(w.trim().to_ascii_lowercase().as_str(), "true" | "1"));
        if !wait {
            return Before::Answer(Answer::no_content());
        }
        tokio::time::sleep(left).await;
        forward(call)
    }

    /// configure-merges-options: the previous effective options under the given ones.
    fn merge_options(&self, call: Call) -> Call {
        let Some(mut body) = call.json() else {
            return call;
        };
        let Some(q) = body["queue"].as_str() else {
            return call;
        };
        let Some(Value::Object(mut merged)) = self.mem().options.get(q).cloned() else {
            return call;
        };
        match body.get("options") {
            Some(Value::Object(given)) => merged.extend(given.clone()),
            None | Some(Value::Null) => {}
            Some(_) => return call,
        }
        body["options"] = Value::Object(merged);
        call.with_json(&body)
    }

    /// configure-merges-options: remembers each queue's effective options.
    fn learn_options(&self, route: &Route, a: Answer) -> Answer {
        match (route, a.status, a.value()) {
            (Route::Configure, 200, Some(v)) => {
                if let Some(q) = v["queue"].as_str() {
                    self.mem()
                        .options
                        .insert(q.to_string(), v["options"].clone());
                }
            }
            (Route::Delete(q), 200, _) => {
                self.mem().options.remove(q);
            }
            _ => {}
        }
        a
    }
}

// ---------------------------------------------------------------------------------------
// The stateless rewrites.

/// status-200-everywhere.
fn status_200(a: Answer) -> Answer {
    match a.status {
        204 => Answer::json(200, &json!({"messages": []})),
        200..=299 => Answer { status: 200, ..a },
        _ => a,
    }
}

/// capitalised-errors.
fn capitalise_error(item: &mut Map<String, Value>) {
    if let Some(Value::String(e)) = item.get_mut("error") {
        let mut chars = e.chars();
        if let Some(first) = chars.next() {
            *e = first.to_uppercase().chain(chars).collect();
        }
    }
}

/// ack-moves-cursor-back.
fn noop_false(item: &mut Map<String, Value>) {
    if item.get("success") == Some(&json!(true)) && item.get("noop") == Some(&json!(true)) {
        item.insert("noop".into(), json!(false));
    }
}

/// batch-default-1.
fn batch_default_1(call: Call) -> Call {
    let call = match call.param("batch") {
        None => call.with_param("batch", "1"),
        Some(_) => call,
    };
    let uncapped = call
        .param("partitions")
        .and_then(|p| p.trim().parse::<i64>().ok())
        .is_some_and(|n| n <= 0);
    if uncapped {
        call.with_param("partitions", "1")
    } else {
        call
    }
}

/// push-created-lease-300.
fn lease_300(call: Call, configured: bool) -> Call {
    let given = call
        .param("leaseSeconds")
        .and_then(|s| s.trim().parse::<i64>().ok());
    let absent = match (&given, call.param("leaseSeconds")) {
        (_, None) => true,
        (Some(n), _) => *n <= 0,
        (None, Some(_)) => false, // does not parse: the broker's 400 stays.
    };
    if configured || !absent {
        call
    } else {
        call.with_param("leaseSeconds", "300")
    }
}

/// raw-path-segments: `%` in a queue or partition segment reaches the broker as a
/// literal `%` (it is escaped once more).
fn raw_path_segments(mut call: Call) -> Call {
    let mut segs: Vec<String> = call.path.split('/').map(str::to_string).collect();
    let names: &[usize] = {
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
        match (call.method.as_str(), s.as_slice()) {
            ("GET", ["", "api", "v1", "pop", "queue", _]) => &[5],
            ("GET", ["", "api", "v1", "pop", "queue", _, "partition", _]) => &[5, 7],
            ("DELETE", ["", "api", "v1", "resources", "queues", _]) => &[5],
            _ => &[],
        }
    };
    for &i in names {
        segs[i] = segs[i].replace('%', "%25");
    }
    call.path = segs.join("/");
    call
}

/// namespace-not-derived.
fn namespace_not_derived(call: Call) -> Call {
    let Some(mut body) = call.json() else {
        return call;
    };
    let Some(o) = body.as_object_mut() else {
        return call;
    };
    for key in ["namespace", "task"] {
        if o.get(key).is_none_or(Value::is_null) {
            o.insert(key.into(), json!(""));
        }
    }
    call.with_json(&body)
}

/// dlq-other-shape.
fn dlq_other_shape(v: &mut Value) {
    *v = json!({"items": v["messages"].take(), "count": v["total"].take()});
}

/// created-at-without-z.
fn created_at_offset(m: &mut Map<String, Value>) {
    if let Some(Value::String(t)) = m.get_mut("createdAt") {
        if let Some(base) = t.strip_suffix('Z') {
            *t = format!("{base}+00:00");
        }
    }
}

/// error-key-message.
fn error_to_message(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        if let Some(e) = o.remove("error") {
            o.insert("message".into(), e);
        }
    }
}

/// push-answer-camel-case.
fn camel_case_push(item: &mut Map<String, Value>) {
    for (snake, camel) in [
        ("message_id", "messageId"),
        ("transaction_id", "transactionId"),
    ] {
        if let Some(v) = item.remove(snake) {
            item.insert(camel.into(), v);
        }
    }
}
