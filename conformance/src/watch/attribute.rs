//! Which queue a watched call belongs to.
//!
//! The watcher checks each queue on its own, with a model that has seen every call on
//! that queue and nothing else. A call is checked on a queue only when it touches that
//! queue alone; a call that may touch several (a push to two queues, a refused
//! transaction across queues, an extend of a lease two queues share) leaves each of them
//! in a state the watcher cannot know, so those queues are no longer judged, never
//! falsely accused. Two exceptions, where the answer says what happened on each queue: a
//! discovery pop's deliveries are placed on their queues (by a partition seen before or
//! an id a push was answered with), a committed transaction is all applied (TXN-1), and
//! a batch ack is evaluated per partition; each queue then judges its own part of the
//! call. Acks and extends name no queue:
//! their partitions and leases are learnt from the pops the watcher saw.

use queen_reference::wire::{HttpRequest, HttpResponse, PopRoute, Scope};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Leases remembered for their extends; past it the memory starts again.
const LEASES_KEPT: usize = 100_000;

/// Pushed message ids remembered for the discovery pops that deliver them; past it the
/// memory starts again.
const MESSAGES_KEPT: usize = 50_000;

/// What a call touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touch {
    /// One queue: the call is checked on its model.
    Queue(String),
    /// Several queues, or those of a namespace or task: each becomes unknown.
    Many {
        /// The queues named, or watched and in the namespace or task.
        queues: BTreeSet<String>,
        /// Why the call cannot be checked on one queue.
        why: &'static str,
    },
    /// A discovery pop over the watched queues of its namespace or task: its answer says
    /// which of them it claimed from (see [`Learnt::delivered`]).
    Discovery {
        /// The watched queues in its namespace or task.
        queues: BTreeSet<String>,
    },
    /// A transaction over several watched queues: once committed, each queue judges its
    /// own part of it (see [`Learnt::split_transaction`]).
    Transaction {
        /// The queues its operations name.
        queues: BTreeSet<String>,
    },
    /// A push to several queues: once accepted, each queue judges its own items (see
    /// [`Learnt::split_push`]).
    Push {
        /// The queues its items name.
        queues: BTreeSet<String>,
    },
    /// A batch ack over several watched queues: each item is evaluated per partition
    /// and group (section 4), so each queue judges its own items and their results
    /// (see [`Learnt::split_acks`]).
    AckBatch {
        /// The queues its items' partitions belong to.
        queues: BTreeSet<String>,
    },
    /// A broker-wide write (a maintenance switch, a group on every queue): applied to
    /// every queue's model as a call whose answer is not compared, since the answer
    /// speaks of queues the model does not hold.
    Broker,
    /// Nothing a queue's model holds: a read across queues, the health probe, a call on
    /// partitions or leases the watcher never saw delivered. Not checked.
    Nothing(&'static str),
}

/// What the watcher learnt from the answers it saw: each delivered partition's and
/// lease's queue, and the namespaces and tasks each queue may be in.
#[derive(Default)]
pub struct Learnt {
    partitions: HashMap<String, String>,
    /// The queues of each lease: a discovery pop's one lease may span several (LEASE-1).
    leases: HashMap<String, BTreeSet<String>>,
    /// The queue of each message id a push answer gave, until a pop shows its partition.
    messages: HashMap<String, String>,
    /// Every (namespace, task) a queue was derived or configured with (CFG-3).
    labels: HashMap<String, BTreeSet<(String, String)>>,
}

impl Learnt {
    /// A queue first seen: the namespace and task its name derives (CFG-3).
    pub fn saw(&mut self, queue: &str) {
        let derived = queen_reference::wire::derive_namespace_task(queue);
        self.labels
            .entry(queue.to_string())
            .or_default()
            .insert(derived);
    }

