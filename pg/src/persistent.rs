//! A cluster that survives restarts, for `queen-server`'s embedded default.
//!
//! Exists so the server can run with no database set up: the same local-binary code as the
//! throwaway cluster, but in a kept data directory (default `./.queen/postgres`). `initdb` runs
//! only when the directory is not yet a cluster; `postgres` starts on the chosen port with normal
//! durability, and stops (fast shutdown) on drop or [`PersistentCluster::shutdown`]. If this
//! process dies, the server gets SIGINT from the kernel and shuts down cleanly too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::bins::Bins;
use crate::cluster::{self, Postmaster};
use crate::error::{Error, Result};
use crate::urls;
use crate::user::run_as;

/// A PostgreSQL cluster in a kept directory, running while this value lives.
#[derive(Debug)]
pub struct PersistentCluster {
    data: PathBuf,
    postmaster: Option<Postmaster>,
    url: String,
    initialised: bool,
}

impl PersistentCluster {
    /// Where `queen-server` keeps its embedded database unless told otherwise.
    pub const DEFAULT_DIR: &'static str = ".queen/postgres";

    /// Starts the cluster in `dir` (created and initialised if needed) on loopback `port`
    /// (0: any free port). Authentication is trust, so the server listens on 127.0.0.1 only.
    pub async fn start(dir: impl AsRef<Path>, port: u16) -> Result<PersistentCluster> {
        let bins = Bins::find()?;
        let who = run_as()?;
        let data = std::path::absolute(dir.as_ref())
            .map_err(|e| Error::local(dir.as_ref().display(), e))?;
        let fail = |e: std::io::Error| Error::local(data.display(), e);
        let fresh = !data.join("PG_VERSION").is_file();
        if fresh {
            std::fs::create_dir_all(&data).map_err(fail)?;
            if std::fs::read_dir(&data).map_err(fail)?.next().is_some() {
                return Err(Error::local(
                    data.display(),
                    "the directory is neither empty nor a PostgreSQL data directory",
                ));
            }
            std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))
                .map_err(fail)?;
            if let Some(who) = &who {
                who.check_reachable(&data)?;
                who.own(&data).map_err(fail)?;
            }
            cluster::initdb(&bins, who.as_ref(), &data, true).await?;
        } else if let Some(who) = &who {
            who.check_reachable(&data)?;
        }
        let log = data.join("queen-postgres.log");
        let pm = Postmaster::start(&bins, who.as_ref(), &data, &log, port, &[]).await?;
        Ok(PersistentCluster {
            url: urls::loopback(pm.port()),
            data,
            postmaster: Some(pm),
            initialised: fresh,
        })
    }

    /// Superuser URL of the cluster's `postgres` database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port it listens on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.postmaster.as_ref().map_or(0, Postmaster::port)
    }

    /// The data directory (absolute).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Whether this start ran `initdb` (the directory was new).
    pub fn initialised(&self) -> bool {
        self.initialised
    }

    /// Stops the server (fast shutdown: clients are disconnected, data is checkpointed).
    pub fn shutdown(mut self) -> Result<()> {
        match self.postmaster.take() {
            Some(mut pm) => pm
                .stop()
                .map_err(|e| Error::local(self.data.display(), format!("stopping: {e}"))),
            None => Ok(()),
        }
    }
}

impl Drop for PersistentCluster {
    fn drop(&mut self) {
        if let Some(mut pm) = self.postmaster.take() {
            let _ = pm.stop();
        }
    }
}
