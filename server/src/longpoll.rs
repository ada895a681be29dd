//! Long polling (POP-11): one pop attempt after another until something is delivered,
//! the timeout passes, or pop maintenance starts.
//!
//! Before each attempt the pop registers on its bell, so a push that lands between the
//! attempt and the park still wakes it. Between attempts it sleeps on the bell with a
//! backing-off timer (initial interval, growing after `threshold` empty checks, capped);
//! a ring resets the interval.

use crate::broker::Broker;
use crate::config::Backoff;
use queen_reference::wire::{HttpResponse, PopQuery, PopRoute, Request};
use std::time::Duration;
use tokio::time::Instant;

/// Answers a pop, parking while `wait=true` and nothing is claimable.
pub async fn pop(
    broker: &dyn Broker,
    route: PopRoute,
    query: PopQuery,
    backoff: Backoff,
) -> HttpResponse {
    let deadline = Instant::now() + Duration::from_millis(query.timeout_ms);
    let bell = broker.wakes().bell(match &route {
        PopRoute::Queue(q) | PopRoute::Partition(q, _) => Some(q.as_str()),
        PopRoute::Discovery { .. } => None,
    });
    let mut interval = backoff.initial;
    let mut empty_checks = 0u32;
    loop {
        let notified = bell.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let answer = broker
            .call(Request::Pop {
                route: route.clone(),
                query: query.clone(),
            })
            .await;
        if answer.status != 204
            || !query.wait
            || Instant::now() >= deadline
            || broker.pop_paused().await
        {
            return answer;
        }
        let sleep_until = (Instant::now() + interval).min(deadline);
        tokio::select! {
            _ = &mut notified => {
                interval = backoff.initial;
                empty_checks = 0;
            }
            _ = tokio::time::sleep_until(sleep_until) => {
                // At the deadline the loop makes one last attempt, then answers it.
                empty_checks += 1;
                if empty_checks >= backoff.threshold {
                    interval = interval.mul_f64(backoff.multiplier).min(backoff.max);
                }
            }
        }
    }
}
