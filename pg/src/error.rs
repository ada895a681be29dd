//! Errors of the provider.
//!
//! Exists so every failure names what was tried and what to do about it: a test that cannot
//! get a database should say which of the three sources failed and why, not just "connection
//! refused". The error is `Clone` (messages are kept as strings) because the process-wide shared
//! server caches a failed start and hands the same error to every test that asks for it.

use std::fmt;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why no PostgreSQL could be provided.
///
/// `Debug` prints the same text as `Display`, so `.expect()` in a test shows the readable
/// message rather than a struct dump.
#[derive(Clone, thiserror::Error)]
pub enum Error {
    /// None of the three sources is usable; each field tells why that one was not.
    #[error(
        "no PostgreSQL available for tests; tried, in order:\n  \
         1. DATABASE_URL (an existing server): {url}\n  \
         2. Docker via testcontainers (image from QUEEN_PG_IMAGE, default {default_image}): {docker}\n  \
         3. a throwaway local cluster (initdb + postgres from PATH or `pg_config --bindir`): {local}\n\
         Fix one of them: set DATABASE_URL=postgres://user@host/db, start a Docker engine \
         (scripts/postgres-image.sh builds an image offline), or install the PostgreSQL server \
         binaries (e.g. `apt-get install postgresql`). QUEEN_TEST_PG=url|docker|local forces one."
    )]
    NoSource {
        /// Why DATABASE_URL was not used.
        url: String,
        /// Why Docker was not used.
        docker: String,
        /// Why local binaries were not used.
        local: String,
        /// The image that Docker would have run.
        default_image: String,
    },

    /// `QUEEN_TEST_PG` holds something other than `url`, `docker` or `local`.
    #[error("QUEEN_TEST_PG={0:?} is not one of url, docker, local")]
    InvalidChoice(String),

    /// The URL source was asked for but `DATABASE_URL` is unset or empty.
    #[error("QUEEN_TEST_PG=url (or Source::Url) needs DATABASE_URL to be set")]
    MissingDatabaseUrl,

    /// A URL could not be parsed or rewritten.
    #[error("bad PostgreSQL URL {url:?}: {reason}")]
    BadUrl {
        /// The offending URL (as given).
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A server did not accept a connection in time, or a statement failed.
    #[error("PostgreSQL at {url}: {reason}")]
    Sql {
        /// Where we tried to connect.
        url: String,
        /// What went wrong.
        reason: String,
    },

    /// No Docker engine answered.
    #[error("no Docker engine answers at {endpoint}: {reason}")]
    DockerUnavailable {
        /// The socket or address that was tried.
        endpoint: String,
        /// What happened.
        reason: String,
    },

    /// The engine answered but the container could not be started or reached.
    #[error("Docker could not run PostgreSQL image {image}: {reason}")]
    Docker {
        /// The image that was started.
        image: String,
        /// What went wrong.
        reason: String,
    },

    /// `initdb`/`postgres` were not found.
    #[error("PostgreSQL server binaries not found: {0}")]
    BinariesNotFound(String),

    /// A local cluster could not be set up or started.
    #[error("local PostgreSQL cluster in {dir}: {reason}")]
    Local {
        /// The cluster directory.
        dir: String,
        /// What went wrong, often with the tail of the server log.
        reason: String,
    },

    /// The unprivileged user that runs `initdb`/`postgres` under root could not be had.
    #[error("running PostgreSQL as root needs an unprivileged user: {0}")]
    User(String),
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Error {
    pub(crate) fn local(dir: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::Local {
            dir: dir.to_string(),
            reason: reason.to_string(),
        }
    }

    #[cfg(feature = "test-sources")]
    pub(crate) fn sql(url: &str, reason: impl fmt::Display) -> Self {
        Error::Sql {
            url: crate::urls::redact(url),
            reason: reason.to_string(),
        }
    }
}
