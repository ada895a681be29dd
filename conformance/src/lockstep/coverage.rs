//! What a lockstep run exercised: how often each operation kind ran and each ack
//! outcome (noop, clamp, dead letter, expired lease, unresolvable, ...) and pop outcome
//! was reached, so a green run that never reached the interesting states shows it.

use queen_reference::checker::World;
use queen_reference::model::{Cursor, Partition};
use queen_reference::wire::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Counts by name, in two groups.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Coverage {
    /// Calls made, by operation name.
    pub operations: BTreeMap<String, u64>,
    /// Outcomes reached, by name.
    pub outcomes: BTreeMap<String, u64>,
}

/// Outcomes every healthy run should reach at least once; reported when missing.
const INTERESTING: &[&str] = &[
    "pop delivered",
    "pop empty (204)",
    "pop redelivery",
    "pop several partitions",
    "ack committed",
    "ack noop (already committed)",
    "ack clamp (completion blocked by a lower failure)",
    "ack dead letter",
    "ack invalid or expired lease",
    "ack unresolvable",
    "ack lease released",
    "ack failure comes back",
    "ack retry with its budget spent comes back",
];

impl Coverage {
    /// Counts one call of the operation `name`.
    pub fn op(&mut self, name: &str) {
        *self.operations.entry(name.to_string()).or_default() += 1;
    }

    /// Counts one reaching of the outcome `name`.
    fn hit(&mut self, name: &str) {
        *self.outcomes.entry(name.to_string()).or_default() += 1;
    }

    /// Adds another run's counts to these.
    pub fn merge(&mut self, other: &Coverage) {
        for (k, v) in &other.operations {
            *self.operations.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += v;
        }
    }

