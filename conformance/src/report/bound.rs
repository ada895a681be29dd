//! Bounds on how much of a request or an answer a report repeats. A bad-input case
//! sends a body of many megabytes, and a report quotes an exchange in several places
//! (the failure, the transcript, the finding's example, the curl repro); copied whole,
//! one case would make a report of tens of megabytes that a CI system refuses to keep
//! or a browser to open. Past [`LIMIT`] bytes a text keeps its head and says how long
//! it was, so a reader still sees what was sent and knows it was cut.

use serde_json::Value;
use std::borrow::Cow;

/// The most bytes of one body, text or script a report keeps.
pub const LIMIT: usize = 4 * 1024;

/// Whether `key`, a member of `members`, holds a quoted body or a value from one (the
/// two sides of a difference, an object with a `path` and a `kind`): such a value is cut
/// as a whole when its text is past the limit. Any other member keeps its shape.
fn quoted(key: &str, members: &serde_json::Map<String, Value>) -> bool {
    key == "body"
        || (matches!(key, "expected" | "actual")
            && members.contains_key("path")
            && members.contains_key("kind"))
}

/// `s`, or its first [`LIMIT`] bytes (at a character boundary) and a marker.
pub fn text(s: &str) -> Cow<'_, str> {
    if s.len() <= LIMIT {
        return Cow::Borrowed(s);
    }
    let mut end = LIMIT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}… [truncated: {} bytes in all]",
        &s[..end],
        s.len()
    ))
}

/// Cuts, in place, every string past the limit and every quoted body whose JSON text is
/// past it (replaced by the head of that text and a marker).
pub fn json(v: &mut Value) {
    match v {
        Value::String(s) if s.len() > LIMIT => *s = text(s).into_owned(),
        Value::Array(items) => items.iter_mut().for_each(json),
        Value::Object(members) => {
            let cut: Vec<String> = members
                .keys()
                .filter(|k| quoted(k, members))
                .cloned()
                .collect();
            for (key, member) in members.iter_mut() {
                json(member);
                if cut.contains(key) && (member.is_array() || member.is_object()) {
                    let t = member.to_string();
                    if t.len() > LIMIT {
                        *member = Value::String(text(&t).into_owned());
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_texts_are_kept_whole() {
        assert!(matches!(text("abc"), Cow::Borrowed("abc")));
        let mut v = json!({"body": {"items": [1, 2, 3]}, "curl": "curl -d '{}'"});
        let before = v.clone();
        json(&mut v);
        assert_eq!(v, before);
    }

    #[test]
    fn a_long_text_keeps_its_head_and_says_how_long_it_was() {
        let s = "é".repeat(LIMIT); // two bytes each: the cut falls inside a character
        let t = text(&s);
        assert!(
            t.ends_with(&format!("… [truncated: {} bytes in all]", 2 * LIMIT)),
            "{t}"
        );
        assert!(t.len() < LIMIT + 64);
        assert!(t.starts_with("éé"));
    }

    #[test]
    fn a_huge_body_is_cut_wherever_it_is_quoted() {
        let items: Vec<Value> = (0..20_000).map(|i| json!({"queue": "q", "n": i})).collect();
        let mut v = json!({
            "request": {"method": "POST", "path": "/api/v1/push", "body": {"items": items}},
            "diff": [{"path": "$.items", "kind": "value", "expected": items.clone(), "actual": null}],
            // An answer quoted whole keeps its shape: only its body is cut.
            "actual": {"status": 201, "body": items.clone()},
            "curl": format!("curl -d '{}'", "x".repeat(100_000)),
            "status": 413,
        });
        json(&mut v);
        let size = v.to_string().len();
        assert!(size < 6 * LIMIT, "{size} bytes");
        let body = v["request"]["body"].as_str().unwrap();
        assert!(body.starts_with("{\"items\":[{"), "{body}");
        assert!(body.contains("[truncated:"));
        assert!(v["diff"][0]["expected"]
            .as_str()
            .unwrap()
            .contains("[truncated:"));
        assert!(v["curl"]
            .as_str()
            .unwrap()
            .contains("[truncated: 100010 bytes in all]"));
        assert_eq!(v["status"], 413);
        assert_eq!(v["actual"]["status"], 201);
        assert!(v["actual"]["body"]
            .as_str()
            .unwrap()
            .contains("[truncated:"));
    }
}
