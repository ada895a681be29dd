//! Who runs `initdb` and `postgres`.
//!
//! Exists because both refuse to run as root, and CI runs as root. Under root we run them as the
//! `postgres` user when it exists (Debian's server packages create it), otherwise as a system user
//! `queen-pg` that we create with `useradd`. The switch is `Command::uid/gid` (std drops
//! supplementary groups too), so neither `sudo` nor `runuser` has to be installed. Directories
//! the server writes are chowned to that user, and the path to them must be searchable by it.

use std::ffi::{CStr, CString};
use std::os::unix::fs::{chown, MetadataExt};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Name of the user we create when running as root and there is no `postgres` user.
const FALLBACK_USER: &str = "queen-pg";

/// An unprivileged account to run PostgreSQL as.
#[derive(Debug, Clone)]
pub(crate) struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `None` when we are not root (run as ourselves); otherwise the account to switch to.
pub(crate) fn run_as() -> Result<Option<RunAs>> {
    static CACHE: OnceLock<Result<Option<RunAs>>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Ok(None);
            }
            if let Some(user) = lookup("postgres") {
                return Ok(Some(user));
            }
            if let Some(user) = lookup(FALLBACK_USER) {
                return Ok(Some(user));
            }
            create(FALLBACK_USER).map(Some)
        })
        .clone()
}

impl RunAs {
    /// Makes `cmd` run as this user.
    pub(crate) fn apply(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        cmd.uid(self.uid).gid(self.gid).env("USER", &self.name);
    }

    /// Gives `path` to this user.
    pub(crate) fn own(&self, path: &Path) -> std::io::Result<()> {
        chown(path, Some(self.uid), Some(self.gid))
    }

    /// Fails when some ancestor of `path` is not searchable by this user (e.g. `/root`, mode
    /// 0700): PostgreSQL would then fail with a less helpful "permission denied".
    pub(crate) fn check_reachable(&self, path: &Path) -> Result<()> {
        for dir in path.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(dir) else {
                continue;
            };
            let mode = meta.mode();
            let searchable = if meta.uid() == self.uid {
                mode & 0o100 != 0
            } else if meta.gid() == self.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !searchable {
                return Err(Error::User(format!(
                    "PostgreSQL runs as user {} (it refuses root), and that user cannot enter {} \
                     (mode {:o}) on the way to {}; choose a directory it can reach",
                    self.name,
                    dir.display(),
                    mode & 0o7777,
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

fn lookup(name: &str) -> Option<RunAs> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value to be overwritten by getpwnam_r.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call, and buf outlives our use of pwd's strings.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    // SAFETY: getpwnam_r succeeded, so pw_name points to a NUL-terminated string in buf.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned();
    Some(RunAs {
        name,
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

fn create(name: &str) -> Result<RunAs> {
    let out = Command::new("useradd")
        .args([
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .output();
    // Another process may have created it at the same moment: look again either way.
    if let Some(user) = lookup(name) {
        return Ok(user);
    }
    let why = match out {
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        Err(e) => format!("cannot run useradd: {e}"),
    };
    Err(Error::User(format!(
        "there is no `postgres` user and creating `{name}` failed: {why}"
    )))
}
