//! The push spool (PUSH-7, PUSH-10, MAINT-1): an append-only file of pushes answered
//! `buffered`.
//!
//! One line per push request, `N<TAB>[items]`, with the request's items as the push
//! path's own [`Prepared`] values (every id decided when accepted) and `N` their count,
//! so depth is known without parsing the payloads. A line is written and fsynced
//! before the 201 goes out, so nothing acknowledged is lost; a torn last line belongs
//! to a request that was never acknowledged and is skipped.
//!
//! Replay goes in bounded chunks from a committed offset: the engine writes a chunk in
//! one transaction, and only then does the offset move past it (kept in a `.done` file
//! beside the spool). A crash between the two replays that chunk again; the engine
//! skips the items already stored (their message ids were decided at accept time), so
//! nothing is written twice. When the offset reaches the end the file is emptied.
//!
//! Each process owns one file, held with an exclusive `flock`. At start a process takes
//! over the files of processes that died (their lock is free): the largest becomes its
//! own, so a restart after a long outage copies nothing; the others are appended to it.
//! A running process keeps looking, so the spool of a broker that never comes back is
//! replayed by any other broker that shares the directory.
//! The spool refuses a push that would take it past its capacity (PUSH-10).

use crate::prepared::Prepared;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use uuid::Uuid;

/// The spool of one process.
pub struct Spool {
    /// This process's file, locked for as long as the process lives; appends and the
    /// offset's moves hold this mutex, so a chunk never sees half a line.
    file: tokio::sync::Mutex<File>,
    path: PathBuf,
    /// The offset of the first line not yet replayed and committed.
    replayed: AtomicU64,
    /// The file's length.
    len: AtomicU64,
    /// Items waiting for replay (`bufferedMessages`).
    pending: AtomicUsize,
    /// Most bytes waiting for replay (PUSH-10).
    capacity: u64,
    /// The quarantine file's length and items when last counted (PUSH-12): counted again
    /// only when its length changed, since an operator may move it away at any time.
    quarantined: std::sync::Mutex<(u64, usize)>,
}

/// What `/health` and the metrics say of a spool (HEALTH-2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpoolState {
    /// Items waiting for replay.
    pub items: u64,
    pub bytes: u64,
    pub capacity: u64,
    /// The database answers, maintenance is off, and replay keeps failing.
    pub stuck: bool,
    /// Items the database refused for good, kept in the quarantine file (PUSH-12).
    pub quarantined: u64,
}

impl SpoolState {
    /// `idle` (empty), `pending` (waiting for the database or for maintenance to end) or
    /// `stuck`.
    pub fn replay(&self) -> &'static str {
        match (self.items, self.stuck) {
            (0, _) => "idle",
            (_, false) => "pending",
            (_, true) => "stuck",
        }
    }

    /// The `spool` object of the health answer.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "items": self.items,
            "bytes": self.bytes,
            "capacity": self.capacity,
            "replay": self.replay(),
            "quarantined": self.quarantined,
        })
    }
}

/// Why a push could not be spooled.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// PUSH-10: the spool is at its capacity.
    #[error("the spool holds {held} bytes of its {capacity}; this push needs {needed} more")]
    Full {
        held: u64,
        needed: u64,
        capacity: u64,
    },
    #[error("cannot write the spool: {0}")]
    Io(#[from] std::io::Error),
}

/// Bounds of one replay chunk: it stops before the line that would pass either
/// (a first line is always taken, however large: it was one push request).
#[derive(Clone, Copy, Debug)]
pub struct ChunkLimits {
    pub bytes: u64,
    pub items: usize,
}

/// Lines read for replay, not yet committed.
pub struct Chunk {
    pub items: Vec<Prepared>,
    /// How many lines (push requests) it holds.
    pub lines: usize,
    /// Lines that do not parse: they go to the quarantine when the chunk commits.
    unreadable: Vec<Vec<u8>>,
    /// The offset of the chunk's first line.
    start: u64,
    /// The offset after the chunk's last line.
    end: u64,
}

fn try_lock(f: &File) -> bool {
    // SAFETY: flock on a valid, owned descriptor.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn done_path(p: &Path) -> PathBuf {
    p.with_extension("done")
}

/// PUSH-12: where the spool `spool-<id>.jsonl` keeps what the database refused for good,
/// `quarantine-<id>.jsonl` beside it: the same line format, and a name the adoption of
/// orphaned spools passes over until an operator renames it.
fn quarantine_path(p: &Path) -> PathBuf {
    let name = p
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("spool.jsonl");
    p.with_file_name(format!("quarantine-{}", name.trim_start_matches("spool-")))
}

