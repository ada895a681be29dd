//! A thin HTTP client for the benchmark: JSON in, status and JSON out. It knows every
//! broker of the target; [`Client::on`] picks the one a worker talks to, so the workers
//! of a workload spread over the brokers of a cluster as a load balancer would.

use serde_json::Value;
use std::sync::Arc;

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    bases: Arc<Vec<String>>,
    /// The broker this handle sends to.
    base: String,
}

impl Client {
    pub fn new(bases: &[String], connections: usize) -> Client {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(connections.max(1))
            .tcp_nodelay(true)
            .build()
            .expect("client");
        let bases: Vec<String> = bases
            .iter()
            .map(|b| b.trim_end_matches('/').to_string())
            .collect();
        Client {
            http,
            base: bases[0].clone(),
            bases: Arc::new(bases),
        }
    }

    /// A handle on broker `i` (modulo their number), sharing the connection pool.
    pub fn on(&self, i: usize) -> Client {
        Client {
            http: self.http.clone(),
            base: self.bases[i % self.bases.len()].clone(),
            bases: self.bases.clone(),
        }
    }

    /// How many brokers the target has.
    pub fn brokers(&self) -> usize {
        self.bases.len()
    }

    pub async fn post(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<(u16, Option<Value>), reqwest::Error> {
        let body = serde_json::to_string(body).expect("JSON serializes");
        let (s, b) = self.post_raw(path, body).await?;
        Ok((s, json_of(&b)))
    }

    /// A POST of a body already serialized, answering the raw bytes: the push workloads
    /// build and check their bodies without JSON trees, so that the client spends as
    /// little of the machine's CPU as the ceiling's does and leaves it to the broker.
    pub async fn post_raw(
        &self,
        path: &str,
        body: String,
    ) -> Result<(u16, bytes::Bytes), reqwest::Error> {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?;
        let s = r.status().as_u16();
        Ok((s, r.bytes().await?))
    }

    /// A GET answering the raw bytes (see [`Client::post_raw`]).
    pub async fn get_raw(&self, path: &str) -> Result<(u16, bytes::Bytes), reqwest::Error> {
        let r = self.http.get(format!("{}{path}", self.base)).send().await?;
        let s = r.status().as_u16();
        Ok((s, r.bytes().await?))
    }

    pub async fn get(&self, path: &str) -> Result<(u16, Option<Value>), reqwest::Error> {
        let r = self.http.get(format!("{}{path}", self.base)).send().await?;
        let s = r.status().as_u16();
        Ok((s, json_of(&r.bytes().await?)))
    }

    pub async fn delete(&self, path: &str) -> Result<(u16, Option<Value>), reqwest::Error> {
        let r = self
            .http
            .delete(format!("{}{path}", self.base))
            .send()
            .await?;
        let s = r.status().as_u16();
        Ok((s, json_of(&r.bytes().await?)))
    }
}

/// An answer's body as JSON: none when empty, `null` when not JSON.
fn json_of(b: &[u8]) -> Option<Value> {
    (!b.is_empty()).then(|| serde_json::from_slice(b).unwrap_or(Value::Null))
}
