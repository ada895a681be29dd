//! One PostgreSQL provider for the workspace's tests and for `queen-server`'s embedded default.
//!
//! Exists so no test, and no developer, has to set a database up by hand. Three sources are
//! tried in order:
//!
//! 1. `DATABASE_URL`, when set: an existing server (`Source::Url`).
//! 2. A container through testcontainers, when a Docker engine answers (`Source::Docker`);
//!    the image is `QUEEN_PG_IMAGE`, default `DEFAULT_IMAGE`. `scripts/postgres-image.sh`
//!    builds `queen-postgres:15` from Debian packages where no registry is reachable.
//! 3. A throwaway cluster from the local binaries (`initdb`, `postgres`), in a temp dir on a
//!    free loopback port (`Source::Local`). Under root it runs as the `postgres` user (or a
//!    `queen-pg` user it creates), since PostgreSQL refuses root.
//!
//! `QUEEN_TEST_PG=url|docker|local` forces one. Each test binary starts at most one server per
//! source (`shared`, `server`); each test takes its own database on it (`TestDb`):
//!
//! ```no_run
//! # async fn demo() -> Result<(), queen_pg::Error> {
//! let db = queen_pg::TestDb::new().await?; // fresh database on the shared server
//! let url: &str = db.url();                // postgres://…/queen_test_…
//! # Ok(()) }
//! ```
//!
//! The three sources and `TestDb` sit behind the `test-sources` feature, which the
//! workspace's tests turn on; `queen-server` itself links only the cluster code, so a production
//! binary carries no Docker client.
//!
//! For the embedded server, [`PersistentCluster`] keeps a cluster in a data directory
//! (default [`PersistentCluster::DEFAULT_DIR`]) across restarts.
//!
//! ## Crates chosen and rejected
//!
//! - **testcontainers** (used, without default features, so no TLS stack): the maintained Rust
//!   client for test containers; it handles the Docker API, port mapping and removal.
//! - **testcontainers-modules** (rejected): its `Postgres` image decides readiness from log
//!   lines printed by the official image's init sequence, which our own image does not print
//!   the same way; a `GenericImage` plus a connection retry works for both.
//! - **pgtemp** (rejected): as root it shells out to `sudo -u postgres` (no sudo on CI), panics
//!   instead of returning errors, waits for startup with fixed sleeps and `createdb`, has no
//!   retry when its randomly chosen port is taken, and has no persistent mode, which the
//!   embedded server needs anyway. The local cluster code here is small and covers both.
//! - **sqlx** (postgres + tokio only): the workspace's database client, used to check readiness
//!   and create and drop databases.
//!
//! See `pg/NOTES.md` for the same in short, and for the CI image.

#[cfg(feature = "test-sources")]
mod bg;
mod bins;
mod cluster;
#[cfg(feature = "test-sources")]
mod docker;
mod error;
mod local;
mod persistent;
#[cfg(feature = "test-sources")]
mod source;
mod sql;
mod standby;
#[cfg(feature = "test-sources")]
mod testdb;
mod tied;
mod urls;
mod user;

#[cfg(feature = "test-sources")]
pub use docker::{engine_answers as docker_engine_answers, image as docker_image, DEFAULT_IMAGE};
pub use error::{Error, Result};
pub use local::{Durability, LocalCluster};
pub use persistent::PersistentCluster;
#[cfg(feature = "test-sources")]
pub use source::{database_url, forced_source, local_binaries, server, shared, Server, Source};
pub use standby::Replication;
#[cfg(feature = "test-sources")]
pub use testdb::TestDb;
