//! A fresh database per test.
//!
//! Exists so tests sharing one server cannot see each other's tables, like `#[sqlx::test]`:
//! `CREATE DATABASE` with a unique name (process id, counter, random bits, so two test binaries
//! on one `DATABASE_URL` server do not collide), and `DROP DATABASE … WITH (FORCE)` when the
//! handle is dropped or [`TestDb::close`]d.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::source::{shared, Server, Source};
use crate::{bg, sql, urls};

/// An isolated, empty database on a shared server.
#[derive(Debug)]
pub struct TestDb {
    name: String,
    url: String,
    admin_url: String,
    source: Source,
    closed: bool,
}

impl TestDb {
    /// A new database on the process-wide [`shared`] server.
    pub async fn new() -> Result<TestDb> {
        TestDb::on(shared().await?).await
    }

    /// A new database on `server`.
    pub async fn on(server: &Server) -> Result<TestDb> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "queen_test_{}_{}_{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            RandomState::new().hash_one(0u8) as u32
        );
        let url = urls::with_database(server.admin_url(), &name)?;
        sql::create_database(server.admin_url(), &name).await?;
        Ok(TestDb {
            name,
            url,
            admin_url: server.admin_url().to_owned(),
            source: server.source(),
            closed: false,
        })
    }

    /// Connection URL of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its server comes from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Drops the database now, reporting failure (dropping the handle does it silently).
    pub async fn close(mut self) -> Result<()> {
        self.closed = true;
        sql::drop_database(&self.admin_url, &self.name).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let (admin, name) = (self.admin_url.clone(), self.name.clone());
        let dropped =
            bg::block_fresh(move || async move { sql::drop_database(&admin, &name).await });
        if let Ok(Err(e)) = dropped {
            eprintln!("queen-pg: could not drop test database {}: {e}", self.name);
        }
    }
}