    /// A configure call that may have set a queue's namespace and task: both readings
    /// are kept, so a discovery pop that could reach the queue under either touches it.
    pub fn configured(&mut self, req: &HttpRequest) {
        let Ok(b) = serde_json::from_slice::<Value>(&req.body) else {
            return;
        };
        let Some(q) = b.get("queue").and_then(Value::as_str) else {
            return;
        };
        let (ns, task) = queen_reference::wire::derive_namespace_task(q);
        let field = |k: &str, d: String| b.get(k).and_then(Value::as_str).map_or(d, str::to_string);
        let label = (field("namespace", ns), field("task", task));
        self.labels.entry(q.to_string()).or_default().insert(label);
    }

    /// Forgets a deleted queue's partitions, leases and names.
    pub fn forget(&mut self, queue: &str) {
        self.partitions.retain(|_, q| q != queue);
        self.leases.retain(|_, qs| {
            qs.remove(queue);
            !qs.is_empty()
        });
        self.messages.retain(|_, q| q != queue);
        self.labels.remove(queue);
    }

    /// The watched queues a discovery pop with these filters may claim from (POP-10).
    fn in_scope(&self, namespace: Option<&str>, task: Option<&str>) -> BTreeSet<String> {
        let fits = |(ns, t): &(String, String)| {
            namespace.is_none_or(|n| n == ns) && task.is_none_or(|x| x == t)
        };
        self.labels
            .iter()
            .filter(|(_, ls)| ls.iter().any(fits))
            .map(|(q, _)| q.clone())
            .collect()
    }
    /// Learns the partitions and leases of a pop on a queue's route.
    pub fn pop_answer(&mut self, queue: &str, answer: &HttpResponse) {
        let Some(msgs) = answer
            .body
            .as_ref()
            .and_then(|b| b.get("messages"))
            .and_then(Value::as_array)
        else {
            return;
        };
        for m in msgs {
            if let Some(p) = m.get("partitionId").and_then(Value::as_str) {
                self.partitions.insert(p.to_string(), queue.to_string());
            }
            if let Some(l) = m
                .get("leaseId")
                .and_then(Value::as_str)
                .filter(|l| !l.is_empty())
            {
                if self.leases.len() >= LEASES_KEPT {
                    // The oldest are not known apart from the others: all go, and an
                    // extend of one of them is then not judged, never misjudged.
                    self.leases.clear();
                }
                let queues = self.leases.entry(l.to_string()).or_default();
                queues.insert(queue.to_string());
            }
        }
    }

    /// Learns the message ids a push to `queue` alone was answered with (PUSH-1).
    pub fn push_answer(&mut self, queue: &str, answer: &HttpResponse) {
        let Some(results) = answer.body.as_ref().and_then(Value::as_array) else {
            return;
        };
        for r in results {
            self.pushed(r, queue);
        }
    }

    /// Learns the message ids of a push to several queues, or of a committed
    /// transaction's pushes: the `i`-th result answers the `i`-th pushed item (PUSH-1,
    /// TXN-3), whose queue the request names.
    pub fn pushes_answer(&mut self, body: &Value, results: &[Value]) {
        let ops: Vec<&Value> = match body.get("operations").and_then(Value::as_array) {
            Some(ops) => ops.iter().collect(),
            None => vec![body],
        };
        let mut next = 0;
        for op in ops {
            let Some(items) = op.get("items").and_then(Value::as_array) else {
                next += 1; // an ack's result
                continue;
            };
            for item in items {
                if let (Some(q), Some(r)) =
                    (item.get("queue").and_then(Value::as_str), results.get(next))
                {
                    self.pushed(r, q);
                }
                next += 1;
            }
        }
    }

    fn pushed(&mut self, result: &Value, queue: &str) {
        let id = result.get("message_id").or_else(|| result.get("messageId"));
        if let Some(id) = id.and_then(Value::as_str) {
            if self.messages.len() >= MESSAGES_KEPT {
                // As for leases: a discovery pop delivering a forgotten id is then not
                // judged, never misjudged.
                self.messages.clear();
            }
            self.messages.insert(id.to_string(), queue.to_string());
        }
    }

