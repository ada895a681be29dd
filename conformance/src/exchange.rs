//! One request and its answer: the record every floor of the suite builds on.
//!
//! A session records exchanges as it checks them; reports, reproductions, health probes
//! and the concurrent histories print them. What they print from (the request's JSON form
//! and its curl command line) lives here, below all of them, so none of them needs
//! another's module to show a request.

use queen_reference::time::Millis;
use queen_reference::wire::{HttpRequest, HttpResponse};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write;

/// One request and its answer, as checked.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The request sent.
    pub request: HttpRequest,
    /// The broker's answer.
    pub response: HttpResponse,
    /// When the request was sent (ms since the Unix epoch).
    pub(crate) sent_ms: Millis,
    /// When the answer arrived (ms since the Unix epoch).
    pub(crate) received_ms: Millis,
    /// States of the model still possible after this exchange (0: it diverged).
    pub(crate) worlds: usize,
}

impl Exchange {
    /// The exchange as JSON for reports.
    pub fn to_json(&self) -> Value {
        json!({
            "request": request_json(&self.request),
            "response": {"status": self.response.status, "body": self.response.body},
            "sentMs": self.sent_ms,
            "tookMs": self.received_ms - self.sent_ms,
            "worlds": self.worlds,
        })
    }
}

/// A request as JSON: the body parsed when it is JSON, else as text.
pub(crate) fn request_json(r: &HttpRequest) -> Value {
    serde_json::to_value(request_doc(r)).expect("a request serializes")
}

/// A request as sent.
#[derive(Serialize, JsonSchema)]
// `description = ""`: the field docs stay out of spec/report.schema.json (see `report::document`).
pub struct RequestDoc {
    /// The HTTP method.
    #[schemars(description = "")]
    pub method: String,
    /// The path, without the query.
    #[schemars(description = "")]
    pub path: String,
    /// Query parameters as `[name, value]` pairs, in order.
    pub query: Vec<(String, String)>,
    /// The body: parsed when it is JSON, else its text; null when empty. Past 4 KiB it
    /// is cut and marked (`… [truncated: N bytes in all]`).
    pub body: Value,
}

/// A request as sent: the body parsed when it is JSON, else as text.
pub(crate) fn request_doc(r: &HttpRequest) -> RequestDoc {
    let body = if r.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&r.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.body).into_owned()))
    };
    RequestDoc {
        method: r.method.to_string(),
        path: r.path.clone(),
        query: r.query.clone(),
        body,
    }
}

/// One request as a single curl command line (for a terminal).
pub(crate) fn curl_one(base: &str, r: &HttpRequest) -> String {
    let mut url = format!("{base}{}", r.path);
    if !r.query.is_empty() {
        url = format!("{url}?{}", form_urlencoded(&r.query));
    }
    let quote = |t: &str| format!("'{}'", t.replace('\'', "'\\''"));
    let mut s = format!("curl -sS -i -X {} {}", r.method, quote(&url));
    if let Some(t) = r.bearer.as_deref().filter(|t| !t.is_empty()) {
        s.push_str(&format!(
            " -H {}",
            quote(&format!("authorization: Bearer {t}"))
        ));
    }
    if !r.body.is_empty() {
        s.push_str(" -H 'content-type: application/json'");
        match std::str::from_utf8(&r.body) {
            Ok(t) if t.len() <= 2000 => s.push_str(&format!(" --data-binary {}", quote(t))),
            Ok(t) => s.push_str(&format!(
                " --data-binary @body.json   # a {}-byte body: see the case's transcript in the JSON report",
                t.len()
            )),
            Err(_) => {
                let hex: String = r.body.iter().take(256).map(|b| format!("\\x{b:02x}")).collect();
                s = format!("printf '{hex}' | {s} --data-binary @-");
            }
        }
    }
    s
}

pub(crate) fn form_urlencoded(pairs: &[(String, String)]) -> String {
    let enc = |s: &str| {
        let mut o = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                o.push(b as char);
            } else {
                let _ = write!(o, "%{b:02X}");
            }
        }
        o
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}
