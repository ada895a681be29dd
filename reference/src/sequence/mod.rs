//! Operation sequences, the one generator every property run uses: the model's own
//! properties on the deterministic engine, the suite's lockstep runs against any broker,
//! and our server's lockstep test. A proptest strategy (so a failing sequence shrinks)
//! over pushes, pops on all three routes with their parameters, acks with mixed statuses
//! and lease ids, extends, configures, dead-letter listings, transactions, management
//! requests and short sleeps, over two queues, three partitions and three groups; and
//! the mapping of a step to a request (feature `sequence`).
//!
//! Steps refer to earlier deliveries by index (an ack picks among delivered messages),
//! so one sequence replays against any broker, whatever ids it mints. Queue names come
//! from a per-run prefix: `<prefix>.qa` and `<prefix>.qb`, so the prefix is also the
//! discovery namespace of the sequence.

mod manage;

use crate::wire::*;
use proptest::prelude::*;
use serde_json::{json, Value};

/// The tasks of a sequence's two queues (`<prefix>.qa`, `<prefix>.qb`).
pub const TASKS: [&str; 2] = ["qa", "qb"];
/// The partitions a sequence pushes to.
pub const PARTS: [&str; 3] = ["p0", "p1", "p2"];
/// The groups a sequence pops and acks as: queue mode, then two named groups.
pub const GROUPS: [Option<&str>; 3] = [None, Some("g1"), Some("g2")];
/// The ack statuses a step picks by index.
pub const STATUSES: [&str; 4] = ["completed", "failed", "retry", "dlq"];

/// Kinds of steps a broker may lack; a generator for a broker without one never makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optional {
    /// Lease extends (section 6).
    LeaseExtend,
    /// Queue configuration (section 7).
    Configure,
    /// The dead-letter listing (section 8).
    DeadLetter,
    /// Transactions (section 9).
    Transactions,
    /// Management reads of the sequence's own queues, a seek and a message delete
    /// (section 17).
    Management,
    /// Management reads of the whole broker (the overview, every queue, group or
    /// namespace): only where the sequence is alone on its broker, such as the model's
    /// own engine, since other sequences' queues would show in them.
    WholeBrokerReads,
    /// Management writes (a seek, a message delete) next to the reads: a broker's
    /// operator moving cursors and removing messages, which invariants about what a
    /// group acknowledged leave out.
    ManagementWrites,
}

/// Which pop route a step uses.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    /// One queue of the sequence, by index.
    Queue(u8),
    /// One partition (index) of one queue (index).
    Partition(u8, u8),
    /// Discovery by the sequence's namespace, optionally narrowed to a task.
    Discovery(Option<u8>),
}

/// A pop step's route and parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Pop {
    /// The route and what it names.
    pub route: Route,
    /// The group popping ([`GROUPS`]).
    pub group: u8,
    /// `batch`.
    pub batch: u8,
    /// `partitions` (-1 and 0 included: the broker's reading of them is checked).
    pub partitions: i8,
    /// `autoAck=true`.
    pub auto_ack: bool,
    /// `leaseSeconds` (0: absent, the queue's leaseTime).
    pub lease: u8,
}

