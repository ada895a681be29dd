//! Management and observability cases (PROTOCOL.md section 17: MGMT-1..13, HEALTH-4).
//!
//! Every answer is checked against the model's view of this session's queues, so the
//! cases read views a session owns: one queue, one group, a namespace of its own. The
//! broker-wide figures (the overview, every group) include other sessions' queues on a
//! shared broker; those are read unchecked and held only to what this session added.

use super::cases;
use crate::calls::*;
use crate::case::CaseResult;
use crate::failure::{ensure, Failure};
use crate::rules::*;
use crate::session::*;
use crate::transport::now_ms;
use queen_reference::wire::*;
use serde_json::json;

pub fn cases() -> Vec<crate::case::Case> {
    cases![
        peek: "mgmt-6/peek-shows-each-state-and-takes-nothing", [MGMT_1, MGMT_6], Project, Management, needs [DeadLetter];
        one_message: "mgmt-7/one-message-with-every-reading-groups-state", [MGMT_7], Project, Management, needs [DeadLetter];
        auto_ack_retries: "mgmt-7/an-auto-ack-commit-forgets-the-retries-of-what-it-commits", [MGMT_7, POP_7], Project, Management, needs [Configure];
        groups: "mgmt-3/a-group-shows-its-lag-and-state", [MGMT_3, POP_18], Project, Management;
        resources: "mgmt-4/queues-depth-and-partitions-of-a-namespace", [MGMT_4, MGMT_5, MGMT_6], Project, Management;
        seek: "mgmt-8/seek-to-the-end-and-back-to-a-time", [MGMT_8], Project, Management;
        one_partition: "mgmt-8/one-partition-and-the-subscription-time", [MGMT_8], Project, Management;
        delete_group: "mgmt-9/a-deleted-group-starts-again", [MGMT_9], Project, Management;
        delete_message: "mgmt-11/a-deleted-message-is-never-delivered-counted-or-resolved", [MGMT_11], Project, Management;
        delete_dead_lettered: "mgmt-11/a-deleted-message-leaves-the-peek-its-dead-letter-stays", [MGMT_11, MGMT_6, DLQ_2], Project, Management, needs [DeadLetter];
        retry: "mgmt-12/a-retried-dead-letter-comes-back-for-every-group", [MGMT_12], Project, Management, needs [DeadLetter];
        pages: "mgmt-2/bad-pages-and-bodies-are-400", [MGMT_2], Project, Management, needs [BadInput];
        metrics: "mgmt-10/metrics-and-health-say-what-runs", [MGMT_10, HEALTH_4], Project, Management;
        analytics: "mgmt-13/analytics-count-a-queues-messages-and-dead-letters", [MGMT_13], Project, Management, needs [DeadLetter];
    ]
}

fn statuses(p: &MessagesPage) -> Vec<MessageStatus> {
    p.messages.iter().map(|m| m.status).collect()
}

/// MGMT-6, MGMT-1: a peek shows leased, dead-lettered, completed and pending messages for
/// a group, and takes nothing: the group's next pop delivers what was pending. A failure
/// it retries shows as the message's retry count.
async fn peek(s: &mut Session) -> CaseResult {
    use MessageStatus::*;
    let (q, g) = (s.name("q"), s.name("g"));
    s.configure(&q, json!({"retryLimit": 1, "retryDelay": 0}))
        .await?;
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let first = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "1")])
        .await?;
    let query = [("queue", q.as_str()), ("consumerGroup", g.as_str())];
    let seen: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
    ensure!(
        statuses(&seen) == [Leased, Pending, Pending],
        MGMT_6,
        "a peek after one pop shows {:?}",
        statuses(&seen)
    )?;
    each_filter_agrees(s, &query, &seen).await?;
    s.ack_batch(Some(&g), acks_for(&first, "dlq")).await?;
    let second = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "1")])
        .await?;
    s.ack_batch(Some(&g), acks_for(&second, "completed"))
        .await?;
    let seen: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
    ensure!(
        statuses(&seen) == [DeadLettered, Completed, Pending],
        MGMT_6,
        "a peek shows {:?}",
        statuses(&seen)
    )?;
    each_filter_agrees(s, &query, &seen).await?;
    let next = s.pop_q(&q, &[("consumerGroup", &g)]).await?;
    ensure!(
        txns(&next) == ["c"],
        MGMT_1,
        "the peeks took something from the group"
    )?;
    if let Some(next) = &next {
        s.ack_batch(Some(&g), acks_for(next, "failed")).await?;
    }
    let seen: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
    let counts: Vec<(MessageStatus, u32)> = seen
        .messages
        .iter()
        .map(|m| (m.status, m.retry_count))
        .collect();
    ensure!(
        counts == [(DeadLettered, 0), (Completed, 0), (Pending, 1)],
        MGMT_6,
        "after c failed once, the peek shows statuses and retry counts {counts:?}"
    )?;
    // Its second failure spends the last retry (DLQ-1): what the broker did, beside what
    // the peek said of it.
    let again = s.pop_some(&q, &[("consumerGroup", &g)]).await?;
    let last = s.ack_batch(Some(&g), acks_for(&again, "failed")).await?;
    ensure!(
        last.iter().all(|r| r.dlq),
        MGMT_6,
        "c's second failure of retryLimit 1 answered {last:?}"
    )
}