    /// The queue of each message a discovery pop delivered, by its partition (seen
    /// delivered before) or its id (seen pushed): the indices of each queue's messages in
    /// the answer, or `None` when one cannot be placed. What it places is learnt, so
    /// later acks and extends of those partitions and leases are placed too.
    pub fn delivered(&mut self, answer: &HttpResponse) -> Option<BTreeMap<String, Vec<usize>>> {
        let msgs = answer.body.as_ref()?.get("messages")?.as_array()?;
        let mut by_queue: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, m) in msgs.iter().enumerate() {
            let partition = m.get("partitionId").and_then(Value::as_str);
            let id = m.get("id").and_then(Value::as_str);
            let queue = partition
                .and_then(|p| self.partitions.get(p))
                .or_else(|| id.and_then(|id| self.messages.get(id)))?
                .clone();
            by_queue.entry(queue).or_default().push(i);
        }
        for (queue, indices) in &by_queue {
            let mine: Vec<Value> = indices.iter().map(|i| msgs[*i].clone()).collect();
            let part = HttpResponse {
                status: answer.status,
                body: Some(serde_json::json!({ "messages": mine })),
            };
            self.pop_answer(queue, &part);
        }
        Some(by_queue)
    }

    /// The queues of `partitions`, or `None` when one was never seen delivered.
    fn queues_of<'a>(&self, partitions: impl Iterator<Item = &'a str>) -> Option<BTreeSet<String>> {
        partitions
            .map(|p| self.partitions.get(p).cloned())
            .collect()
    }

    /// What `req` touches, by its route's scope in the route table.
    pub fn touch(&self, req: &HttpRequest) -> Touch {
        let segments: Vec<&str> = req.path.trim_end_matches('/').split('/').skip(1).collect();
        let Some((route, vars)) = queen_reference::wire::find(&req.method, &segments) else {
            return Touch::Nothing("not a route of the protocol");
        };
        let var = |i: usize| vars.get(i).map(|v| decoded(v)).unwrap_or_default();
        let body: Option<Value> = serde_json::from_slice(&req.body).ok();
        let body = body.as_ref();
        match route.scope {
            Scope::PathQueue(n) => Touch::Queue(var(n)),
            Scope::PushItems => match self.named(push_queues(body), "a push to several queues") {
                Touch::Many { queues, .. } => Touch::Push { queues },
                other => other,
            },
            Scope::Namespace => self.discovery(req),
            Scope::Ack => self.acks(body.map(std::slice::from_ref)),
            Scope::AckBatch => {
                let items = body.and_then(|b| b.get("acknowledgments")?.as_array());
                self.acks(items.map(Vec::as_slice))
            }
            Scope::PathLease(n) => match self.leases.get(&var(n)) {
                Some(qs) => self.named(
                    Some(qs.clone()),
                    "an extend of a lease several queues share",
                ),
                None => Touch::Nothing("an extend of a lease the watcher never saw granted"),
            },
            Scope::Transaction => self.transaction(body),
            Scope::BodyQueue => match body.and_then(|b| b.get("queue")?.as_str()) {
                Some(q) => Touch::Queue(q.to_string()),
                None => Touch::Nothing("a request that names no queue"),
            },
            Scope::QueryQueue => match param(req, "queue") {
                Some(q) => Touch::Queue(q),
                None => Touch::Nothing("a read across queues"),
            },
            Scope::PathPartition(n) => match self.queues_of(std::iter::once(var(n).as_str())) {
                Some(qs) => self.named(Some(qs), ""),
                None => Touch::Nothing("a message of a partition the watcher never saw"),
            },
            Scope::Broker => Touch::Broker,
            Scope::Across => Touch::Nothing("a read across queues"),
        }
    }

    /// A discovery pop touches the watched queues of its namespace or task (POP-10), as
    /// the model reads them. One the model refuses for want of a scope may reach any
    /// queue at a broker that reads it otherwise.
    fn discovery(&self, req: &HttpRequest) -> Touch {
        let scope = match queen_reference::wire::discovery_scope(&req.query) {
            Ok(PopRoute::Discovery { namespace, task }) => {
                self.in_scope(namespace.as_deref(), task.as_deref())
            }
            _ => self.in_scope(None, None),
        };
        if scope.is_empty() {
            return Touch::Nothing("a pop by namespace or task that reaches no watched queue");
        }
        Touch::Discovery { queues: scope }
    }

    /// One queue, several, or none named (a request too malformed to name one).
    fn named(&self, queues: Option<BTreeSet<String>>, why: &'static str) -> Touch {
        match queues {
            Some(qs) if qs.len() == 1 => Touch::Queue(qs.into_iter().next().unwrap_or_default()),
            Some(qs) if !qs.is_empty() => Touch::Many { queues: qs, why },
            _ => Touch::Nothing("a request that names no queue"),
        }
    }

    fn acks(&self, items: Option<&[Value]>) -> Touch {
        let Some(items) = items.filter(|i| !i.is_empty()) else {
            return Touch::Nothing("an ack that names no message");
        };
        let parts = items
            .iter()
            .map(|i| i.get("partitionId").and_then(Value::as_str).unwrap_or(""));
        match self.queues_of(parts) {
            Some(qs) => match self.named(Some(qs), "an ack batch across queues") {
                Touch::Many { queues, .. } => Touch::AckBatch { queues },
                other => other,
            },
            None => Touch::Nothing("an ack of a partition the watcher never saw delivered"),
        }
    }

    fn transaction(&self, body: Option<&Value>) -> Touch {
        let Some(ops) = body
            .and_then(|b| b.get("operations"))
            .and_then(Value::as_array)
        else {
            return Touch::Nothing("a transaction without operations");
        };
        let mut queues = BTreeSet::new();
        for op in ops {
            if let Some(qs) = push_queues(Some(op)) {
                queues.extend(qs);
            } else if let Some(p) = op.get("partitionId").and_then(Value::as_str) {
                match self.partitions.get(p) {
                    Some(q) => {
                        queues.insert(q.clone());
                    }
                    None => {
                        return Touch::Nothing("a transaction on a partition the watcher never saw")
                    }
                }
            }
        }
        for lease in body
            .and_then(|b| b.get("requiredLeases"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(qs) = lease.as_str().and_then(|l| self.leases.get(l)) {
                queues.extend(qs.iter().cloned());
            }
        }
        match self.named(Some(queues), "a transaction across queues") {
            Touch::Many { queues, .. } => Touch::Transaction { queues },
            other => other,
        }
    }

    /// A batch ack's part on each queue: its items there, with the answer's results for
    /// them in order (one per item, ACK-0). `None` when an item cannot be placed or the
    /// results do not line up.
    pub fn split_acks(
        &self,
        body: &Value,
        answer: &Value,
    ) -> Option<BTreeMap<String, (Value, Value)>> {
        split_items(body, "acknowledgments", answer, |item| {
            self.partitions
                .get(item.get("partitionId")?.as_str()?)
                .cloned()
        })
    }

    /// An accepted push's part on each queue it names: that queue's items, in order, with
    /// the answer's results for them (PUSH-1: one per item, in request order). Queues are
    /// independent, so each part is what a push of those items alone would have done.
    /// `None` when an item names no queue or the results do not line up.
    pub fn split_push(body: &Value, answer: &Value) -> Option<BTreeMap<String, (Value, Value)>> {
        split_items(body, "items", answer, |item| {
            Some(item.get("queue")?.as_str()?.to_string())
        })
    }

    /// A committed transaction's part on each queue it touched: the operations naming
    /// that queue (a push's items for it, its acks, the required leases it holds), and
    /// the answer's results for them, in order (TXN-3: one result per pushed item and per
    /// ack). `None` when an operation cannot be placed or the results do not line up:
    /// the transaction is then not judged.
    pub fn split_transaction(
        &self,
        body: &Value,
        answer: &Value,
    ) -> Option<BTreeMap<String, (Value, Value)>> {
        let ops = body.get("operations")?.as_array()?;
        let results = answer.get("results")?.as_array()?;
        let mut parts: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
        let mut next = 0usize;
        for op in ops {
            if let Some(items) = op.get("items").and_then(Value::as_array) {
                let mut by_queue: BTreeMap<String, Vec<Value>> = BTreeMap::new();
                for item in items {
                    let q = item.get("queue")?.as_str()?.to_string();
                    by_queue.entry(q.clone()).or_default().push(item.clone());
                    let mine = &mut parts.entry(q).or_default().1;
                    mine.push(renumbered(results.get(next)?, next, mine.len()));
                    next += 1;
                }
                for (q, items) in by_queue {
                    let mut part = op.clone();
                    part["items"] = Value::Array(items);
                    parts.entry(q).or_default().0.push(part);
                }
            } else {
                let p = op.get("partitionId")?.as_str()?;
                let q = self.partitions.get(p)?.clone();
                let part = parts.entry(q).or_default();
                part.0.push(op.clone());
                part.1
                    .push(renumbered(results.get(next)?, next, part.1.len()));
                next += 1;
            }
        }
        if next != results.len() {
            return None;
        }
        let leases: Vec<&str> = body
            .get("requiredLeases")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = BTreeMap::new();
        for (q, (ops, results)) in parts {
            let mut part_body = body.clone();
            part_body["operations"] = Value::Array(ops);
            if body.get("requiredLeases").is_some() {
                let held: Vec<Value> = leases
                    .iter()
                    .filter(|l| self.leases.get(**l).is_some_and(|qs| qs.contains(&q)))
                    .map(|l| Value::from(*l))
                    .collect();
                part_body["requiredLeases"] = Value::Array(held);
            }
            let mut part_answer = answer.clone();
            part_answer["results"] = Value::Array(results);
            out.insert(q, (part_body, part_answer));
        }
        Some(out)
    }
}

