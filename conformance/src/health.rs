//! Is the target a Queen broker at all, and does it still answer?
//!
//! A suite that runs ninety cases against a static file server and calls it
//! "non-conformant" has said nothing useful, and one that lets a crashed broker fail a
//! dozen cases with "connection refused", shrink that into a counterexample and call the
//! unanswered calls linearizable has said something wrong. So before the run a probe
//! checks that the target answers a push and a pop with Queen-shaped answers (exit 2
//! otherwise), and during the run the first request that gets no answer asks [`Health`]
//! whether the broker is gone; if it is, the run ends at once (exit 3) naming the
//! request the broker received last (or, with several cases at once, the requests it
//! left unanswered, among which that one is).

use crate::lockstep::repro::curl_one;
use crate::session::{transmit, Target};
use queen_reference::wire::HttpRequest;
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::Duration;

/// The broker's state as the run knows it: alive until a request goes unanswered and
/// the broker then fails to answer a health check too.
#[derive(Debug, Default)]
pub struct Health {
    down: Mutex<Option<String>>,
    /// Requests sent and not answered (in flight, or failed): the oldest is the one the
    /// broker received last before it died, whichever session noticed first.
    unanswered: Mutex<Unanswered>,
}

#[derive(Debug, Default)]
struct Unanswered {
    next: u64,
    /// id -> (what sent it, the request).
    open: std::collections::BTreeMap<u64, (String, HttpRequest)>,
}

impl Health {
    /// Notes `req`, sent by `label`, until [`Health::answered`]. Long polls are not noted:
    /// they are meant to wait.
    pub fn sent(&self, label: &str, req: &HttpRequest) -> Option<u64> {
        let parked = req.query.iter().any(|(k, v)| k == "wait" && v == "true");
        if parked {
            return None;
        }
        let mut u = self.unanswered.lock().expect("health");
        u.next += 1;
        let id = u.next;
        u.open.insert(id, (label.to_string(), req.clone()));
        Some(id)
    }

    /// The request `id` got an answer.
    pub fn answered(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.unanswered.lock().expect("health").open.remove(&id);
        }
    }

    /// Why the run must stop, once the broker stopped answering.
    pub fn down(&self) -> Option<String> {
        self.down.lock().expect("health").clone()
    }

    /// After `req` (sent by `label`) got no answer (`error`): the broker is gone when it
    /// does not answer `GET /health` either, three times over a second and a half (any
    /// HTTP answer counts as alive). Returns the message that ends the run, then.
    pub async fn confirm_down(
        &self,
        target: &Target,
        label: &str,
        req: &HttpRequest,
        error: &str,
    ) -> Option<String> {
        if let Some(why) = self.down() {
            return Some(why);
        }
        // Of several brokers, every one must answer: one that died ends the run.
        let mut silent = "";
        for _ in 0..3 {
            silent = "";
            for url in target.urls() {
                let ping = target
                    .client
                    .get(format!("{url}/health"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await;
                if ping.is_err() {
                    silent = url;
                    break;
                }
            }
            if silent.is_empty() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // The requests without an answer, oldest first: the last one the broker received
        // is among them (with several cases at once, which one cannot be told).
        let open: Vec<(String, HttpRequest)> = {
            let u = self.unanswered.lock().expect("health");
            u.open.values().cloned().collect()
        };
        let open = if open.is_empty() {
            vec![(label.to_string(), req.clone())]
        } else {
            open
        };
        let (first, _) = &open[0];
        let who = if target.more.is_empty() {
            String::new()
        } else {
            format!(" ({silent} does not answer)")
        };
        let mut why = if open.len() == 1 {
            format!(
                "the broker stopped answering during {first}{who}; the last request it received was:\n"
            )
        } else {
            format!(
                "the broker stopped answering during {first}{who}; the last request it received is one of the {} it left unanswered:\n",
                open.len()
            )
        };
        for (l, r) in open.iter().take(8) {
            why.push_str(&format!("  [{l}] {}\n", curl_one(&target.url, r)));
        }
        why.push_str(&format!("  (then: {error})"));
        let mut down = self.down.lock().expect("health");
        Some(down.get_or_insert(why).clone())
    }
}

/// Whether the broker serves the management routes (section 17): a broker that answers
/// 404 to the overview has none, and its management cases are skipped rather than
/// failed one by one; any other answer leaves the judging to the cases.
pub async fn serves_management(target: &Target) -> bool {
    let req = target.authorized(HttpRequest::get("/api/v1/resources/overview", &[]));
    !matches!(transmit(target, &req).await, Ok(r) if r.status == 404)
}

/// Whether the target looks like a Queen broker: a push to a probe queue answers a 2xx
/// JSON array with one result carrying a `status`, and a pop of it answers 204 or a 2xx
/// JSON object with a `messages` array. Deviations the suite reports later (another 2xx
/// status, missing fields) pass; a 404, an HTML page or no answer does not.
pub async fn probe(target: &Target, queue: &str) -> Result<(), String> {
    for one in target.each() {
        probe_one(&one, queue).await?;
    }
    Ok(())
}

async fn probe_one(target: &Target, queue: &str) -> Result<(), String> {
    let not_queen = |what: String| format!("this does not look like a Queen broker: {what}");
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": queue, "payload": {"probe": true}}]}),
    );
    let r = transmit(target, &push)
        .await
        .map_err(|e| format!("cannot reach {}: {e}", target.url))?;
    let item = r
        .body
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|a| a.first());
    let shaped = (200..300).contains(&r.status) && item.is_some_and(|i| i.get("status").is_some());
    if !shaped {
        return Err(not_queen(format!(
            "POST /api/v1/push answered {} {} (a 201 JSON array of per-item results is due)",
            r.status,
            shown(&r.body)
        )));
    }
    let pop = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &[("autoAck", "true")]);
    let r = transmit(target, &pop)
        .await
        .map_err(|e| not_queen(format!("GET {} got no answer: {e}", pop.path)))?;
    let delivery = r
        .body
        .as_ref()
        .and_then(|b| b.get("messages"))
        .is_some_and(Value::is_array);
    if r.status != 204 && !((200..300).contains(&r.status) && delivery) {
        return Err(not_queen(format!(
            "GET {} answered {} {} (200 with `messages`, or a bare 204, is due)",
            pop.path,
            r.status,
            shown(&r.body)
        )));
    }
    // The probe queue is not left behind where the broker can delete it; an error here
    // is the delete cases' business, not the probe's.
    let _ = transmit(
        target,
        &HttpRequest::delete(format!("/api/v1/resources/queues/{queue}")),
    )
    .await;
    Ok(())
}

fn shown(body: &Option<Value>) -> String {
    let s = body
        .as_ref()
        .map_or("(no body)".to_string(), |b| b.to_string());
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}