/// MGMT-6, MGMT-2: the peek filtered by each status lists, and counts, the rows of that
/// status in the unfiltered peek `all`, in the same order; and its pages of one and of
/// two rows, at every offset, are `all`'s rows there.
async fn each_filter_agrees(
    s: &mut Session,
    query: &[(&str, &str)],
    all: &MessagesPage,
) -> CaseResult {
    let rows = |p: &MessagesPage| -> Vec<(String, MessageStatus)> {
        let row = |m: &MessageRow| (m.message.transaction_id.clone(), m.status);
        p.messages.iter().map(row).collect()
    };
    let every = rows(all);
    for (size, k) in [1usize, 2]
        .into_iter()
        .flat_map(|n| (0..every.len()).map(move |k| (n, k)))
    {
        let (limit, at) = (size.to_string(), k.to_string());
        let mut paged = query.to_vec();
        paged.extend([("limit", limit.as_str()), ("offset", at.as_str())]);
        let page: MessagesPage = decode(&s.get("/api/v1/messages", &paged).await?, 200, "peek")?;
        let want = &every[k..every.len().min(k + size)];
        ensure!(
            rows(&page) == want && page.page.total == all.page.total,
            MGMT_6,
            "the peek's page of {size} at offset {k} lists {:?} of {}, not {want:?}",
            rows(&page),
            page.page.total
        )?;
    }
    for status in ["pending", "leased", "completed", "deadLettered"] {
        let mut filtered = query.to_vec();
        filtered.push(("status", status));
        let page: MessagesPage = decode(&s.get("/api/v1/messages", &filtered).await?, 200, "peek")?;
        let want: Vec<_> = rows(all)
            .into_iter()
            .filter(|(_, st)| Some(*st) == MessageStatus::parse(status))
            .collect();
        ensure!(
            rows(&page) == want && page.page.total == want.len() as u64,
            MGMT_6,
            "the peek by status {status} lists {:?} of {}, where the whole peek has {want:?}",
            rows(&page),
            page.page.total
        )?;
    }
    Ok(())
}

/// MGMT-7: the message by its partitionId and transactionId, with each reading group's
/// state and the error its dead letter kept.
async fn one_message(s: &mut Session) -> CaseResult {
    let (q, g, h) = (s.name("q"), s.name("g"), s.name("h"));
    s.configure(&q, json!({"retryLimit": 0})).await?;
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[("consumerGroup", &g)]).await?;
    let m = &p.messages[0];
    let fail = json!([{"transactionId": "a", "partitionId": m.partition_id, "leaseId": p.lease_id, "status": "failed", "error": "boom"}]);
    s.ack_batch(Some(&g), fail.as_array().cloned().unwrap_or_default())
        .await?;
    s.pop_some(&q, &[("consumerGroup", &h)]).await?;
    let path = format!("/api/v1/messages/{}/a", m.partition_id);
    let d: MessageDetail = decode(&s.get(&path, &[]).await?, 200, "message")?;
    let got: Vec<(String, MessageStatus, Option<String>)> = d
        .groups
        .iter()
        .map(|x| (x.group.clone(), x.status, x.error_message.clone()))
        .collect();
    let want = vec![
        (
            g.clone(),
            MessageStatus::DeadLettered,
            Some("boom".to_string()),
        ),
        (h.clone(), MessageStatus::Leased, None),
    ];
    ensure!(got == want, MGMT_7, "the groups' view is {got:?}")?;
    let missing = s
        .get(&format!("/api/v1/messages/{}/zz", m.partition_id), &[])
        .await?;
    ensure!(
        missing.status == 404,
        MGMT_7,
        "an unknown transactionId answered {}",
        missing.status
    )
}

