//! A streaming standby of a [`PersistentCluster`], for replication tests and the fault
//! scenarios that kill a primary.
//!
//! PostgreSQL already knows how to keep a second copy: `pg_basebackup -R` copies the
//! primary's data directory and writes the `primary_conninfo` that makes the copy
//! stream the primary's WAL as a standby. The standby names itself with an
//! `application_name`, which the primary lists in `synchronous_standby_names` when a
//! commit must wait for the standby's flush ([`Replication::Synchronous`]): then a
//! commit the primary reported survives the primary's loss. With
//! [`Replication::Asynchronous`] the primary does not wait, and a commit can be lost
//! with it. Promotion is `pg_promote()`: the standby finishes replaying what it has and
//! accepts writes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::bins::Bins;
use crate::error::{Error, Result};
use crate::user::run_as;
use crate::{sql, PersistentCluster};

/// Whether the primary's commits wait for the standby.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// Commits return once the standby has flushed their WAL (`synchronous_commit=on`
    /// with the standby in `synchronous_standby_names`).
    Synchronous,
    /// Commits return once the primary alone has flushed them.
    Asynchronous,
}

/// The `application_name` the standby streams under.
const STANDBY_NAME: &str = "queen_standby";
/// How long the standby may take to catch up after its start.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(60);

impl PersistentCluster {
    /// Copies this cluster into `dir` (which must not exist or be empty) with
    /// `pg_basebackup`, starts the copy as its streaming standby on `port` (0: any
    /// free port), and waits until it streams; with [`Replication::Synchronous`] the
    /// primary's commits wait for it from then on.
    pub async fn start_standby(
        &self,
        dir: impl AsRef<Path>,
        port: u16,
        replication: Replication,
    ) -> Result<PersistentCluster> {
        self.start_standby_through(dir, port, replication, self.port())
            .await
    }

    /// [`PersistentCluster::start_standby`] streaming through loopback port `through`
    /// (a forwarder to this cluster, which the fault tooling cuts to make the standby
    /// fall behind).
    pub async fn start_standby_through(
        &self,
        dir: impl AsRef<Path>,
        port: u16,
        replication: Replication,
        through: u16,
    ) -> Result<PersistentCluster> {
        let bins = Bins::find()?;
        let who = run_as()?;
        let data = std::path::absolute(dir.as_ref())
            .map_err(|e| Error::local(dir.as_ref().display(), e))?;
        prepare_dir(&data, who.as_ref())?;
        let conninfo =
            format!("host=127.0.0.1 port={through} user=postgres application_name={STANDBY_NAME}");
        let mut cmd = Command::new(bins.pg_basebackup());
        cmd.arg("-D")
            .arg(&data)
            .args(["-d", &conninfo, "-R", "-X", "stream", "--no-sync"])
            .current_dir(data.parent().unwrap_or(Path::new("/")))
            .stdin(Stdio::null());
        if let Some(who) = &who {
            who.apply(&mut cmd);
        }
        let out = tokio::process::Command::from(cmd)
            .output()
            .await
            .map_err(|e| Error::local(data.display(), format!("cannot run pg_basebackup: {e}")))?;
        if !out.status.success() {
            return Err(Error::local(
                data.display(),
                format!(
                    "pg_basebackup failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ),
            ));
        }
        // A standby whose primary is gone retries the stream every 5 s by default, and
        // a promotion waits for that sleep to end; the tooling wants it at once.
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.auto.conf"))
            .map_err(|e| Error::local(data.display(), e))?;
        std::io::Write::write_all(&mut conf, b"wal_retrieve_retry_interval = '100ms'\n")
            .map_err(|e| Error::local(data.display(), e))?;
        drop(conf);
        let standby = PersistentCluster::start(&data, port).await?;
        if replication == Replication::Synchronous {
            self.execute(&format!(
                "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"
            ))
            .await?;
            self.execute("SELECT pg_reload_conf()").await?;
        }
        self.wait_for_standby(replication).await?;
        Ok(standby)
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    pub async fn promote(&self) -> Result<()> {
        self.execute("SELECT pg_promote(true, 60)").await?;
        let deadline = Instant::now() + CATCH_UP_LIMIT;
        while self.in_recovery().await? {
            if Instant::now() >= deadline {
                return Err(Error::local(
                    self.data_dir().display(),
                    "promotion timed out",
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Whether the cluster is a standby (`pg_is_in_recovery()`).
    pub async fn in_recovery(&self) -> Result<bool> {
        let mut conn = self.connect().await?;
        let (r,): (bool,) = sqlx::query_as("SELECT pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await
            .map_err(|e| Error::local(self.data_dir().display(), e))?;
        let _ = conn.close().await;
        Ok(r)
    }

    async fn connect(&self) -> Result<sqlx::PgConnection> {
        sql::connect(self.url())
            .await
            .map_err(|e| Error::local(self.data_dir().display(), e))
    }

    async fn execute(&self, statement: &str) -> Result<()> {
        let mut conn = self.connect().await?;
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .map_err(|e| Error::local(self.data_dir().display(), format!("{statement}: {e}")))?;
        let _ = conn.close().await;
        Ok(())
    }

    /// Waits until the standby streams, and for a synchronous one until the primary
    /// counts it as synchronous.
    async fn wait_for_standby(&self, replication: Replication) -> Result<()> {
        let want = match replication {
            Replication::Synchronous => "sync",
            Replication::Asynchronous => "async",
        };
        let deadline = Instant::now() + CATCH_UP_LIMIT;
        loop {
            let mut conn = self.connect().await?;
            let state: Option<(String, String)> = sqlx::query_as(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1",
            )
            .bind(STANDBY_NAME)
            .fetch_optional(&mut conn)
            .await
            .map_err(|e| Error::local(self.data_dir().display(), e))?;
            let _ = conn.close().await;
            if state
                .as_ref()
                .is_some_and(|(s, sync)| s == "streaming" && sync == want)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::local(
                    self.data_dir().display(),
                    format!("the standby does not stream as {want}: {state:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Creates `data` empty, private and owned by the cluster's user.
fn prepare_dir(data: &Path, who: Option<&crate::user::RunAs>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |e: std::io::Error| Error::local(data.display(), e);
    std::fs::create_dir_all(data).map_err(fail)?;
    if std::fs::read_dir(data).map_err(fail)?.next().is_some() {
        return Err(Error::local(
            data.display(),
            "a standby needs an empty directory",
        ));
    }
    std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    if let Some(who) = who {
        who.check_reachable(data)?;
        who.own(data).map_err(fail)?;
    }
    Ok(())
}
