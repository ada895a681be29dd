//! Live checking of real traffic: the model between real clients and any broker.
//!
//! `watch` is a proxy a client is pointed at instead of the broker ([`proxy`]). Every
//! exchange is timed and handed to the online checker ([`online`]), which judges each
//! queue's calls against the reference model as they complete, in bounded memory, and
//! says so when a queue cannot be judged ([`attribute`]: which queue a call belongs
//! to). Findings are printed as they are made; on Ctrl-C or SIGTERM the watcher writes
//! its reports for the period watched. `check` replays a history `watch --record` wrote
//! (or a HAR file) through the same checker ([`record`]).

pub mod attribute;
pub mod online;
pub mod proxy;
pub mod record;
pub mod report;

pub use online::{Online, QueueVerdict, WatchFinding};
pub use report::WatchReport;

use crate::target::CheckSettings;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What `watch` is told.
pub struct WatchOptions {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The broker's base URL.
    pub target: String,
    /// How answers are judged.
    pub settings: CheckSettings,
    /// `--record FILE`: every exchange as a JSON line.
    pub record: Option<PathBuf>,
    /// `--findings FILE`: every finding as a JSON line, as it is made.
    pub findings: Option<PathBuf>,
    /// `--admin ADDR`: where `GET /metrics` answers in Prometheus text.
    pub admin: Option<SocketAddr>,
    /// Print findings as they are made.
    pub live: bool,
}

/// Runs the watcher until Ctrl-C or SIGTERM (or `stop` resolves): the report of the
/// period watched.
pub async fn watch(
    opts: WatchOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<WatchReport, String> {
    let started = queen_reference::time::wall_clock_ms();
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", opts.listen))?;
    let shared = Arc::new(shared(&opts)?);
    if let Some(addr) = opts.admin {
        report::serve_metrics(addr, shared.clone()).await?;
    }
    let accept = accept_loop(listener, shared.clone());
    tokio::select! {
        _ = accept => {}
        _ = stop => {}
        _ = terminated() => {}
    }
    shared.flush();
    let online = shared.checker();
    Ok(WatchReport::of(
        &online,
        &opts.target,
        started,
        opts.settings.strict_project,
    ))
}

fn shared(opts: &WatchOptions) -> Result<proxy::Shared, String> {
    let create = |p: &PathBuf| {
        std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    let record = opts.record.as_ref().map(create).transpose()?;
    let findings = opts.findings.as_ref().map(create).transpose()?;
    let findings = findings.map(std::sync::Mutex::new);
    let live = opts.live;
    let paint = crate::report::terminal::Paint::for_stdout();
    let on_finding = Box::new(move |f: &WatchFinding| {
        if live {
            print!("{}", report::render_finding(f, paint));
        }
        if let Some(w) = &findings {
            use std::io::Write;
            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
            let _ = serde_json::to_writer(&mut *w, f);
            let _ = w.write_all(b"\n");
            let _ = w.flush();
        }
    });
    let online = Online::new(opts.settings.clone(), &opts.target);
    Ok(proxy::Shared::new(&opts.target, online, record, on_finding))
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<proxy::Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| proxy::handle(shared.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Resolves on SIGTERM (and never where there is no such signal).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut s) = signal(SignalKind::terminate()) {
            s.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await
}

/// `check`: a recorded history through the same checker.
pub fn check(
    path: &std::path::Path,
    settings: CheckSettings,
    base: &str,
) -> Result<WatchReport, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let records = record::read_history(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let started = records.iter().map(|r| r.invoke_ms).min().unwrap_or(0);
    let strict = settings.strict_project;
    let online = online::replay(&records, settings, base);
    Ok(WatchReport::of(&online, base, started, strict))
}