/// One generated operation. Indices (queue, partition, group, status, pick) wrap around
/// the sequence's names and what it has delivered, so every value is meaningful.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Items of `(partition, transactionId tN)` pushed to one queue in one call.
    Push {
        /// The queue pushed to.
        queue: u8,
        /// Each item's partition and, when `Some(n)`, its transactionId `tn`.
        items: Vec<(u8, Option<u8>)>,
    },
    /// A pop on one of the three routes, with its parameters (POP-1..POP-10).
    Pop(Pop),
    /// Picks among delivered messages: `(index, status, with leaseId)`. `group`: `None`
    /// acks as the group the first picked message was delivered to.
    Ack {
        /// Each item's delivered message (index), status ([`STATUSES`]) and whether it
        /// carries the message's leaseId.
        picks: Vec<(u8, u8, bool)>,
        /// The group acking, or the first picked message's.
        group: Option<u8>,
        /// `POST /api/v1/ack` with the first pick alone, instead of the batch route.
        single: bool,
    },
    /// Acks every message the latest delivering pop returned, in order, with
    /// `statuses[i % len]` (failures beside completions: the ACK-2 clamp, step 3).
    AckLast {
        /// The statuses, by index into [`STATUSES`], cycled over the batch.
        statuses: Vec<u8>,
        /// Whether the items carry the batch's leaseId.
        with_lease: bool,
    },
    /// Extends the lease of a delivered message (LEASE-1..LEASE-3).
    Extend {
        /// The delivered message whose lease is extended.
        pick: u8,
        /// The body's `seconds`, or no body.
        seconds: Option<u8>,
    },
    /// Configures one queue (section 7).
    Configure {
        /// The queue configured.
        queue: u8,
        /// `retryLimit`.
        retry_limit: u8,
        /// `retryDelay`, milliseconds.
        retry_delay: u16,
        /// `dedupWindowSeconds`.
        dedup: u8,
        /// `leaseTime`, seconds.
        lease_time: u8,
    },
    /// The dead-letter listing of one queue (DLQ-2).
    Dlq {
        /// The queue listed.
        queue: u8,
        /// The group filtered on, if any.
        group: Option<u8>,
    },
    /// A transaction pushing one item and acking one delivered message.
    Txn {
        /// The queue the item is pushed to.
        queue: u8,
        /// The pushed item's transactionId `tN`.
        txn: u8,
        /// The delivered message acked.
        pick: u8,
        /// The ack's status, by index into [`STATUSES`].
        status: u8,
    },
    /// A management request (section 17) on a route of the table, in one of the
    /// variants of its parameters the sequence sends (see `manage::request`); `pick` is
    /// a delivered message for the per-message routes, or a partition.
    Manage {
        /// The route.
        route: RouteId,
        /// Which of the route's variants.
        variant: u8,
        /// The queue it is about.
        queue: u8,
        /// The group it is about.
        group: u8,
        /// The delivered message it is about, where it is about one.
        pick: u8,
    },
    /// Time passing, in milliseconds: a sleep against a live broker, the clock moved for
    /// the deterministic engine.
    Sleep(u16),
}

/// The strategy for one step; capabilities the broker lacks are never generated.
pub fn step(allowed: &dyn Fn(Optional) -> bool) -> BoxedStrategy<Step> {
    let push = (
        0..2u8,
        prop::collection::vec((0..3u8, prop::option::of(0..6u8)), 1..4),
    )
        .prop_map(|(queue, items)| Step::Push { queue, items });
    let sleep = prop_oneof![3 => 0..300u16, 1 => 900..1300u16].prop_map(Step::Sleep);
    let mut options: Vec<(u32, BoxedStrategy<Step>)> = vec![
        (5, push.boxed()),
        (5, pop()),
        (3, ack()),
        (3, ack_last()),
        (1, sleep.boxed()),
    ];
    options.extend(optional_steps(allowed));
    let (w, s): (Vec<u32>, Vec<BoxedStrategy<Step>>) = options.into_iter().unzip();
    proptest::strategy::Union::new_weighted(w.into_iter().zip(s).collect()).boxed()
}

/// Pops on every route, with their parameters.
fn pop() -> BoxedStrategy<Step> {
    let route = prop_oneof![
        6 => (0..2u8).prop_map(Route::Queue),
        2 => (0..2u8, 0..3u8).prop_map(|(q, p)| Route::Partition(q, p)),
        1 => prop::option::of(0..2u8).prop_map(Route::Discovery),
    ];
    (
        route,
        0..3u8,
        1..5u8,
        -1..3i8,
        prop::bool::weighted(0.15),
        prop_oneof![3 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(route, group, batch, partitions, auto_ack, lease)| {
            Step::Pop(Pop {
                route,
                group,
                batch,
                partitions,
                auto_ack,
                lease,
            })
        })
        .boxed()
}

/// An ack status, as an index into [`STATUSES`]: mostly completions, then failures.
fn status() -> impl Strategy<Value = u8> {
    prop_oneof![5 => Just(0u8), 3 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)]
}

