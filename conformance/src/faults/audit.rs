//! What a faulty run must still guarantee, checked after the deployment has recovered:
//! every pushed item answered 201 (`queued`, `duplicate` or `buffered`, PUSH-7: "nothing
//! acknowledged with 201 is lost") is stored exactly once, and nothing is stored that
//! no client pushed. Items of pushes with an unknown answer may be stored or not (once
//! at most).
//!
//! What is stored is read with a consumer group no client used, subscribed from the
//! beginning (POP-13 `all`) with `autoAck`: it sees every message of every partition,
//! whatever leases the workload's own groups hold.
//!
//! Also here: the view of a history the linearizability search is given. The model
//! answers `buffered` only under push maintenance; a push our server spooled because
//! the database was away is applied at replay, some time later. Its answer is
//! therefore handed to the search as unknown (applied at any time after it was
//! invoked, or never), and "never" is ruled out by this audit.

use crate::concurrent::{Answer, History};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Whether a call's error says it never reached the broker: the connection was
/// refused (a killed server's port), so the call had no effect at all.
pub fn never_sent(answer: &Answer) -> bool {
    matches!(answer, Answer::Unknown(why) if why.contains("Connection refused"))
}

/// What the search is given: pushes answered `buffered` become unknown, and calls
/// that never reached the broker are left out (they are no more than absent calls,
/// and each unknown call multiplies the orders the search must consider).
pub fn for_search(history: &History) -> History {
    let mut h = History::new(
        history
            .ops
            .iter()
            .filter(|o| !never_sent(&o.answer))
            .cloned()
            .collect(),
    );
    for o in &mut h.ops {
        if let Answer::Known(a) = &o.answer {
            if a.status == 201 && buffered_items(a.body.as_ref()) > 0 {
                o.answer = Answer::Unknown("answered buffered: replayed later (PUSH-7)".into());
            }
        }
    }
    h
}

fn buffered_items(body: Option<&Value>) -> usize {
    body.and_then(Value::as_array)
        .map(|a| a.iter().filter(|r| r["status"] == "buffered").count())
        .unwrap_or(0)
}

/// Whether a pushed item was acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ack {
    Acknowledged,
    Maybe,
}

/// The result of the audit.
#[derive(Clone, Debug, Default)]
pub struct Audit {
    /// Items answered 201.
    pub acknowledged: usize,
    /// Of those, answered `buffered`.
    pub buffered: usize,
    /// Items of pushes with an unknown answer.
    pub maybe: usize,
    /// Of those, found stored.
    pub maybe_stored: usize,
    /// Messages read back.
    pub stored: usize,
    /// Acknowledged but not stored.
    pub lost: Vec<String>,
    /// Stored more than once.
    pub duplicated: Vec<String>,
    /// Stored but never pushed.
    pub phantom: Vec<String>,
    /// Why the read-back itself failed, if it did.
    pub error: Option<String>,
}

impl Audit {
    pub fn bad(&self) -> usize {
        self.lost.len()
            + self.duplicated.len()
            + self.phantom.len()
            + usize::from(self.error.is_some())
    }

    pub fn summary(&self) -> String {
        let mut s = format!(
            "audit: {} items acknowledged ({} buffered), {} unknown ({} of them stored), {} stored; lost {}, duplicated {}, phantom {}",
            self.acknowledged,
            self.buffered,
            self.maybe,
            self.maybe_stored,
            self.stored,
            self.lost.len(),
            self.duplicated.len(),
            self.phantom.len()
        );
        for (what, list) in [
            ("lost", &self.lost),
            ("duplicated", &self.duplicated),
            ("phantom", &self.phantom),
        ] {
            if !list.is_empty() {
                s.push_str(&format!("\n  {what}: {}", list.join(", ")));
            }
        }
        if let Some(e) = &self.error {
            s.push_str(&format!("\n  read-back failed: {e}"));
        }
        s
    }
}

