//! `queen-server`: a Queen-compatible message broker.
//!
//! * [`routes`] — one axum handler; routing and validation come from the shared wire layer.
//! * [`longpoll`] and [`wakes`] — parked pops and the bells that wake them (POP-11).
//! * [`broker`] — the [`broker::Broker`] trait between HTTP and storage.
//! * [`pg`] — the PostgreSQL engine; [`spool`] — the disk spool of PUSH-7.
//! * [`memory`] — the reference model as an engine (`--engine memory`).
//! * [`prepared`] — a pushed item with its ids decided; [`clock`] — the wall clock.
//! * [`auth`] — bearer tokens verified into principals (section 14).
//! * [`seal`] — payloads of encrypted queues sealed at rest (section 15).
//! * [`config`], [`app`] — flags and environment, serving and graceful shutdown.
//! * [`metrics`] — operational counters and the spool's gauges for Prometheus.
//! * [`recoveries`] — internal failures recovered from, for `/health` (HEALTH-3).

pub mod app;
pub mod auth;
pub mod broker;
pub mod clock;
pub mod config;
pub mod embedded;
pub mod keyfile;
pub mod logging;
pub mod longpoll;
pub mod memory;
pub mod metrics;
pub mod pg;
pub mod prepared;
pub mod recoveries;
pub mod routes;
pub mod seal;
pub mod spool;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wakes;
