//! Retention and queue size cases (PROTOCOL.md section 16: RET-1..5, CFG-4).
//!
//! Removal runs on the broker's own clock, so the cases that need a message gone wait
//! its age plus the broker's retention interval (`--retention-interval-ms`, RET-3);
//! before that the model allows both, and after it the model requires the removal.

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult};
use crate::failure::{ensure, ensure_timely, late, Failure};
use crate::rules::*;
use crate::session::*;
use queen_reference::wire::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub fn cases() -> Vec<Case> {
    cases![
        aged_out: "ret-3/an-aged-message-is-gone-within-the-interval", [RET_1, RET_3], Project, Retention, needs [Configure];
        gated: "ret-2/nothing-is-removed-without-retention-enabled", [RET_2], Project, Retention, needs [Configure];
        completed: "ret-2/completed-retention-removes-what-every-group-committed", [RET_2, RET_3, RET_4], Project, Retention, needs [Configure];
        pointers: "ret-4/what-pointed-at-a-removed-message-follows-it", [RET_4], Project, Retention, needs [Configure, DeadLetter, Dedup];
        max_size: "ret-5/a-push-past-max-size-is-429-and-writes-nothing", [RET_5], Project, Retention, needs [Configure, Dedup];
        echoed: "cfg-4/unknown-options-are-kept-and-echoed", [CFG_4], Project, Configure;
        bounded: "cfg-4/too-many-unknown-options-is-400-and-changes-nothing", [CFG_4], Project, Configure, needs [BadInput, DeadLetter];
    ]
}

/// The age limit of the cases that check something before their messages age out: room
/// for those checks on a slow broker or a busy machine, where one second is not.
const ROOMY_AGE_S: u64 = 3;

/// Judges checks made before messages pushed at `pushed` reach their age limit `age_s`.
/// One that fails once the limit may have passed says nothing about the rule it checks,
/// since the messages may be gone by then: it is a timing miss of a slow broker or a busy
/// machine, which the runner confirms with a second run, not a departure.
fn before_aging<T>(pushed: Instant, age_s: u64, checks: Result<T, Failure>) -> Result<T, Failure> {
    let took = pushed.elapsed();
    match checks {
        Err(Failure::Assertion { message, rules }) if took >= Duration::from_secs(age_s) => {
            let message = format!(
                "{message}, but only once the {age_s} s age limit had passed: the checks before it took {} ms",
                took.as_millis()
            );
            Err(late(message, &rules))
        }
        other => other,
    }
}

/// Waits until a message pushed now with an age limit of `age_s` must be gone (RET-3).
async fn past_retention(s: &Session, age_s: u64) {
    sleep_ms(retention_wait_ms(s, age_s)).await;
}

/// How long a message with an age limit of `age_s` may outlive it: the broker's interval
/// too.
fn retention_wait_ms(s: &Session, age_s: u64) -> u64 {
    age_s * 1_000 + s.settings().retention_lag_ms.max(0) as u64 + 200
}

/// [`past_retention`], while new partitions of another queue keep being written: each
/// partition's age limit is its own, and a busy broker removes on time too.
async fn past_retention_while_busy(s: &mut Session) -> CaseResult {
    let busy = s.name("busy");
    let wait = retention_wait_ms(s, ROOMY_AGE_S);
    let until = Instant::now() + Duration::from_millis(wait);
    let mut n = 0;
    while Instant::now() < until {
        s.push1(&busy, &format!("p{n}"), "x").await?;
        n += 1;
        sleep_ms(100).await;
    }
    Ok(())
}

// Each case keeps its queues few: before a removal is due the model keeps both outcomes
// for every queue that retention may touch (and, in a lax run, the PROJECT alternatives
// too), so the states a case's model carries grow with the product of its queues.

/// RET-1, RET-3: an acked message stays for other groups; past its age plus the interval
/// it is gone for every group, also where a longer `maxWaitTimeSeconds` is set (the
/// shorter limit counts), while other partitions keep being written.
async fn aged_out(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let both = s.name("both");
    let queues = [
        (
            &q,
            json!({"retentionEnabled": true, "retentionSeconds": ROOMY_AGE_S}),
        ),
        (
            &both,
            json!({"retentionEnabled": true, "retentionSeconds": ROOMY_AGE_S, "maxWaitTimeSeconds": 3600}),
        ),
    ];
    for (name, options) in &queues {
        s.configure(name, options.clone()).await?;
    }
    let pushed = Instant::now();
    for (name, _) in queues {
        s.push1(name, "p", "a").await?;
    }
    before_aging(pushed, ROOMY_AGE_S, kept_for_another_group(s, &q).await)?;
    past_retention_while_busy(s).await?;
    for (name, limits) in [
        (&q, "retentionSeconds"),
        (&both, "retentionSeconds under a longer maxWaitTimeSeconds"),
    ] {
        let late = s.pop_q(name, &[("consumerGroup", "late")]).await?;
        ensure_timely!(
            late.is_none(),
            RET_3,
            "a message older than {limits} was still delivered after the retention interval"
        )?;
    }
    Ok(())
}

