//! A rejected request (bad input). The answer must be some 4xx, since anything else
//! may have changed something; the route's rule decides the exact status and the
//! `{"error": "..."}` body.

use super::cx::Cx;
use super::{hard, Check};
use crate::finding::{Finding, Kind};
use crate::rules::*;
use crate::wire::*;
use serde_json::Value;

/// The rule that decides the answer to a rejected request on `path` (its status beyond
/// "some 4xx" and its body shape).
fn rejection_rule(path: &str, status: u16) -> RuleId {
    let route = path.strip_prefix("/api/v1/").unwrap_or(path);
    let family = route.split('/').next().unwrap_or("");
    match family {
        // Which refusal (401 or 403) and its body are AUTH-4's; that there is one, AUTH-6's.
        _ if matches!(status, 401 | 403) => AUTH_4,
        // RET-5: a push or transaction past a queue's maxSize.
        _ if status == 429 => RET_5,
        "messages" if path.ends_with("/retry") => MGMT_12,
        "messages" if status == 405 => MGMT_11,
        "status" if path.ends_with("/analytics") => MGMT_13,
        _ => route_rule(family, status),
    }
}

/// [`rejection_rule`] for bad input: the rule of the route family.
fn route_rule(family: &str, status: u16) -> RuleId {
    match family {
        "transaction" if status == 503 => TXN_4,
        "ack" => ACK_9,
        "lease" => LEASE_3,
        "configure" => CFG_3,
        "transaction" => TXN_3,
        "dlq" => DLQ_2,
        "pop" => POP_10,
        "consumer-groups" => MGMT_3,
        "resources" => MGMT_4,
        "status" => MGMT_5,
        "messages" => MGMT_6,
        _ => PUSH_8,
    }
}
/// Bad input: some 4xx (hard: anything else may have changed something), the rule's
/// exact status and a body `{"error": "..."}` (soft).
pub(super) fn rejected(cx: &mut Cx, e: &WireError, actual: &HttpResponse, path: &str) -> Check {
    let rule = e.rule.unwrap_or_else(|| rejection_rule(path, e.status));
    // AUTH-6: a caller admitted above its level is a security failure, never a wording.
    hard(
        !matches!(e.status, 401 | 403) || actual.status / 100 == 4,
        AUTH_6,
        || {
            format!(
                "admitted ({}) a request its caller's level refuses ({})",
                actual.status, e.status
            )
        },
    )?;
    cx.status(e.status, actual.status, rule)?;
    let text = actual
        .body
        .as_ref()
        .and_then(|b| b.get("error"))
        .and_then(Value::as_str);
    if matches!(e.status, 401 | 403) && text.is_some_and(|t| t != e.message) {
        // AUTH-4 names the exact text of an authentication refusal.
        cx.soft(
            Finding::new(
                AUTH_4,
                Kind::ErrorText,
                format!("the error {:?} is worded otherwise", e.message),
            )
            .at("$.error")
            .example(format!("{:?}", text.unwrap_or_default())),
        )?;
    }
    cx.expect(text.is_some_and(|s| !s.is_empty()), || {
        Finding::new(
            rule,
            Kind::MissingField,
            "a rejection without {\"error\": \"...\"}",
        )
        .at("$.error")
        .example(
            actual
                .body
                .as_ref()
                .map_or("(no body)".into(), |b| b.to_string()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_routes_rejection_is_judged_by_that_routes_rule() {
        let cases = [
            ("/api/v1/transaction", 503, (TXN_4, Level::Project)),
            ("/api/v1/transaction", 400, (TXN_3, Level::Project)),
            ("/api/v1/ack/batch", 400, (ACK_9, Level::Project)),
            ("/api/v1/lease/x/extend", 400, (LEASE_3, Level::Project)),
            ("/api/v1/configure", 400, (CFG_3, Level::Project)),
            ("/api/v1/dlq", 400, (DLQ_2, Level::Project)),
            ("/api/v1/pop", 400, (POP_10, Level::Seed)),
            ("/api/v1/push", 413, (PUSH_8, Level::Project)),
            ("/api/v1/pop/queue/q", 403, (AUTH_4, Level::Project)),
            ("/api/v1/pop", 401, (AUTH_4, Level::Project)),
            ("/api/v1/push", 401, (AUTH_4, Level::Project)),
            ("/api/v1/system/maintenance", 403, (AUTH_4, Level::Project)),
        ];
        for (path, status, want) in cases {
            let rule = rejection_rule(path, status);
            assert_eq!((rule, rule.level()), want, "{path} {status}");
        }
    }
}
