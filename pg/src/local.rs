//! Source 3: a throwaway cluster from the local PostgreSQL binaries.
//!
//! Exists for machines with PostgreSQL installed but no Docker and no DATABASE_URL, and as the
//! fallback that keeps tests running when Docker is absent. The cluster lives in a fresh
//! directory under the temp dir (`queen-pg-<pid>-<random>`), listens on a free loopback port,
//! and is stopped and removed on drop. Under root the directory belongs to the unprivileged
//! user that runs PostgreSQL (see [`crate::user`]). Directories left behind by processes that
//! were killed are swept on the next start.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::bins::Bins;
use crate::cluster::{self, Postmaster};
use crate::error::{Error, Result};
use crate::urls;
use crate::user::run_as;

const PREFIX: &str = "queen-pg-";
const OWNER_FILE: &str = "owner.pid";

/// What a throwaway cluster promises about a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync, synchronous commit and full-page writes off: fast, and a crash of the
    /// machine may lose committed data. For tests.
    Off,
    /// PostgreSQL's defaults: a commit is on disk before it is answered. For benchmarks
    /// whose figures must hold for a real deployment.
    On,
}

impl Durability {
    /// The name reports print: `throwaway` or `durable`.
    pub fn label(self) -> &'static str {
        match self {
            Durability::Off => "throwaway",
            Durability::On => "durable",
        }
    }
}

/// A throwaway PostgreSQL cluster, stopped and deleted on drop.
#[derive(Debug)]
pub struct LocalCluster {
    dir: PathBuf,
    postmaster: Option<Postmaster>,
    url: String,
}

impl LocalCluster {
    /// `initdb` into a new temp directory and start `postgres` on a free loopback port.
    /// Durability is off (fsync, full-page writes): this is for tests.
    pub async fn start() -> Result<LocalCluster> {
        Self::start_with(Durability::Off).await
    }

    /// [`LocalCluster::start`] with the durability given: [`Durability::On`] keeps
    /// PostgreSQL's defaults (and `initdb` syncs its files), for benchmarks.
    pub async fn start_with(durability: Durability) -> Result<LocalCluster> {
        let bins = Bins::find()?;
        let who = run_as()?;
        sweep_stale();
        let dir = std::env::temp_dir().join(format!(
            "{PREFIX}{}-{:016x}",
            std::process::id(),
            RandomState::new().hash_one(0u8)
        ));
        let fail = |e: std::io::Error| Error::local(dir.display(), e);
        std::fs::create_dir(&dir).map_err(fail)?;
        // From here on, dropping `cluster` removes the directory, also on error.
        let mut cluster = LocalCluster {
            dir: dir.clone(),
            postmaster: None,
            url: String::new(),
        };
        std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string()).map_err(fail)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
        if let Some(who) = &who {
            who.check_reachable(&dir)?;
            who.own(&dir).map_err(fail)?;
        }
        let data = dir.join("data");
        let durable = durability == Durability::On;
        cluster::initdb(&bins, who.as_ref(), &data, durable).await?;
        let pm = Postmaster::start(
            &bins,
            who.as_ref(),
            &data,
            &dir.join("postgres.log"),
            0,
            if durable {
                cluster::DURABLE
            } else {
                cluster::THROWAWAY
            },
        )
        .await?;
        cluster.url = urls::loopback(pm.port());
        cluster.postmaster = Some(pm);
        Ok(cluster)
    }

    /// Superuser URL of the cluster's `postgres` database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.postmaster.as_ref().map_or(0, Postmaster::port)
    }

    /// The temp directory (data directory and server log inside).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the server and removes the directory now (the same as dropping it).
    pub fn shutdown(self) {}
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if let Some(mut pm) = self.postmaster.take() {
            let _ = pm.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes cluster directories whose owning process no longer exists (a killed test binary;
/// its server died with it through the parent-death signal).
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let path = entry.path();
        let owner = std::fs::read_to_string(path.join(OWNER_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = owner {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}
