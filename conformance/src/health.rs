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

use crate::exchange::curl_one;
use queen_reference::wire::HttpRequest;
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
    /// id -> (what sent it, the request, how it failed when it did).
    open: std::collections::BTreeMap<u64, (String, HttpRequest, Option<String>)>,
}

/// Whether a transport error says the broker dropped the connection without an answer
/// (what a request that crashes it sees), rather than never answering or refusing.
pub fn dropped(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    [
        "connection reset",
        "connection closed",
        "incompletemessage",
        "broken pipe",
        "unexpected eof",
        "connection aborted",
    ]
    .iter()
    .any(|m| e.contains(m))
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
        u.open.insert(id, (label.to_string(), req.clone(), None));
        Some(id)
    }

    /// The request `id` failed with `error` (it stays unanswered).
    pub fn failed(&self, id: Option<u64>, error: &str) {
        if let Some(id) = id {
            let mut u = self.unanswered.lock().expect("health");
            if let Some(x) = u.open.get_mut(&id) {
                x.2 = Some(error.to_string());
            }
        }
    }

    /// The requests `label` sent that are still unanswered (a case that ran out of time
    /// names what it was waiting for).
    pub fn waiting(&self, label: &str) -> Vec<HttpRequest> {
        let u = self.unanswered.lock().expect("health");
        u.open
            .values()
            .filter(|(l, _, _)| l == label)
            .map(|(_, r, _)| r.clone())
            .collect()
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
    pub(crate) async fn confirm_down(
        &self,
        client: &reqwest::Client,
        urls: &[&str],
        label: &str,
        req: &HttpRequest,
        error: &str,
    ) -> Option<String> {
        if let Some(why) = self.down() {
            return Some(why);
        }
        let silent = silent_broker(client, urls).await?;
        // The requests without an answer, oldest first: the last one the broker received
        // is among them (with several cases at once, which one cannot be told).
        let mut open: Vec<(String, HttpRequest, Option<String>)> = {
            let u = self.unanswered.lock().expect("health");
            u.open.values().cloned().collect()
        };
        if open.is_empty() {
            open.push((label.to_string(), req.clone(), Some(error.to_string())));
        }
        // A request whose connection was dropped without an answer is the likely killer:
        // it comes first, and the headline names it; requests only hanging come after.
        open.sort_by_key(|(_, _, e)| !e.as_deref().is_some_and(dropped));
        let who = if urls.len() < 2 {
            String::new()
        } else {
            format!(" ({silent} does not answer)")
        };
        let (first, killer, _) = &open[0];
        let cut = open
            .iter()
            .filter(|(_, _, e)| e.as_deref().is_some_and(dropped))
            .count();
        let mut why = match &open[0].2 {
            Some(_) if cut == 1 => format!(
                "the broker stopped answering{who}; the likely killer is the request of {first} whose connection it dropped without an answer: {} {}\n",
                killer.method, killer.path
            ),
            Some(_) if cut > 1 => format!(
                "the broker stopped answering{who}; it dropped {cut} connections without an answer, the likely killer among them (listed first; with several cases at once, which one cannot be told):\n"
            ),
            _ if open.len() == 1 => format!(
                "the broker stopped answering during {first}{who}; the last request it received was:\n"
            ),
            _ => format!(
                "the broker stopped answering during {first}{who}; the last request it received is one of the {} it left unanswered:\n",
                open.len()
            ),
        };
        for (l, r, e) in open.iter().take(8) {
            let how = match e {
                Some(e) if dropped(e) => " (dropped without an answer)",
                Some(_) => " (no answer)",
                None => " (in flight)",
            };
            why.push_str(&format!("  [{l}]{how} {}\n", curl_one(urls[0], r)));
        }
        why.push_str(&format!("  (then: {error})"));
        let mut down = self.down.lock().expect("health");
        Some(down.get_or_insert(why).clone())
    }
}

/// The broker of `urls` that did not answer `GET /health` at any of three tries over a
/// second and a half; `None` when every one answered at some try. Of several brokers,
/// every one must answer: one that died ends the run.
async fn silent_broker<'u>(client: &reqwest::Client, urls: &[&'u str]) -> Option<&'u str> {
    let mut silent = "";
    for _ in 0..3 {
        silent = "";
        for url in urls {
            let ping = client
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
    Some(silent)
}
