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

use crate::broker::{Broker, Popped};
use crate::config::Backoff;
use queen_reference::wire::{Answer, PopQuery, PopRoute};
use std::time::Duration;
use tokio::time::Instant;

/// Answers a pop, parking while `wait=true` and nothing is claimable.
pub async fn pop(
    broker: &dyn Broker,
    route: PopRoute,
    query: PopQuery,
    backoff: Backoff,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> Answer {
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
        let popped = broker.pop(&route, &query).await;
        // Nothing yet keeps a parked pop waiting, and so does a busy pool (a herd woken by
        // one push) or a database hiccup; at its deadline it answers what it got.
        let retry = match &popped {
            Popped::Empty => true,
            Popped::Other(answer) => answer.status() >= 500,
            Popped::Messages(_) | Popped::Paused => false,
        };
        if !retry || !query.wait || Instant::now() >= deadline || *stopping.borrow() {
            return popped.into_answer();
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
            _ = stopping.wait_for(|s| *s) => return Answer::Empty,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The loop under paused tokio time: every sleep ends when the test says, so each
    //! check is about the order of events, never about how fast the machine is.

    use super::*;
    use crate::wakes::Wakes;
    use async_trait::async_trait;
    use queen_reference::wire::{HttpResponse, Request};
    use serde_json::json;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// A broker whose pop attempts answer from a script (then 204), counting attempts.
    #[derive(Default)]
    struct Scripted {
        wakes: Wakes,
        answers: Mutex<VecDeque<Answer>>,
        attempts: AtomicUsize,
        paused: AtomicBool,
        /// POP-15: the queue's fill time and the claimable count.
        fill_wait: Duration,
        claimable: AtomicUsize,
    }

    #[async_trait]
    impl Broker for Scripted {
        async fn call(&self, _req: Request) -> Answer {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            let next = self.answers.lock().unwrap().pop_front();
            next.unwrap_or(Answer::Empty)
        }
        fn wakes(&self) -> &Wakes {
            &self.wakes
        }
        async fn pop_paused(&self) -> bool {
            self.paused.load(Ordering::SeqCst)
        }
        async fn min_pop_wait(&self, _queue: &str) -> Duration {
            self.fill_wait
        }
        async fn claimable(&self, _route: &PopRoute, _query: &PopQuery) -> u32 {
            self.claimable.load(Ordering::SeqCst) as u32
        }
    }

    fn backoff() -> Backoff {
        Backoff {
            initial: Duration::from_millis(100),
            threshold: 2,
            multiplier: 2.0,
            max: Duration::from_millis(400),
        }
    }

    fn query(wait: bool, timeout_ms: u64, batch: u32) -> PopQuery {
        PopQuery {
            wait,
            timeout_ms,
            batch,
            ..PopQuery::defaults(30_000)
        }
    }

    fn delivered() -> Answer {
        Answer::Raw(HttpResponse {
            status: 200,
            body: Some(json!({"messages": [{"id": "m"}]})),
        })
    }

    /// Runs one long poll in a task; the test drives time and the broker meanwhile.
    fn spawn_pop(
        broker: &Arc<Scripted>,
        q: PopQuery,
    ) -> (
        tokio::task::JoinHandle<(Answer, Instant)>,
        tokio::sync::watch::Sender<bool>,
    ) {
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let b = broker.clone();
        let task = tokio::spawn(async move {
            let route = PopRoute::Queue("q".into());
            let answer = pop(b.as_ref(), route, q, backoff(), stopping).await;
            (answer, Instant::now())
        });
        (task, stop)
    }

    /// How a long poll ended: its status, when (after `start`), and after how many
    /// attempts.
    async fn ended(
        b: &Scripted,
        task: tokio::task::JoinHandle<(Answer, Instant)>,
        start: Instant,
    ) -> (u16, Duration, usize) {
        let (answer, at) = task.await.unwrap();
        (
            answer.status(),
            at - start,
            b.attempts.load(Ordering::SeqCst),
        )
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[tokio::test(start_paused = true)]
    async fn pop_11_without_wait_one_attempt_answers() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        let (task, _stop) = spawn_pop(&b, query(false, 5_000, 10));
        assert_eq!(ended(&b, task, start).await, (204, MS(0), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn pop_11_an_empty_wait_answers_204_at_its_timeout_with_backing_off_checks() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        let (task, _stop) = spawn_pop(&b, query(true, 1_000, 10));
        // At its deadline, after checks at 0, 100, 200 (two empty checks: the interval
        // doubles), 400, 800 (capped at 400) and a last one at the deadline.
        assert_eq!(ended(&b, task, start).await, (204, MS(1_000), 6));
    }

    #[tokio::test(start_paused = true)]
    async fn pop_11_a_ring_wakes_a_parked_pop_before_its_next_check() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        let (task, _stop) = spawn_pop(&b, query(true, 10_000, 10));
        tokio::time::sleep(MS(30)).await;
        assert_eq!(
            b.attempts.load(Ordering::SeqCst),
            1,
            "parked after one attempt"
        );
        b.answers.lock().unwrap().push_back(delivered());
        b.wakes.ring("q");
        // Woken by the ring at 30 ms, not by the timer at 100.
        assert_eq!(ended(&b, task, start).await, (200, MS(30), 2));
    }

    #[tokio::test(start_paused = true)]
    async fn maint_2_pop_maintenance_ends_the_wait_after_the_attempt() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        b.paused.store(true, Ordering::SeqCst);
        let (task, _stop) = spawn_pop(&b, query(true, 10_000, 10));
        assert_eq!(ended(&b, task, start).await, (204, MS(0), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn stop_1_a_parked_pop_answers_204_when_shutdown_begins() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        let (task, stop) = spawn_pop(&b, query(true, 60_000, 10));
        tokio::time::sleep(MS(250)).await;
        stop.send(true).unwrap();
        let (status, at, _) = ended(&b, task, start).await;
        assert_eq!((status, at), (204, MS(250)), "at once, not at its timeout");
    }

    #[tokio::test(start_paused = true)]
    async fn a_5xx_attempt_of_a_parked_pop_is_tried_again_until_it_delivers() {
        let (b, start) = (Arc::new(Scripted::default()), Instant::now());
        b.answers.lock().unwrap().extend([
            Answer::error(503, "busy"),
            Answer::error(500, "hiccup"),
            delivered(),
        ]);
        let (task, _stop) = spawn_pop(&b, query(true, 10_000, 10));
        assert_eq!(ended(&b, task, start).await, (200, MS(200), 3));
    }

    /// An engine whose pop is typed: it says "paused" itself, so a parked pop never
    /// asks for the maintenance switch on the side.
    #[derive(Default)]
    struct Typed {
        wakes: Wakes,
        attempts: AtomicUsize,
    }

    #[async_trait]
    impl Broker for Typed {
        async fn call(&self, _req: Request) -> Answer {
            unreachable!("the long poll asks `pop`")
        }
        async fn pop(&self, _route: &PopRoute, _query: &PopQuery) -> Popped {
            match self.attempts.fetch_add(1, Ordering::SeqCst) {
                0 => Popped::Empty,
                _ => Popped::Paused,
            }
        }
        fn wakes(&self) -> &Wakes {
            &self.wakes
        }
        async fn pop_paused(&self) -> bool {
            panic!("an engine with a typed pop is never asked for the switch")
        }
    }

    #[tokio::test(start_paused = true)]
    async fn maint_2_a_typed_paused_answer_ends_the_wait_without_a_side_question() {
        let (b, start) = (Typed::default(), Instant::now());
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        let route = PopRoute::Queue("q".into());
        let answer = pop(&b, route, query(true, 10_000, 10), backoff(), stopping).await;
        assert_eq!(answer.status(), 204);
        // Empty at 0, parked until the timer at 100 ms, then paused.
        assert_eq!(
            (Instant::now() - start, b.attempts.load(Ordering::SeqCst)),
            (MS(100), 2)
        );
    }

    /// A broker whose queue has a 500 ms fill time and 3 claimable messages.
    fn under_full() -> Arc<Scripted> {
        let b = Arc::new(Scripted {
            fill_wait: MS(500),
            ..Scripted::default()
        });
        b.claimable.store(3, Ordering::SeqCst);
        b.answers.lock().unwrap().push_back(delivered());
        b
    }

    #[tokio::test(start_paused = true)]
    async fn pop_15_an_under_full_batch_waits_its_fill_time_then_takes_what_there_is() {
        let (b, start) = (under_full(), Instant::now());
        let (task, _stop) = spawn_pop(&b, query(true, 10_000, 10));
        // Held for the fill time, then one attempt.
        assert_eq!(ended(&b, task, start).await, (200, MS(500), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn pop_15_a_batch_that_fills_is_taken_at_once() {
        let (b, start) = (under_full(), Instant::now());
        let (task, _stop) = spawn_pop(&b, query(true, 10_000, 10));
        tokio::time::sleep(MS(50)).await;
        b.claimable.store(10, Ordering::SeqCst);
        b.wakes.ring("q");
        // The ring that filled it ends the wait.
        assert_eq!(ended(&b, task, start).await, (200, MS(50), 1));
    }
}
