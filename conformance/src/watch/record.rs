//! One watched exchange as a line of a history file, and the files `check` reads.
//!
//! `watch --record FILE` writes one JSON object per exchange, in the order the exchanges
//! completed; `check FILE` reads those lines, or a HAR file a browser or proxy exported,
//! and replays them through the same online checker, so a history checked later gets
//! the verdict it would have got live.

use base64::Engine;
use queen_reference::time::{parse_iso, Millis};
use queen_reference::wire::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One exchange as recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Order of invocation at the watcher.
    pub id: u64,
    /// The HTTP method.
    pub method: String,
    /// The path, percent-encoded as sent.
    pub path: String,
    /// The query's pairs, percent-decoded.
    #[serde(default)]
    pub query: Vec<(String, String)>,
    /// The body as text when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64 when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// When the request reached the watcher (ms since the Unix epoch).
    pub invoke_ms: Millis,
    /// When its answer left the watcher, or the watcher gave up on it.
    pub complete_ms: Millis,
    /// The broker's status; `None` when no answer came (see `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The broker's body: JSON when it parses, else a string marked `<not JSON>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Why no answer came (the target was down, the connection was reset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// Queues first seen with this call that the broker already had (their contents are
    /// unknown to the watcher).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existed: Vec<String>,
    /// The call carried a bearer token (the token itself is not recorded).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token: bool,
}

impl Record {
    /// The request as the model reads it. The token is not recorded: the watcher checks
    /// a broker whose callers are all admitted.
    pub fn request(&self) -> HttpRequest {
        let body = match (&self.body, &self.body_base64) {
            (Some(t), _) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        HttpRequest {
            method: self.method.clone(),
            path: self.path.clone(),
            query: self.query.clone(),
            body,
            bearer: None,
        }
    }

    /// The request's body as JSON, when it is JSON.
    pub fn json_body(&self) -> Option<Value> {
        serde_json::from_slice(&self.request().body).ok()
    }

    /// The answer, or `None` when none came.
    pub fn answer(&self) -> Option<HttpResponse> {
        self.status.map(|status| HttpResponse {
            status,
            body: self.response.clone(),
        })
    }

    /// Sets the body from its bytes: text when UTF-8, else base64.
    pub fn set_body(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match std::str::from_utf8(bytes) {
            Ok(t) => self.body = Some(t.to_string()),
            Err(_) => {
                self.body_base64 = Some(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }
}

/// A response body as the checker reads it: JSON, or the text marked as not JSON.
pub fn response_body(bytes: &[u8]) -> Option<Value> {
    if bytes.is_empty() {
        return None;
    }
    Some(serde_json::from_slice(bytes).unwrap_or_else(|_| {
        Value::String(format!(
            "<not JSON> {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
        ))
    }))
}

/// The query pairs of a raw query string, percent-decoded (`+` is a space).
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.map(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    })
    .unwrap_or_default()
}

/// The exchanges of a history file: JSON lines of [`Record`]s, or a HAR document.
pub fn read_history(text: &str) -> Result<Vec<Record>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') && !trimmed.contains("\n{") {
        if let Ok(doc) = serde_json::from_str::<Value>(text) {
            if doc.get("log").is_some() {
                return from_har(&doc);
            }
        }
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record =
            serde_json::from_str(line).map_err(|e| format!("line {}: not a record: {e}", n + 1))?;
        out.push(r);
    }
    Ok(out)
}

/// The entries of a HAR 1.2 document as records, in the order they started.
fn from_har(doc: &Value) -> Result<Vec<Record>, String> {
    let entries = doc["log"]["entries"]
        .as_array()
        .ok_or("a HAR document without log.entries")?;
    let mut out = Vec::with_capacity(entries.len());
    for (n, e) in entries.iter().enumerate() {
        out.push(har_entry(n as u64, e).map_err(|why| format!("HAR entry {n}: {why}"))?);
    }
    out.sort_by_key(|r| (r.invoke_ms, r.id));
    Ok(out)
}

fn har_entry(id: u64, e: &Value) -> Result<Record, String> {
    let req = &e["request"];
    let url = req["url"].as_str().ok_or("no request.url")?;
    let url = url::Url::parse(url).map_err(|err| format!("request.url {url:?}: {err}"))?;
    let started = e["startedDateTime"]
        .as_str()
        .and_then(parse_iso)
        .ok_or("no startedDateTime in ISO-8601")?;
    let took = e["time"].as_f64().unwrap_or(0.0).max(0.0).ceil() as Millis;
    let status = e["response"]["status"].as_u64().filter(|s| *s > 0);
    let text = e["response"]["content"]["text"].as_str().unwrap_or("");
    let mut r = Record {
        id,
        method: req["method"].as_str().unwrap_or("GET").to_ascii_uppercase(),
        path: url.path().to_string(),
        query: query_pairs(url.query()),
        body: None,
        body_base64: None,
        invoke_ms: started,
        complete_ms: started + took,
        status: status.map(|s| s as u16),
        response: status.and_then(|_| response_body(text.as_bytes())),
        unknown: status
            .is_none()
            .then(|| "no answer in the HAR entry".to_string()),
        existed: vec![],
        token: has_authorization(&req["headers"]),
    };
    if let Some(t) = req["postData"]["text"].as_str() {
        r.set_body(t.as_bytes());
    }
    Ok(r)
}

/// Whether a HAR entry's headers carry an `Authorization`.
fn has_authorization(headers: &Value) -> bool {
    headers.as_array().is_some_and(|hs| {
        hs.iter().any(|h| {
            h["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("authorization"))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_keeps_a_binary_body() {
        let mut r = Record {
            id: 3,
            method: "POST".into(),
            path: "/api/v1/push".into(),
            query: vec![],
            body: None,
            body_base64: None,
            invoke_ms: 10,
            complete_ms: 12,
            status: Some(400),
            response: Some(serde_json::json!({"error": "x"})),
            unknown: None,
            existed: vec![],
            token: false,
        };
        r.set_body(&[0xff, 0x00, b'{']);
        let line = serde_json::to_string(&r).unwrap();
        let back = read_history(&line).unwrap();
        assert_eq!(back, vec![r.clone()]);
        assert_eq!(back[0].request().body, vec![0xff, 0x00, b'{']);
    }

    #[test]
    fn a_har_entry_becomes_a_record() {
        let har = serde_json::json!({"log": {"entries": [{
            "startedDateTime": "2026-01-01T00:00:00.000Z", "time": 2.5,
            "request": {"method": "post", "url": "http://b:6632/api/v1/pop/queue/q?batch=2&wait=false",
                        "postData": {"text": "{}"}},
            "response": {"status": 204, "content": {"text": ""}}}]}});
        let recs = read_history(&har.to_string()).unwrap();
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/api/v1/pop/queue/q")
        );
        assert_eq!(
            r.query,
            vec![
                ("batch".into(), "2".into()),
                ("wait".into(), "false".into())
            ]
        );
        assert_eq!(r.complete_ms - r.invoke_ms, 3);
        assert_eq!(
            r.answer(),
            Some(HttpResponse {
                status: 204,
                body: None
            })
        );
    }

    #[test]
    fn a_line_that_is_not_a_record_is_named() {
        let e = read_history("{\"id\": 1}\n").unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
    }
}
