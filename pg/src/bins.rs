//! Finding the PostgreSQL server binaries.
//!
//! Exists because distributions hide them: Debian puts `initdb` and `postgres` in
//! `/usr/lib/postgresql/<major>/bin`, off PATH, and `pg_config` may belong to a client-only
//! install. We look, in order, at `QUEEN_PG_BINDIR`, `initdb` on PATH (following symlinks, since
//! `postgres` lives next to the real file), `pg_config --bindir`, and the newest
//! `/usr/lib/postgresql/*/bin`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// A directory holding `initdb` and `postgres`.
#[derive(Debug, Clone)]
pub(crate) struct Bins {
    dir: PathBuf,
}

impl Bins {
    /// Finds the binaries once per process.
    pub(crate) fn find() -> Result<Bins> {
        static CACHE: OnceLock<Result<Bins>> = OnceLock::new();
        CACHE.get_or_init(search).clone()
    }

    pub(crate) fn initdb(&self) -> PathBuf {
        self.dir.join("initdb")
    }

    pub(crate) fn postgres(&self) -> PathBuf {
        self.dir.join("postgres")
    }

    pub(crate) fn pg_basebackup(&self) -> PathBuf {
        self.dir.join("pg_basebackup")
    }

    #[cfg(feature = "test-sources")]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

fn complete(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("postgres").is_file()
}

fn search() -> Result<Bins> {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("QUEEN_PG_BINDIR") {
        let dir = PathBuf::from(dir);
        if complete(&dir) {
            return Ok(Bins { dir });
        }
        return Err(Error::BinariesNotFound(format!(
            "QUEEN_PG_BINDIR={} has no initdb and postgres",
            dir.display()
        )));
    }

    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("initdb"))
        .find(|f| f.is_file());
    match on_path {
        Some(initdb) => {
            let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
            if let Some(dir) = real.parent().filter(|d| complete(d)) {
                return Ok(Bins { dir: dir.into() });
            }
            tried.push(format!("{} has no postgres beside it", real.display()));
        }
        None => tried.push("no initdb on PATH".into()),
    }

    match Command::new("pg_config").arg("--bindir").output() {
        Ok(out) if out.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if complete(&dir) {
                return Ok(Bins { dir });
            }
            tried.push(format!(
                "`pg_config --bindir` is {} without initdb and postgres",
                dir.display()
            ));
        }
        _ => tried.push("no pg_config".into()),
    }

    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, dir)| complete(dir))
        .collect();
    versioned.sort();
    if let Some((_, dir)) = versioned.pop() {
        return Ok(Bins { dir });
    }
    tried.push("nothing in /usr/lib/postgresql/*/bin".into());
    Err(Error::BinariesNotFound(tried.join("; ")))
}