/// The items each push of `history` carried, by queue, with whether they were
/// acknowledged.
fn pushed(history: &History) -> (BTreeMap<String, BTreeMap<String, Ack>>, usize) {
    let mut out: BTreeMap<String, BTreeMap<String, Ack>> = BTreeMap::new();
    let mut buffered = 0;
    for o in &history.ops {
        if o.request.path != "/api/v1/push" {
            continue;
        }
        let Ok(body) = serde_json::from_slice::<Value>(&o.request.body) else {
            continue;
        };
        let ack = match &o.answer {
            Answer::Known(a) if a.status == 201 => {
                buffered += buffered_items(a.body.as_ref());
                Ack::Acknowledged
            }
            Answer::Known(_) => continue, // refused: nothing written
            Answer::Unknown(_) => Ack::Maybe,
        };
        for item in body["items"].as_array().into_iter().flatten() {
            if let (Some(q), Some(t)) = (item["queue"].as_str(), item["transactionId"].as_str()) {
                out.entry(q.to_string())
                    .or_default()
                    .insert(t.to_string(), ack);
            }
        }
    }
    (out, buffered)
}

/// Reads every message of `queue` once, through a fresh consumer group.
async fn read_back(
    client: &reqwest::Client,
    url: &str,
    queue: &str,
) -> Result<Vec<String>, String> {
    let group = format!("audit{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let mut txns = Vec::new();
    for _ in 0..10_000 {
        let r = client
            .get(format!("{url}/api/v1/pop/queue/{queue}"))
            .query(&[
                ("consumerGroup", group.as_str()),
                ("batch", "1000"),
                ("partitions", "0"),
                ("autoAck", "true"),
            ])
            .send()
            .await
            .map_err(|e| format!("pop {queue}: {e}"))?;
        match r.status().as_u16() {
            204 => return Ok(txns),
            200 => {
                let b: Value = r.json().await.map_err(|e| format!("pop {queue}: {e}"))?;
                let msgs = b["messages"].as_array().cloned().unwrap_or_default();
                if msgs.is_empty() {
                    return Err(format!("pop {queue}: 200 without messages: {b}"));
                }
                for m in msgs {
                    txns.push(m["transactionId"].as_str().unwrap_or("?").to_string());
                }
            }
            s => return Err(format!("pop {queue}: status {s}")),
        }
    }
    Err(format!("{queue}: still delivering after 10000 pops"))
}

/// Audits the queues `history` pushed to, reading them back from the broker at `url`.
pub async fn audit(history: &History, url: &str) -> Audit {
    let (expected, buffered) = pushed(history);
    let mut a = Audit {
        buffered,
        ..Audit::default()
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client builds");
    let queues: BTreeSet<&String> = history
        .ops
        .iter()
        .map(|o| &o.key)
        .chain(expected.keys())
        .collect();
    for queue in queues {
        let items = expected.get(queue).cloned().unwrap_or_default();
        a.acknowledged += items.values().filter(|&&k| k == Ack::Acknowledged).count();
        a.maybe += items.values().filter(|&&k| k == Ack::Maybe).count();
        let stored = match read_back(&client, url, queue).await {
            Ok(s) => s,
            Err(e) => {
                a.error.get_or_insert(e);
                continue;
            }
        };
        a.stored += stored.len();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &stored {
            *seen.entry(t).or_default() += 1;
        }
        for (t, n) in &seen {
            match items.get(*t) {
                None => a.phantom.push(format!("{queue}/{t}")),
                Some(Ack::Maybe) => a.maybe_stored += 1,
                Some(Ack::Acknowledged) => {}
            }
            if *n > 1 {
                a.duplicated.push(format!("{queue}/{t} x{n}"));
            }
        }
        for (t, k) in &items {
            if *k == Ack::Acknowledged && !seen.contains_key(t.as_str()) {
                a.lost.push(format!("{queue}/{t}"));
            }
        }
    }
    a
}