/// RET-1: a message one group acked is still delivered to another.
async fn kept_for_another_group(s: &mut Session, q: &str) -> CaseResult {
    let p = s.pop_some(q, &[("consumerGroup", "g")]).await?;
    s.ack_batch(Some("g"), acks_for(&p, "completed")).await?;
    let other = s
        .pop_q(q, &[("consumerGroup", "h"), ("autoAck", "true")])
        .await?;
    ensure!(
        txns(&other) == ["a"],
        RET_1,
        "an ack removed the message for another group"
    )
}

/// RET-2: without `retentionEnabled`, neither `retentionSeconds` (also beside a longer
/// `maxWaitTimeSeconds`) nor `completedRetentionSeconds` removes anything.
async fn gated(s: &mut Session) -> CaseResult {
    let [gated, capped, done] = ["gated", "capped", "done"].map(|n| s.name(n));
    let queues = [
        (&gated, json!({"retentionSeconds": 1})),
        (
            &capped,
            json!({"retentionSeconds": 1, "maxWaitTimeSeconds": 3600}),
        ),
        (&done, json!({"completedRetentionSeconds": 1})),
    ];
    for (name, options) in queues {
        s.configure(name, options).await?;
        s.push1(name, "p", "a").await?;
    }
    // Committed by its only group: removable under completedRetentionSeconds, were it on.
    s.pop_some(&done, &[("consumerGroup", "g"), ("autoAck", "true")])
        .await?;
    past_retention(s, 1).await;
    let kept_by = [
        (&gated, "retentionSeconds"),
        (
            &capped,
            "retentionSeconds, beside a longer maxWaitTimeSeconds,",
        ),
        (&done, "completedRetentionSeconds"),
    ];
    for (name, option) in kept_by {
        let kept = s.pop_q(name, &[("consumerGroup", "late")]).await?;
        ensure!(
            txns(&kept) == ["a"],
            RET_2,
            "{option} removed a message without retentionEnabled"
        )?;
    }
    Ok(())
}

/// RET-2..4 under `completedRetentionSeconds`: past the interval, what every group
/// committed is gone and the rest stays.
async fn completed(s: &mut Session) -> CaseResult {
    let uneven = s.name("uneven");
    committed_unevenly(s, &uneven).await?;
    past_retention(s, ROOMY_AGE_S).await;
    removed_where_all_committed(s, &uneven).await
}

/// RET-2 under `completedRetentionSeconds`: `a` is committed by both groups of the
/// partition, `b` only by `g`.
async fn committed_unevenly(s: &mut Session, q: &str) -> CaseResult {
    s.configure(
        q,
        json!({"retentionEnabled": true, "completedRetentionSeconds": ROOMY_AGE_S}),
    )
    .await?;
    let pushed = Instant::now();
    s.push_many(q, "p", &["a", "b"]).await?;
    before_aging(pushed, ROOMY_AGE_S, commit_unevenly(s, q).await)
}

/// `g` commits both, then `h`, new to the partition, commits `a`, which is not yet
/// removable although every group with a cursor had committed it (RET-3).
async fn commit_unevenly(s: &mut Session, q: &str) -> CaseResult {
    s.pop_some(
        q,
        &[("consumerGroup", "g"), ("batch", "2"), ("autoAck", "true")],
    )
    .await?;
    let h = s
        .pop_some(
            q,
            &[("consumerGroup", "h"), ("batch", "1"), ("autoAck", "true")],
        )
        .await?;
    let got = txns(&Some(h));
    ensure!(
        got == ["a"],
        RET_3,
        "a message its one group had committed was gone for a new group before it was removable; got {got:?}"
    )
}

