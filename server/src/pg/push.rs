//! The push route (PROTOCOL.md section 2): hands the items to the group-commit writers
//! (`writers.rs`), and spools them when maintenance is on or the database cannot be
//! reached (PUSH-7). The writing itself is `write.rs`'s.

use super::write::answers;
use super::writers::WriteError;
use super::PgBroker;
use crate::prepared::Prepared;
use crate::spool::AppendError;
use queen_reference::model::redrive::RETRY_UNDER_MAINTENANCE;
use queen_reference::wire::{Answer, PushRequest, PushResult, PushStatus};
use std::sync::Arc;

/// The push route: write, or spool under maintenance or when the database is away.
pub(crate) async fn push_route(broker: &PgBroker, req: PushRequest) -> Answer {
    if req.items.is_empty() {
        return Answer::Pushed(vec![]);
    }
    let items = prepared(req);
    if broker.spool_first() {
        return spool(broker, &items).await;
    }
    match write(broker, &items).await {
        Written::Done(out) => Answer::Pushed(out),
        Written::NotNow(_) => spool(broker, &items).await,
        Written::Refused(answer) => *answer,
    }
}

/// MGMT-12: a push that is written now or not at all, never spooled. A dead letter's
/// retry deletes the dead letter only after its push is written; a spooled push would
/// be written later while the dead letter stayed, and a second retry would push the
/// message twice. `why` says why nothing was written when the spool holds pushes.
pub(crate) async fn push_now(broker: &PgBroker, req: PushRequest, why: &str) -> Answer {
    let items = prepared(req);
    if broker.spool_first() {
        return Answer::error(503, why);
    }
    match write(broker, &items).await {
        Written::Done(out) => Answer::Pushed(out),
        Written::NotNow(reason) => Answer::error(503, reason),
        Written::Refused(answer) => *answer,
    }
}

fn prepared(req: PushRequest) -> Arc<Vec<Prepared>> {
    Arc::new(
        req.items
            .into_iter()
            .map(|i| Prepared::from_item(i, false))
            .collect(),
    )
}

/// What the group-commit writers made of a push.
enum Written {
    Done(Vec<PushResult>),
    /// Push maintenance is on, or the database cannot be reached: the push may be
    /// spooled (PUSH-7). Says which.
    NotNow(&'static str),
    /// The push is refused (RET-5) or failed: the answer to give.
    Refused(Box<Answer>),
}

/// Written by the group-commit writers; a deadlock is retried.
async fn write(broker: &PgBroker, items: &Arc<Vec<Prepared>>) -> Written {
    let mut result = broker.inner.writers.write(items.clone()).await;
    for _ in 0..3 {
        match result {
            Err(WriteError::Deadlock) => result = broker.inner.writers.write(items.clone()).await,
            _ => break,
        }
    }
    match result {
        Ok(Some(out)) => Written::Done(out),
        Ok(None) => Written::NotNow(RETRY_UNDER_MAINTENANCE),
        Err(WriteError::Full(e)) => Written::Refused(Box::new(Answer::error(e.status, e.message))),
        Err(WriteError::Unreachable(e)) => {
            broker.mark_down();
            tracing::warn!("database unreachable during a push: {e}");
            Written::NotNow("the database cannot be reached")
        }
        Err(e) => {
            tracing::error!("push failed: {e}");
            Written::Refused(Box::new(Answer::error(500, format!("push failed: {e}"))))
        }
    }
}

/// PUSH-7: appends to the disk spool (fsynced) and answers `buffered`; PUSH-10: a full
/// spool answers 503 (the route adds `Retry-After`).
async fn spool(broker: &PgBroker, items: &[Prepared]) -> Answer {
    match broker.inner.spool.append(items).await {
        Ok(()) => {}
        Err(e @ AppendError::Full { .. }) => {
            tracing::warn!("refusing a push: {e}");
            return Answer::error(503, format!("the push spool is full, try again later: {e}"));
        }
        Err(e) => return Answer::error(500, e),
    }
    Answer::Pushed(answers(items.iter(), PushStatus::Buffered))
}