/// MGMT-7, POP-7: a message that failed once and was then committed by an autoAck pop,
/// the last of the span it committed, shows no retries charged: the commit forgets the
/// retries at or below the new cursor, the cursor's own offset included.
async fn auto_ack_retries(s: &mut Session) -> CaseResult {
    let (q, g) = (s.name("q"), s.name("g"));
    s.configure(&q, json!({"retryLimit": 3, "retryDelay": 0}))
        .await?;
    s.push1(&q, "p", "a").await?;
    let p = s.pop_some(&q, &[("consumerGroup", &g)]).await?;
    let pid = p.messages[0].partition_id.clone();
    let fail = json!({"transactionId": "a", "partitionId": pid, "leaseId": p.lease_id,
                      "consumerGroup": g, "status": "failed", "error": "once"});
    s.ack(fail).await?;
    let again = s
        .pop_some(&q, &[("consumerGroup", &g), ("autoAck", "true")])
        .await?;
    ensure!(
        txns(&Some(again)) == ["a"],
        POP_7,
        "the autoAck pop after the failure did not deliver a"
    )?;
    let path = format!("/api/v1/messages/{pid}/a");
    let d: MessageDetail = decode(&s.get(&path, &[]).await?, 200, "message")?;
    let mine: Vec<_> = d.groups.iter().filter(|x| x.group == g).collect();
    ensure!(
        mine.len() == 1 && mine[0].retry_count == 0,
        MGMT_7,
        "after the autoAck commit, a shows {mine:?}"
    )
}

/// MGMT-3: one group over two queues: its lag, lag in seconds, live leases and state, then
/// behind.
async fn groups(s: &mut Session) -> CaseResult {
    let (q, r, g) = (s.name("q"), s.name("r"), s.name("g"));
    let before_push = std::time::Instant::now();
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let pushed = std::time::Instant::now();
    s.push1(&r, "p", "x").await?;
    let held = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "1")])
        .await?;
    s.pop_some(&r, &[("consumerGroup", &g), ("autoAck", "true")])
        .await?;
    // Old enough that its lag in seconds cannot be 0.
    sleep_ms(1100u64.saturating_sub(pushed.elapsed().as_millis() as u64)).await;
    let path = format!("/api/v1/consumer-groups/{g}");
    let asked = std::time::Instant::now();
    let v: GroupView = decode(&s.get(&path, &[]).await?, 200, "group")?;
    let (least, most) = (
        asked.duration_since(pushed).as_secs(),
        before_push.elapsed().as_secs(),
    );
    let seconds: Vec<u64> = v.queues.iter().map(|x| x.lag_seconds).collect();
    ensure!(
        seconds.len() == 2
            && (least..=most).contains(&seconds[0])
            && seconds[1] == 0
            && v.lag_seconds == seconds[0],
        MGMT_3,
        "the lag in seconds reads {seconds:?} (group {}): the oldest unread \
                     message was {least}..={most} s old, the other queue has none",
        v.lag_seconds
    )?;
    // Every group on the broker is listed: read unchecked, held to this session's group.
    // A group lagging for a second is not an hour behind; a queue it has caught up with
    // is not lagging even by 0 seconds.
    let behind_on_q = vec![q.as_str()];
    for (min, expected) in [("0", &behind_on_q), ("1", &behind_on_q), ("3600", &vec![])] {
        let mine = lagging_queues(s, min, &g).await?;
        ensure!(
            &mine == expected,
            MGMT_3,
            "lagging by {min} s or more lists the group's queues as {mine:?}"
        )?;
    }
    let rows: Vec<(u64, u64, GroupState)> = v
        .queues
        .iter()
        .map(|x| (x.lag, x.leased, x.state))
        .collect();
    ensure!(
        rows == [(3, 1, GroupState::Consuming), (0, 0, GroupState::CaughtUp)],
        MGMT_3,
        "the group's queues read {rows:?}"
    )?;
    s.ack_batch(Some(&g), acks_for(&held, "completed")).await?;
    let v: GroupView = decode(&s.get(&path, &[]).await?, 200, "group")?;
    ensure!(
        (v.lag, v.state) == (2, GroupState::Behind),
        MGMT_3,
        "after the ack the group reads lag {} {:?}",
        v.lag,
        v.state
    )?;
    let nobody = s
        .get(
            &format!("/api/v1/consumer-groups/{}", s.name("nobody")),
            &[],
        )
        .await?;
    ensure!(nobody.status == 404, MGMT_3, "an unknown group is not 404")?;
    queue_mode_records_nothing(s).await
}

/// POP-18: only a named group's first pop records a subscription, so a queue-mode pop on
/// a new queue, which seeds no cursor (POP-13), leaves the queue out of queue mode's
/// view. Queue mode is shared by every session, so its view is read unchecked and only
/// this queue is looked for.
async fn queue_mode_records_nothing(s: &mut Session) -> CaseResult {
    let fresh = s.name("fresh");
    s.pop_q(&fresh, &[("subscriptionMode", "new")]).await?;
    let path = format!("/api/v1/consumer-groups/{QUEUE_MODE}");
    let view = s.send_unchecked(HttpRequest::get(path, &[])).await?;
    let listed = match view.status {
        404 => false,
        _ => decode::<GroupView>(&view, 200, "group")?
            .queues
            .iter()
            .any(|x| x.queue == fresh),
    };
    ensure!(
        !listed,
        POP_18,
        "a queue-mode pop recorded a subscription: queue mode's view lists a queue it never read"
    )
}

