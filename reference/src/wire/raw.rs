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