/// A result of a transaction or a batch ack with its `index` (its place among the
/// results) moved from `was` to `now`, its place in one queue's part. An index that was wrong stays as
/// the broker sent it, to be judged.
fn renumbered(result: &Value, was: usize, now: usize) -> Value {
    let mut r = result.clone();
    if r.get("index").and_then(Value::as_u64) == Some(was as u64) {
        r["index"] = Value::from(now as u64);
    }
    r
}

/// The items of `body[field]` and the answer's results for them (one per item, in
/// order) grouped by the queue `queue_of` places each item on: per queue, the body with
/// only its items and the array of their results, renumbered from 0. `None` when an item
/// cannot be placed or the results do not line up.
fn split_items(
    body: &Value,
    field: &str,
    answer: &Value,
    queue_of: impl Fn(&Value) -> Option<String>,
) -> Option<BTreeMap<String, (Value, Value)>> {
    let items = body.get(field)?.as_array()?;
    let results = answer.as_array()?;
    if items.len() != results.len() {
        return None;
    }
    let mut parts: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for (i, (item, result)) in items.iter().zip(results).enumerate() {
        let part = parts.entry(queue_of(item)?).or_default();
        part.1.push(renumbered(result, i, part.0.len()));
        part.0.push(item.clone());
    }
    let out = parts
        .into_iter()
        .map(|(q, (items, results))| {
            let mut part_body = body.clone();
            part_body[field] = Value::Array(items);
            (q, (part_body, Value::Array(results)))
        })
        .collect();
    Some(out)
}

