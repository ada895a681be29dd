//! A thin HTTP client for the benchmark: JSON in, status and JSON out.

use serde_json::Value;

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    pub fn new(base: &str, connections: usize) -> Client {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(connections.max(1))
            .tcp_nodelay(true)
            .build()
            .expect("client");
        Client {
            http,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    pub async fn post(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<(u16, Option<Value>), reqwest::Error> {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await?;
        let s = r.status().as_u16();
        let b = r.bytes().await?;
        Ok((
            s,
            (!b.is_empty()).then(|| serde_json::from_slice(&b).unwrap_or(Value::Null)),
        ))
    }

    pub async fn get(&self, path: &str) -> Result<(u16, Option<Value>), reqwest::Error> {
        let r = self.http.get(format!("{}{path}", self.base)).send().await?;
        let s = r.status().as_u16();
        let b = r.bytes().await?;
        Ok((
            s,
            (!b.is_empty()).then(|| serde_json::from_slice(&b).unwrap_or(Value::Null)),
        ))
    }
}
