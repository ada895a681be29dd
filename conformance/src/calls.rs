//! The protocol's calls as a case makes them: typed requests on a [`Session`] whose
//! answers the model has already checked, a pop asked again as a client would when the
//! spec does not time an effect, and readers of the answers.

use crate::failure::{fail, Failure};
use crate::session::Session;
use queen_reference::finding::Kind;
use queen_reference::rules::{ACK_0, POP_2};
use queen_reference::wire::*;
use serde_json::{json, Value};
use std::time::Duration;

/// The waits between pops asked again (see [`Session::pop`]): 3.1 s in all, the bound
/// section 13 gives an effect the spec does not time.
pub(crate) const POLL_STEPS_MS: [u64; 5] = [100, 200, 400, 800, 1600];

impl Session {
    /// Sends a `GET` of `path` with the query pairs, checked against the model.
    pub async fn get(
        &mut self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::get(path, query)).await
    }

    /// Sends a `POST` of `path` with a JSON body, checked against the model.
    pub async fn post(&mut self, path: &str, body: Value) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::post(path, &body)).await
    }

    /// Sends a `POST` of `path` with a raw body as given (malformed JSON included), checked against the model.
    pub async fn post_raw(
        &mut self,
        path: &str,
        body: impl Into<Vec<u8>>,
    ) -> Result<HttpResponse, Failure> {
        self.send(HttpRequest::post_raw(path, body)).await
    }

    /// Pushes `items` (a JSON array) and returns the 201 results.
    pub async fn push(&mut self, items: Value) -> Result<Vec<PushResult>, Failure> {
        let r = self.post("/api/v1/push", json!({ "items": items })).await?;
        decode(&r, 201, "push")
    }

    /// Pushes one message with a transactionId and payload `{"txn": txn}`.
    pub async fn push1(
        &mut self,
        queue: &str,
        partition: &str,
        txn: &str,
    ) -> Result<PushResult, Failure> {
        let mut r = self
            .push(json!([{"queue": queue, "partition": partition, "transactionId": txn, "payload": {"txn": txn}}]))
            .await?;
        Ok(r.remove(0))
    }

    /// Pushes `txns` to one partition in one call.
    pub(crate) async fn push_many(
        &mut self,
        queue: &str,
        partition: &str,
        txns: &[&str],
    ) -> Result<Vec<PushResult>, Failure> {
        let items: Vec<Value> = txns
            .iter()
            .map(|t| json!({"queue": queue, "partition": partition, "transactionId": t, "payload": {"txn": t}}))
            .collect();
        self.push(Value::Array(items)).await
    }

    /// A pop on any route: `None` for the 204. A pop without `batch` asks for the
    /// protocol's default (200) by name: a case relies on a default only where it is
    /// about it (`pop-3/defaults-...`, which sends its pops raw).
    pub async fn pop(
        &mut self,
        route: PopRoute,
        query: &[(&str, &str)],
    ) -> Result<Option<PopResponse>, Failure> {
        let mut q: Vec<(&str, &str)> = query.to_vec();
        if !q.iter().any(|(k, _)| *k == "batch") {
            q.push(("batch", "200"));
        }
        let (ns, task);
        if let PopRoute::Discovery { namespace, task: t } = &route {
            if let Some(n) = namespace {
                ns = n.clone();
                q.push(("namespace", &ns));
            }
            if let Some(t) = t {
                task = t.clone();
                q.push(("task", &task));
            }
        }
        // A broker that claimed nothing although messages were claimable (a finding,
        // POP-2), one with a diagnosed cause (a lease kept too long), or one that may not
        // yet deliver what the spec does not time (a retry delay ending inside the
        // request's interval) is asked again for up to `POLL_MS`, as a client would, so
        // that the case goes on to check its own rules.
        let mut r = self.get(&route.path(), &q).await?;
        for wait_ms in POLL_STEPS_MS {
            let kept = self
                .findings()
                .iter()
                .any(|s| s.finding.kind == Kind::Cause);
            let undecided = self.checker().last_empty_undecided();
            if r.status != 204 || !(self.checker().last_claim_short() || kept || undecided) {
                break;
            }
            sleep_ms(wait_ms).await;
            r = self.get(&route.path(), &q).await?;
        }
        if r.status == 204 {
            return Ok(None);
        }
        decode(&r, 200, "pop").map(Some)
    }

    /// A queue-route pop.
    pub(crate) async fn pop_q(
        &mut self,
        queue: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<PopResponse>, Failure> {
        self.pop(PopRoute::Queue(queue.into()), query).await
    }

    /// A queue-route pop that must deliver.
    pub(crate) async fn pop_some(
        &mut self,
        queue: &str,
        query: &[(&str, &str)],
    ) -> Result<PopResponse, Failure> {
        self.pop_q(queue, query).await?.ok_or_else(|| {
            fail(
                "the pop answered 204 where messages were expected",
                &[POP_2],
            )
        })
    }

    /// `POST /api/v1/ack/batch`.
    pub(crate) async fn ack_batch(
        &mut self,
        group: Option<&str>,
        acks: Vec<Value>,
    ) -> Result<Vec<AckResult>, Failure> {
        let mut body = json!({ "acknowledgments": acks });
        if let Some(g) = group {
            body["consumerGroup"] = json!(g);
        }
        let r = self.post("/api/v1/ack/batch", body).await?;
        decode(&r, 200, "ack")
    }

    /// `POST /api/v1/ack` with one acknowledgment.
    pub async fn ack(&mut self, body: Value) -> Result<AckResult, Failure> {
        let r = self.post("/api/v1/ack", body).await?;
        let mut v: Vec<AckResult> = decode(&r, 200, "ack")?;
        if v.len() != 1 {
            return Err(fail("a single ack must answer one result", &[ACK_0]));
        }
        Ok(v.remove(0))
    }

    /// `POST /api/v1/configure`.
    pub async fn configure(
        &mut self,
        queue: &str,
        options: Value,
    ) -> Result<ConfigureResponse, Failure> {
        let r = self
            .post(
                "/api/v1/configure",
                json!({"queue": queue, "options": options}),
            )
            .await?;
        decode(&r, 200, "configure")
    }

    /// `POST /api/v1/lease/{id}/extend` with an optional `seconds`.
    pub async fn extend(
        &mut self,
        lease: &str,
        seconds: Option<u32>,
    ) -> Result<ExtendResponse, Failure> {
        let body = seconds.map_or(vec![], |s| format!("{{\"seconds\":{s}}}").into_bytes());
        let r = self
            .post_raw(
                &format!("/api/v1/lease/{}/extend", encode_segment(lease)),
                body,
            )
            .await?;
        decode(&r, 200, "extend")
    }

    /// `GET /api/v1/dlq` with filters.
    pub async fn dlq(&mut self, query: &[(&str, &str)]) -> Result<DlqResponse, Failure> {
        let r = self.get("/api/v1/dlq", query).await?;
        decode(&r, 200, "dlq")
    }

    /// `DELETE /api/v1/resources/queues/{queue}`.
    pub async fn delete(&mut self, queue: &str) -> Result<DeleteResponse, Failure> {
        let r = self
            .send(HttpRequest::delete(format!(
                "/api/v1/resources/queues/{}",
                encode_segment(queue)
            )))
            .await?;
        decode(&r, 200, "delete")
    }

    /// `POST /api/v1/transaction`.
    pub async fn transaction(&mut self, body: Value) -> Result<TxnResponse, Failure> {
        let r = self.post("/api/v1/transaction", body).await?;
        decode(&r, 200, "transaction")
    }

    /// Sends a request that must be rejected with `status` (400 or 413), checked by the
    /// model (which also proves nothing changed: later answers are judged on the
    /// unchanged state).
    pub(crate) async fn rejected(
        &mut self,
        req: HttpRequest,
        status: u16,
    ) -> Result<HttpResponse, Failure> {
        let what = format!("{} {}", req.method, req.path);
        let r = self.send(req).await?;
        if r.status != status {
            // The case that sends it names the rules; the model has judged the answer.
            return Err(fail(
                format!("{what} answered {} where {status} is expected", r.status),
                &[],
            ));
        }
        Ok(r)
    }
}

