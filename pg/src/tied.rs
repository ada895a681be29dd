//! Child processes that cannot outlive this process.
//!
//! Exists because a throwaway cluster lives in a process-wide static, and statics are never
//! dropped: if a test binary is killed or aborts, a daemonised postmaster (what `pg_ctl start`
//! makes) would keep running, holding its port and temp dir. Instead `postgres` runs as our child
//! with `PR_SET_PDEATHSIG`, so the kernel sends it SIGINT (fast shutdown) when we die.
//!
//! The parent-death signal fires when the *thread* that forked the child exits, not the process;
//! tokio worker and blocking-pool threads come and go, so every tied child is forked from one
//! dedicated thread that lives as long as the process.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{mpsc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("queen-pg-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .expect("queen-pg: cannot start its spawner thread");
        Mutex::new(tx)
    })
}

/// Spawns `cmd` so that the child gets SIGINT when this process exits or dies.
pub(crate) fn spawn(mut cmd: Command) -> io::Result<Child> {
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // syscalls (prctl, getppid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::other("parent exited before the child started"));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(cmd.spawn());
    });
    spawner()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(job)
        .map_err(|_| io::Error::other("queen-pg spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("queen-pg spawner thread is gone"))?
}
