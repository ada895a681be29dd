//! The push spool (PUSH-7, MAINT-1): an append-only file of pushes answered `buffered`.
//!
//! One line per push request (a JSON array of its items, ids already decided), written
//! and fsynced before the 201 goes out, so nothing acknowledged is lost; a torn last
//! line belongs to a request that was never acknowledged and is skipped. Each process
//! owns one file, held with an exclusive `flock`; at start a process adopts the files
//! of processes that died (their lock is free). Replay takes every line in order and
//! writes it through the normal push path (dedup applies), then empties the file. A
//! line holds the push path's own [`Prepared`] items, every id decided when accepted.

use crate::pg::Prepared;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use uuid::Uuid;

pub struct Spool {
    /// This process's file, locked for as long as the process lives.
    file: tokio::sync::Mutex<File>,
    path: PathBuf,
    /// Items waiting for replay (`bufferedMessages`).
    pending: AtomicUsize,
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a valid, owned descriptor.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn read_lines(f: &mut File) -> std::io::Result<Vec<Vec<Prepared>>> {
    f.rewind()?;
    let mut out = Vec::new();
    for line in BufReader::new(&*f).lines() {
        let line = line?;
        match serde_json::from_str::<Vec<Prepared>>(&line) {
            Ok(entries) => out.push(entries),
            Err(e) => tracing::warn!("skipping a torn spool line (never acknowledged): {e}"),
        }
    }
    Ok(out)
}

impl Spool {
    /// Opens this process's spool file in `dir`, adopting files of dead processes.
    pub fn open(dir: &Path) -> std::io::Result<Spool> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("spool-{}.jsonl", Uuid::new_v4()));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        if !try_lock(&file) {
            return Err(std::io::Error::other("cannot lock a fresh spool file"));
        }
        let mut adopted = 0;
        for entry in std::fs::read_dir(dir)? {
            let p = entry?.path();
            let is_spool = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("spool-") && n.ends_with(".jsonl"));
            if !is_spool || p == path {
                continue;
            }
            let Ok(mut other) = OpenOptions::new().read(true).write(true).open(&p) else {
                continue;
            };
            if !try_lock(&other) {
                continue; // a live process owns it
            }
            for entries in read_lines(&mut other)? {
                writeln!(
                    file,
                    "{}",
                    serde_json::to_string(&entries).expect("serializes")
                )?;
                adopted += entries.len();
            }
            file.sync_data()?;
            std::fs::remove_file(&p)?;
        }
        if adopted > 0 {
            tracing::info!("adopted {adopted} spooled pushes left by a stopped process");
        }
        let pending = read_lines(&mut file)?.iter().map(Vec::len).sum();
        Ok(Spool {
            file: tokio::sync::Mutex::new(file),
            path,
            pending: AtomicUsize::new(pending),
        })
    }

    /// Appends one request's items and fsyncs before returning.
    pub async fn append(&self, entries: &[Prepared]) -> std::io::Result<()> {
        let mut f = self.file.lock().await;
        let mut line = serde_json::to_vec(entries).expect("serializes");
        line.push(b'\n');
        f.write_all(&line)?;
        f.sync_data()?;
        self.pending.fetch_add(entries.len(), Ordering::SeqCst);
        Ok(())
    }

    /// Items waiting for replay.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Hands every spooled item, in order, to `write`; empties the file if it succeeds.
    /// Appends wait meanwhile, so nothing slips between reading and emptying.
    pub async fn replay<F, Fut, T>(&self, write: F) -> Result<T, sqlx::Error>
    where
        F: FnOnce(Vec<Prepared>) -> Fut,
        Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
        T: Default,
    {
        let mut f = self.file.lock().await;
        let entries: Vec<Prepared> = read_lines(&mut f)
            .map_err(sqlx::Error::Io)?
            .into_iter()
            .flatten()
            .collect();
        if entries.is_empty() {
            return Ok(T::default());
        }
        let n = entries.len();
        let out = write(entries).await?;
        f.set_len(0).map_err(sqlx::Error::Io)?;
        f.sync_data().map_err(sqlx::Error::Io)?;
        self.pending.fetch_sub(n, Ordering::SeqCst);
        tracing::info!("replayed {n} spooled pushes from {}", self.path.display());
        Ok(out)
    }

    /// Flushes the file (appends are already fsynced; this is for shutdown).
    pub fn sync(&self) {
        if let Ok(f) = self.file.try_lock() {
            let _ = f.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::push::Prepared;

    fn item(n: usize) -> Prepared {
        Prepared {
            queue: "q".into(),
            partition: "Default".into(),
            data: serde_json::json!({ "n": n }),
            transaction_id: format!("t{n}"),
            minted: false,
            trace_id: None,
            message_id: Uuid::now_v7(),
        }
    }

    /// PUSH-7: a process that dies with pushes in its spool leaves a file whose lock
    /// died with it; the next process to open the directory adopts it, in order, and
    /// removes it. A file a live process holds is left alone.
    #[tokio::test]
    async fn push_7_a_dead_process_spool_is_adopted_in_order() {
        let dir = std::env::temp_dir().join(format!("queen-spool-test-{}", Uuid::new_v4()));
        let live = Spool::open(&dir).unwrap();
        live.append(&[item(9)]).await.unwrap();
        let dead = Spool::open(&dir).unwrap();
        dead.append(&[item(1), item(2)]).await.unwrap();
        dead.append(&[item(3)]).await.unwrap();
        let dead_path = dead.path.clone();
        drop(dead); // its lock goes with its file handle, as on SIGKILL
        let next = Spool::open(&dir).unwrap();
        assert_eq!(
            next.pending(),
            3,
            "the dead process's three items, not the live one's"
        );
        assert!(!dead_path.exists(), "the adopted file is removed");
        let got = next
            .replay(|items| async move { Ok::<_, sqlx::Error>(items) })
            .await
            .unwrap();
        let ids: Vec<&str> = got.iter().map(|i| i.transaction_id.as_str()).collect();
        assert_eq!(ids, ["t1", "t2", "t3"]);
        assert_eq!(live.pending(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
