//! A structured difference between the answer the model would give and the broker's:
//! every place they differ, by JSON path, so a report shows all of them at once rather
//! than the first one a deserializer tripped over.
//!
//! The model's answer is rendered with placeholders for what only the broker knows (ids
//! it minted, `<message 3>`; times inside an interval, `<between ...>`): a placeholder
//! matches any string. Extra keys in the broker's answer are listed but allowed
//! (PROTOCOL.md preamble: clients tolerate them).

use crate::wire::HttpResponse;
use serde::Serialize;
use serde_json::Value;

/// How one place differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffKind {
    /// The HTTP status differs.
    Status,
    /// Expected in the model's answer, absent from the broker's.
    Missing,
    /// Present in the broker's answer only (allowed).
    Extra,
    /// The JSON type differs.
    Type,
    /// Same type, another value.
    Value,
}

/// One place where the answers differ.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// `status`, `$` for the whole body, `$.messages[0].noop`, ...
    pub path: String,
    /// How the place differs.
    pub kind: DiffKind,
    /// The model's value there, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
    /// The broker's value there, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("-".to_string(), clip);
        match self.kind {
            DiffKind::Missing => write!(
                f,
                "{}: missing (expected {})",
                self.path,
                show(&self.expected)
            ),
            DiffKind::Extra => write!(f, "{}: extra {} (allowed)", self.path, show(&self.actual)),
            DiffKind::Type => write!(
                f,
                "{}: {} where {} is expected",
                self.path,
                type_name(self.actual.as_ref()),
                type_name(self.expected.as_ref())
            ),
            DiffKind::Status | DiffKind::Value => write!(
                f,
                "{}: {} where {} is expected",
                self.path,
                show(&self.actual),
                show(&self.expected)
            ),
        }
    }
}

fn clip(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "nothing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

fn placeholder(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.starts_with('<') && s.ends_with('>'))
}

/// Every difference between `expected` (the model's rendering) and `actual`.
pub fn diff(expected: &HttpResponse, actual: &HttpResponse) -> Vec<Difference> {
    let mut out = Vec::new();
    if expected.status != actual.status {
        out.push(Difference {
            path: "status".into(),
            kind: DiffKind::Status,
            expected: Some(expected.status.into()),
            actual: Some(actual.status.into()),
        });
    }
    match (&expected.body, &actual.body) {
        (None, None) => {}
        (Some(e), Some(a)) => values(e, a, "$", &mut out),
        (e, a) => out.push(Difference {
            path: "$".into(),
            kind: if e.is_none() {
                DiffKind::Extra
            } else {
                DiffKind::Missing
            },
            expected: e.clone(),
            actual: a.clone(),
        }),
    }
    out
}

fn values(e: &Value, a: &Value, path: &str, out: &mut Vec<Difference>) {
    let differ = |kind| Difference {
        path: path.to_string(),
        kind,
        expected: Some(e.clone()),
        actual: Some(a.clone()),
    };
    match (e, a) {
        (Value::Object(eo), Value::Object(ao)) => {
            for (k, ev) in eo {
                let p = format!("{path}.{k}");
                match ao.get(k) {
                    Some(av) => values(ev, av, &p, out),
                    None => out.push(Difference {
                        path: p,
                        kind: DiffKind::Missing,
                        expected: Some(ev.clone()),
                        actual: None,
                    }),
                }
            }
            for (k, av) in ao.iter().filter(|(k, _)| !eo.contains_key(*k)) {
                out.push(Difference {
                    path: format!("{path}.{k}"),
                    kind: DiffKind::Extra,
                    expected: None,
                    actual: Some(av.clone()),
                });
            }
        }
        (Value::Array(ea), Value::Array(aa)) => {
            for (i, (ev, av)) in ea.iter().zip(aa).enumerate() {
                values(ev, av, &format!("{path}[{i}]"), out);
            }
            if ea.len() != aa.len() {
                out.push(Difference {
                    path: format!("{path}.length"),
                    kind: DiffKind::Value,
                    expected: Some(ea.len().into()),
                    actual: Some(aa.len().into()),
                });
            }
        }
        (e, Value::String(_)) if placeholder(e) => {}
        (e, a) if std::mem::discriminant(e) != std::mem::discriminant(a) => {
            out.push(differ(DiffKind::Type))
        }
        (e, a) if e != a => out.push(differ(DiffKind::Value)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(status: u16, body: Option<Value>) -> HttpResponse {
        HttpResponse { status, body }
    }

    #[test]
    fn lists_every_difference_by_path() {
        let e = r(
            201,
            Some(
                json!([{"index": 0, "message_id": "<message 1>", "status": "queued", "noop": false}]),
            ),
        );
        let a = r(
            200,
            Some(json!([{"index": "0", "message_id": "0198-x", "status": "queued", "extra": 1}])),
        );
        let d: Vec<String> = diff(&e, &a).iter().map(|d| d.to_string()).collect();
        assert_eq!(
            d,
            vec![
                "status: 200 where 201 is expected",
                "$[0].index: a string where a number is expected",
                "$[0].noop: missing (expected false)",
                "$[0].extra: extra 1 (allowed)",
            ]
        );
        assert!(diff(&e, &e).is_empty());
        assert_eq!(
            diff(&r(204, None), &r(200, Some(json!({"messages": []}))))[1].kind,
            DiffKind::Extra
        );
    }

    #[test]
    fn a_value_of_the_same_type_that_differs_is_listed() {
        let d = diff(
            &r(200, Some(json!({"a": 1}))),
            &r(200, Some(json!({"a": 2}))),
        );
        let d: Vec<String> = d.iter().map(|d| d.to_string()).collect();
        assert_eq!(d, vec!["$.a: 2 where 1 is expected"]);
    }

    #[test]
    fn long_values_are_clipped_at_120_characters() {
        let exactly = json!("x".repeat(118)); // 120 with its quotes
        assert_eq!(clip(&exactly), exactly.to_string());
        let longer = json!("x".repeat(119));
        assert_eq!(clip(&longer).chars().count(), 121);
        assert!(clip(&longer).ends_with('…'));
    }

    #[test]
    fn only_a_whole_angle_bracketed_string_is_a_placeholder() {
        assert!(placeholder(&json!("<message 1>")));
        assert!(!placeholder(&json!("<message 1")));
        assert!(!placeholder(&json!("message 1>")));
        assert!(!placeholder(&json!(1)));
    }
}