/// Past the interval, `a` is gone, `b` stays for `h`, and `g`'s cursor, which was past
/// what was removed, is where `g` left it (RET-4 moves only cursors below the removal).
async fn removed_where_all_committed(s: &mut Session, q: &str) -> CaseResult {
    let g = s.pop_q(q, &[("consumerGroup", "g")]).await?;
    ensure!(
        g.is_none(),
        RET_4,
        "a removal moved back a cursor that was past it: group g got {:?} again",
        txns(&g)
    )?;
    let h = s.pop_q(q, &[("consumerGroup", "h")]).await?;
    ensure!(
        txns(&h) == ["b"],
        RET_2,
        "a message one group had not committed was removed; got {:?}",
        txns(&h)
    )?;
    let late = s.pop_q(q, &[("consumerGroup", "late")]).await?;
    ensure_timely!(
        txns(&late) == ["b"],
        RET_3,
        "a message every group had committed, older than completedRetentionSeconds, was still delivered after the retention interval; got {:?}",
        txns(&late)
    )
}

/// RET-4: after removal an ack of the message is unresolvable, its lease is gone, its
/// transactionId may be pushed again, the group resumes at the oldest retained message
/// and its dead letters are still listed, as themselves. They are neither the partition's
/// first message (a copy taken from the wrong message shows) nor short of its last (the
/// removal's own end takes its copy too).
async fn pointers(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(
        &q,
        json!({"retentionEnabled": true, "retentionSeconds": ROOMY_AGE_S, "retryLimit": 0, "leaseTime": 600}),
    )
    .await?;
    let pushed = Instant::now();
    s.push_many(&q, "p", &["z", "a", "b"]).await?;
    let held = before_aging(pushed, ROOMY_AGE_S, pointed_at(s, &q).await)?;
    past_retention(s, ROOMY_AGE_S).await;
    // Both are gone for a group new to the partition: the removal is seen first.
    let probe = s
        .pop_q(&q, &[("consumerGroup", "probe"), ("autoAck", "true")])
        .await?;
    ensure!(
        probe.is_none(),
        RET_3,
        "messages past their age and the retention interval were delivered"
    )?;
    let again = s.push1(&q, "p", "a").await?;
    ensure!(
        again.status == PushStatus::Queued,
        RET_4,
        "a removed message's transactionId still deduplicates"
    )?;
    let acked = s.ack_batch(Some("g"), acks_for(&held, "completed")).await?;
    ensure!(
        !acked[0].success && acked[0].error.as_deref() == Some("unresolvable"),
        RET_4,
        "an ack of a removed message was resolved"
    )?;
    let next = s.pop_q(&q, &[("consumerGroup", "g")]).await?;
    ensure!(txns(&next) == ["a"], RET_4, "the group resumes at the oldest retained message, its lease over removed ones gone; got {:?}",
                txns(&next))?;
    for (group, txn) in [("g", "a"), ("d", "b")] {
        let d = s.dlq(&[("queue", &q), ("consumerGroup", group)]).await?;
        ensure!(
            d.total == 1,
            RET_4,
            "{group}'s dead letter of a removed message is no longer listed"
        )?;
        ensure!(
            d.messages[0].transaction_id == txn,
            RET_4,
            "{group}'s dead letter of removed message {txn} is listed as {:?}",
            d.messages[0].transaction_id
        )?;
    }
    Ok(())
}

/// Before `z`, `a` and `b` age out: group g commits `z`, dead-letters `a` and holds a
/// lease on `b` (returned); group d commits `z` and `a` and dead-letters `b`, the last
/// message, the one the removal ends at.
async fn pointed_at(s: &mut Session, q: &str) -> Result<PopResponse, Failure> {
    let done = s
        .pop_some(q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    s.ack_batch(Some("g"), acks_for(&done, "completed")).await?;
    let first = s
        .pop_some(q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    s.ack_batch(Some("g"), acks_for(&first, "failed")).await?;
    let held = s
        .pop_some(q, &[("consumerGroup", "g"), ("batch", "1")])
        .await?;
    let all = s
        .pop_some(q, &[("consumerGroup", "d"), ("batch", "3")])
        .await?;
    let mut acks = acks_for(&all, "completed");
    if let Some(last) = acks.last_mut() {
        last["status"] = json!("failed");
    }
    s.ack_batch(Some("d"), acks).await?;
    Ok(held)
}

/// RET-5: a push past `maxSize` is refused as a whole; duplicates do not count and
/// consuming makes room.
async fn max_size(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"maxSize": 2})).await?;
    s.push_many(&q, "p", &["a", "b"]).await?;
    let over = json!({"items": [
        {"queue": q, "partition": "p", "transactionId": "c"},
        {"queue": q, "partition": "other", "transactionId": "d"}]});
    let r = s.post("/api/v1/push", over).await?;
    ensure!(
        r.status == 429,
        RET_5,
        "a push past maxSize answered {} where 429 is expected",
        r.status
    )?;
    let dup = s.push1(&q, "p", "a").await?;
    ensure!(
        dup.status == PushStatus::Duplicate,
        RET_5,
        "a duplicate is not refused by maxSize"
    )?;
    s.pop_some(&q, &[("batch", "1"), ("autoAck", "true")])
        .await?;
    s.push1(&q, "p", "c").await?;
    let rest = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&rest) == ["b", "c"],
        RET_5,
        "the refused push wrote something: {:?}",
        txns(&rest)
    )?;
    // Items whose transactionId the broker mints are bounded alike (a broker may write
    // them by a path of their own), down to the smallest bound.
    let one = s.name("one");
    s.configure(&one, json!({"maxSize": 1})).await?;
    let minted = |n: u32| json!({"items": [{"queue": one, "partition": "p", "payload": n}]});
    let first = s.post("/api/v1/push", minted(1)).await?;
    let second = s.post("/api/v1/push", minted(2)).await?;
    ensure!(
        (first.status, second.status) == (201, 429),
        RET_5,
        "two pushes of one minted item each under maxSize 1 answered {} and {} where 201 and 429 are expected",
        first.status,
        second.status
    )
}

