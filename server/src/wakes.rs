//! Wake-ups for parked pops (POP-11).
//!
//! A parked pop holds no database connection: it waits on a [`tokio::sync::Notify`]
//! for its queue (queue-scoped routes) or on the discovery channel (any push), with a
//! timer as a backstop. A push on this process rings the bells directly; a push on
//! another process arrives through PostgreSQL `LISTEN/NOTIFY` and rings the same bells.
//! A bell rung here is also handed to the engine's forwarder (if it has one), which tells
//! the other processes after the write that rang it has committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

/// The bells parked pops wait on.
#[derive(Default)]
pub struct Wakes {
    /// One bell per queue name, created when a pop first parks on it.
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    /// Rung by every push: discovery pops may match any queue.
    any: Arc<Notify>,
    /// Where the queues rung here are sent for pops parked in other processes.
    forward: OnceLock<UnboundedSender<String>>,
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

    /// Wakes every pop parked on `queue` and every discovery pop, here and, through the
    /// forwarder, in other processes.
    pub fn ring(&self, queue: &str) {
        self.ring_here(queue);
        if let Some(f) = self.forward.get() {
            // A closed forwarder means the engine is stopping: nobody is left to tell.
            let _ = f.send(queue.to_string());
        }
    }

    /// Wakes the pops parked on `queue` in this process only: for a ring that came from
    /// another process, which must not be sent back.
    pub fn ring_here(&self, queue: &str) {
        if let Some(n) = self.queues.lock().expect("wakes lock").get(queue) {
            n.notify_waiters();
        }
        self.any.notify_waiters();
    }

    /// Sends every queue rung from now on to `forwarder` too; the first one set stays.
    pub fn forward_to(&self, forwarder: UnboundedSender<String>) {
        let _ = self.forward.set(forwarder);
    }

    /// Wakes every parked pop (e.g. after a spool replay).
    pub fn ring_all(&self) {
        for n in self.queues.lock().expect("wakes lock").values() {
            n.notify_waiters();
        }
        self.any.notify_waiters();
    }
}
