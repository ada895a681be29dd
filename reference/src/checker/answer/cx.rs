//! The context every check runs in: the world being matched, the state before the
//! request, and the judge that decides whether a failed soft check is a finding or a
//! miss. Its helpers check one field each, so the per-operation modules only say what
//! each field must be.

use super::{hard, loose, Check, Judge, Miss};
use crate::checker::World;
use crate::finding::{note, Finding, Kind};
use crate::model::*;
use crate::rules::*;
use serde_json::Value;

/// The world being matched and the judge of its soft checks.
pub(super) struct Cx<'w, 'a> {
    pub(super) w: &'w mut World,
    /// The state before the request (what a configure replaced).
    pub(super) before: &'a State,
    pub(super) j: Judge<'a>,
    /// How many soft differences were allowed (recorded or already known).
    pub(super) softened: usize,
}

impl Cx<'_, '_> {
    /// A soft check that failed: recorded when the judge allows it, else a miss.
    pub(super) fn soft(&mut self, f: Finding) -> Check {
        if self.j.allows(&f) {
            note(&mut self.w.findings, f);
            self.softened += 1;
            Ok(())
        } else {
            Err(Miss {
                rule: f.rule,
                why: f.to_string(),
            })
        }
    }

    /// A flag that says another state than the outcome's: recorded and counted among the
    /// step's differences unless the checker holds the broker to every word (strict and
    /// not kept going), where it is a miss.
    pub(super) fn flag(&mut self, f: Finding) -> Check {
        if self.j.strict_project
            && !self.j.keep_going
            && !self.j.accept.iter().any(|a| a.covers(&f))
        {
            return Err(Miss {
                rule: f.rule,
                why: f.to_string(),
            });
        }
        note(&mut self.w.findings, f);
        self.softened += 1;
        Ok(())
    }

    pub(super) fn expect(&mut self, ok: bool, f: impl FnOnce() -> Finding) -> Check {
        if ok {
            Ok(())
        } else {
            self.soft(f())
        }
    }

    /// The status: another class is a miss under `rule`; another code in the class a
    /// soft [`Kind::Status`] finding.
    pub(super) fn status(&mut self, due: u16, actual: u16, rule: RuleId) -> Check {
        if actual == due {
            return Ok(());
        }
        hard(actual / 100 == due / 100, rule, || {
            format!("status {actual} where {due} is expected")
        })?;
        self.soft(
            Finding::new(
                rule,
                Kind::Status,
                format!("answers {actual} where {due} is due"),
            )
            .at("status"),
        )
    }

