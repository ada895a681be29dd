//! `Db`: the connection pool, counting who waits for it.
//!
//! sqlx reports how many connections a pool holds and how many are idle, but not how many
//! callers are queued for one, and that queue is what an operator needs to see when the
//! broker is slow because the pool is too small (MGMT-10's `db_pool_waiting`). Every
//! engine query takes its connection through [`Db::acquire`] or [`Db::begin`], which count
//! the caller while it waits; `Db` is deliberately not an sqlx executor, so no query can
//! borrow a connection behind the count's back.

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use sqlx::Transaction;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A cheap handle: clones share the pool and the count.
#[derive(Clone)]
pub struct Db {
    pool: PgPool,
    /// Callers inside `acquire`/`begin` that have no connection yet.
    waiting: Arc<AtomicU32>,
}

/// Counts one waiter for as long as it lives, so a cancelled wait is uncounted too.
struct Waiter<'a>(&'a AtomicU32);

impl<'a> Waiter<'a> {
    fn new(count: &'a AtomicU32) -> Waiter<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Waiter(count)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Db {
    pub fn new(pool: PgPool) -> Db {
        Db {
            pool,
            waiting: Arc::new(AtomicU32::new(0)),
        }
    }

    /// One connection, for queries outside a transaction.
    pub async fn acquire(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let _waiter = Waiter::new(&self.waiting);
        self.pool.acquire().await
    }

    /// A transaction on a connection of its own.
    pub async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let _waiter = Waiter::new(&self.waiting);
        self.pool.begin().await
    }

    /// A read-only transaction on one snapshot, for reads made of several statements
    /// that must agree with each other.
    pub async fn snapshot(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let mut tx = self.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// Callers waiting for a connection now.
    pub fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The pool itself, for its own figures and settings, never for queries.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_counts_while_it_lives() {
        let count = AtomicU32::new(0);
        {
            let _a = Waiter::new(&count);
            let _b = Waiter::new(&count);
            assert_eq!(count.load(Ordering::Relaxed), 2);
        }
        assert_eq!(count.load(Ordering::Relaxed), 0);
    }
}
