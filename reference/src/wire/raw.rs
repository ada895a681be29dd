//! A payload as JSON text: what a broker stores and hands back, carried without being
//! taken apart.
//!
//! A message's `data` goes into the database as text and comes back out as text (the
//! column is `json`, which keeps it verbatim, POP-5). Building a `serde_json::Value` tree
//! on the way in and on the way out only to print it again costs an allocation per key
//! and per number, on the hottest paths a broker has. [`RawJson`] keeps the text (checked
//! once to be one JSON value), prints it as it is, and builds a tree only for whoever
//! asks for one ([`RawJson::value`]): the model and the checker, never the pop path.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;

/// One JSON value, as text. Cloning shares the text; equality compares the values (the
/// same document with other whitespace is equal).
#[derive(Clone, Debug)]
pub struct RawJson(Arc<RawValue>);

impl RawJson {
    /// The text of `v`.
    pub fn from_value(v: &Value) -> RawJson {
        RawJson(Arc::from(
            serde_json::value::to_raw_value(v).expect("a Value always prints"),
        ))
    }

    /// `text`, once it is checked to be exactly one JSON value.
    pub fn parse(text: String) -> Result<RawJson, serde_json::Error> {
        RawValue::from_string(text).map(|r| RawJson(Arc::from(r)))
    }

    /// The text, as it will be written.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The value as a tree (numbers keep their digits, objects their key order).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.get()).expect("checked to be JSON when made")
    }

    /// The same value printed compactly, as [`RawJson::from_value`] prints a tree: what a
    /// model keeps of a payload, so that [`RawJson::is`] mostly compares text.
    pub fn compact(&self) -> RawJson {
        RawJson::from_value(&self.value())
    }

    /// Whether `v` is this value (objects equal whatever their key order). The text is
    /// compared first, which settles it without building a tree whenever `v` prints as
    /// this text does.
    pub fn is(&self, v: &Value) -> bool {
        let mut rest = Matching(self.get().as_bytes());
        (serde_json::to_writer(&mut rest, v).is_ok() && rest.0.is_empty()) || self.value() == *v
    }
}

/// A writer that accepts only the bytes it still expects: printing a value into it tells
/// whether the value prints as that text, without building the text.
struct Matching<'a>(&'a [u8]);

impl std::io::Write for Matching<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.strip_prefix(buf) {
            Some(rest) => {
                self.0 = rest;
                Ok(buf.len())
            }
            None => Err(std::io::ErrorKind::InvalidData.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// \[PROJECT\] PUSH-11: the deepest nesting of arrays and objects a payload may have. Every
/// answer that carries a payload wraps it in a few levels of its own, and common JSON
/// parsers (serde_json among them) stop at 128 levels, so a payload deeper than this could
/// be stored but not read back by its consumer.
pub const PAYLOAD_DEPTH_LIMIT: usize = 64;

/// Why a payload's text could not be delivered as it is (PUSH-11).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Undeliverable {
    /// Nested deeper than [`PAYLOAD_DEPTH_LIMIT`].
    #[error("is nested more than {PAYLOAD_DEPTH_LIMIT} levels deep")]
    TooDeep,
    /// Holds a `\u` escape of a lone UTF-16 surrogate, quoted here.
    #[error(
        "holds a lone UTF-16 surrogate escape ({0}), which is not a character and which \
         most JSON parsers refuse"
    )]
    LoneSurrogate(String),
    /// Not exactly one JSON value; the parser's complaint.
    #[error("is not one JSON value: {0}")]
    NotJson(String),
}

/// Whether `text`, one JSON value, can be handed back to any consumer as it is: nested at
/// most [`PAYLOAD_DEPTH_LIMIT`] levels, and every `\u` escape a character (a high
/// surrogate only with its low one). One pass over the bytes, no tree: it runs on every
/// pushed payload and on every message a pop delivers.
pub fn deliverable(text: &str) -> Result<(), Undeliverable> {
    nested_within(text, PAYLOAD_DEPTH_LIMIT)
}

/// The first lone surrogate escape in the strings of `text`, any JSON text (a whole body).
pub(crate) fn lone_surrogate(text: &str) -> Option<String> {
    match nested_within(text, usize::MAX) {
        Err(Undeliverable::LoneSurrogate(u)) => Some(u),
        _ => None,
    }
}

