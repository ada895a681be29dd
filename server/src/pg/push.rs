//! The push route (PROTOCOL.md section 2): hands the items to the group-commit writers
//! (`writers.rs`), and spools them when maintenance is on or the database cannot be
//! reached (PUSH-7). The writing itself is `write.rs`'s.

use super::write::answers;
use super::writers::WriteError;
use super::PgBroker;
use crate::prepared::Prepared;
use crate::spool::AppendError;
use queen_reference::wire::{Answer, PushRequest, PushStatus};
use std::sync::Arc;

/// The push route: write, or spool under maintenance or when the database is away.
pub(crate) async fn push_route(broker: &PgBroker, req: PushRequest) -> Answer {
    if req.items.is_empty() {
        return Answer::Pushed(vec![]);
    }
    let items: Arc<Vec<Prepared>> = Arc::new(
        req.items
            .into_iter()
            .map(|i| Prepared::from_item(i, false))
            .collect(),
    );
    if broker.spool_first() {
        return spool(broker, &items).await;
    }
    // Written by the group-commit writers; a deadlock is retried.
    let mut result = broker.inner.writers.write(items.clone()).await;
    for _ in 0..3 {
        match result {
            Err(WriteError::Deadlock) => result = broker.inner.writers.write(items.clone()).await,
            _ => break,
        }
    }
    match result {
        Ok(Some(out)) => Answer::Pushed(out),
        Ok(None) => spool(broker, &items).await,
        Err(WriteError::Full(e)) => Answer::error(e.status, e.message),
        Err(WriteError::Unreachable(e)) => {
            broker.mark_down();
            tracing::warn!("database unreachable during a push, spooling it: {e}");
            spool(broker, &items).await
        }
        Err(e) => {
            tracing::error!("push failed: {e}");
            Answer::error(500, format!("push failed: {e}"))
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
