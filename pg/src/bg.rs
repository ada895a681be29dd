//! A process-wide background tokio runtime, and blocking helpers for `Drop` code.
//!
//! Exists because the shared server outlives every test: `#[tokio::test]` builds one runtime per
//! test and drops it afterwards, and the Docker client (hyper connections, testcontainers' drop
//! logic) must not be tied to a runtime that is gone. Everything that belongs to the shared server
//! runs here, and `Drop`/`atexit` code can wait for async cleanup from any thread.

use std::future::Future;
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("queen-pg")
            .enable_all()
            .build()
            .expect("queen-pg: cannot build its background tokio runtime")
    })
}

/// Runs `fut` on the background runtime and awaits it from whatever runtime the caller is on.
pub(crate) async fn run<F>(fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match runtime().spawn(fut).await {
        Ok(out) => out,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("queen-pg background task cancelled: {e}"),
    }
}

/// Runs the future made by `make` on a new thread with its own small runtime and blocks until it
/// is done. For `Drop` code whose future is not `Send` (sqlx's executor bounds trip the
/// compiler's higher-ranked `Send` check), inside or outside a runtime.
pub(crate) fn block_fresh<F, Fut>(make: F) -> std::thread::Result<Fut::Output>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future,
    Fut::Output: Send + 'static,
{
    std::thread::spawn(move || {
        Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("queen-pg: cannot build a tokio runtime")
            .block_on(make())
    })
    .join()
}

/// Runs `fut` on the background runtime and blocks this thread until it is done or `limit`
/// passes (then `None`). Safe in `Drop` and `atexit`, inside or outside a runtime.
pub(crate) fn block<F>(fut: F, limit: Duration) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv_timeout(limit).ok()
}
