//! Counterexamples anyone can run: a transcript turned into a bash + curl script (ids the
//! broker minted are read back with jq from the answers that introduced them, queue names
//! get a fresh prefix per run), and a step list turned into a Rust test.

use crate::case::{join, Failure};
use crate::exchange::{form_urlencoded, Exchange};
use queen_reference::sequence::Step;
use queen_reference::wire::is_uuid;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Where an id was first seen: the exchange and a jq path into its answer.
struct Origin {
    step: usize,
    path: String,
    var: Option<String>,
}

fn jq_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
    {
        format!(".{k}")
    } else {
        format!(
            ".[{}]",
            serde_json::to_string(k).expect("a string serializes")
        )
    }
}

fn collect_ids(v: &Value, path: String, step: usize, out: &mut BTreeMap<String, Origin>) {
    match v {
        Value::String(s) if is_uuid(s) => {
            out.entry(s.clone()).or_insert(Origin {
                step,
                path: if path.is_empty() { ".".into() } else { path },
                var: None,
            });
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let base = if path.is_empty() { "." } else { path.as_str() };
                collect_ids(x, format!("{base}[{i}]"), step, out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                let p = if path.is_empty() {
                    jq_key(k)
                } else {
                    format!("{path}{}", jq_key(k))
                };
                collect_ids(x, p, step, out);
            }
        }
        _ => {}
    }
}

/// Escapes text for an unquoted heredoc, then puts the variables back in.
fn heredoc_text(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('$', "\\$")
        .replace('`', "\\`")
}

fn body_text(v: &Option<Value>) -> String {
    v.as_ref()
        .map_or_else(|| "(no body)".to_string(), |b| b.to_string())
}

/// Replaces learnt ids and the run prefix in `s` by shell variables.
fn substitute(
    s: &str,
    ids: &mut BTreeMap<String, Origin>,
    step: usize,
    prefix: &str,
    next_var: &mut usize,
) -> String {
    let mut out = if prefix.is_empty() {
        s.to_string()
    } else {
        s.replace(prefix, "${RUN}")
    };
    for (id, origin) in ids.iter_mut() {
        if origin.step < step && out.contains(id.as_str()) {
            let var = origin.var.get_or_insert_with(|| {
                *next_var += 1;
                format!("ID{}", *next_var)
            });
            out = out.replace(id.as_str(), &format!("${{{var}}}"));
        }
    }
    out
}

/// A bash script replaying `transcript` with curl, with the model's allowed answers
/// and the rules beside the diverging exchange.
pub(crate) fn curl_script(
    transcript: &[Exchange],
    prefix: &str,
    failure: Option<&Failure>,
) -> String {
    curl_marked(transcript, prefix, failure.and_then(failure_mark))
}

/// The comment lines a failure puts beside the exchange it happened at.
fn failure_mark(failure: &Failure) -> Option<(usize, Vec<String>)> {
    match failure {
        Failure::Diverged { step, divergence } => {
            let mut lines = vec![
                format!(">>> DIVERGES HERE ({})", join(&divergence.rules)),
                format!(
                    ">>> actual:  {} {}",
                    divergence.actual.status,
                    body_text(&divergence.actual.body)
                ),
            ];
            for (e, why) in divergence.expected.iter().zip(&divergence.reasons) {
                lines.push(format!(">>> allowed: {} {}", e.status, body_text(&e.body)));
                lines.push(format!(">>>   differs: {why}"));
            }
            Some((*step, lines))
        }
        Failure::Inconclusive { step, why } => {
            Some((*step, vec![format!(">>> the model cannot decide: {why}")]))
        }
        _ => None,
    }
}