/// Acks of delivered messages, single or in a batch, mostly completions.
fn ack() -> BoxedStrategy<Step> {
    (
        prop::collection::vec((any::<u8>(), status(), prop::bool::weighted(0.8)), 1..4),
        prop_oneof![6 => Just(None), 1 => (0..3u8).prop_map(Some)],
        prop::bool::weighted(0.2),
    )
        .prop_map(|(picks, group, single)| Step::Ack {
            picks,
            group,
            single,
        })
        .boxed()
}

/// Acks of the whole latest delivery, with mixed statuses.
fn ack_last() -> BoxedStrategy<Step> {
    (
        prop::collection::vec(status(), 1..4),
        prop::bool::weighted(0.85),
    )
        .prop_map(|(statuses, with_lease)| Step::AckLast {
            statuses,
            with_lease,
        })
        .boxed()
}

/// The steps of optional capabilities, each only when the broker has it, with weights.
fn optional_steps(allowed: &dyn Fn(Optional) -> bool) -> Vec<(u32, BoxedStrategy<Step>)> {
    let mut options: Vec<(u32, BoxedStrategy<Step>)> = vec![];
    if allowed(Optional::LeaseExtend) {
        options.push((
            1,
            (any::<u8>(), prop::option::of(1..4u8))
                .prop_map(|(pick, seconds)| Step::Extend { pick, seconds })
                .boxed(),
        ));
    }
    if allowed(Optional::Configure) {
        options.push((1, configure()));
    }
    if allowed(Optional::DeadLetter) {
        options.push((
            1,
            (0..2u8, prop::option::of(0..3u8))
                .prop_map(|(queue, group)| Step::Dlq { queue, group })
                .boxed(),
        ));
    }
    if allowed(Optional::Transactions) {
        options.push((
            1,
            (0..2u8, 0..6u8, any::<u8>(), 0..4u8)
                .prop_map(|(queue, txn, pick, status)| Step::Txn {
                    queue,
                    txn,
                    pick,
                    status,
                })
                .boxed(),
        ));
    }
    if allowed(Optional::Management) {
        options.push((
            2,
            (manage_choice(allowed), 0..2u8, 0..3u8, any::<u8>())
                .prop_map(|((route, variant), queue, group, pick)| Step::Manage {
                    route,
                    variant,
                    queue,
                    group,
                    pick,
                })
                .boxed(),
        ));
    }
    options
}

/// The management requests a broker may be sent: its own queues' reads always, writes
/// and whole-broker reads as `allowed` says.
fn manage_choice(allowed: &dyn Fn(Optional) -> bool) -> BoxedStrategy<(RouteId, u8)> {
    prop::sample::select(manage::choices(|scope| match scope {
        manage::Scope::Own => true,
        manage::Scope::OwnWrite => allowed(Optional::ManagementWrites),
        manage::Scope::WholeBroker => allowed(Optional::WholeBrokerReads),
    }))
    .boxed()
}

/// Configures of one queue: retries, their delay, the dedup window and the lease time.
fn configure() -> BoxedStrategy<Step> {
    (
        0..2u8,
        0..3u8,
        prop_oneof![Just(0u16), Just(400u16)],
        prop_oneof![Just(1u8), Just(60u8)],
        1..3u8,
    )
        .prop_map(
            |(queue, retry_limit, retry_delay, dedup, lease_time)| Step::Configure {
                queue,
                retry_limit,
                retry_delay,
                dedup,
                lease_time,
            },
        )
        .boxed()
}

