//! A small driver for rule tests: an [`Engine`] with a hand-moved clock and helpers
//! that speak the wire protocol, so each test reads like the HTTP exchange it checks.
#![allow(dead_code)]

use queen_reference::engine::Engine;
use queen_reference::time::Millis;
use queen_reference::wire::*;
use serde_json::{json, Value};

pub struct Broker {
    pub e: Engine,
    pub now: Millis,
}

/// 2027-01-15T08:00:00Z, a round start time that makes timestamps easy to read.
pub const T0: Millis = 1_800_000_000_000;

impl Broker {
    pub fn new() -> Broker {
        Broker {
            e: Engine::default(),
            now: T0,
        }
    }

    pub fn advance(&mut self, ms: Millis) {
        self.now += ms;
    }

    pub fn send(&mut self, req: HttpRequest) -> HttpResponse {
        self.e.handle(&req, self.now)
    }

    pub fn post(&mut self, path: &str, body: Value) -> HttpResponse {
        self.send(HttpRequest::post(path, &body))
    }

    /// Pushes and returns the 201 array.
    pub fn push(&mut self, items: Value) -> Vec<PushResult> {
        let r = self.post("/api/v1/push", json!({ "items": items }));
        assert_eq!(r.status, 201, "{:?}", r.body);
        serde_json::from_value(r.body.unwrap()).unwrap()
    }

    /// Pushes one message with a transactionId to a partition.
    pub fn push1(&mut self, queue: &str, partition: &str, txn: &str) -> PushResult {
        self.push(json!([{ "queue": queue, "partition": partition, "transactionId": txn, "payload": { "txn": txn } }]))
            .remove(0)
    }

    /// Pushes `txns` in order to one partition in one call.
    pub fn push_many(&mut self, queue: &str, partition: &str, txns: &[&str]) -> Vec<PushResult> {
        let items: Vec<Value> = txns
            .iter()
            .map(|t| json!({ "queue": queue, "partition": partition, "transactionId": t, "payload": { "txn": t } }))
            .collect();
        self.push(Value::Array(items))
    }

    /// A pop on any route; `None` for a 204 (checked to have no body).
    pub fn pop_path(&mut self, path: &str, query: &[(&str, &str)]) -> Option<PopResponse> {
        let r = self.send(HttpRequest::get(path, query));
        match r.status {
            204 => {
                assert!(r.body.is_none(), "204 has no body (POP-6)");
                None
            }
            200 => Some(serde_json::from_value(r.body.unwrap()).unwrap()),
            s => panic!("pop answered {s}: {:?}", r.body),
        }
    }

    pub fn pop(&mut self, queue: &str, query: &[(&str, &str)]) -> Option<PopResponse> {
        self.pop_path(
            &format!("/api/v1/pop/queue/{}", encode_segment(queue)),
            query,
        )
    }

    pub fn pop_partition(
        &mut self,
        queue: &str,
        partition: &str,
        query: &[(&str, &str)],
    ) -> Option<PopResponse> {
        self.pop_path(
            &format!(
                "/api/v1/pop/queue/{}/partition/{}",
                encode_segment(queue),
                encode_segment(partition)
            ),
            query,
        )
    }

    /// The transactionIds of a pop, in order (empty for a 204).
    pub fn txns(p: &Option<PopResponse>) -> Vec<String> {
        PopResponse::transaction_ids(p)
    }

    pub fn ack_batch(&mut self, group: Option<&str>, items: Vec<Value>) -> Vec<AckResult> {
        let mut body = json!({ "acknowledgments": items });
        if let Some(g) = group {
            body["consumerGroup"] = json!(g);
        }
        let r = self.post("/api/v1/ack/batch", body);
        assert_eq!(r.status, 200, "{:?}", r.body);
        serde_json::from_value(r.body.unwrap()).unwrap()
    }

    pub fn ack(&mut self, body: Value) -> AckResult {
        let r = self.post("/api/v1/ack", body);
        assert_eq!(r.status, 200, "{:?}", r.body);
        let mut v: Vec<AckResult> = serde_json::from_value(r.body.unwrap()).unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0)
    }

    pub fn configure(&mut self, queue: &str, options: Value) {
        let r = self.post(
            "/api/v1/configure",
            json!({ "queue": queue, "options": options }),
        );
        assert_eq!(r.status, 200, "{:?}", r.body);
    }

    pub fn extend(&mut self, lease: &str, body: &[u8]) -> HttpResponse {
        self.send(HttpRequest::post_raw(
            format!("/api/v1/lease/{lease}/extend"),
            body.to_vec(),
        ))
    }

    pub fn dlq(&mut self, query: &[(&str, &str)]) -> DlqResponse {
        let r = self.send(HttpRequest::get("/api/v1/dlq", query));
        assert_eq!(r.status, 200, "{:?}", r.body);
        serde_json::from_value(r.body.unwrap()).unwrap()
    }
}

/// An acknowledgment of a delivered message with its lease.
pub fn ack_of(m: &PopMessage, status: &str) -> Value {
    json!({ "transactionId": m.transaction_id, "partitionId": m.partition_id, "leaseId": m.lease_id, "status": status })
}

/// The same without the lease (not lease-checked, ACK-5).
pub fn ack_nolease(m: &PopMessage, status: &str) -> Value {
    json!({ "transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status })
}

impl Broker {
    /// A management read that must answer 200, as its wire type.
    pub fn view<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        query: &[(&str, &str)],
    ) -> T {
        let r = self.send(HttpRequest::get(path, query));
        assert_eq!(r.status, 200, "{path}: {:?}", r.body);
        serde_json::from_value(r.body.unwrap()).expect("the view parses")
    }
}