/// MGMT-4, MGMT-5: the queues of this session's namespace in creation order, a queue's
/// figures, depth, partitions and peek (MGMT-6), its status page, and how many queues
/// the listings of namespaces and tasks give this session's own.
async fn resources(s: &mut Session) -> CaseResult {
    let ns = s.namespace();
    // Tasks of this session's own (CFG-3: the second dotted segment).
    let (task_one, task_two) = (s.name("one"), s.name("two"));
    let (one, two) = (format!("{ns}.{task_one}"), format!("{ns}.{task_two}"));
    s.push_many(&one, "p1", &["a", "b"]).await?;
    s.push1(&two, "p1", "c").await?;
    s.push_many(&one, "p2", &["d", "e"]).await?;
    let g = s.name("g");
    s.pop(
        PopRoute::Partition(one.clone(), "p1".into()),
        &[("consumerGroup", &g), ("autoAck", "true"), ("batch", "1")],
    )
    .await?;
    let page: QueuesPage = decode(
        &s.get("/api/v1/resources/queues", &[("namespace", &ns)])
            .await?,
        200,
        "queues",
    )?;
    let names: Vec<&str> = page.queues.iter().map(|q| q.name.as_str()).collect();
    ensure!(
        names == [one.as_str(), two.as_str()],
        MGMT_4,
        "the namespace lists {names:?}"
    )?;
    let depth: Depth = decode(
        &s.get(
            &format!("/api/v1/resources/queues/{one}/depth"),
            &[("group", &g)],
        )
        .await?,
        200,
        "depth",
    )?;
    ensure!(
        depth.pending == 3,
        MGMT_4,
        "depth for the group is {}",
        depth.pending
    )?;
    s.get(&format!("/api/v1/resources/queues/{one}"), &[])
        .await?;
    s.get("/api/v1/resources/partitions", &[("queue", &one)])
        .await?;
    // The peek over two partitions, filtered and a row a page (MGMT-6).
    let query = [("queue", one.as_str()), ("consumerGroup", g.as_str())];
    let all: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
    each_filter_agrees(s, &query, &all).await?;
    s.get(&format!("/api/v1/status/queues/{one}"), &[]).await?;
    s.get("/api/v1/status/queues", &[("namespace", &ns)])
        .await?;
    // The broker-wide overview counts other sessions' queues too: read unchecked.
    let o = s
        .send_unchecked(HttpRequest::get("/api/v1/resources/overview", &[]))
        .await?;
    let o: Overview = decode(&o, 200, "overview")?;
    ensure!(
        o.queues >= 2 && o.messages >= 4,
        MGMT_4,
        "the overview misses this session's queues: {o:?}"
    )?;
    let listed = [
        (Grouping::Namespaces, ns.as_str(), 2),
        (Grouping::Tasks, task_one.as_str(), 1),
        (Grouping::Tasks, task_two.as_str(), 1),
    ];
    for (listing, name, queues) in listed {
        let found = queues_under(s, listing, name).await?;
        ensure!(
            found == Some(queues),
            MGMT_4,
            "{} gives {name:?} {found:?} queues, not {queues}",
            listing.path()
        )?;
    }
    Ok(())
}

/// The queues `group` lags on by at least `min` seconds, as the broker-wide listing
/// (MGMT-3) gives them; read unchecked, since it lists every session's groups.
async fn lagging_queues(s: &mut Session, min: &str, group: &str) -> Result<Vec<String>, Failure> {
    let req = HttpRequest::get("/api/v1/consumer-groups/lagging", &[("minLagSeconds", min)]);
    let lagging: Lagging = decode(&s.send_unchecked(req).await?, 200, "lagging groups")?;
    Ok(lagging
        .consumer_groups
        .into_iter()
        .filter(|x| x.name == group)
        .flat_map(|x| x.queues.into_iter().map(|y| y.queue))
        .collect())
}

/// The two broker-wide listings that group queues by a name (MGMT-4).
#[derive(Clone, Copy)]
enum Grouping {
    Namespaces,
    Tasks,
}

impl Grouping {
    fn path(self) -> &'static str {
        match self {
            Grouping::Namespaces => "/api/v1/resources/namespaces",
            Grouping::Tasks => "/api/v1/resources/tasks",
        }
    }

    /// One page of the listing as (name, queue count) rows, with its paging.
    fn rows(self, answer: &HttpResponse) -> Result<(Vec<(String, u64)>, PageInfo), Failure> {
        Ok(match self {
            Grouping::Namespaces => {
                let p: Namespaces = decode(answer, 200, "namespaces")?;
                let rows = p.namespaces.into_iter().map(|r| (r.namespace, r.queues));
                (rows.collect(), p.page)
            }
            Grouping::Tasks => {
                let p: Tasks = decode(answer, 200, "tasks")?;
                (
                    p.tasks.into_iter().map(|r| (r.task, r.queues)).collect(),
                    p.page,
                )
            }
        })
    }
}

