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
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    broker.shutdown().await;
    Ok(())
}

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