    /// `obj[key]`, or a soft [`Kind::MissingField`] finding and `None`.
    pub(super) fn get<'v>(
        &mut self,
        obj: &'v Value,
        path: &str,
        key: &str,
        rule: RuleId,
    ) -> Result<Option<&'v Value>, Miss> {
        if let Some(v) = obj.get(key) {
            return Ok(Some(v));
        }
        match loose(obj, key) {
            Some((name, v)) => {
                self.soft(
                    Finding::new(
                        rule,
                        Kind::MissingField,
                        format!("`{key}` is named `{name}`"),
                    )
                    .at(format!("{path}.{key}")),
                )?;
                Ok(Some(v))
            }
            None => {
                self.soft(
                    Finding::new(rule, Kind::MissingField, format!("`{key}` is missing"))
                        .at(format!("{path}.{key}")),
                )?;
                Ok(None)
            }
        }
    }

    fn typed<'v, T>(
        &mut self,
        obj: &'v Value,
        path: &str,
        key: &str,
        rule: RuleId,
        want: &str,
        read: impl FnOnce(&'v Value) -> Option<T>,
    ) -> Result<Option<T>, Miss> {
        let Some(v) = self.get(obj, path, key, rule)? else {
            return Ok(None);
        };
        match read(v) {
            Some(t) => Ok(Some(t)),
            None => {
                self.soft(
                    Finding::new(rule, Kind::MistypedField, format!("`{key}` is not {want}"))
                        .at(format!("{path}.{key}"))
                        .example(v.to_string()),
                )?;
                Ok(None)
            }
        }
    }

    pub(super) fn str<'v>(
        &mut self,
        obj: &'v Value,
        path: &str,
        key: &str,
        rule: RuleId,
    ) -> Result<Option<&'v str>, Miss> {
        self.typed(obj, path, key, rule, "a string", Value::as_str)
    }

    pub(super) fn bool(
        &mut self,
        obj: &Value,
        path: &str,
        key: &str,
        rule: RuleId,
    ) -> Result<Option<bool>, Miss> {
        self.typed(obj, path, key, rule, "a boolean", Value::as_bool)
    }

    /// A field that must equal `want` when present (soft [`Kind::Value`] otherwise).
    pub(super) fn same<T: PartialEq + std::fmt::Debug>(
        &mut self,
        got: Option<T>,
        want: T,
        path: &str,
        rule: RuleId,
        what: &str,
    ) -> Check {
        match got {
            Some(g) if g != want => self.soft(
                Finding::new(rule, Kind::Value, what.to_string())
                    .at(path.to_string())
                    .example(format!("{g:?} where {want:?} is expected")),
            ),
            _ => Ok(()),
        }
    }

    /// `obj[key]` is `want` (soft: missing, mistyped and other values are findings under
    /// `rule`).
    pub(super) fn is(
        &mut self,
        obj: &Value,
        path: &str,
        key: &str,
        want: Value,
        rule: RuleId,
        what: &str,
    ) -> Check {
        let Some(got) = self.get(obj, path, key, rule)? else {
            return Ok(());
        };
        let at = format!("{path}.{key}");
        if std::mem::discriminant(got) != std::mem::discriminant(&want) {
            return self.soft(
                Finding::new(
                    rule,
                    Kind::MistypedField,
                    format!("`{key}` has another type"),
                )
                .at(at)
                .example(format!("{got} where {want} is expected")),
            );
        }
        if *got != want {
            return self.soft(
                Finding::new(rule, Kind::Value, what.to_string())
                    .at(at)
                    .example(format!("{got} where {want} is expected")),
            );
        }
        Ok(())
    }

    /// Every key of `expected` is in `actual` with an equal value (extra keys allowed),
    /// each difference a soft finding under the rule `rule_at` names for its path.
    pub(super) fn subset(
        &mut self,
        expected: &Value,
        actual: Option<&Value>,
        path: &str,
        rule_at: &dyn Fn(&str) -> RuleId,
    ) -> Check {
        let rule = rule_at(path);
        let Some(a) = actual else {
            return self.soft(
                Finding::new(rule, Kind::MissingField, format!("`{path}` is missing"))
                    .at(path.to_string()),
            );
        };
        match (expected, a) {
            (Value::Object(e), Value::Object(o)) => {
                for (k, v) in e {
                    self.subset(v, o.get(k), &format!("{path}.{k}"), rule_at)?;
                }
                Ok(())
            }
            (e, a) if std::mem::discriminant(e) != std::mem::discriminant(a) => self.soft(
                Finding::new(
                    rule,
                    Kind::MistypedField,
                    format!("`{path}` has another type"),
                )
                .at(path.to_string())
                .example(format!("{a} where {e} is expected")),
            ),
            (e, a) if e != a => {
                let kind = if path.ends_with(".error") {
                    Kind::ErrorText
                } else {
                    Kind::Value
                };
                self.soft(
                    Finding::new(rule, kind, format!("`{path}` differs"))
                        .at(path.to_string())
                        .example(format!("{a} where {e} is expected")),
                )
            }
            _ => Ok(()),
        }
    }

    /// A sub-check of a PROJECT point (`rule`) that may bind ids: run on a copy of the
    /// world, kept when it passes; when it fails, one soft finding for the whole part.
    pub(super) fn part(
        &mut self,
        rule: RuleId,
        what: &str,
        run: impl FnOnce(&mut Cx) -> Check,
    ) -> Check {
        let mut trial = self.w.clone();
        let strict = Judge {
            strict_project: true,
            keep_going: false,
            accept: &[],
        };
        match run(&mut Cx {
            w: &mut trial,
            before: self.before,
            j: strict,
            softened: 0,
        }) {
            Ok(()) => {
                *self.w = trial;
                Ok(())
            }
            Err(miss) => {
                self.soft(Finding::new(rule, Kind::Value, what.to_string()).example(miss.why))
            }
        }
    }
}
