//! Capability `database-control`: stopping and starting the broker's database, so the
//! suite can check what a broker does while its database is unreachable (HEALTH-1's 503,
//! PUSH-7's spool). Only a broker the CLI started itself on its own PostgreSQL cluster
//! offers it (the embedded target owns the cluster); against any other target the cases
//! needing it are skipped and listed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A future returned by [`DatabaseControl`].
pub type DbFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Stops and starts the database behind the broker under test.
pub trait DatabaseControl: Send + Sync {
    /// Stops the database (clients are disconnected); the broker keeps running.
    fn stop(&self) -> DbFuture<'_>;
    /// Starts it again with the same data, where the broker expects it.
    fn start(&self) -> DbFuture<'_>;
}

/// A shared handle on the target's database.
#[derive(Clone)]
pub struct Database(pub Arc<dyn DatabaseControl>);

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Database(..)")
    }
}
