//! Is the target a Queen broker at all, and which parts of the protocol does it serve?
//! Asked once before a run, through a target like any session's.

use crate::target::Target;
use crate::transport::transmit;
use queen_reference::wire::HttpRequest;
use serde_json::{json, Value};

/// Whether the broker serves the management routes (section 17): a broker that answers
/// 404 to the overview has none, and its management cases are skipped rather than
/// failed one by one; any other answer leaves the judging to the cases.
pub(crate) async fn serves_management(target: &Target) -> bool {
    let req = target.authorized(HttpRequest::get("/api/v1/resources/overview", &[]));
    !matches!(transmit(target, &req).await, Ok(r) if r.status == 404)
}

/// Whether the target looks like a Queen broker: a push to a probe queue answers a 2xx
/// JSON array with one result carrying a `status`, and a pop of it answers 204 or a 2xx
/// JSON object with a `messages` array. Deviations the suite reports later (another 2xx
/// status, missing fields) pass; a 404, an HTML page or no answer does not.
pub async fn probe(target: &Target, queue: &str) -> Result<(), String> {
    for one in target.each() {
        probe_one(&one, queue).await?;
    }
    Ok(())
}

async fn probe_one(target: &Target, queue: &str) -> Result<(), String> {
    let not_queen = |what: String| format!("this does not look like a Queen broker: {what}");
    let push = HttpRequest::post(
        "/api/v1/push",
        &json!({"items": [{"queue": queue, "payload": {"probe": true}}]}),
    );
    let r = transmit(target, &push)
        .await
        .map_err(|e| format!("cannot reach {}: {e}", target.url))?;
    let item = r
        .body
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|a| a.first());
    let shaped = (200..300).contains(&r.status) && item.is_some_and(|i| i.get("status").is_some());
    if !shaped {
        return Err(not_queen(format!(
            "POST /api/v1/push answered {} {} (a 201 JSON array of per-item results is due)",
            r.status,
            shown(&r.body)
        )));
    }
    let pop = HttpRequest::get(format!("/api/v1/pop/queue/{queue}"), &[("autoAck", "true")]);
    let r = transmit(target, &pop)
        .await
        .map_err(|e| not_queen(format!("GET {} got no answer: {e}", pop.path)))?;
    let delivery = r
        .body
        .as_ref()
        .and_then(|b| b.get("messages"))
        .is_some_and(Value::is_array);
    if r.status != 204 && !((200..300).contains(&r.status) && delivery) {
        return Err(not_queen(format!(
            "GET {} answered {} {} (200 with `messages`, or a bare 204, is due)",
            pop.path,
            r.status,
            shown(&r.body)
        )));
    }
    // The probe queue is not left behind where the broker can delete it; an error here
    // is the delete cases' business, not the probe's.
    let _ = transmit(
        target,
        &HttpRequest::delete(format!("/api/v1/resources/queues/{queue}")),
    )
    .await;
    Ok(())
}

fn shown(body: &Option<Value>) -> String {
    let s = body
        .as_ref()
        .map_or("(no body)".to_string(), |b| b.to_string());
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}
