//! Matching one broker answer against one outcome of the model.
//!
//! Every check here is one of two sorts. A *hard* check reads what the broker did (which
//! messages a pop delivered, whether an ack was applied, which push items were written):
//! when it fails, this outcome is not what happened. A *soft* check reads only what the
//! broker said (a status code inside the right class, a field's presence, type or text):
//! when it fails, the [`Judge`] decides whether that is a divergence or a [`Finding`]
//! recorded on the world, and the match goes on. Each check names the one rule it is
//! about, so a finding or a divergence is reported under the rule it breaks.

use super::{describe, World};
use crate::finding::{note, Accept, Finding, Kind};
use crate::model::*;
use crate::rules::*;
use crate::time::{format_iso, is_iso_utc_z, parse_iso, Stamp};
use crate::wire::*;
use serde_json::{json, Value};

/// How much an answer may differ from the model's (see the checker's module doc).
#[derive(Clone, Copy, Debug)]
pub struct Judge<'a> {
    pub strict_project: bool,
    pub keep_going: bool,
    pub accept: &'a [Accept],
}

impl Judge<'_> {
    /// Whether `f` is recorded and the match goes on (else it is a divergence).
    fn allows(&self, f: &Finding) -> bool {
        self.accept.iter().any(|a| a.covers(f))
            || f.level == Level::Open
            || (f.level == Level::Project && !self.strict_project)
            || (self.keep_going && f.kind.answer_only())
    }
}

/// A check that failed: the rule it is about, and why.
#[derive(Clone, Debug)]
pub struct Miss {
    pub rule: RuleId,
    pub why: String,
}

type Check = Result<(), Miss>;

fn hard(ok: bool, rule: RuleId, why: impl FnOnce() -> String) -> Check {
    if ok {
        Ok(())
    } else {
        Err(Miss { rule, why: why() })
    }
}

/// The world being matched and the judge of its soft checks.
struct Cx<'w, 'a> {
    w: &'w mut World,
    /// The state before the request (what a configure replaced).
    before: &'a State,
    j: Judge<'a>,
    /// How many soft differences were allowed (recorded or already known).
    softened: usize,
}

impl Cx<'_, '_> {
    /// A soft check that failed: recorded when the judge allows it, else a miss.
    fn soft(&mut self, f: Finding) -> Check {
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

    /// A state reading the judge does not weigh (the caller only follows it when kept
    /// going): recorded, and counted among the step's differences.
    fn soft_state(&mut self, f: Finding) -> Check {
        note(&mut self.w.findings, f);
        self.softened += 1;
        Ok(())
    }

    fn expect(&mut self, ok: bool, f: impl FnOnce() -> Finding) -> Check {
        if ok {
            Ok(())
        } else {
            self.soft(f())
        }
    }

    /// The status: another class is a miss under `rule`; another code in the class a
    /// soft [`Kind::Status`] finding.
    fn status(&mut self, due: u16, actual: u16, rule: RuleId, level: Level) -> Check {
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
            .at("status")
            .at_level(level),
        )
    }

    /// `obj[key]`, or a soft [`Kind::MissingField`] finding and `None`.
    fn get<'v>(
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

