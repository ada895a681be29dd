//! A rejected request (bad input). The answer must be some 4xx, since anything else
//! may have changed something; the route's rule decides the exact status and the
//! `{"error": "..."}` body.

use super::cx::Cx;
use super::Check;
use crate::finding::{Finding, Kind};
use crate::rules::*;
use crate::wire::*;
use serde_json::Value;

/// The PROJECT rule that decides the answer to a rejected request on `path` (its status
/// beyond "some 4xx" and its body shape), and the level of that half of the rule.
fn rejection_rule(path: &str, status: u16) -> (RuleId, Level) {
    let route = path.strip_prefix("/api/v1/").unwrap_or(path);
    let family = route.split('/').next().unwrap_or("");
    match family {
        // AUTH-1: a pop is refused (SEED); how (401 or 403, the body) is AUTH-4's.
        "pop" if matches!(status, 401 | 403) => (AUTH_1, Level::Project),
        _ if status == 401 => (AUTH_4, Level::Project),
        _ if status == 403 => (AUTH_3, Level::Project),
        // RET-5: a push or transaction past a queue's maxSize.
        _ if status == 429 => (RET_5, Level::Project),
        "messages" if path.ends_with("/retry") => (MGMT_12, Level::Project),
        "messages" if status == 405 => (MGMT_11, Level::Project),
        "status" if path.ends_with("/analytics") => (MGMT_13, Level::Project),
        _ => route_rule(family, status),
    }
}

/// [`rejection_rule`] for bad input: the rule of the route family.
fn route_rule(family: &str, status: u16) -> (RuleId, Level) {
    match family {
        "transaction" if status == 503 => (TXN_4, Level::Project),
        "ack" => (ACK_0, Level::Project),
        "lease" => (LEASE_3, Level::Project),
        "configure" => (CFG_3, Level::Project),
        "transaction" => (TXN_3, Level::Project),
        "dlq" => (DLQ_2, Level::Project),
        "pop" => (POP_10, Level::Seed),
        "consumer-groups" => (MGMT_3, Level::Project),
        "resources" => (MGMT_4, Level::Project),
        "status" => (MGMT_5, Level::Project),
        "messages" => (MGMT_6, Level::Project),
        _ => (PUSH_8, Level::Project),
    }
}
/// Bad input: some 4xx (hard: anything else may have changed something), the rule's
/// exact status and a body `{"error": "..."}` (soft).
pub(super) fn rejected(cx: &mut Cx, e: &WireError, actual: &HttpResponse, path: &str) -> Check {
    let (rule, level) = match e.rule {
        Some(rule) => (rule, rule.level()),
        None => rejection_rule(path, e.status),
    };
    cx.status(e.status, actual.status, rule, level)?;
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
        .at_level(level)
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
            ("/api/v1/ack/batch", 400, (ACK_0, Level::Project)),
            ("/api/v1/lease/x/extend", 400, (LEASE_3, Level::Project)),
            ("/api/v1/configure", 400, (CFG_3, Level::Project)),
            ("/api/v1/dlq", 400, (DLQ_2, Level::Project)),
            ("/api/v1/pop", 400, (POP_10, Level::Seed)),
            ("/api/v1/push", 413, (PUSH_8, Level::Project)),
            ("/api/v1/pop/queue/q", 403, (AUTH_1, Level::Project)),
            ("/api/v1/pop", 401, (AUTH_1, Level::Project)),
            ("/api/v1/push", 401, (AUTH_4, Level::Project)),
            ("/api/v1/system/maintenance", 403, (AUTH_3, Level::Project)),
        ];
        for (path, status, want) in cases {
            assert_eq!(rejection_rule(path, status), want, "{path} {status}");
        }
    }
}