/// How many queues `listing` gives `name`, read page by page until `name` or the end.
/// Other sessions' names are listed too, so the pages are read unchecked.
async fn queues_under(
    s: &mut Session,
    listing: Grouping,
    name: &str,
) -> Result<Option<u64>, Failure> {
    let mut offset = 0u64;
    loop {
        let at = offset.to_string();
        let req = HttpRequest::get(listing.path(), &[("limit", "1000"), ("offset", &at)]);
        let (rows, page) = listing.rows(&s.send_unchecked(req).await?)?;
        if let Some((_, n)) = rows.iter().find(|(r, _)| r == name) {
            return Ok(Some(*n));
        }
        offset += rows.len() as u64;
        if rows.is_empty() || offset >= page.total {
            return Ok(None);
        }
    }
}

/// MGMT-8: a seek to the end leaves nothing to deliver and releases the lease; a seek
/// to a time delivers again from there.
async fn seek(s: &mut Session) -> CaseResult {
    let (q, g) = (s.name("q"), s.name("g"));
    s.push1(&q, "p", "a").await?;
    sleep_ms(50).await;
    let mark = queen_reference::time::format_iso(now_ms());
    sleep_ms(50).await;
    s.push1(&q, "p", "b").await?;
    s.pop_some(&q, &[("consumerGroup", &g)]).await?;
    let path = format!("/api/v1/consumer-groups/{g}/queues/{q}/seek");
    s.post(&path, json!({"toEnd": true})).await?;
    let none = s.pop_q(&q, &[("consumerGroup", &g)]).await?;
    ensure!(
        none.is_none(),
        MGMT_8,
        "a pop after a seek to the end delivered"
    )?;
    s.post(&path, json!({"timestamp": mark})).await?;
    let again = s.pop_q(&q, &[("consumerGroup", &g)]).await?;
    ensure!(
        txns(&again) == ["b"],
        MGMT_8,
        "after a seek back the group got {:?}",
        txns(&again)
    )
}

/// MGMT-9: after a group delete the group is gone and starts again from the beginning.
async fn delete_group(s: &mut Session) -> CaseResult {
    let (q, g) = (s.name("q"), s.name("g"));
    s.push_many(&q, "p", &["a", "b"]).await?;
    let p = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "2")])
        .await?;
    s.ack_batch(Some(&g), acks_for(&p, "completed")).await?;
    s.send(HttpRequest::delete(format!("/api/v1/consumer-groups/{g}")))
        .await?;
    let gone = s.get(&format!("/api/v1/consumer-groups/{g}"), &[]).await?;
    ensure!(
        gone.status == 404,
        MGMT_9,
        "a deleted group is still listed"
    )?;
    let again = s
        .pop_q(&q, &[("consumerGroup", &g), ("batch", "5")])
        .await?;
    ensure!(
        txns(&again) == ["a", "b"],
        MGMT_9,
        "a deleted group's next pop got {:?}",
        txns(&again)
    )
}

/// MGMT-2: a bad page, filter or seek body is 400 and nothing changes.
async fn pages(s: &mut Session) -> CaseResult {
    let q = s.name("q");
    s.push1(&q, "p", "a").await?;
    for (path, query) in [
        ("/api/v1/messages", vec![("limit", "0")]),
        ("/api/v1/messages", vec![("limit", "1001")]),
        ("/api/v1/resources/queues", vec![("offset", "-1")]),
        ("/api/v1/messages", vec![("status", "lost")]),
        (
            "/api/v1/consumer-groups/lagging",
            vec![("minLagSeconds", "soon")],
        ),
        ("/api/v1/consumer-groups/lagging", vec![("limit", "0")]),
        ("/api/v1/resources/namespaces", vec![("offset", "x")]),
        ("/api/v1/resources/tasks", vec![("limit", "1001")]),
    ] {
        let r = s.get(path, &query).await?;
        ensure!(
            r.status == 400,
            MGMT_2,
            "{path} {query:?} answered {}",
            r.status
        )?;
    }
    let seek = format!("/api/v1/consumer-groups/{}/queues/{q}/seek", s.name("g"));
    let r = s.post(&seek, json!({"toEnd": false})).await?;
    ensure!(
        r.status == 400,
        MGMT_8,
        "a seek without a target answered {}",
        r.status
    )?;
    let p = s.pop_q(&q, &[]).await?;
    ensure!(
        txns(&p) == ["a"],
        MGMT_2,
        "a refused request changed something"
    )
}

