//! Serving: the router with request ids and tracing, bound to a listener, with a
//! graceful shutdown (stop accepting, finish in-flight requests, flush the broker).

use crate::broker::Broker;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::routes::{router, AppState};
use axum::http::{HeaderName, Request};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The application for `broker` under `config`; `stopping` turns true at shutdown.
pub fn app(
    broker: Arc<dyn Broker>,
    config: &Config,
    stopping: tokio::sync::watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
) -> std::io::Result<axum::Router> {
    let auth = crate::auth::Authenticator::from_config(&config.auth)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let state = AppState {
        broker,
        auth: auth.map(Arc::new),
        body_limit: config.body_limit,
        default_timeout_ms: config.pop_timeout_ms(),
        backoff: config.backoff(),
        body_timeout: Duration::from_millis(config.body_timeout_ms),
        max_items: config.max_items as usize,
        metrics_top: config.metrics_top as usize,
        in_flight,
        metrics,
        stopping,
    };
    Ok(router(state)
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
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid)))
}

/// Serves until `shutdown` completes, then shuts down as STOP-1 says: no new
/// connections, parked pops answered at once, in-flight requests given the grace
/// period, the broker flushed.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<dyn Broker>,
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let metrics = Arc::new(Metrics::new());
    let app = app(
        broker.clone(),
        config,
        stop_rx,
        in_flight.clone(),
        metrics.clone(),
    )?;
    let http = http_builder(config);
    let slots = Arc::new(tokio::sync::Semaphore::new(config.max_connections as usize));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.connections_refused.inc();
            refuse(stream, peer);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        while connections.try_join_next().is_some() {} // reap the ended ones
        connections.spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    finish_in_flight(graceful, &in_flight, grace).await;
    // Idle connections and ones still sending a head have no request to finish.
    connections.abort_all();
    broker.shutdown().await;
    Ok(())
}

/// STOP-1: waits until every connection has closed, or the grace period is over, or
/// no request is in flight any more (then a moment longer, for the last answers to be
/// written out), whichever is first.
async fn finish_in_flight(
    graceful: hyper_util::server::graceful::GracefulShutdown,
    in_flight: &AtomicUsize,
    grace: Duration,
) {
    let closed = graceful.shutdown();
    tokio::pin!(closed);
    let idle = async {
        while in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        _ = &mut closed => return,
        _ = idle => {}
        _ = tokio::time::sleep(grace) => {
            tracing::warn!("requests still in flight after the {grace:?} grace period; closing them");
            return;
        }
    }
    let _ = tokio::time::timeout(ANSWERS_FLUSH, closed).await;
}

/// How long connections whose requests have all been answered get to write the answers
/// out at shutdown before the rest (idle, or still sending a head) are closed.
const ANSWERS_FLUSH: Duration = Duration::from_millis(250);

/// HTTP/1 with the CONN-1 head timeout and a bounded read buffer: a parked long poll
/// keeps its connection's buffer for as long as it waits, and ten thousand of them
/// should not cost ten thousand buffers of hyper's default bound (about 400 KiB).
fn http_builder(config: &Config) -> hyper::server::conn::http1::Builder {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(READ_BUFFER)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_timeout_ms));
    http
}

/// CONN-1: a connection past the cap gets a 503 (if its socket takes it at once) and
/// is closed.
fn refuse(stream: tokio::net::TcpStream, peer: std::net::SocketAddr) {
    tracing::warn!("refusing a connection from {peer}: at the connection limit");
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
        retry-after: 1\r\nconnection: close\r\ncontent-length: 49\r\n\r\n\
        {\"error\":\"the server is at its connection limit\"}";
    let _ = stream.try_write(BUSY);
}

/// The most a connection's read buffer grows to, and so the largest request head hyper
/// reads: room for `routes::HEADER_LIMIT` of headers, answered with a JSON 431 above it,
/// and a request line. The buffer starts small and grows only on a connection that
/// needs it, so parked long polls keep small ones.
const READ_BUFFER: usize = 2 * crate::routes::HEADER_LIMIT;

/// Resolves on SIGTERM or ctrl-c. The handlers are installed when this is called, not
/// when the future is first polled, so a SIGTERM that arrives as soon as the server says
/// it is listening still shuts it down gracefully instead of killing it.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let (term, int) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(term) => {},
                _ = wait(int) => {},
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
    }
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

/// How many connections may wait to be accepted (the kernel caps it at
/// `net.core.somaxconn`). Thousands of long polls connecting at once overflow the usual
/// 1024, and a connect that overflows it waits for the client's SYN retries or times out.
const ACCEPT_BACKLOG: u32 = 8192;

/// A listening socket on `addr` with room for [`ACCEPT_BACKLOG`] pending connections.
fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std's bind does on Unix: a restarted server rebinds a port in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Serves `broker` on `addr` (port 0: any free port) in the background.
pub async fn spawn(
    broker: Arc<dyn Broker>,
    config: &Config,
    addr: std::net::SocketAddr,
) -> std::io::Result<Running> {
    let listener = listen(addr)?;
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
    // Installed first: a SIGTERM while the engine starts is honoured once it is up,
    // through the graceful path that also stops the embedded cluster.
    let stop = shutdown_signal();
    // Settings that cannot work stop the start before anything is opened (AUTH-5).
    if crate::auth::Authenticator::from_config(&config.auth)?.is_some() {
        tracing::info!("authentication is on (JWT, {})", config.auth.jwt_algorithm);
    }
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
    let addr = tokio::net::lookup_host((config.host.as_str(), config.port))
        .await?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", config.host))?;
    let listener = listen(addr)?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    serve(listener, broker, &config, stop).await?;
    Ok(())
}