/// A message delivered earlier in the sequence, with the group it was delivered to.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// The message as the pop answered it.
    pub message: PopMessage,
    /// The group it was delivered to ([`GROUPS`]).
    pub group: u8,
    /// Which delivering pop of the sequence returned it.
    pub pop: u32,
}

/// The names of one sequence.
#[derive(Clone, Debug)]
pub struct Names {
    /// The prefix of its queue names, also its discovery namespace.
    pub prefix: String,
}

impl Names {
    /// The name of queue `q` of the sequence: `<prefix>.<task>`.
    pub fn queue(&self, q: u8) -> String {
        format!("{}.{}", self.prefix, TASKS[q as usize % 2])
    }
}

fn group_pair(g: u8) -> Option<(&'static str, &'static str)> {
    GROUPS[g as usize % 3].map(|g| ("consumerGroup", g))
}

/// The request a step stands for, given what was delivered; `None` when the step does
/// nothing here (a sleep, or an ack before anything was delivered).
pub fn request(s: &Step, names: &Names, delivered: &[Delivered]) -> Option<HttpRequest> {
    Some(match s {
        Step::Push { queue, items } => {
            let items: Vec<Value> = items
                .iter()
                .map(|(p, t)| push_item(names, *queue, *p, *t))
                .collect();
            HttpRequest::post("/api/v1/push", &json!({ "items": items }))
        }
        Step::Pop(p) => pop_request(p, names),
        Step::Ack {
            picks,
            group,
            single,
        } => ack_request(picks, *group, *single, delivered)?,
        Step::AckLast {
            statuses,
            with_lease,
        } => ack_last_request(statuses, *with_lease, delivered)?,
        Step::Extend { pick: i, seconds } => {
            let d = pick(delivered, *i)?;
            if d.message.lease_id.is_empty() {
                return None;
            }
            let body = seconds.map_or(vec![], |s| format!("{{\"seconds\":{s}}}").into_bytes());
            HttpRequest::post_raw(format!("/api/v1/lease/{}/extend", d.message.lease_id), body)
        }
        Step::Configure {
            queue,
            retry_limit,
            retry_delay,
            dedup,
            lease_time,
        } => HttpRequest::post(
            "/api/v1/configure",
            &json!({"queue": names.queue(*queue), "options": {
                "retryLimit": retry_limit, "retryDelay": retry_delay,
                "dedupWindowSeconds": dedup, "leaseTime": lease_time}}),
        ),
        Step::Dlq { queue, group } => dlq_request(names, *queue, *group),
        Step::Txn {
            queue,
            txn,
            pick: i,
            status,
        } => txn_request(names, (*queue, *txn), pick(delivered, *i), *status),
        Step::Manage {
            route,
            variant,
            queue,
            group,
            pick: i,
        } => manage::request(
            (*route, *variant),
            names,
            (*queue, *group, *i),
            pick(delivered, *i),
        )?,
        Step::Sleep(_) => return None,
    })
}

/// The delivered message a step's index picks (indices wrap around), if any was.
fn pick(delivered: &[Delivered], i: u8) -> Option<&Delivered> {
    delivered.get(i as usize % delivered.len().max(1))
}

/// A pop step's request, on its route with its parameters.
fn pop_request(p: &Pop, names: &Names) -> HttpRequest {
    let (path, mut q): (String, Vec<(String, String)>) = match &p.route {
        Route::Queue(qi) => (PopRoute::Queue(names.queue(*qi)).path(), vec![]),
        Route::Partition(qi, pi) => (
            PopRoute::Partition(names.queue(*qi), PARTS[*pi as usize % 3].into()).path(),
            vec![],
        ),
        Route::Discovery(task) => {
            let mut q = vec![("namespace".to_string(), names.prefix.clone())];
            if let Some(t) = task {
                q.push(("task".into(), TASKS[*t as usize % 2].into()));
            }
            ("/api/v1/pop".to_string(), q)
        }
    };
    q.push(("batch".into(), p.batch.to_string()));
    q.push(("partitions".into(), p.partitions.to_string()));
    if p.lease > 0 {
        q.push(("leaseSeconds".into(), p.lease.to_string()));
    }
    if p.auto_ack {
        q.push(("autoAck".into(), "true".into()));
    }
    if let Some((k, v)) = group_pair(p.group) {
        q.push((k.into(), v.into()));
    }
    HttpRequest {
        method: "GET".into(),
        path,
        query: q,
        body: vec![],
        bearer: None,
    }
}