/// MGMT-10, HEALTH-4: `/metrics` is a JSON object with the uptime; health names the
/// version and uptime.
async fn metrics(s: &mut Session) -> CaseResult {
    let m = s.send_unchecked(HttpRequest::get("/metrics", &[])).await?;
    let ok = m.status == 200
        && m.body
            .as_ref()
            .and_then(|b| b.get("uptimeSeconds"))
            .is_some_and(|u| u.is_u64());
    ensure!(ok, MGMT_10, "/metrics answered {} {:?}", m.status, m.body)?;
    let h = s.get("/health", &[]).await?;
    let body = h.body.unwrap_or_default();
    ensure!(
        body.get("version").is_some_and(|v| v.is_string())
            && body.get("uptimeSeconds").is_some_and(|u| u.is_u64()),
        HEALTH_4,
        "the health answer has no version or uptime: {body}"
    )
}

/// MGMT-8: a seek on one partition leaves the others; the subscription time seeks every
/// partition of every queue the group reads.
async fn one_partition(s: &mut Session) -> CaseResult {
    let (q, g) = (s.name("q"), s.name("g"));
    let start = queen_reference::time::format_iso(now_ms() - 60_000);
    s.push1(&q, "p1", "a").await?;
    s.push1(&q, "p2", "b").await?;
    let all = [
        ("consumerGroup", g.as_str()),
        ("autoAck", "true"),
        ("batch", "5"),
        ("partitions", "2"),
    ];
    s.pop_some(&q, &all).await?;
    let one = format!("/api/v1/consumer-groups/{g}/queues/{q}/partitions/p1/seek");
    s.post(&one, json!({"timestamp": start})).await?;
    let back = s.pop_q(&q, &all).await?;
    ensure!(
        txns(&back) == ["a"],
        MGMT_8,
        "a seek of p1 gave back {:?}",
        txns(&back)
    )?;
    let sub = format!("/api/v1/consumer-groups/{g}/subscription");
    s.post(&sub, json!({"subscriptionTimestamp": start}))
        .await?;
    let mut again = txns(&s.pop_q(&q, &all).await?);
    again.sort();
    ensure!(
        again == ["a", "b"],
        MGMT_8,
        "after the subscription time the group got {again:?}"
    )
}

/// MGMT-11: a deleted message is never delivered, listed, counted or resolved again and
/// no longer deduplicates; a lease whose span ended at it ends at the message before.
async fn delete_message(s: &mut Session) -> CaseResult {
    let (q, g) = (s.name("q"), s.name("g"));
    s.push_many(&q, "p", &["a", "b", "c", "d"]).await?;
    let held = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "3")])
        .await?;
    let pid = held.messages[0].partition_id.clone();
    delete_c_and_b(s, &q, &pid).await?;
    // The span ended at c, which went: acking a releases the lease.
    let first = held.messages.first().map(|m| m.transaction_id.clone());
    let acks: Vec<_> = acks_for(&held, "completed")
        .into_iter()
        .filter(|a| a["transactionId"] == "a")
        .collect();
    let acked = s.ack_batch(Some(&g), acks).await?;
    ensure!(
        first.as_deref() == Some("a") && acked.iter().all(|r| r.success && r.lease_released),
        MGMT_11,
        "acking a, the lease's last remaining message, answered {acked:?}"
    )?;
    let late = s
        .ack(json!({"transactionId": "c", "partitionId": pid, "consumerGroup": g}))
        .await?;
    ensure!(
        late.error.as_deref() == Some("unresolvable"),
        MGMT_11,
        "an ack of the deleted c answered {late:?}"
    )?;
    deleted_is_gone(s, &q, &g, &pid).await
}

/// MGMT-11: deleting c and b answers their ids, and each delete leaves the queue's count
/// of retained messages one lower (one deleted message, then two, are both subtracted);
/// c, deleted, is then neither deleted again nor shown.
async fn delete_c_and_b(s: &mut Session, q: &str, pid: &str) -> CaseResult {
    let path = |t: &str| format!("/api/v1/messages/{pid}/{t}");
    for (t, left) in [("c", 3), ("b", 2)] {
        let r = s.send(HttpRequest::delete(path(t))).await?;
        let r: MessageDeleted = decode(&r, 200, "a message delete")?;
        ensure!(
            r.success && r.transaction_id == t,
            MGMT_11,
            "the delete of {t} answered {r:?}"
        )?;
        let queue: serde_json::Value = decode(
            &s.get(&format!("/api/v1/resources/queues/{q}"), &[]).await?,
            200,
            "the queue",
        )?;
        ensure!(
            queue["messages"] == left,
            MGMT_11,
            "after deleting {t}, the queue counts {} messages, not {left}",
            queue["messages"]
        )?;
    }
    let again = s.send(HttpRequest::delete(path("c"))).await?;
    let view = s.get(&path("c"), &[]).await?;
    ensure!(
        again.status == 404 && view.status == 404,
        MGMT_11,
        "after its delete, a second delete answered {} and the message view {}",
        again.status,
        view.status
    )
}

