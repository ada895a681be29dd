//! Management answers (PROTOCOL.md section 17): the broker's JSON must hold the model's
//! view, key by key (extra keys allowed), with each array as long as the model's.
//!
//! The model's view carries symbols where it does not know the concrete value: an id the
//! broker minted is learnt from the answer (and must agree with what was learnt before),
//! a time or an OPEN value is not compared, and neither are the figures that depend on
//! the broker's clock ([`MEASURED_KEYS`]).

use super::cx::Cx;
use super::{Check, Miss};
use crate::finding::{Finding, Kind};
use crate::model::views::sym::{self, Sym};
use crate::model::views::MEASURED_KEYS;
use crate::rules::RuleId;
use serde_json::Value;

/// Matches `actual` against the model's view `expected` under `rule`.
pub(super) fn view(
    cx: &mut Cx,
    rule: RuleId,
    expected: &Value,
    actual: Option<&Value>,
    path: &str,
) -> Check {
    let Some(a) = actual else {
        return cx.soft(
            Finding::new(rule, Kind::MissingField, format!("`{path}` is missing"))
                .at(path.to_string()),
        );
    };
    match (expected, a) {
        (Value::String(s), _) if sym::read(s).is_some() => symbol(cx, rule, s, a, path),
        (Value::Object(e), Value::Object(o)) => {
            for (k, v) in e {
                if !MEASURED_KEYS.contains(&k.as_str()) {
                    view(cx, rule, v, o.get(k), &format!("{path}.{k}"))?;
                }
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(o)) if e.len() == o.len() => e
            .iter()
            .zip(o)
            .try_for_each(|(e, o)| view(cx, rule, e, Some(o), &format!("{path}[*]"))),
        (Value::Array(e), Value::Array(o)) => cx.soft(
            Finding::new(
                rule,
                Kind::Value,
                format!("`{path}` has {} entries", o.len()),
            )
            .at(path.to_string())
            .example(format!("{} where the model has {}", o.len(), e.len())),
        ),
        (e, a) if std::mem::discriminant(e) != std::mem::discriminant(a) => cx.soft(
            Finding::new(
                rule,
                Kind::MistypedField,
                format!("`{path}` has another type"),
            )
            .at(path.to_string())
            .example(format!("{a} where {e} is expected")),
        ),
        (e, a) if e != a => cx.soft(
            Finding::new(rule, Kind::Value, format!("`{path}` differs"))
                .at(path.to_string())
                .example(format!("{a} where {e} is expected")),
        ),
        _ => Ok(()),
    }
}

/// An id is learnt (a contradiction with what was learnt is a miss); a time must be a
/// string; an OPEN value is anything.
fn symbol(cx: &mut Cx, rule: RuleId, s: &str, a: &Value, path: &str) -> Check {
    let sym = sym::read(s).expect("checked by the caller");
    let text = a.as_str();
    let miss = |why: String| Miss { rule, why };
    match (sym, text) {
        (Sym::Any, _) => Ok(()),
        (Sym::Part(h), Some(id)) => cx.w.ids.parts.bind("partition", h, id).map_err(miss),
        (Sym::Msg(h), Some(id)) => cx.w.ids.msgs.bind("message", h, id).map_err(miss),
        (Sym::Time(_), Some(_)) => Ok(()),
        (_, None) => cx.soft(
            Finding::new(
                rule,
                Kind::MistypedField,
                format!("`{path}` is not a string"),
            )
            .at(path.to_string())
            .example(a.to_string()),
        ),
    }
}