/// An ack of the picked messages, single or batch, as the first one's group unless
/// the step names one; `None` before anything was delivered.
fn ack_request(
    picks: &[(u8, u8, bool)],
    group: Option<u8>,
    single: bool,
    delivered: &[Delivered],
) -> Option<HttpRequest> {
    let first = pick(delivered, picks[0].0)?;
    let g = group.unwrap_or(first.group);
    let items: Vec<Value> = picks
        .iter()
        .take(if single { 1 } else { picks.len() })
        .filter_map(|(i, st, with_lease)| {
            let d = pick(delivered, *i)?;
            Some(ack_item(
                &d.message,
                STATUSES[*st as usize % 4],
                *with_lease,
            ))
        })
        .collect();
    Some(if single {
        let mut body = items[0].clone();
        if let Some(g) = GROUPS[g as usize % 3] {
            body["consumerGroup"] = json!(g);
        }
        HttpRequest::post("/api/v1/ack", &body)
    } else {
        let mut body = json!({ "acknowledgments": items });
        if let Some(g) = GROUPS[g as usize % 3] {
            body["consumerGroup"] = json!(g);
        }
        HttpRequest::post("/api/v1/ack/batch", &body)
    })
}

/// A batch ack of every message the latest delivering pop returned; `None` before
/// anything was delivered.
fn ack_last_request(
    statuses: &[u8],
    with_lease: bool,
    delivered: &[Delivered],
) -> Option<HttpRequest> {
    let last = delivered.last()?.pop;
    let batch: Vec<&Delivered> = delivered.iter().filter(|d| d.pop == last).collect();
    let items: Vec<Value> = batch
        .iter()
        .enumerate()
        .map(|(i, d)| {
            ack_item(
                &d.message,
                STATUSES[statuses[i % statuses.len()] as usize % 4],
                with_lease,
            )
        })
        .collect();
    let mut body = json!({ "acknowledgments": items });
    if let Some(g) = GROUPS[batch[0].group as usize % 3] {
        body["consumerGroup"] = json!(g);
    }
    Some(HttpRequest::post("/api/v1/ack/batch", &body))
}

/// The dead-letter listing of one queue, optionally of one group.
fn dlq_request(names: &Names, queue: u8, group: Option<u8>) -> HttpRequest {
    let mut q = vec![("queue", names.queue(queue))];
    if let Some((k, v)) = group.and_then(group_pair) {
        q.push((k, v.to_string()));
    }
    HttpRequest {
        method: "GET".into(),
        path: "/api/v1/dlq".into(),
        query: q.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        body: vec![],
        bearer: None,
    }
}

/// A transaction pushing one item `(queue, txn)` and acking the picked message, if any.
fn txn_request(
    names: &Names,
    (queue, txn): (u8, u8),
    d: Option<&Delivered>,
    status: u8,
) -> HttpRequest {
    let mut ops = vec![json!({"type": "push", "items": [push_item(names, queue, 0, Some(txn))]})];
    if let Some(d) = d {
        let mut a = ack_item(&d.message, STATUSES[status as usize % 4], true);
        a["type"] = json!("ack");
        if let Some(g) = GROUPS[d.group as usize % 3] {
            a["consumerGroup"] = json!(g);
        }
        ops.push(a);
    }
    HttpRequest::post("/api/v1/transaction", &json!({ "operations": ops }))
}