/// MGMT-11, after the delete: c is neither listed, counted, delivered nor a duplicate.
/// Then a, which the group has consumed, goes too: the group's lag counts only what
/// lies after its cursor, so that delete leaves it as it was.
async fn deleted_is_gone(s: &mut Session, q: &str, g: &str, pid: &str) -> CaseResult {
    let peek: MessagesPage = decode(
        &s.get("/api/v1/messages", &[("queue", q), ("consumerGroup", g)])
            .await?,
        200,
        "peek",
    )?;
    let listed: Vec<&str> = peek
        .messages
        .iter()
        .map(|m| m.message.transaction_id.as_str())
        .collect();
    ensure!(
        listed == ["a", "d"] && peek.page.total == 2,
        MGMT_11,
        "the peek lists {listed:?}"
    )?;
    // The rows after a deleted message move up: one row a page, d is the second row of
    // all and the first of the pending ones.
    for (status, offset) in [(None, "1"), (Some("pending"), "0")] {
        let mut query = vec![("queue", q), ("consumerGroup", g), ("limit", "1")];
        query.push(("offset", offset));
        query.extend(status.map(|st| ("status", st)));
        let page: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
        let listed = page
            .messages
            .iter()
            .map(|m| m.message.transaction_id.as_str());
        let listed: Vec<&str> = listed.collect();
        ensure!(
            listed == ["d"],
            MGMT_11,
            "the peek's page of one row at offset {offset} (status {status:?}) lists {listed:?}, not d"
        )?;
    }
    let consumed = s
        .send(HttpRequest::delete(format!("/api/v1/messages/{pid}/a")))
        .await?;
    decode::<MessageDeleted>(&consumed, 200, "the delete of a, already consumed")?;
    let depth: Depth = decode(
        &s.get(
            &format!("/api/v1/resources/queues/{q}/depth"),
            &[("group", g)],
        )
        .await?,
        200,
        "depth",
    )?;
    ensure!(
        depth.pending == 1,
        MGMT_11,
        "the group's depth is {}, with only d left after its cursor",
        depth.pending
    )?;
    let rest = txns(
        &s.pop_q(q, &[("consumerGroup", g), ("autoAck", "true")])
            .await?,
    );
    ensure!(
        rest == ["d"],
        MGMT_11,
        "the next pop delivered {rest:?}, not d alone"
    )?;
    let again = s.push1(q, "p", "c").await?;
    ensure!(
        again.status == PushStatus::Queued,
        MGMT_11,
        "a push reusing the deleted c's transactionId was {:?}",
        again.status
    )
}

/// MGMT-11, MGMT-6, DLQ-2: a group dead-letters a and c and completes b, then a is
/// deleted and d pushed. The peek no longer lists or counts a, in any state or filter;
/// c stays dead-lettered at the group's cursor, with d pending after it; a's dead letter
/// keeps its own copy in the dead-letter queue.
async fn delete_dead_lettered(s: &mut Session) -> CaseResult {
    use MessageStatus::*;
    let (q, g) = (s.name("q"), s.name("g"));
    s.configure(&q, json!({"retryLimit": 0})).await?;
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let mut pid = String::new();
    for status in ["dlq", "completed", "dlq"] {
        let one = s
            .pop_some(&q, &[("consumerGroup", &g), ("batch", "1")])
            .await?;
        pid.clone_from(&one.messages[0].partition_id);
        s.ack_batch(Some(&g), acks_for(&one, status)).await?;
    }
    let r = s
        .send(HttpRequest::delete(format!("/api/v1/messages/{pid}/a")))
        .await?;
    decode::<MessageDeleted>(&r, 200, "the delete of a, dead-lettered")?;
    s.push1(&q, "p", "d").await?;
    let every = vec![("b", Completed), ("c", DeadLettered), ("d", Pending)];
    for (filter, want) in [
        (None, every),
        (Some("deadLettered"), vec![("c", DeadLettered)]),
        (Some("pending"), vec![("d", Pending)]),
    ] {
        let mut query = vec![("queue", q.as_str()), ("consumerGroup", g.as_str())];
        query.extend(filter.map(|f| ("status", f)));
        let page: MessagesPage = decode(&s.get("/api/v1/messages", &query).await?, 200, "peek")?;
        let listed: Vec<(&str, MessageStatus)> = page
            .messages
            .iter()
            .map(|m| (m.message.transaction_id.as_str(), m.status))
            .collect();
        ensure!(
            listed == want && page.page.total == want.len() as u64,
            MGMT_11,
            "after a's delete, the peek (status {filter:?}) lists {listed:?} of {}",
            page.page.total
        )?;
    }
    let letters = s.dlq(&[("queue", &q), ("consumerGroup", &g)]).await?;
    ensure!(
        letters.total == 2,
        DLQ_2,
        "the group's dead letters after a's delete number {}, not a's and c's",
        letters.total
    )
}