/// Appends `lines` to the quarantine beside `p`, synced before the spool moves past them.
fn quarantine_lines(p: &Path, lines: &[&[u8]]) -> std::io::Result<()> {
    let mut q = OpenOptions::new()
        .create(true)
        .append(true)
        .open(quarantine_path(p))?;
    for line in lines {
        q.write_all(line)?;
    }
    q.sync_data()
}

/// The committed offset recorded beside `p` (0 when none, or when it is past the end:
/// the file was emptied but the record not yet removed).
fn read_done(p: &Path, len: u64) -> u64 {
    std::fs::read_to_string(done_path(p))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&o| o <= len)
        .unwrap_or(0)
}

fn write_done(p: &Path, offset: u64) -> std::io::Result<()> {
    let tmp = p.with_extension("done.tmp");
    let mut f = File::create(&tmp)?;
    write!(f, "{offset}")?;
    f.sync_all()?;
    std::fs::rename(&tmp, done_path(p))
}

/// One line: its item count, and the items unless only the count is wanted.
fn parse_line(line: &[u8], items: bool) -> Option<(usize, Vec<Prepared>)> {
    let line = line.strip_suffix(b"\n")?;
    if line.starts_with(b"[") {
        // A line of the earlier format: the items alone.
        let parsed: Vec<Prepared> = serde_json::from_slice(line).ok()?;
        return Some((parsed.len(), parsed));
    }
    let tab = line.iter().position(|&b| b == b'\t')?;
    let n: usize = std::str::from_utf8(&line[..tab]).ok()?.parse().ok()?;
    if !items {
        return Some((n, vec![]));
    }
    let parsed: Vec<Prepared> = serde_json::from_slice(&line[tab + 1..]).ok()?;
    (parsed.len() == n).then_some((n, parsed))
}

/// Calls `each` with every whole line of `f` from `from`, with its end offset.
fn scan(f: &File, from: u64, mut each: impl FnMut(&[u8], u64) -> bool) -> std::io::Result<()> {
    let mut r = BufReader::new(f);
    r.seek(SeekFrom::Start(from))?;
    let mut at = from;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line)?;
        if n == 0 || !line.ends_with(b"\n") {
            return Ok(()); // the end, or a torn last line that was never acknowledged
        }
        at += n as u64;
        if !each(&line, at) {
            return Ok(());
        }
    }
}

/// The items waiting in `f` from `from`.
fn count_items(f: &File, from: u64) -> std::io::Result<usize> {
    let mut n = 0;
    scan(f, from, |line, _| {
        n += parse_line(line, false).map_or(0, |(k, _)| k);
        true
    })?;
    Ok(n)
}

/// The spool files in `dir` no live process holds, opened and locked, largest first.
fn dead_files(dir: &Path) -> std::io::Result<Vec<(PathBuf, File)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        let is_spool = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("spool-") && n.ends_with(".jsonl"));
        if !is_spool {
            continue;
        }
        let Ok(f) = OpenOptions::new().read(true).append(true).open(&p) else {
            continue;
        };
        // A file another process adopted and removed while we waited is not a spool.
        if try_lock(&f) && f.metadata()?.nlink() > 0 {
            out.push((p, f));
        }
    }
    out.sort_by_key(|(_, f)| std::cmp::Reverse(f.metadata().map(|m| m.len()).unwrap_or(0)));
    Ok(out)
}

/// Appends the unreplayed lines of a dead process's spool `other` to `file` (synced),
/// then removes `other`.
fn take_over(file: &mut File, other: &Path, f: File) -> std::io::Result<()> {
    let from = read_done(other, f.metadata()?.len());
    let mut copy = Ok(());
    scan(&f, from, |line, _| {
        copy = file.write_all(line);
        copy.is_ok()
    })?;
    copy?;
    file.sync_data()?;
    std::fs::remove_file(other)?;
    let _ = std::fs::remove_file(done_path(other));
    tracing::info!("adopted the spool {} of a stopped process", other.display());
    Ok(())
}