/// [`deliverable`] with `limit` levels.
fn nested_within(text: &str, limit: usize) -> Result<(), Undeliverable> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'"' => i = string_end(b, i + 1)?,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(Undeliverable::TooDeep);
                }
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// The index after the string whose contents start at `i`, checking its `\u` escapes.
fn string_end(b: &[u8], mut i: usize) -> Result<usize, Undeliverable> {
    let unterminated = || Undeliverable::NotJson("a string is not terminated".into());
    loop {
        match *b.get(i).ok_or_else(unterminated)? {
            b'"' => return Ok(i + 1),
            b'\\' if b.get(i + 1) == Some(&b'u') => {
                let unit = hex4(b, i + 2)?;
                i += 6;
                if (0xDC00..0xE000).contains(&unit) {
                    return Err(Undeliverable::LoneSurrogate(format!("\\u{unit:04x}")));
                }
                if (0xD800..0xDC00).contains(&unit) {
                    let low = (b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u'))
                        .then(|| hex4(b, i + 2))
                        .transpose()?
                        .filter(|l| (0xDC00..0xE000).contains(l));
                    if low.is_none() {
                        return Err(Undeliverable::LoneSurrogate(format!("\\u{unit:04x}")));
                    }
                    i += 6;
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The four hex digits at `i` as a UTF-16 code unit.
fn hex4(b: &[u8], i: usize) -> Result<u32, Undeliverable> {
    b.get(i..i + 4)
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| Undeliverable::NotJson("a \\u escape lacks its four hex digits".into()))
}

impl From<Box<RawValue>> for RawJson {
    fn from(r: Box<RawValue>) -> Self {
        RawJson(Arc::from(r))
    }
}

impl From<&Value> for RawJson {
    fn from(v: &Value) -> Self {
        RawJson::from_value(v)
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.value() == other.value()
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(RawJson::from)
    }
}

/// Described as any JSON value, exactly as a `Value` field is.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for RawJson {
    fn inline_schema() -> bool {
        <Value as schemars::JsonSchema>::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Value as schemars::JsonSchema>::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        <Value as schemars::JsonSchema>::schema_id()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Value as schemars::JsonSchema>::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a model keeps of a payload is compared as the checker compared trees: key
    /// order aside, and every number by its digits (POP-5, POP-17).
    #[test]
    fn pop_17_a_kept_payload_is_its_value_in_any_key_order_and_to_the_digit() {
        let kept = RawJson::parse(r#" { "b" : 1, "a" : [0.10, -0] } "#.into())
            .unwrap()
            .compact();
        assert_eq!(kept.get(), r#"{"b":1,"a":[0.10,-0]}"#);
        assert!(kept.is(&serde_json::from_str(r#"{"b":1,"a":[0.10,-0]}"#).unwrap()));
        assert!(kept.is(&serde_json::from_str(r#"{"a":[0.10,-0],"b":1}"#).unwrap()));
        assert!(!kept.is(&serde_json::from_str(r#"{"b":1,"a":[0.1,-0]}"#).unwrap()));
        assert!(!kept.is(&serde_json::from_str(r#"{"b":1}"#).unwrap()));
    }

    #[test]
    fn pop_5_text_goes_out_as_it_came_in() {
        let text = r#"{"b":1,"a":18446744073709551616,"c":-0,"d":0.10}"#;
        let r = RawJson::parse(text.to_string()).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), text);
        let inside = json!({"data": r});
        assert_eq!(inside.to_string(), format!(r#"{{"data":{text}}}"#));
        assert_eq!(r.value()["a"].to_string(), "18446744073709551616");
    }

    #[test]
    fn only_one_json_value_is_accepted() {
        assert!(RawJson::parse("{\"a\":".into()).is_err());
        assert!(RawJson::parse("1 2".into()).is_err());
        assert!(RawJson::parse(" \"s\" ".into()).is_ok());
    }

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn push_11_nesting_up_to_the_limit_is_deliverable_and_past_it_is_not() {
        assert_eq!(deliverable(&nested(PAYLOAD_DEPTH_LIMIT)), Ok(()));
        assert_eq!(
            deliverable(&nested(PAYLOAD_DEPTH_LIMIT + 1)),
            Err(Undeliverable::TooDeep)
        );
        assert_eq!(deliverable(&nested(100_000)), Err(Undeliverable::TooDeep));
        // Brackets inside strings are text, not nesting.
        let text = format!("[\"{}\"]", "[".repeat(1000));
        assert_eq!(deliverable(&text), Ok(()));
        // What the limit leaves room for: an answer's envelope around the deepest payload
        // still parses with serde_json's default limit of 128.
        let answer = format!(
            r#"{{"messages":[{{"data":{}}}]}}"#,
            nested(PAYLOAD_DEPTH_LIMIT)
        );
        assert!(serde_json::from_str::<Value>(&answer).is_ok());
    }

    #[test]
    fn push_11_lone_surrogates_are_not_deliverable_and_pairs_are() {
        for lone in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#"["a\ud83d"]"#,
            r#""\ud83d\u0041""#,
        ] {
            assert!(
                matches!(deliverable(lone), Err(Undeliverable::LoneSurrogate(_))),
                "{lone}"
            );
            // The same text is one a tree-building parser refuses too.
            assert!(serde_json::from_str::<Value>(lone).is_err(), "{lone}");
        }
        for fine in [
            r#""\ud83d\ude00""#,
            r#""\\ud800""#,
            r#""\u00e9\n\"""#,
            "\"😀\"",
        ] {
            assert_eq!(deliverable(fine), Ok(()), "{fine}");
            assert!(serde_json::from_str::<Value>(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn push_11_broken_text_is_not_deliverable() {
        assert!(matches!(
            deliverable(r#""abc"#),
            Err(Undeliverable::NotJson(_))
        ));
        assert!(matches!(
            deliverable(r#""\u12""#),
            Err(Undeliverable::NotJson(_))
        ));
    }

    #[test]
    fn equality_is_by_value_and_a_round_trip_keeps_the_text() {
        let a = RawJson::parse("{\"x\": [1, 2]}".into()).unwrap();
        let b = RawJson::from_value(&json!({"x": [1, 2]}));
        assert_eq!(a, b);
        assert_ne!(a, RawJson::from_value(&json!({"x": [2, 1]})));
        let back: RawJson = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.get(), a.get());
    }
}
