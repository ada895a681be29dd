//! Wake-ups for parked pops (POP-11).
//!
//! A parked pop holds no database connection: it waits on a [`tokio::sync::Notify`]
//! for its queue (queue-scoped routes) or on the discovery channel (any push), with a
//! timer as a backstop. A push on this process rings the bells directly; a push on
//! another process arrives through PostgreSQL `LISTEN/NOTIFY` and rings the same bells.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The bells parked pops wait on.
#[derive(Default)]
pub struct Wakes {
    /// One bell per queue name, created when a pop first parks on it.
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    /// Rung by every push: discovery pops may match any queue.
    any: Arc<Notify>,
}

impl Wakes {
    pub fn new() -> Wakes {
        Wakes::default()
    }

    /// The bell for `queue` (`None`: the discovery bell).
    pub fn bell(&self, queue: Option<&str>) -> Arc<Notify> {
        match queue {
            None => self.any.clone(),
            Some(q) => {
                let mut map = self.queues.lock().expect("wakes lock");
                if map.len() > 4096 {
                    // Forget bells nobody waits on, so the map tracks live queues only.
                    map.retain(|_, n| Arc::strong_count(n) > 1);
                }
                map.entry(q.to_string()).or_default().clone()
            }
        }
    }

    /// Wakes every pop parked on `queue` and every discovery pop.
    pub fn ring(&self, queue: &str) {
        if let Some(n) = self.queues.lock().expect("wakes lock").get(queue) {
            n.notify_waiters();
        }
        self.any.notify_waiters();
    }

    /// Wakes every parked pop (e.g. after a spool replay).
    pub fn ring_all(&self) {
        for n in self.queues.lock().expect("wakes lock").values() {
            n.notify_waiters();
        }
        self.any.notify_waiters();
    }
}