impl Spool {
    /// Opens this process's spool in `dir`: a dead process's file taken over, or a
    /// fresh one; other dead processes' unreplayed lines are appended to it.
    pub fn open(dir: &Path, capacity: u64) -> std::io::Result<Spool> {
        std::fs::create_dir_all(dir)?;
        let mut dead = dead_files(dir)?.into_iter();
        let (path, mut file) = match dead.next() {
            Some(taken) => taken,
            None => {
                // Locked before it gets a spool's name, so no live process adopts it.
                let id = Uuid::new_v4();
                let fresh = dir.join(format!(".spool-{id}.new"));
                let f = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .create_new(true)
                    .open(&fresh)?;
                if !try_lock(&f) {
                    return Err(std::io::Error::other("cannot lock a fresh spool file"));
                }
                let path = dir.join(format!("spool-{id}.jsonl"));
                std::fs::rename(&fresh, &path)?;
                (path, f)
            }
        };
        let replayed = read_done(&path, file.metadata()?.len());
        // A torn last line is cut off, so the next append starts a line of its own.
        let mut whole = replayed;
        scan(&file, replayed, |_, end| {
            whole = end;
            true
        })?;
        if whole < file.metadata()?.len() {
            file.set_len(whole)?;
        }
        for (other, f) in dead {
            take_over(&mut file, &other, f)?;
        }
        let len = file.metadata()?.len();
        let pending = count_items(&file, replayed)?;
        if pending > 0 {
            tracing::info!(
                "{pending} spooled pushes wait for replay in {}",
                path.display()
            );
        }
        Ok(Spool {
            file: tokio::sync::Mutex::new(file),
            path,
            replayed: AtomicU64::new(replayed),
            len: AtomicU64::new(len),
            pending: AtomicUsize::new(pending),
            capacity,
            quarantined: Default::default(),
        })
    }

    /// Takes over the spools of processes that died since this one started (their lock
    /// is free), so a broker that never comes back leaves nothing behind while another
    /// shares its spool directory: the number of items adopted.
    pub async fn adopt_orphans(&self) -> std::io::Result<usize> {
        let Some(dir) = self.path.parent() else {
            return Ok(0);
        };
        let dead = dead_files(dir)?;
        if dead.is_empty() {
            return Ok(0);
        }
        let mut f = self.file.lock().await;
        let before = self.len.load(Ordering::SeqCst);
        for (other, d) in dead {
            take_over(&mut f, &other, d)?;
        }
        let adopted = count_items(&f, before)?;
        self.len.store(f.metadata()?.len(), Ordering::SeqCst);
        self.pending.fetch_add(adopted, Ordering::SeqCst);
        Ok(adopted)
    }

    /// Appends one request's items and fsyncs before returning; refuses when the spool
    /// would pass its capacity (PUSH-10).
    pub async fn append(&self, entries: &[Prepared]) -> Result<(), AppendError> {
        let mut line = format!("{}\t", entries.len()).into_bytes();
        serde_json::to_writer(&mut line, entries).expect("serializes");
        line.push(b'\n');
        let mut f = self.file.lock().await;
        let held = self.bytes();
        if held + line.len() as u64 > self.capacity {
            return Err(AppendError::Full {
                held,
                needed: line.len() as u64,
                capacity: self.capacity,
            });
        }
        let len = self.len.load(Ordering::SeqCst);
        if let Err(e) = f.write_all(&line).and_then(|_| f.sync_data()) {
            // Half a line would glue itself to the next one: cut it off.
            let _ = f.set_len(len);
            return Err(e.into());
        }
        self.len.store(len + line.len() as u64, Ordering::SeqCst);
        self.pending.fetch_add(entries.len(), Ordering::SeqCst);
        Ok(())
    }

