//! Serving: the router with request ids and tracing, bound to a listener, with a
//! graceful shutdown (stop accepting, finish in-flight requests, flush the broker).

use crate::broker::Broker;
use crate::config::Config;
use crate::routes::{router, AppState};
use axum::http::{HeaderName, Request};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The application for `broker` under `config`.
pub fn app(broker: Arc<dyn Broker>, config: &Config) -> axum::Router {
    let state = AppState {
        broker,
        body_limit: config.body_limit,
        default_timeout_ms: config.pop_timeout_ms(),
        backoff: config.backoff(),
    };
    router(state)
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get(&REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", id, method = %req.method(), path = %req.uri().path())
            }),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}

/// Serves until `shutdown` completes, then lets in-flight requests finish and flushes.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<dyn Broker>,
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = app(broker.clone(), config);
    // HTTP/1 with a small read buffer: a parked long poll keeps its connection's buffer
    // for as long as it waits, and ten thousand of them should not cost ten thousand
    // 16 KiB buffers (hyper's adaptive default grows to that).
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(READ_BUFFER);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    // Stop accepting; let in-flight requests finish (parked pops answer at their
    // timeout at the latest), then flush the broker.
    drop(listener);
    graceful.shutdown().await;
    broker.shutdown().await;
    Ok(())
}

/// The most a connection's read buffer grows to (hyper's minimum).
const READ_BUFFER: usize = 8192;

/// Resolves on SIGTERM or ctrl-c.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
}

/// A server running in this process (tests, the conformance CLI's embedded target).
pub struct Running {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops gracefully and waits for in-flight requests and the broker's flush.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.task.take() {
            Some(t) => t.await.unwrap_or_else(|e| Err(std::io::Error::other(e))),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Serves `broker` on `addr` (port 0: any free port) in the background.
pub async fn spawn(
    broker: Arc<dyn Broker>,
    config: &Config,
    addr: std::net::SocketAddr,
) -> std::io::Result<Running> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = config.clone();
    let task = tokio::spawn(async move {
        serve(listener, broker, &config, async move {
            let _ = rx.await;
        })
        .await
    });
    Ok(Running {
        addr,
        stop: Some(tx),
        task: Some(task),
    })
}

/// What `queen-server` does after reading its configuration: opens the engine
/// (PostgreSQL from `DATABASE_URL` or the embedded cluster, or the in-memory model),
/// says where the data lives, and serves on `config.host:config.port` until SIGTERM or
/// ctrl-c. The fault scenarios run the same function in their server processes.
pub async fn run(config: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The embedded cluster, if any, lives until the server has shut down.
    let mut _cluster: Option<queen_pg::PersistentCluster> = None;
    let broker: Arc<dyn Broker> = match config.engine {
        crate::config::EngineKind::Memory => {
            tracing::info!("engine: the reference model in memory; nothing is persisted");
            Arc::new(crate::memory::MemoryBroker::new(
                config.pop_timeout_ms(),
                config.body_limit,
            ))
        }
        crate::config::EngineKind::Pg => {
            let engine = crate::embedded::open(&config).await?;
            tracing::info!(
                "engine: {}; spool in {}",
                engine.location,
                config.spool_dir.display()
            );
            _cluster = engine.cluster;
            Arc::new(engine.broker)
        }
    };
    let listener = TcpListener::bind((config.host.as_str(), config.port)).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    serve(listener, broker, &config, shutdown_signal()).await?;
    Ok(())
}