fn push_item(names: &Names, queue: u8, p: u8, t: Option<u8>) -> Value {
    let mut v = json!({"queue": names.queue(queue), "partition": PARTS[p as usize % 3], "payload": {"p": p}});
    if let Some(t) = t {
        v["transactionId"] = json!(format!("t{t}"));
    }
    v
}

fn ack_item(m: &PopMessage, status: &str, with_lease: bool) -> Value {
    let mut v =
        json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status});
    if with_lease {
        v["leaseId"] = json!(m.lease_id);
    }
    v
}

impl Step {
    /// The step as a Rust expression (for a reproducing test).
    pub fn to_rust(&self) -> String {
        fn opt<T: std::fmt::Display>(o: &Option<T>) -> String {
            o.as_ref().map_or("None".into(), |v| format!("Some({v})"))
        }
        match self {
            Step::Push { queue, items } => {
                let items: Vec<String> = items.iter().map(|(p, t)| format!("({p}, {})", opt(t))).collect();
                format!("Step::Push {{ queue: {queue}, items: vec![{}] }}", items.join(", "))
            }
            Step::Pop(Pop { route, group, batch, partitions, auto_ack, lease }) => {
                let route = match route {
                    Route::Queue(q) => format!("Route::Queue({q})"),
                    Route::Partition(q, p) => format!("Route::Partition({q}, {p})"),
                    Route::Discovery(t) => format!("Route::Discovery({})", opt(t)),
                };
                format!("Step::Pop(Pop {{ route: {route}, group: {group}, batch: {batch}, partitions: {partitions}, auto_ack: {auto_ack}, lease: {lease} }})")
            }
            Step::Ack { picks, group, single } => {
                let picks: Vec<String> = picks.iter().map(|(i, s, l)| format!("({i}, {s}, {l})")).collect();
                format!("Step::Ack {{ picks: vec![{}], group: {}, single: {single} }}", picks.join(", "), opt(group))
            }
            Step::AckLast { statuses, with_lease } => {
                let st: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
                format!("Step::AckLast {{ statuses: vec![{}], with_lease: {with_lease} }}", st.join(", "))
            }
            Step::Extend { pick, seconds } => format!("Step::Extend {{ pick: {pick}, seconds: {} }}", opt(seconds)),
            Step::Configure { queue, retry_limit, retry_delay, dedup, lease_time } => format!(
                "Step::Configure {{ queue: {queue}, retry_limit: {retry_limit}, retry_delay: {retry_delay}, dedup: {dedup}, lease_time: {lease_time} }}"
            ),
            Step::Dlq { queue, group } => format!("Step::Dlq {{ queue: {queue}, group: {} }}", opt(group)),
            Step::Txn { queue, txn, pick, status } => {
                format!("Step::Txn {{ queue: {queue}, txn: {txn}, pick: {pick}, status: {status} }}")
            }
            Step::Manage { route, variant, queue, group, pick } => {
                format!("Step::Manage {{ route: RouteId::{route:?}, variant: {variant}, queue: {queue}, group: {group}, pick: {pick} }}")
            }
            Step::Sleep(ms) => format!("Step::Sleep({ms})"),
        }
    }

    /// A short name for coverage counts.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Push { .. } => "push",
            Step::Pop(Pop {
                route: Route::Queue(_),
                ..
            }) => "pop (queue route)",
            Step::Pop(Pop {
                route: Route::Partition(..),
                ..
            }) => "pop (partition route)",
            Step::Pop(Pop {
                route: Route::Discovery(_),
                ..
            }) => "pop (discovery)",
            Step::Ack { single: true, .. } => "ack (single)",
            Step::Ack { .. } => "ack (batch)",
            Step::AckLast { .. } => "ack (the latest batch)",
            Step::Extend { .. } => "extend",
            Step::Configure { .. } => "configure",
            Step::Dlq { .. } => "dlq listing",
            Step::Txn { .. } => "transaction",
            Step::Manage { route, .. } => manage::label(*route),
            Step::Sleep(_) => "sleep",
        }
    }
}