    fn str<'v>(
        &mut self,
        obj: &'v Value,
        path: &str,
        key: &str,
        rule: RuleId,
    ) -> Result<Option<&'v str>, Miss> {
        self.typed(obj, path, key, rule, "a string", Value::as_str)
    }

    fn bool(
        &mut self,
        obj: &Value,
        path: &str,
        key: &str,
        rule: RuleId,
    ) -> Result<Option<bool>, Miss> {
        self.typed(obj, path, key, rule, "a boolean", Value::as_bool)
    }

    /// A field that must equal `want` when present (soft [`Kind::Value`] otherwise).
    fn same<T: PartialEq + std::fmt::Debug>(
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
    fn is(
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
    fn subset(
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
    fn part(&mut self, rule: RuleId, what: &str, run: impl FnOnce(&mut Cx) -> Check) -> Check {
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

/// A key of `obj` that names `key` in another case or style (`messageId` for
/// `message_id`): clients differ there, and what the field says can still be read.
pub fn loose<'v>(obj: &'v Value, key: &str) -> Option<(&'v str, &'v Value)> {
    let norm = |k: &str| {
        k.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let want = norm(key);
    obj.as_object()?
        .iter()
        .find(|(k, _)| norm(k) == want)
        .map(|(k, v)| (k.as_str(), v))
}

/// The messages a pop answer delivered, as `(partitionId, partition)` in order: empty
/// for a 204 or an empty `messages` array, `None` when it cannot be read as a delivery.
pub fn delivered_parts(actual: &HttpResponse) -> Option<Vec<(String, String)>> {
    if actual.status == 204 {
        return Some(vec![]);
    }
    let messages = actual.body.as_ref()?.get("messages")?.as_array()?;
    messages
        .iter()
        .map(|m| {
            let id = m.get("partitionId")?.as_str()?;
            let name = m.get("partition").and_then(Value::as_str).unwrap_or("");
            Some((id.to_string(), name.to_string()))
        })
        .collect()
}

/// The PROJECT rule that decides the answer to a rejected request on `path` (its status
/// beyond "some 4xx" and its body shape), and the level of that half of the rule.
fn rejection_rule(path: &str, status: u16) -> (RuleId, Level) {
    let route = path.strip_prefix("/api/v1/").unwrap_or(path);
    match route.split('/').next().unwrap_or("") {
        "transaction" if status == 503 => (TXN_4, Level::Project),
        "ack" => (ACK_0, Level::Project),
        "lease" => (LEASE_3, Level::Project),
        "configure" => (CFG_3, Level::Project),
        "transaction" => (TXN_3, Level::Project),
        "dlq" => (DLQ_2, Level::Project),
        "pop" => (POP_10, Level::Seed),
        _ => (PUSH_8, Level::Project),
    }
}

/// Whether `actual` is an answer the model allows for `out` under `judge`, learning ids,
/// narrowing uncertain times and OPEN values, and recording findings in `w` as it goes.
/// Returns how many soft differences it allowed (0: the answer is the model's).
pub fn check_answer(
    out: &Outcome,
    actual: &HttpResponse,
    w: &mut World,
    before: &State,
    path: &str,
    judge: Judge,
) -> Result<usize, Miss> {
    let cx = &mut Cx {
        w,
        before,
        j: judge,
        softened: 0,
    };
    answer(cx, out, actual, path)?;
    Ok(cx.softened)
}

fn answer(cx: &mut Cx, out: &Outcome, actual: &HttpResponse, path: &str) -> Check {
    let body = actual.body.as_ref();
    match out {
        Outcome::PopIllegal(rule, why) => Err(Miss {
            rule: *rule,
            why: why.clone(),
        }),
        Outcome::Rejected(e) => rejected(cx, e, actual, path),
        Outcome::DiscoveryRejected => {
            cx.status(400, actual.status, POP_10, Level::Seed)?;
            let expected = serde_json::to_value(DiscoveryError::new()).expect("serializes");
            cx.subset(&expected, body, "$", &|_| POP_10)
        }
        Outcome::Push(items) => {
            cx.status(201, actual.status, PUSH_1, Level::Seed)?;
            let arr = results(body, items.len(), PUSH_1, "push")?;
            items
                .iter()
                .zip(arr)
                .try_for_each(|(o, a)| push_item(cx, o, a, "$[*]"))
        }
        Outcome::PopEmpty => pop_empty(cx, actual),
        Outcome::Pop(p) => pop(cx, p, actual),
        Outcome::Ack(items) => {
            cx.status(200, actual.status, ACK_0, Level::Seed)?;
            let arr = results(body, items.len(), ACK_0, "ack")?;
            items
                .iter()
                .zip(arr)
                .try_for_each(|(o, a)| ack_item(cx, o, a, "$[*]"))
        }
        Outcome::Extend(e) => extend(cx, e, actual),
        Outcome::Txn(t) => txn(cx, t, actual),
        Outcome::Dlq(d) => {
            cx.status(200, actual.status, DLQ_2, Level::Project)?;
            cx.part(DLQ_2, "the dead-letter listing differs", |cx| {
                dlq(cx, d, body)
            })
        }
        Outcome::Configure(_) => {
            cx.status(200, actual.status, CFG_1, Level::Seed)?;
            configure(cx, out, body)
        }
        Outcome::Delete(_) => {
            cx.status(200, actual.status, DEL_1, Level::Project)?;
            let expected = describe(out, cx.w)
                .body
                .expect("a delete answer has a body");
            cx.subset(&expected, body, "$", &|_| DEL_1)
        }
        Outcome::Health | Outcome::Maintenance { .. } | Outcome::PopMaintenance { .. } => {
            let rule = match out {
                Outcome::Health => HEALTH_1,
                Outcome::Maintenance { .. } => MAINT_1,
                _ => MAINT_2,
            };
            cx.status(200, actual.status, rule, rule.level())?;
            let expected = describe(out, cx.w).body.expect("these answers have bodies");
            cx.subset(&expected, body, "$", &|_| rule)
        }
    }
}

/// The per-item results of a push or an ack answer: a JSON array with one result per
/// item (hard: without it, what was done with each item cannot be read).
fn results<'v>(
    body: Option<&'v Value>,
    n: usize,
    rule: RuleId,
    what: &str,
) -> Result<&'v Vec<Value>, Miss> {
    let arr = body.and_then(Value::as_array).ok_or_else(|| Miss {
        rule,
        why: format!("{what} answer must be a JSON array of per-item results"),
    })?;
    hard(arr.len() == n, rule, || {
        format!("{} results for {n} items", arr.len())
    })?;
    Ok(arr)
}

/// Bad input: some 4xx (hard: anything else may have changed something), the rule's
/// exact status and a body `{"error": "..."}` (soft).
fn rejected(cx: &mut Cx, e: &WireError, actual: &HttpResponse, path: &str) -> Check {
    let (rule, level) = rejection_rule(path, e.status);
    cx.status(e.status, actual.status, rule, level)?;
    let text = actual
        .body
        .as_ref()
        .and_then(|b| b.get("error"))
        .and_then(Value::as_str);
    cx.expect(text.is_some_and(|s| !s.is_empty()), || {
        Finding::new(
            rule,
            Kind::MissingField,
            "a rejection without {\"error\": \"...\"}",
        )
        .at("$.error")
        .at_level(level)
        .example(
            actual
                .body
                .as_ref()
                .map_or("(no body)".into(), |b| b.to_string()),
        )
    })
}

/// A time's format (POP-12: ISO-8601 UTC with a literal Z, soft), and its value if it
/// parses at all.
fn check_format(cx: &mut Cx, actual: &str, path: &str) -> Result<Option<i64>, Miss> {
    if !is_iso_utc_z(actual) {
        cx.soft(
            Finding::new(
                POP_12,
                Kind::Value,
                "a time is not ISO-8601 UTC with a literal Z",
            )
            .at(path.to_string())
            .example(actual.to_string()),
        )?;
    }
    Ok(parse_iso(actual))
}

fn check_time(cx: &mut Cx, actual: &str, s: Stamp, path: &str) -> Result<Option<i64>, Miss> {
    let Some(t) = check_format(cx, actual, path)? else {
        return Ok(None);
    };
    if s.admits(t, 1) {
        return Ok(Some(t));
    }
    cx.soft(
        Finding::new(
            POP_12,
            Kind::Value,
            "a time lies outside the interval the request was handled in",
        )
        .at(path.to_string())
        .example(format!(
            "{actual} outside [{}, {}]",
            format_iso(s.lo),
            format_iso(s.hi)
        )),
    )?;
    Ok(None)
}

fn push_item(cx: &mut Cx, o: &PushOut, a: &Value, path: &str) -> Check {
    let status = a.get("status").and_then(Value::as_str);
    let status = status.and_then(|s| serde_json::from_value::<PushStatus>(json!(s)).ok());
    let status = status.ok_or_else(|| Miss {
        rule: PUSH_1,
        why: format!(
            "item {}: no readable `status` (queued, duplicate or buffered)",
            o.index
        ),
    })?;
    hard(
        status == o.status,
        push_status_rule(o.status, status),
        || {
            format!(
                "item {}: status {status:?} where {:?} is expected",
                o.index, o.status
            )
        },
    )?;
    cx.is(
        a,
        path,
        "index",
        json!(o.index as u64),
        PUSH_1,
        "`index` is not the item's position",
    )?;
    cx.is(
        a,
        path,
        "queueName",
        json!(o.queue),
        PUSH_1,
        "`queueName` is not the item's queue",
    )?;
    let txn = cx.str(a, path, "transaction_id", PUSH_1)?;
    cx.same(
        txn,
        o.transaction_id.as_str(),
        &format!("{path}.transaction_id"),
        PUSH_1,
        "`transaction_id` is not the item's",
    )?;
    if o.minted_txn {
        cx.expect(txn.is_none_or(is_uuid), || {
            Finding::new(PUSH_4, Kind::Value, "a minted transaction_id is not a UUID")
                .example(format!("{txn:?}"))
        })?;
    }
    let Some(id) = cx.str(a, path, "message_id", PUSH_1)? else {
        return Ok(());
    };
    cx.expect(is_uuid_v7(id), || {
        Finding::new(PUSH_1, Kind::Value, "a message_id is not a UUIDv7")
            .at(format!("{path}.message_id"))
            .example(id.to_string())
    })?;
    let Some(h) = o.msg else { return Ok(()) };
    if o.status == PushStatus::Duplicate {
        // PUSH-5 [PROJECT]: a duplicate carries the original message's id. Another id
        // is a finding; the original's id is then learnt from a later answer.
        if let Some(original) = cx.w.ids.msgs.id(h).map(str::to_string) {
            return cx.expect(original == id, || {
                Finding::new(
                    PUSH_5,
                    Kind::Value,
                    "a duplicate item carries another message_id than the original's",
                )
                .at_level(Level::Project)
                .at(format!("{path}.message_id"))
                .example(format!(
                    "item {}: {id} where the original is {original}",
                    o.index
                ))
            });
        }
    }
    cx.w.ids.msgs.bind("message", h, id).map_err(|e| Miss {
        rule: if o.status == PushStatus::Duplicate {
            PUSH_5
        } else {
            PUSH_1
        },
        why: format!("{e} (a duplicate carries the original id)"),
    })
}

/// The rule a push item's wrong status breaks.
fn push_status_rule(due: PushStatus, got: PushStatus) -> RuleId {
    if due == PushStatus::Buffered || got == PushStatus::Buffered {
        PUSH_7
    } else {
        PUSH_5
    }
}

/// The rule an ack item's expected answer is decided by.
fn ack_rule(e: &AckResult) -> RuleId {
    match e.error.as_deref() {
        Some(ERR_INVALID_LEASE) => ACK_5,
        Some(_) => ACK_3,
        None if e.noop => ACK_3,
        None if e.dlq => ACK_6,
        None => ACK_1,
    }
}

fn ack_item(cx: &mut Cx, o: &AckOut, a: &Value, path: &str) -> Check {
    let e = &o.result;
    let success = a
        .get("success")
        .and_then(Value::as_bool)
        .ok_or_else(|| Miss {
            rule: ACK_0,
            why: format!(
                "ack item {}: no boolean `success`: whether it was applied cannot be read",
                e.index
            ),
        })?;
    cx.is(
        a,
        path,
        "index",
        json!(e.index as u64),
        ACK_0,
        "`index` is not the item's position",
    )?;
    let error = match a.get("error") {
        None => {
            cx.soft(
                Finding::new(ACK_0, Kind::MissingField, "`error` is missing")
                    .at(format!("{path}.error")),
            )?;
            None
        }
        Some(v) => v.as_str(),
    };
    if o.may_fail && !success {
        // ACK step 6 [OPEN]: a blocked completion may be refused with an error.
        return cx.expect(error.is_some_and(|s| !s.is_empty()), || {
            Finding::new(
                ACK_0,
                Kind::MissingField,
                "a refused ack item without an error",
            )
            .at(format!("{path}.error"))
        });
    }
    let rule = ack_rule(e);
    hard(success == e.success, rule, || {
        format!(
            "ack item {}: success {success} where {} is expected ({})",
            e.index,
            e.success,
            e.error.as_deref().unwrap_or("applied")
        )
    })?;
    cx.is(
        a,
        path,
        "transactionId",
        json!(e.transaction_id),
        ACK_0,
        "`transactionId` is not the item's",
    )?;
    match (&e.error, error) {
        (Some(want), Some(got)) if want != got => cx.soft(
            Finding::new(
                rule,
                Kind::ErrorText,
                format!("the error {want:?} is worded otherwise"),
            )
            .at(format!("{path}.error"))
            .example(format!("{got:?} where {want:?} is expected")),
        )?,
        (Some(_), None) => cx.soft(
            Finding::new(
                rule,
                Kind::MissingField,
                "a refused ack item without an error",
            )
            .at(format!("{path}.error")),
        )?,
        (None, Some(got)) => cx.soft(
            Finding::new(ACK_0, Kind::Value, "an accepted ack item carries an error")
                .at(format!("{path}.error"))
                .example(got.to_string()),
        )?,
        _ => {}
    }
    // These three say what the ack did (a lease released, a dead letter filed, a cursor
    // already past): when present, another value is another state, not another wording.
    let released = cx.bool(a, path, "leaseReleased", ACK_0)?;
    match (&o.released, released) {
        (Some((ph, group)), Some(false)) if cx.j.keep_going => kept_lease(cx, *ph, group, e.index)?,
        _ => {
            let rule = if e.lease_released { ACK_1 } else { ACK_STEP_5 };
            state_flag(released, e.lease_released, e.index, "leaseReleased", rule)?;
        }
    }
    let dlq = cx.bool(a, path, "dlq", ACK_6)?;
    state_flag(dlq, e.dlq, e.index, "dlq", ACK_6)?;
    let noop = cx.bool(a, path, "noop", ACK_3)?;
    state_flag(noop, e.noop, e.index, "noop", ACK_3)
}

/// A broker that says it kept the lease an ack released by the protocol (ACK-1: the
/// span is acked away): followed, in keep-going mode, as the lease it held before the
/// call, live until some time before its deadline (the broker decides when it lets
/// go), so later pops are judged by it instead of failing every case on the way.
fn kept_lease(cx: &mut Cx, ph: PartH, group: &str, index: usize) -> Check {
    let held = cx
        .before
        .part(ph)
        .and_then(|p| p.cursors.get(group))
        .and_then(|c| c.lease.clone());
    let Some(mut l) = held else {
        return hard(false, ACK_1, || {
            format!("ack item {index}: leaseReleased false where true is expected")
        });
    };
    l.deadline = Stamp::between(l.deadline.lo - l.duration_ms, l.deadline.hi);
    cx.w.state.cursor_mut(ph, group).lease = Some(l);
    cx.soft_state(
        Finding::new(
            ACK_1,
            Kind::KeptLease,
            "an ack that completes the leased span keeps the lease",
        )
        .example(format!("ack item {index} answered leaseReleased:false")),
    )
}

/// An ack item's flag that reports state: absent is a finding already; another value a miss.
fn state_flag(got: Option<bool>, want: bool, index: usize, key: &str, rule: RuleId) -> Check {
    hard(got.is_none_or(|g| g == want), rule, || {
        format!("ack item {index}: {key} {} where {want} is expected", !want)
    })
}

/// Nothing to deliver: a bare 204. A 2xx whose body holds an empty `messages` array
/// said the same thing differently (POP-6).
fn pop_empty(cx: &mut Cx, actual: &HttpResponse) -> Check {
    match delivered_parts(actual) {
        Some(p) if p.is_empty() => {}
        Some(_) => {
            return hard(false, POP_2, || {
                "a delivery where nothing was claimable".into()
            })
        }
        None => {
            return hard(false, POP_6, || {
                "nothing was claimable: a bare 204 is due, and this answer is no empty delivery"
                    .into()
            })
        }
    }
    // One finding for the whole answer: its status and body say the same thing.
    hard(actual.status / 100 == 2, POP_6, || {
        format!("status {} where a bare 204 is due", actual.status)
    })?;
    let shown = actual.body.as_ref().map(|b| format!(" {b}"));
    cx.expect(actual.status == 204 && shown.is_none(), || {
        Finding::new(POP_6, Kind::Shape, "an empty pop is not a bare 204")
            .at("$")
            .example(format!("{}{}", actual.status, shown.unwrap_or_default()))
    })
}

fn pop(cx: &mut Cx, p: &PopOut, actual: &HttpResponse) -> Check {
    hard(actual.status != 204, POP_2, || {
        format!("204 where {} message(s) were claimable", p.messages.len())
    })?;
    cx.status(200, actual.status, POP_5, Level::Seed)?;
    let b = actual
        .body
        .as_ref()
        .filter(|b| b.is_object())
        .ok_or_else(|| Miss {
            rule: POP_5,
            why: "a pop answer must be a JSON object".into(),
        })?;
    let messages = b
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| Miss {
            rule: POP_5,
            why: "a pop answer must carry a `messages` array".into(),
        })?;
    hard(messages.len() == p.messages.len(), POP_3, || {
        format!(
            "{} messages where {} are expected",
            messages.len(),
            p.messages.len()
        )
    })?;
    cx.is(
        b,
        "$",
        "success",
        json!(true),
        POP_5,
        "`success` is not true on a delivery",
    )?;
    cx.is(
        b,
        "$",
        "queue",
        json!(p.queue),
        POP_5,
        "the top-level `queue` differs",
    )?;
    cx.is(
        b,
        "$",
        "consumerGroup",
        json!(p.group),
        POP_5,
        "the top-level `consumerGroup` differs",
    )?;
    cx.is(
        b,
        "$",
        "partitionsClaimed",
        json!(p.partitions_claimed as u64),
        POP_5,
        "`partitionsClaimed` differs",
    )?;
    let lease = cx.str(b, "$", "leaseId", POP_5)?;
    pop_lease(cx, p, lease)?;
    let first = cx.w.state.part(p.first).ok_or_else(|| Miss {
        rule: POP_1,
        why: "the claimed partition vanished".into(),
    })?;
    let first_name = first.name.clone();
    cx.is(
        b,
        "$",
        "partition",
        json!(first_name),
        POP_5,
        "the top-level `partition` is not the first claimed one",
    )?;
    if let Some(id) = cx.str(b, "$", "partitionId", POP_5)? {
        bind_part(cx, p.first, id)?;
    }
    for (m, &(ph, off)) in messages.iter().zip(&p.messages) {
        pop_message(cx, p, m, ph, off, lease)?;
    }
    Ok(())
}

fn bind_part(cx: &mut Cx, h: PartH, id: &str) -> Check {
    cx.w.ids
        .parts
        .bind("partition", h, id)
        .map_err(|why| Miss { rule: POP_5, why })
}

fn pop_lease(cx: &mut Cx, p: &PopOut, lease: Option<&str>) -> Check {
    let Some(lease) = lease else { return Ok(()) };
    match p.lease {
        None => cx.expect(lease.is_empty(), || {
            Finding::new(
                POP_7,
                Kind::Value,
                "an autoAck pop answers a leaseId (\"\" is due)",
            )
            .at("$.leaseId")
            .example(lease.to_string())
        }),
        Some(h) => {
            cx.expect(is_uuid(lease), || {
                Finding::new(POP_5, Kind::Value, "a leaseId is not a UUID")
                    .at("$.leaseId")
                    .example(lease.to_string())
            })?;
            cx.w.ids.leases.bind("lease", h, lease).map_err(|e| Miss {
                rule: ACK_4,
                why: format!("{e}: a pop mints a fresh lease id"),
            })
        }
    }
}

const MSG: &str = "$.messages[*]";

fn pop_message(
    cx: &mut Cx,
    p: &PopOut,
    m: &Value,
    ph: PartH,
    off: u32,
    lease: Option<&str>,
) -> Check {
    let part = cx.w.state.part(ph).ok_or_else(|| Miss {
        rule: POP_1,
        why: "a delivered partition vanished".into(),
    })?;
    let msg = part.at(off).clone();
    let pname = part.name.clone();
    let txn = m.get("transactionId").and_then(Value::as_str);
    hard(txn == Some(msg.transaction_id.as_str()), POP_1, || {
        format!(
            "transactionId {txn:?} where {} is expected (offset order)",
            msg.transaction_id
        )
    })?;
    if let Some(id) = cx.str(m, MSG, "partitionId", POP_5)? {
        cx.expect(is_uuid(id), || {
            Finding::new(POP_5, Kind::Value, "a partitionId is not a UUID").example(id.to_string())
        })?;
        bind_part(cx, ph, id)?;
    }
    cx.is(
        m,
        MSG,
        "partition",
        json!(pname),
        POP_5,
        "a message's `partition` differs",
    )?;
    if let Some(id) = cx.str(m, MSG, "id", POP_5)? {
        cx.expect(is_uuid_v7(id), || {
            Finding::new(POP_5, Kind::Value, "a message id is not a UUIDv7").example(id.to_string())
        })?;
        cx.w.ids
            .msgs
            .bind("message", msg.msg, id)
            .map_err(|why| Miss { rule: POP_5, why })?;
    }
    let ml = cx.str(m, MSG, "leaseId", POP_5)?;
    if let Some(l) = lease {
        cx.same(
            ml,
            l,
            &format!("{MSG}.leaseId"),
            POP_5,
            "a message's `leaseId` is not the top-level one",
        )?;
    }
    cx.is(
        m,
        MSG,
        "consumerGroup",
        json!(p.group),
        POP_5,
        "a message's `consumerGroup` differs",
    )?;
    match cx.get(m, MSG, "producerSub", POP_5)? {
        Some(Value::Null) | None => {}
        Some(v) => cx.soft(
            Finding::new(
                POP_5,
                Kind::Value,
                "producerSub is not null without authentication",
            )
            .example(v.to_string()),
        )?,
    }
    let created = cx.w.state.created(&msg);
    if let Some(t) = cx.str(m, MSG, "createdAt", POP_12)? {
        if let Some(t) = check_time(cx, t, created, &format!("{MSG}.createdAt"))? {
            let write = msg.write as usize;
            cx.w.state.writes[write] =
                cx.w.state.writes[write].intersect(&Stamp::between(t, t + 1));
        }
    }
    message_content(cx, m, ph, off)
}

/// A delivered message's traceId and data, narrowing the OPEN choices of PUSH-9.
fn message_content(cx: &mut Cx, m: &Value, ph: PartH, off: u32) -> Check {
    let trace = cx.get(m, MSG, "traceId", POP_5)?.cloned();
    let data = cx.get(m, MSG, "data", POP_5)?.cloned();
    let slot =
        cx.w.state
            .part_mut(ph)
            .expect("exists")
            .messages
            .get_mut(off as usize - 1)
            .expect("exists");
    let mut wrong = Vec::new();
    if let Some(a) = &trace {
        match (&slot.trace, a.as_str()) {
            (Trace::None, None) => {}
            (Trace::Kept(t), Some(a)) if t == a => {}
            (Trace::Either(t), Some(a)) if t == a => slot.trace = Trace::Kept(t.clone()),
            (Trace::Either(_), None) if a.is_null() => slot.trace = Trace::None,
            (e, _) => wrong.push(
                Finding::new(POP_5, Kind::Value, "a message's traceId differs")
                    .example(format!("{a} where {e:?} is expected")),
            ),
        }
    }
    if let Some(d) = data {
        match &slot.data {
            Data::Value(v) if **v != d => wrong.push(
                Finding::new(
                    POP_5,
                    Kind::Value,
                    "a message's data is not the payload pushed",
                )
                .example(format!("{d} where {v} is expected")),
            ),
            Data::Value(_) => {}
            Data::Absent if d.is_null() || d == json!({}) => {
                slot.data = Data::Value(std::sync::Arc::new(d))
            }
            Data::Absent => wrong.push(
                Finding::new(
                    POP_5,
                    Kind::Value,
                    "an absent payload is shown as neither null nor {}",
                )
                .example(d.to_string()),
            ),
        }
    }
    wrong.into_iter().try_for_each(|f| cx.soft(f))
}

fn extend(cx: &mut Cx, e: &ExtendOut, actual: &HttpResponse) -> Check {
    // A 4xx to an extend the model takes: the broker validates the body otherwise, and
    // which bodies are valid is LEASE-3's to say.
    hard(actual.status / 100 != 4, LEASE_3, || {
        format!(
            "status {} to an extend with a valid body (absent, empty or a positive `seconds`)",
            actual.status
        )
    })?;
    cx.status(200, actual.status, LEASE_2, Level::Seed)?;
    let mut b = actual.body.as_ref();
    if let Some(Value::Array(a)) = b {
        if a.len() == 1 && a[0].is_object() {
            cx.soft(
                Finding::new(
                    LEASE_2,
                    Kind::Shape,
                    "the extend answer is an array holding the object",
                )
                .at("$"),
            )?;
            b = a.first();
        }
    }
    let b = b.filter(|b| b.is_object()).ok_or_else(|| Miss {
        rule: LEASE_2,
        why: "the extend answer must be a JSON object".into(),
    })?;
    let renewed = b
        .get("renewed")
        .and_then(Value::as_u64)
        .ok_or_else(|| Miss {
            rule: LEASE_2,
            why: "no integer `renewed`: what was renewed cannot be read".into(),
        })?;
    hard(renewed == e.renewed as u64, LEASE_1, || {
        format!(
            "renewed {renewed} where {} live leases have that id",
            e.renewed
        )
    })?;
    cx.is(
        b,
        "$",
        "leaseId",
        json!(e.lease_id),
        LEASE_2,
        "`leaseId` is not the path's",
    )?;
    cx.is(
        b,
        "$",
        "success",
        json!(e.renewed > 0),
        LEASE_2,
        "`success` does not say whether anything was renewed",
    )?;
    match (cx.get(b, "$", "expiresAt", LEASE_2)?, e.expires_at) {
        (None, _) | (Some(Value::Null), None) => {}
        (Some(Value::String(t)), Some(s)) => {
            // The deadline is state: another one is another lease duration, the queue's
            // (POP-9) when the extend named no seconds, else the extend's own (LEASE-1).
            let rule = if e.own_duration { POP_9 } else { LEASE_1 };
            let t = check_format(cx, t, "$.expiresAt")?;
            hard(t.is_none_or(|t| s.admits(t, 1)), rule, || {
                format!(
                    "expiresAt lies outside [{}, {}]",
                    format_iso(s.lo),
                    format_iso(s.hi)
                )
            })?;
        }
        (Some(a), _) => cx.soft(
            Finding::new(LEASE_1, Kind::Value, "`expiresAt` differs")
                .at("$.expiresAt")
                .example(format!(
                    "{a} where {:?} is expected",
                    e.expires_at.map(|s| format_iso(s.lo))
                )),
        )?,
    }
    if e.renewed == 0 {
        let error = b.get("error").and_then(Value::as_str);
        cx.expect(error.is_some_and(|s| !s.is_empty()), || {
            Finding::new(
                LEASE_2,
                Kind::MissingField,
                "a failed extend carries no error",
            )
            .at("$.error")
        })?;
    }
    Ok(())
}

fn txn(cx: &mut Cx, t: &TxnOut, actual: &HttpResponse) -> Check {
    cx.status(200, actual.status, TXN_3, Level::Project)?;
    let b = actual.body.as_ref().ok_or_else(|| Miss {
        rule: TXN_1,
        why: "a transaction answer has no body".into(),
    })?;
    // TXN-1 (all or nothing) is SEED: `success` must say which happened.
    let success = b.get("success").and_then(Value::as_bool);
    hard(success == Some(t.success), TXN_1, || {
        format!("success must be {} (TXN-1, TXN-2)", t.success)
    })?;
    // TXN-3 [PROJECT]: the rest of the answer's shape.
    cx.part(TXN_3, "the transaction answer's shape differs", |cx| {
        let id = b.get("transactionId").and_then(Value::as_str).unwrap_or("");
        hard(is_uuid(id), TXN_3, || {
            format!("transactionId {id:?} is not a UUID")
        })?;
        if !t.success {
            let e = b.get("error").and_then(Value::as_str);
            return hard(e.is_some_and(|s| !s.is_empty()), TXN_3, || {
                "an aborted transaction must say why in \"error\"".into()
            });
        }
        let res = b.get("results").and_then(Value::as_array);
        let res = res.ok_or_else(|| Miss {
            rule: TXN_3,
            why: "results must be an array".into(),
        })?;
        hard(res.len() == t.results.len(), TXN_3, || {
            format!(
                "{} results where {} are expected",
                res.len(),
                t.results.len()
            )
        })?;
        t.results.iter().zip(res).try_for_each(|(o, a)| match o {
            TxnItemOut::Push(p) => push_item(cx, p, a, "$.results[*]"),
            TxnItemOut::Ack(x) => ack_item(cx, x, a, "$.results[*]"),
        })
    })
}

/// The configure answer: every effective option (CFG-1, CFG-2) and the namespace and
/// task (CFG-3). A broker that derived another namespace or task is followed: the
/// model's queue takes the ones it answered, so discovery pops are judged by them.
fn configure(cx: &mut Cx, out: &Outcome, body: Option<&Value>) -> Check {
    let Outcome::Configure(c) = out else {
        unreachable!("a configure outcome")
    };
    let expected = describe(out, cx.w)
        .body
        .expect("a configure answer has a body");
    // An option answered as it was before this call was not replaced (CFG-1); any other
    // value where the model has the default is another default (CFG-2).
    let before = serde_json::to_value(cx.before.queues.get(&c.queue).map(|q| q.options))
        .expect("serializes");
    let defaults = serde_json::to_value(QueueOptions::default()).expect("serializes");
    let answered = body.and_then(|b| b.get("options"));
    let rule_at = |p: &str| match p {
        "$.namespace" | "$.task" => CFG_3,
        p if p.starts_with("$.options.") => {
            let key = &p["$.options.".len()..];
            let got = answered.and_then(|o| o.get(key));
            if got.is_some() && got == before.get(key) {
                CFG_1
            } else if expected["options"].get(key) == defaults.get(key) {
                CFG_2
            } else {
                CFG_1
            }
        }
        _ => CFG_1,
    };
    cx.subset(&expected, body, "$", &rule_at)?;
    // The broker is followed: the options it answered are the ones it applies.
    if let Some(o) = answered.and_then(|o| QueueOptions::deserialize(o).ok()) {
        if let Some(q) = cx.w.state.queue_mut(&c.queue) {
            q.options = o;
        }
    }
    let read = |k: &str| {
        body.and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(q) = cx.w.state.queue_mut(&c.queue) {
        if let Some(ns) = read("namespace") {
            q.namespace = ns;
        }
        if let Some(task) = read("task") {
            q.task = task;
        }
    }
    Ok(())
}

fn dlq(cx: &mut Cx, d: &DlqOut, body: Option<&Value>) -> Check {
    let miss = |why: String| Miss { rule: DLQ_2, why };
    let b = body.ok_or_else(|| miss("no body".into()))?;
    let r: DlqResponse = DlqResponse::deserialize(b)
        .map_err(|e| miss(format!("the listing does not parse: {e}")))?;
    hard(
        r.total == d.total && r.limit == d.limit && r.offset == d.offset,
        DLQ_2,
        || {
            format!(
                "total/limit/offset {}/{}/{} where {}/{}/{} are expected",
                r.total, r.limit, r.offset, d.total, d.limit, d.offset
            )
        },
    )?;
    hard(r.messages.len() == d.items.len(), DLQ_2, || {
        format!(
            "{} dead letters where {} are expected",
            r.messages.len(),
            d.items.len()
        )
    })?;
    for (a, &i) in r.messages.iter().zip(&d.items) {
        let rec = cx.w.state.dead_letters[i].clone();
        let part =
            cx.w.state
                .part(rec.part)
                .ok_or_else(|| miss("a dead letter of a deleted partition".into()))?;
        let msg = part.at(rec.offset).clone();
        let (pname, qname) = (part.name.clone(), part.queue.clone());
        cx.w.ids
            .msgs
            .bind("message", msg.msg, &a.id)
            .map_err(miss)?;
        cx.w.ids
            .parts
            .bind("partition", rec.part, &a.partition_id)
            .map_err(miss)?;
        let same = a.transaction_id == msg.transaction_id
            && a.partition == pname
            && a.queue == qname
            && a.consumer_group == rec.group
            && a.error_message == rec.error
            && a.retry_count == rec.retry_count;
        hard(same, DLQ_2, || {
            format!(
                "dead letter {} differs from the model's {rec:?}",
                serde_json::to_value(a).expect("serializes")
            )
        })?;
        let created = cx.w.state.created(&msg);
        check_time(cx, &a.created_at, created, "$.messages[*].createdAt")?;
        check_time(cx, &a.failed_at, rec.failed_at, "$.messages[*].failedAt")?;
        let shown = match &msg.data {
            Data::Value(v) => **v == a.data,
            Data::Absent => a.data.is_null() || a.data == json!({}),
        };
        hard(shown, DLQ_2, || {
            format!("dead letter data {} differs", a.data)
        })?;
    }
    Ok(())
}

use serde::Deserialize;