    /// Interesting outcomes never reached.
    pub fn missing(&self) -> Vec<&'static str> {
        INTERESTING
            .iter()
            .copied()
            .filter(|k| !self.outcomes.contains_key(*k))
            .collect()
    }

    /// Records the outcomes of one checked exchange. `world` is a state of the model
    /// after it (to tell a clamp from a plain commit); `seen` holds delivered ids.
    pub(crate) fn observe(
        &mut self,
        req: &HttpRequest,
        resp: &HttpResponse,
        world: Option<&World>,
        seen: &mut BTreeSet<String>,
        worlds: usize,
    ) {
        if worlds > 1 {
            self.hit("timing undecided (several states kept)");
        }
        let body = resp.body.as_ref();
        if req.path.contains("/pop") {
            self.observe_pop(resp, seen);
        } else if req.path.starts_with("/api/v1/ack") || req.path == "/api/v1/transaction" {
            for (sent, r) in ack_items(req, body) {
                self.observe_ack(&sent, &r, world);
            }
            if req.path == "/api/v1/transaction" {
                match body.and_then(|b| b.get("success")).and_then(Value::as_bool) {
                    Some(true) => self.hit("transaction committed"),
                    Some(false) => self.hit("transaction aborted"),
                    None => {}
                }
            }
        } else if req.path.ends_with("/extend") {
            match body.and_then(|b| b.get("renewed")).and_then(Value::as_u64) {
                Some(0) => self.hit("extend found nothing"),
                Some(_) => self.hit("extend renewed"),
                None => {}
            }
        } else if req.path == "/api/v1/push" {
            if let Some(items) = body.and_then(Value::as_array) {
                for i in items {
                    if i.get("status").and_then(Value::as_str) == Some("duplicate") {
                        self.hit("push duplicate");
                    }
                }
            }
        } else if req.path == "/api/v1/dlq"
            && body
                .and_then(|b| b.get("total"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                > 0
        {
            self.hit("dlq listing non-empty");
        }
    }

    /// The outcomes of a pop's answer; `seen` holds the ids delivered before.
    fn observe_pop(&mut self, resp: &HttpResponse, seen: &mut BTreeSet<String>) {
        if resp.status == 204 {
            self.hit("pop empty (204)");
        } else if let Some(p) = resp
            .body
            .as_ref()
            .and_then(|b| serde_json::from_value::<PopResponse>(b.clone()).ok())
        {
            self.hit("pop delivered");
            if p.partitions_claimed > 1 {
                self.hit("pop several partitions");
            }
            if p.lease_id.is_empty() {
                self.hit("pop autoAck");
            }
            if p.messages.iter().any(|m| !seen.insert(m.id.clone())) {
                self.hit("pop redelivery");
            }
        }
    }

    /// The outcome of one ack item `sent`, answered `r`.
    fn observe_ack(&mut self, sent: &Value, r: &AckResult, world: Option<&World>) {
        let status = sent
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("completed");
        match (r.success, r.error.as_deref()) {
            (true, _) if r.noop => self.hit("ack noop (already committed)"),
            (true, _) if r.dlq => self.hit("ack dead letter"),
            (true, _) if status == "completed" => {
                if blocked(sent, world) {
                    self.hit("ack clamp (completion blocked by a lower failure)");
                } else {
                    self.hit("ack committed");
                }
            }
            (true, _) if status == "retry" => {
                self.hit("ack retry comes back");
                if budget_spent(sent, world) {
                    self.hit("ack retry with its budget spent comes back");
                }
            }
            (true, _) => self.hit("ack failure comes back"),
            (false, Some(ERR_ALREADY_COMMITTED)) => self.hit("ack failure below the cursor"),
            (false, Some(ERR_UNRESOLVABLE)) => self.hit("ack unresolvable"),
            (false, Some(ERR_INVALID_LEASE)) => self.hit("ack invalid or expired lease"),
            (false, _) => self.hit("ack refused (other)"),
        }
        if r.lease_released {
            self.hit("ack lease released");
        }
    }
}

/// The ack items a request sent, beside their results.
fn ack_items(req: &HttpRequest, body: Option<&Value>) -> Vec<(Value, AckResult)> {
    let Ok(sent) = serde_json::from_slice::<Value>(&req.body) else {
        return vec![];
    };
    let (items, results): (Vec<Value>, Vec<Value>) = if req.path == "/api/v1/ack" {
        (
            vec![sent],
            body.and_then(Value::as_array).cloned().unwrap_or_default(),
        )
    } else if req.path == "/api/v1/ack/batch" {
        let mut items = sent["acknowledgments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for i in &mut items {
            if i.get("consumerGroup").is_none() && !sent["consumerGroup"].is_null() {
                i["consumerGroup"] = sent["consumerGroup"].clone();
            }
        }
        (
            items,
            body.and_then(Value::as_array).cloned().unwrap_or_default(),
        )
    } else {
        let acks: Vec<Value> = sent["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["type"] == "ack")
            .cloned()
            .collect();
        let results: Vec<Value> = body
            .and_then(|b| b.get("results"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| r.get("type").and_then(Value::as_str) == Some("ack"))
            .cloned()
            .collect();
        (acks, results)
    };
    items
        .into_iter()
        .zip(results)
        .filter_map(|(s, r)| Some((s, serde_json::from_value(r).ok()?)))
        .collect()
}

/// Whether a successful completion stayed above the new cursor (ACK-2 clamp).
fn blocked(sent: &Value, world: Option<&World>) -> bool {
    acked(sent, world).is_some_and(|(_, off, cursor, _)| off > cursor.committed)
}

/// Whether a `retry` ack met a message whose retry budget was already spent: ACK-6 says
/// it comes back all the same, since `retry` spends nothing (the state after the ack
/// still has the charged count, which only `failed` changes).
fn budget_spent(sent: &Value, world: Option<&World>) -> bool {
    acked(sent, world).is_some_and(|(w, off, cursor, part)| {
        let spent = cursor.retries.get(&off).copied().unwrap_or(0);
        w.state
            .queues
            .get(&part.queue)
            .is_some_and(|q| spent >= q.options.retry_limit)
    })
}

/// The acked item in the model's state after the ack: its partition's offset and the
/// group's cursor.
fn acked<'w>(
    sent: &Value,
    world: Option<&'w World>,
) -> Option<(&'w World, u32, &'w Cursor, &'w Partition)> {
    let w = world?;
    let (pid, txn) = (
        sent["partitionId"].as_str()?,
        sent["transactionId"].as_str()?,
    );
    let part = w.state.part(w.ids.parts.handle(pid)?)?;
    let off = part.txn_offset(txn)?;
    let group = sent
        .get("consumerGroup")
        .and_then(Value::as_str)
        .unwrap_or(QUEUE_MODE);
    Some((w, off, part.cursors.get(group)?, part))
}