/// The answer's body as `T`, after checking its status (the model has already
/// accepted the answer, so this fails only when the case's scenario went elsewhere).
pub fn decode<T: serde::de::DeserializeOwned>(
    r: &HttpResponse,
    status: u16,
    what: &str,
) -> Result<T, Failure> {
    // The model has judged the exact status already; a case reads any answer of the class.
    if r.status / 100 != status / 100 {
        return Err(fail(
            format!(
                "{what} answered {} where {status} is expected: {}",
                r.status,
                r.body
                    .as_ref()
                    .map_or("(no body)".into(), |b| b.to_string())
            ),
            &[],
        ));
    }
    serde_json::from_value(r.body.clone().unwrap_or(Value::Null))
        .map_err(|e| fail(format!("{what} answer does not parse: {e}"), &[]))
}

/// Acknowledgments for every message of a pop, with its lease, all with `status`.
pub(crate) fn acks_for(p: &PopResponse, status: &str) -> Vec<Value> {
    p.messages
        .iter()
        .map(|m| {
            json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": status})
        })
        .collect()
}

/// The transactionIds of a pop's messages, in order.
pub fn txns(p: &Option<PopResponse>) -> Vec<String> {
    PopResponse::transaction_ids(p)
}

/// Sleeps `ms` milliseconds.
pub(crate) async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