/// A path segment percent-decoded as the protocol decodes it (WIRE-2); one that does
/// not decode names no queue the watcher could hold ("").
fn decoded(segment: &str) -> String {
    queen_reference::wire::decode_segment(segment).unwrap_or_default()
}

/// A query parameter as the model reads it: the last non-empty value given.
fn param(req: &HttpRequest, name: &str) -> Option<String> {
    req.query
        .iter()
        .rev()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.clone())
}

/// The queues a push body's items name (`None` when it has no items to read).
fn push_queues(body: Option<&Value>) -> Option<BTreeSet<String>> {
    let items = body?.get("items")?.as_array()?;
    let qs: BTreeSet<String> = items
        .iter()
        .filter_map(|i| i.get("queue").and_then(Value::as_str).map(str::to_string))
        .collect();
    (!qs.is_empty()).then_some(qs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(path: &str, body: Value) -> HttpRequest {
        HttpRequest::post(path, &body)
    }

    #[test]
    fn calls_are_put_on_their_queue() {
        let mut l = Learnt::default();
        let one = post(
            "/api/v1/push",
            json!({"items": [{"queue": "a"}, {"queue": "a"}]}),
        );
        assert_eq!(l.touch(&one), Touch::Queue("a".into()));
        let two = post(
            "/api/v1/push",
            json!({"items": [{"queue": "a"}, {"queue": "b"}]}),
        );
        assert!(matches!(l.touch(&two), Touch::Push { .. }));
        let pop = HttpRequest::get("/api/v1/pop/queue/a%20b", &[]);
        assert_eq!(l.touch(&pop), Touch::Queue("a b".into()));
        let ack = post(
            "/api/v1/ack",
            json!({"partitionId": "p1", "transactionId": "t"}),
        );
        assert!(
            matches!(l.touch(&ack), Touch::Nothing(_)),
            "unseen partition"
        );
        l.pop_answer(
            "a",
            &HttpResponse {
                status: 200,
                body: Some(json!({"messages": [{"partitionId": "p1", "leaseId": "l1"}]})),
            },
        );
        assert_eq!(l.touch(&ack), Touch::Queue("a".into()));
        let extend = post("/api/v1/lease/l1/extend", json!({}));
        assert_eq!(l.touch(&extend), Touch::Queue("a".into()));
        let maint = post("/api/v1/system/maintenance", json!({"enabled": true}));
        assert_eq!(l.touch(&maint), Touch::Broker);
        let discovery = HttpRequest::get("/api/v1/pop", &[("namespace", "n")]);
        assert!(
            matches!(l.touch(&discovery), Touch::Nothing(_)),
            "no queue of n seen"
        );
        l.saw("n.t.x");
        l.saw("m.t");
        let Touch::Discovery { queues } = l.touch(&discovery) else {
            panic!("n.t.x is in n");
        };
        assert_eq!(
            queues.into_iter().collect::<Vec<_>>(),
            vec!["n.t.x".to_string()]
        );
        let configure = json!({"queue": "m.t", "namespace": "n", "task": "t"});
        l.configured(&post("/api/v1/configure", configure));
        let by_task = HttpRequest::get("/api/v1/pop", &[("namespace", "n"), ("task", "t")]);
        let Touch::Discovery { queues } = l.touch(&by_task) else {
            panic!("both are in n/t");
        };
        assert_eq!(queues.len(), 2);
        let garbage = post("/api/v1/push", json!("not an object"));
        assert!(matches!(l.touch(&garbage), Touch::Nothing(_)));
    }

    /// A query is read as the model reads it (the last non-empty value), so a call is
    /// judged on the queue the model takes it to name.
    #[test]
    fn query_parameters_are_read_as_the_model_reads_them() {
        let mut l = Learnt::default();
        let twice = [("queue", "a"), ("queue", "b"), ("queue", "")];
        let partitions = HttpRequest::get("/api/v1/resources/partitions", &twice);
        assert_eq!(l.touch(&partitions), Touch::Queue("b".into()));
        let across = HttpRequest::get("/api/v1/dlq", &[("queue", "")]);
        assert!(matches!(l.touch(&across), Touch::Nothing(_)));
        l.saw("x.t");
        l.saw("y.t");
        l.saw("y.u");
        // `namespace=` names no namespace: the task alone scopes it (POP-10).
        let by_task = HttpRequest::get("/api/v1/pop", &[("namespace", ""), ("task", "t")]);
        let Touch::Discovery { queues } = l.touch(&by_task) else {
            panic!("x.t and y.t are in task t");
        };
        assert_eq!(queues.len(), 2, "{queues:?}");
        // No scope: the model refuses it; a broker that reads it otherwise may reach any.
        let unscoped = HttpRequest::get("/api/v1/pop", &[("task", "")]);
        let Touch::Discovery { queues } = l.touch(&unscoped) else {
            panic!("every watched queue");
        };
        assert_eq!(queues.len(), 3, "{queues:?}");
    }
}
