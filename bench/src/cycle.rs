//! One consumer step, pop then batch ack, as cheaply as a client can do it: the answers
//! are read into borrowed, typed fields and the ack body is written as text, so the
//! bench spends as little of the machine's CPU as it can and leaves it to the broker
//! (on two cores a client that builds JSON trees takes a share the broker then lacks).

use crate::client::Client;
use std::borrow::Cow;
use std::fmt::Write;
use std::time::{Duration, Instant};

#[derive(serde::Deserialize)]
struct PopBody<'a> {
    #[serde(borrow)]
    messages: Vec<Message<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message<'a> {
    #[serde(borrow)]
    transaction_id: Cow<'a, str>,
    #[serde(borrow)]
    partition_id: Cow<'a, str>,
    #[serde(borrow)]
    lease_id: Cow<'a, str>,
}

#[derive(serde::Deserialize)]
struct AckAnswer {
    success: bool,
}

/// What one step did.
pub struct Cycle {
    /// The transactionIds delivered and acknowledged.
    pub delivered: Vec<String>,
    /// The pop's round trip.
    pub pop: Duration,
    /// The batch ack's round trip.
    pub ack: Duration,
}

/// One step; `None` when the pop found nothing (204).
pub async fn pop_and_ack(
    client: &Client,
    pop_path: &str,
    group: Option<&str>,
) -> Result<Option<Cycle>, String> {
    let t = Instant::now();
    let (s, body) = client.get_raw(pop_path).await.map_err(|e| e.to_string())?;
    let pop = t.elapsed();
    if s == 204 {
        return Ok(None);
    }
    if s != 200 {
        return Err(format!("pop answered {s}"));
    }
    let popped: PopBody = serde_json::from_slice(&body).map_err(|e| format!("pop answer: {e}"))?;
    // transactionIds are the bench's own ([a-z0-9]), ids are UUIDs: no escaping needed.
    let mut ack = String::with_capacity(64 + popped.messages.len() * 150);
    ack.push('{');
    if let Some(g) = group {
        let _ = write!(ack, "\"consumerGroup\":\"{g}\",");
    }
    ack.push_str("\"acknowledgments\":[");
    for (i, m) in popped.messages.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            ack,
            "{sep}{{\"transactionId\":\"{}\",\"partitionId\":\"{}\",\"leaseId\":\"{}\",\"status\":\"completed\"}}",
            m.transaction_id, m.partition_id, m.lease_id
        );
    }
    ack.push_str("]}");
    let t = Instant::now();
    let (s, answer) = client
        .post_raw("/api/v1/ack/batch", ack)
        .await
        .map_err(|e| e.to_string())?;
    let ack = t.elapsed();
    let answers: Vec<AckAnswer> = serde_json::from_slice(&answer).unwrap_or_default();
    if s != 200 || answers.len() != popped.messages.len() || !answers.iter().all(|a| a.success) {
        return Err(format!(
            "batch ack answered {s}: {}",
            String::from_utf8_lossy(&answer)
        ));
    }
    let delivered = popped
        .messages
        .into_iter()
        .map(|m| m.transaction_id.into_owned())
        .collect();
    Ok(Some(Cycle {
        delivered,
        pop,
        ack,
    }))
}