/// [`curl_script`] with `mark`'s comment lines beside the exchange it names.
pub(crate) fn curl_marked(
    transcript: &[Exchange],
    prefix: &str,
    mark: Option<(usize, Vec<String>)>,
) -> String {
    let (rendered, ids) = rendered_requests(transcript, prefix);
    let mut s = String::new();
    script_header(&mut s);
    for (i, (request, x)) in rendered.iter().zip(transcript).enumerate() {
        let _ = writeln!(s, "# #{} {} {}", i + 1, request.0, x.request.path);
        match &mark {
            Some((at, lines)) if *at == i => {
                for l in lines {
                    let _ = writeln!(s, "# {l}");
                }
            }
            _ => {
                let _ = writeln!(
                    s,
                    "#     answered {} {}",
                    x.response.status,
                    body_text(&x.response.body)
                );
            }
        }
        curl_line(&mut s, i, request, x);
        let _ = writeln!(s, "echo \"#{} $S{i} $(cat \"$OUT/{i}.json\")\"", i + 1);
        for origin in ids.values() {
            if origin.step == i {
                if let Some(var) = &origin.var {
                    let _ = writeln!(
                        s,
                        "{var}=$(jq -r '{}' \"$OUT/{i}.json\")",
                        origin.path.replace('\'', "'\\''")
                    );
                }
            }
        }
        let _ = writeln!(s);
    }
    s
}

/// One request as the script sends it: method, URL and body.
type Rendered = (String, String, Option<String>);

/// Every request as the script sends it, with the ids earlier answers minted replaced
/// by shell variables, and where each such id comes from.
fn rendered_requests(
    transcript: &[Exchange],
    prefix: &str,
) -> (Vec<Rendered>, BTreeMap<String, Origin>) {
    // First pass: where each id comes from; second pass: which ones are used later.
    let mut ids: BTreeMap<String, Origin> = BTreeMap::new();
    let mut rendered: Vec<Rendered> = Vec::new();
    let mut next_var = 0;
    for (i, x) in transcript.iter().enumerate() {
        let r = &x.request;
        let mut url = r.path.clone();
        if !r.query.is_empty() {
            let q: String = form_urlencoded(&r.query);
            url = format!("{url}?{q}");
        }
        let url = substitute(&url, &mut ids, i, prefix, &mut next_var);
        let body = if r.body.is_empty() {
            None
        } else {
            match std::str::from_utf8(&r.body) {
                Ok(t) if !t.lines().any(|l| l == "EOF") => Some(substitute(
                    &heredoc_text(t),
                    &mut ids,
                    i,
                    prefix,
                    &mut next_var,
                )),
                _ => Some(format!(
                    "<<binary>>{}",
                    r.body
                        .iter()
                        .map(|b| format!("\\x{b:02x}"))
                        .collect::<String>()
                )),
            }
        };
        rendered.push((r.method.clone(), url, body));
        if let Some(b) = &x.response.body {
            collect_ids(b, String::new(), i, &mut ids);
        }
    }
    (rendered, ids)
}

/// The script's opening lines: what it is, what it needs, and its settings.
fn script_header(s: &mut String) {
    let _ = writeln!(s, "#!/usr/bin/env bash");
    let _ = writeln!(
        s,
        "# Counterexample found by queen-conformance: replays each request against a broker."
    );
    let _ = writeln!(
        s,
        "# Needs curl and jq. QUEEN_URL picks the broker; RUN makes the queue names fresh."
    );
    let _ = writeln!(s, "set -euo pipefail");
    let _ = writeln!(s, "BASE=\"${{QUEEN_URL:-http://127.0.0.1:6632}}\"");
    let _ = writeln!(s, "RUN=\"${{RUN:-r$(date +%s%N | cut -c1-13)}}\"");
    let _ = writeln!(s, "OUT=\"$(mktemp -d)\"");
    let _ = writeln!(s);
}