    /// Items waiting for replay.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Bytes waiting for replay.
    pub fn bytes(&self) -> u64 {
        self.len.load(Ordering::SeqCst) - self.replayed.load(Ordering::SeqCst)
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The next lines to replay, in order, within `limits` (`None`: nothing waits).
    pub async fn next_chunk(&self, limits: ChunkLimits) -> std::io::Result<Option<Chunk>> {
        let _appends = self.file.lock().await;
        let from = self.replayed.load(Ordering::SeqCst);
        let reader = File::open(&self.path)?;
        let mut c = Chunk {
            items: Vec::new(),
            lines: 0,
            unreadable: Vec::new(),
            start: from,
            end: from,
        };
        scan(&reader, from, |line, at| {
            let fits = c.lines == 0 || (at - from <= limits.bytes && c.items.len() < limits.items);
            if !fits {
                return false;
            }
            match parse_line(line, true) {
                Some((_, parsed)) => c.items.extend(parsed),
                None => {
                    tracing::warn!("an unreadable spool line goes to the quarantine");
                    c.unreadable.push(line.to_vec());
                }
            }
            c.lines += 1;
            c.end = at;
            true
        })?;
        Ok((c.end > from).then_some(c))
    }

    /// PUSH-12: moves `chunk`'s lines, which the database refused for good, to the
    /// quarantine file, then moves the spool past them, so the pushes behind them are
    /// replayed. Nothing is lost: an operator can re-admit the file (see `docs/operating.md`).
    pub async fn quarantine(&self, chunk: Chunk) -> std::io::Result<()> {
        {
            let _appends = self.file.lock().await;
            let mut bytes = Vec::new();
            scan(&File::open(&self.path)?, chunk.start, |line, at| {
                bytes.extend_from_slice(line);
                at < chunk.end
            })?;
            quarantine_lines(&self.path, &[&bytes])?;
        }
        let mut chunk = chunk;
        chunk.unreadable.clear();
        self.commit(chunk).await
    }

    /// Items in the quarantine file (PUSH-12).
    pub fn quarantined(&self) -> usize {
        let path = quarantine_path(&self.path);
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        let mut known = self.quarantined.lock().expect("quarantine count lock");
        if known.0 != len {
            let items = File::open(&path).and_then(|f| count_items(&f, 0));
            *known = (len, items.unwrap_or(0));
        }
        known.1
    }

    /// Records that `chunk` is stored: the offset moves past it, and the file is emptied
    /// once nothing is left.
    pub async fn commit(&self, chunk: Chunk) -> std::io::Result<()> {
        let f = self.file.lock().await;
        if !chunk.unreadable.is_empty() {
            let lines: Vec<&[u8]> = chunk.unreadable.iter().map(Vec::as_slice).collect();
            quarantine_lines(&self.path, &lines)?;
        }
        write_done(&self.path, chunk.end)?;
        self.replayed.store(chunk.end, Ordering::SeqCst);
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| {
                Some(p.saturating_sub(chunk.items.len()))
            });
        if chunk.end == self.len.load(Ordering::SeqCst) {
            f.set_len(0)?;
            f.sync_data()?;
            std::fs::remove_file(done_path(&self.path))?;
            self.len.store(0, Ordering::SeqCst);
            self.replayed.store(0, Ordering::SeqCst);
            self.pending.store(0, Ordering::SeqCst);
            tracing::info!("the spool {} is replayed", self.path.display());
        }
        Ok(())
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
    use crate::prepared::Prepared;

    fn item(n: usize) -> Prepared {
        Prepared {
            queue: "q".into(),
            partition: "Default".into(),
            data: queen_reference::wire::RawJson::from_value(&serde_json::json!({ "n": n })),
            transaction_id: format!("t{n}"),
            minted: false,
            trace_id: None,
            message_id: Uuid::now_v7(),
            producer_sub: None,
        }
    }

    fn temp_dir() -> PathBuf {
        std::env::temp_dir().join(format!("queen-spool-test-{}", Uuid::new_v4()))
    }

    const ALL: ChunkLimits = ChunkLimits {
        bytes: u64::MAX,
        items: usize::MAX,
    };

    async fn drain(s: &Spool, limits: ChunkLimits) -> Vec<Vec<String>> {
        let mut chunks = vec![];
        while let Some(c) = s.next_chunk(limits).await.unwrap() {
            chunks.push(c.items.iter().map(|i| i.transaction_id.clone()).collect());
            s.commit(c).await.unwrap();
        }
        chunks
    }

    /// PUSH-7: a process that dies with pushes in its spool leaves a file whose lock
    /// died with it; the next process to open the directory takes it over, in order.
    /// A file a live process holds is left alone.
    #[tokio::test]
    async fn push_7_a_dead_process_spool_is_adopted_in_order() {
        let dir = temp_dir();
        let (live, dead) = live_and_dying(&dir).await;
        drop(dead); // its lock goes with its file handle, as on SIGKILL
        let next = Spool::open(&dir, u64::MAX).unwrap();
        assert_eq!(
            next.pending(),
            3,
            "the dead process's items, not the live one's"
        );
        assert_eq!(drain(&next, ALL).await, [["t1", "t2", "t3"]]);
        assert_eq!(live.pending(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// CLUSTER-3: a running process takes over the spool of one that died after it
    /// started (from its last committed chunk), and leaves a live one's alone.
    #[tokio::test]
    async fn push_7_a_running_process_adopts_the_spool_of_one_that_died_after_it_started() {
        let dir = temp_dir();
        let (live, dead) = live_and_dying(&dir).await;
        let first = dead
            .next_chunk(ChunkLimits { bytes: 1, items: 1 })
            .await
            .unwrap();
        dead.commit(first.unwrap()).await.unwrap();
        assert_eq!(
            live.adopt_orphans().await.unwrap(),
            0,
            "its owner still runs"
        );
        drop(dead);
        assert_eq!(
            live.adopt_orphans().await.unwrap(),
            1,
            "the unreplayed line only"
        );
        assert_eq!(live.pending(), 2);
        assert_eq!(drain(&live, ALL).await, [["t9", "t3"]]);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "the dead spool is gone: {left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two processes' spools in `dir`: one holding `t9`, one (to die) `t1`, `t2`, `t3`
    /// in two requests.
    async fn live_and_dying(dir: &Path) -> (Spool, Spool) {
        let live = Spool::open(dir, u64::MAX).unwrap();
        live.append(&[item(9)]).await.unwrap();
        let dying = Spool::open(dir, u64::MAX).unwrap();
        dying.append(&[item(1), item(2)]).await.unwrap();
        dying.append(&[item(3)]).await.unwrap();
        (live, dying)
    }

    /// PUSH-10: replay goes in chunks bounded by items and bytes, in order, each line
    /// whole; a line over the bound still goes, alone.
    #[tokio::test]
    async fn push_10_replay_goes_in_bounded_chunks_in_order() {
        let dir = temp_dir();
        let s = Spool::open(&dir, u64::MAX).unwrap();
        for k in 0..5 {
            s.append(&[item(2 * k), item(2 * k + 1)]).await.unwrap();
        }
        let by_items = ChunkLimits {
            bytes: u64::MAX,
            items: 3,
        };
        let chunks = drain(&s, by_items).await;
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(
            sizes,
            [4, 4, 2],
            "whole lines, stopping once 3 items are reached"
        );
        let order: Vec<String> = chunks.into_iter().flatten().collect();
        let want: Vec<String> = (0..10).map(|n| format!("t{n}")).collect();
        assert_eq!(order, want);
        assert_eq!((s.pending(), s.bytes()), (0, 0), "emptied at the end");
        s.append(&[item(1)]).await.unwrap();
        s.append(&[item(2)]).await.unwrap();
        let tiny = ChunkLimits {
            bytes: 1,
            items: 100,
        };
        assert_eq!(
            drain(&s, tiny).await,
            [["t1"], ["t2"]],
            "one line per chunk"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// PUSH-10: a crash after a chunk is stored but before its commit replays only from
    /// the last committed chunk; one after the commit resumes after it.
    #[tokio::test]
    async fn push_10_a_restart_resumes_from_the_last_committed_chunk() {
        let dir = temp_dir();
        let s = Spool::open(&dir, u64::MAX).unwrap();
        for n in 0..4 {
            s.append(&[item(n)]).await.unwrap();
        }
        let one = ChunkLimits { bytes: 1, items: 1 };
        let first = s.next_chunk(one).await.unwrap().unwrap();
        s.commit(first).await.unwrap();
        let _uncommitted = s.next_chunk(one).await.unwrap().unwrap();
        drop(s); // the crash
        let again = Spool::open(&dir, u64::MAX).unwrap();
        assert_eq!(again.pending(), 3);
        assert_eq!(drain(&again, ALL).await, [["t1", "t2", "t3"]]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// PUSH-10: past its capacity the spool refuses a push and keeps what it holds; once
    /// replayed, it takes pushes again.
    #[tokio::test]
    async fn push_10_a_full_spool_refuses_and_keeps_what_it_holds() {
        let dir = temp_dir();
        let s = Spool::open(&dir, 400).unwrap();
        s.append(&[item(1)]).await.unwrap();
        let held = s.bytes();
        let mut refused = 0;
        for n in 2..10 {
            match s.append(&[item(n)]).await {
                Ok(()) => {}
                Err(AppendError::Full { capacity, .. }) => {
                    assert_eq!(capacity, 400);
                    refused += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(refused > 0 && s.bytes() <= 400 && s.bytes() >= held);
        let kept = drain(&s, ALL).await.concat();
        assert_eq!(kept.len(), 8 - refused + 1, "everything accepted is kept");
        s.append(&[item(20)]).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A torn last line (a push that was never acknowledged) is cut off at open, so the
    /// next append is not glued to it.
    #[tokio::test]
    async fn a_torn_last_line_is_cut_off_and_the_next_append_is_whole() {
        let dir = temp_dir();
        let s = Spool::open(&dir, u64::MAX).unwrap();
        s.append(&[item(1)]).await.unwrap();
        let path = s.path.clone();
        drop(s);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"1\t[{\"queue\":").unwrap();
        drop(f);
        let s = Spool::open(&dir, u64::MAX).unwrap();
        s.append(&[item(2)]).await.unwrap();
        assert_eq!(drain(&s, ALL).await, [["t1", "t2"]]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