/// CFG-4: option keys the protocol does not act on come back as sent, and a configure
/// replaces them with the rest.
async fn echoed(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    let sent = json!({"deadLetterQueue": true, "dlqAfterMaxRetries": true, "ttl": {"s": [1, 2]}, "retryLimit": 1});
    let r = s.configure(&q, sent).await?;
    let kept = |r: &ConfigureResponse, k: &str| r.options.extra.get(k).cloned();
    ensure!(
        kept(&r, "deadLetterQueue") == Some(json!(true))
            && kept(&r, "ttl") == Some(json!({"s": [1, 2]})),
        CFG_4,
        "unknown option keys were not echoed"
    )?;
    let r = s.configure(&q, json!({"ttl": 5})).await?;
    ensure!(
        kept(&r, "deadLetterQueue").is_none() && kept(&r, "ttl") == Some(json!(5)),
        CFG_4,
        "a configure did not replace the kept keys (CFG-1)"
    )
}

/// CFG-4's bounds: too many keys, a key too long, values too large; each is 400 and the
/// queue keeps its options (retryLimit 0 still makes the first failure final).
async fn bounded(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.configure(&q, json!({"retryLimit": 0})).await?;
    let many: serde_json::Map<String, Value> = (0..=MAX_EXTRA_OPTIONS)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    for options in [
        Value::Object(many),
        json!({"k".repeat(MAX_EXTRA_KEY_BYTES + 1): 1}),
        json!({"blob": "x".repeat(MAX_EXTRA_VALUE_BYTES + 1)}),
        json!({"retentionEnabled": "yes"}),
        json!({"maxWaitTimeSeconds": -1}),
    ] {
        let body = json!({"queue": q, "options": options});
        s.rejected(HttpRequest::post("/api/v1/configure", &body), 400)
            .await?;
    }
    super::configure::first_failure_is_final(s, &q, CFG_4).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::fail;

    fn pushed_ago(ms: u64) -> Instant {
        Instant::now() - Duration::from_millis(ms)
    }

    #[test]
    fn a_check_that_fails_before_the_age_limit_is_a_departure() {
        let checked = before_aging::<()>(pushed_ago(100), 3, Err(fail("gone", &[RET_1])));
        assert!(matches!(checked, Err(Failure::Assertion { rules, .. }) if rules == [RET_1]));
    }

    #[test]
    fn a_check_that_fails_past_the_age_limit_is_a_timing_miss_on_the_same_rule() {
        let checked = before_aging::<()>(pushed_ago(3_100), 3, Err(fail("gone", &[RET_1])));
        let Err(Failure::Late { message, rules }) = checked else {
            panic!("{checked:?}")
        };
        assert_eq!(rules, [RET_1]);
        assert!(
            message.starts_with("gone, but only once the 3 s age limit"),
            "{message}"
        );
    }

    #[test]
    fn what_passes_or_is_not_a_case_assertion_is_left_alone() {
        assert!(before_aging(pushed_ago(3_100), 3, Ok(1)).is_ok_and(|n| n == 1));
        let down = Failure::Transport("refused".into());
        let checked = before_aging::<()>(pushed_ago(3_100), 3, Err(down));
        assert!(matches!(checked, Err(Failure::Transport(_))));
    }
}