/// MGMT-12: a dead letter's retry writes the message again under a new transactionId;
/// every reading group gets it, and the dead letter is gone.
async fn retry(s: &mut Session) -> CaseResult {
    let (q, g, h) = (s.name("q"), s.name("g"), s.name("h"));
    s.configure(&q, json!({"retryLimit": 0})).await?;
    s.push1(&q, "p", "a").await?;
    let first = s.pop_some(&q, &[("consumerGroup", &g)]).await?;
    s.ack_batch(Some(&g), acks_for(&first, "dlq")).await?;
    s.pop_some(&q, &[("consumerGroup", &h), ("autoAck", "true")])
        .await?;
    let path = format!(
        "/api/v1/messages/{}/a/retry",
        first.messages[0].partition_id
    );
    let r: RetryResponse = decode(&s.post(&path, json!({})).await?, 200, "retry")?;
    for group in [&g, &h] {
        let again = s
            .pop_q(&q, &[("consumerGroup", group), ("autoAck", "true")])
            .await?;
        ensure!(
            txns(&again) == [r.transaction_id.clone()],
            MGMT_12,
            "{group} got {:?} after the retry",
            txns(&again)
        )?;
    }
    let listed = s.dlq(&[("queue", &q)]).await?;
    ensure!(
        listed.total == 0,
        MGMT_12,
        "the retried dead letter is still listed"
    )?;
    let twice = s.post(&path, json!({})).await?;
    ensure!(
        twice.status == 404,
        MGMT_12,
        "a second retry answered {}",
        twice.status
    )
}

/// MGMT-13: a window of its own, kept to this session's queue, counts exactly its
/// messages and dead letters, in buckets aligned to the interval; the default window
/// holds them too; a window that cannot be served is 400.
async fn analytics(s: &mut Session) -> CaseResult {
    use queen_reference::time::{format_iso, parse_iso};
    let (q, g) = (s.name("q"), s.name("g"));
    s.configure(&q, json!({"retryLimit": 0})).await?;
    s.push_many(&q, "p", &["a", "b", "c"]).await?;
    let got = s
        .pop_some(&q, &[("consumerGroup", &g), ("batch", "1")])
        .await?;
    s.ack_batch(Some(&g), acks_for(&got, "dlq")).await?;
    // An hour either side: the broker's clock need not be the suite's to the second.
    let now = now_ms();
    let (from, to) = (format_iso(now - 3_600_000), format_iso(now + 3_600_000));
    let path = "/api/v1/status/analytics";
    let window = [
        ("queue", q.as_str()),
        ("from", from.as_str()),
        ("to", to.as_str()),
        ("interval", "minute"),
    ];
    let a: Analytics = decode(&s.get(path, &window).await?, 200, "analytics")?;
    let starts: Vec<Option<i64>> = a.buckets.iter().map(|b| parse_iso(&b.timestamp)).collect();
    let first = (now - 3_600_000).div_euclid(60_000) * 60_000;
    let aligned = starts.len() == 121
        && starts
            .iter()
            .enumerate()
            .all(|(i, t)| *t == Some(first + i as i64 * 60_000));
    ensure!(
        aligned,
        MGMT_13,
        "two hours by the minute from {from} gave {} buckets starting {:?}",
        starts.len(),
        a.buckets.first().map(|b| &b.timestamp)
    )?;
    let summed = (
        a.buckets.iter().map(|b| b.ingested).sum::<u64>(),
        a.buckets.iter().map(|b| b.dead_lettered).sum::<u64>(),
    );
    let totals = (a.totals.ingested, a.totals.dead_lettered);
    ensure!(
        totals == (3, 1) && summed == totals,
        MGMT_13,
        "three messages and one dead letter read as totals {totals:?}, buckets {summed:?}"
    )?;
    let d: Analytics = decode(&s.get(path, &[("queue", &q)]).await?, 200, "analytics")?;
    let defaults = (d.interval, (24..=25).contains(&d.buckets.len()));
    ensure!(
        defaults == (Interval::Hour, true) && (d.totals.ingested, d.totals.dead_lettered) == (3, 1),
        MGMT_13,
        "the default window reads {:?} with {} buckets and totals {:?}",
        d.interval,
        d.buckets.len(),
        d.totals
    )?;
    let long_ago = format_iso(now - 3 * 86_400_000);
    for query in [
        vec![("interval", "week")],
        vec![("from", "yesterday")],
        vec![("from", to.as_str()), ("to", from.as_str())],
        vec![
            ("from", long_ago.as_str()),
            ("to", to.as_str()),
            ("interval", "minute"),
        ],
    ] {
        let r = s.get(path, &query).await?;
        ensure!(
            r.status == 400,
            MGMT_13,
            "analytics {query:?} answered {}",
            r.status
        )?;
    }
    Ok(())
}