/// The curl command of exchange `i`, its status kept in `S<i>` and its body in a file.
fn curl_line(s: &mut String, i: usize, (method, url, body): &Rendered, x: &Exchange) {
    let auth = match x.request.bearer.as_deref() {
        Some(t) if !t.is_empty() => format!(" -H 'authorization: Bearer {t}'"),
        _ => String::new(),
    };
    let head = format!(
        "S{i}=$(curl -sS -o \"$OUT/{i}.json\" -w '%{{http_code}}' -X {method} \"$BASE{url}\"{auth}"
    );
    match body {
        None => {
            let _ = writeln!(s, "{head})");
        }
        Some(b) if b.starts_with("<<binary>>") => {
            let _ = writeln!(
                s,
                "S{i}=$(printf '{}' | curl -sS -o \"$OUT/{i}.json\" -w '%{{http_code}}' -X {method} \"$BASE{url}\" -H 'content-type: application/json' --data-binary @-)",
                &b["<<binary>>".len()..]
            );
        }
        Some(b) => {
            let _ = writeln!(
                s,
                "{head} -H 'content-type: application/json' --data-binary @- <<EOF\n{b}\nEOF\n)"
            );
        }
    }
}

/// A Rust test replaying the steps against `QUEEN_URL` (or 127.0.0.1:6632).
pub(crate) fn rust_test(steps: &[Step], name: &str, about: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "//! {about}");
    let _ = writeln!(s, "//! Run against a broker: QUEEN_URL=http://127.0.0.1:6632 cargo test -p queen-conformance --test <this file>");
    let _ = writeln!(
        s,
        "#[allow(unused_imports)]\nuse queen_conformance::lockstep::{{replay, Pop, Route, RouteId, Step}};"
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "#[tokio::test]");
    let _ = writeln!(s, "async fn {name}() {{");
    let _ = writeln!(s, "    let url = std::env::var(\"QUEEN_URL\").unwrap_or_else(|_| \"http://127.0.0.1:6632\".into());");
    let _ = writeln!(s, "    let steps = vec![");
    for st in steps {
        let _ = writeln!(s, "        {},", st.to_rust());
    }
    let _ = writeln!(s, "    ];");
    let _ = writeln!(s, "    if let Err(e) = replay(&url, &steps).await {{");
    let _ = writeln!(s, "        panic!(\"{{e}}\");");
    let _ = writeln!(s, "    }}");
    let _ = writeln!(s, "}}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_reference::wire::{HttpRequest, HttpResponse};
    use serde_json::json;

    fn x(req: HttpRequest, status: u16, body: Option<Value>) -> Exchange {
        Exchange {
            request: req,
            response: HttpResponse { status, body },
            sent_ms: 0,
            received_ms: 1,
            worlds: 1,
        }
    }

    #[test]
    fn ids_are_read_back_with_jq_and_names_get_the_run_prefix() {
        let lease = "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90";
        let t = vec![
            x(
                HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": "lsABCs1.qa"}]})),
                201,
                Some(
                    json!([{"message_id": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91", "transaction_id": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92"}]),
                ),
            ),
            x(
                HttpRequest::get("/api/v1/pop/queue/lsABCs1.qa", &[("batch", "2")]),
                200,
                Some(json!({"leaseId": lease})),
            ),
            x(
                HttpRequest::post_raw(format!("/api/v1/lease/{lease}/extend"), "{\"seconds\":$5}"),
                200,
                None,
            ),
        ];
        let s = curl_script(&t, "lsABCs1", None);
        assert!(s.contains("\"queue\":\"${RUN}.qa\""), "{s}");
        assert!(s.contains("/api/v1/pop/queue/${RUN}.qa?batch=2"), "{s}");
        assert!(s.contains("ID1=$(jq -r '.leaseId' \"$OUT/1.json\")"), "{s}");
        assert!(s.contains("/api/v1/lease/${ID1}/extend"), "{s}");
        assert!(
            s.contains("{\"seconds\":\\$5}"),
            "a literal $ is escaped in the heredoc: {s}"
        );
        assert!(!s.contains("jq -r '[0]"), "{s}");
    }

    #[test]
    fn rust_test_lists_the_steps() {
        let r = rust_test(&[Step::Sleep(5)], "case_1", "about");
        assert!(
            r.contains("Step::Sleep(5),") && r.contains("async fn case_1()"),
            "{r}"
        );
    }
}
