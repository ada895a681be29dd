//! Long polling (POP-11): one pop attempt after another until something is delivered,
//! the timeout passes, or pop maintenance starts.
//!
//! Before each attempt the pop registers on its bell, so a push that lands between the
//! attempt and the park still wakes it. Between attempts it sleeps on the bell with a
//! backing-off timer (initial interval, growing after `threshold` empty checks, capped);
//! a ring resets the interval.
//!
//! POP-15: on the queue route, with `wait=true` and `batch > 1`, a queue's
//! `minPopWaitTime` lets an under-full (but non-empty) batch wait to fill: the pop parks
//! until the batch would be full, the fill time is over, or the timeout comes, whichever
//! is first; then it takes what there is.
//!
//! STOP-1: when the server begins to shut down, every parked pop answers 204 at once
//! instead of holding the shutdown until its own timeout.

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
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> HttpResponse {
    let deadline = Instant::now() + Duration::from_millis(query.timeout_ms);
    let bell = broker.wakes().bell(match &route {
        PopRoute::Queue(q) | PopRoute::Partition(q, _) => Some(q.as_str()),
        PopRoute::Discovery { .. } => None,
    });
    let mut interval = backoff.initial;
    let mut empty_checks = 0u32;
    let fill_wait = match &route {
        PopRoute::Queue(q) if query.wait && query.batch > 1 => broker.min_pop_wait(q).await,
        _ => Duration::ZERO,
    };
    let mut fill_until: Option<Instant> = None;
    loop {
        let notified = bell.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !fill_wait.is_zero() {
            let n = broker.claimable(&route, &query).await;
            if n > 0 && n < query.batch {
                let until =
                    *fill_until.get_or_insert_with(|| (Instant::now() + fill_wait).min(deadline));
                if Instant::now() < until && !*stopping.borrow() {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(until.min(Instant::now() + interval)) => {}
                        _ = stopping.wait_for(|s| *s) => {}
                    }
                    continue;
                }
            }
        }
        let answer = broker
            .call(Request::Pop {
                route: route.clone(),
                query: query.clone(),
            })
            .await;
        // A parked pop that meets a busy pool (a herd woken by one push) or a database
        // hiccup keeps waiting instead of failing; at its deadline it answers what it got.
        let retry = answer.status >= 500 || answer.status == 204;
        if !retry || !query.wait || Instant::now() >= deadline || *stopping.borrow() {
            return answer;
        }
        if broker.pop_paused().await {
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
            _ = stopping.wait_for(|s| *s) => return crate::broker::empty_answer(),
        }
    }
}
