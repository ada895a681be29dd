//! `queen-conformance`: the suite a broker author runs against their broker, and what
//! gates our own server.
//!
//! * [`catalog`] — named cases (`ack-2/failure-clamps-later-success`, ...), each tagged
//!   with PROTOCOL.md rule ids, a level and a capability; every exchange is checked
//!   against the reference model by a [`session::Session`]; [`calls`] are the protocol's
//!   calls a case makes on it, [`transport`] sends one request to the [`target`], and
//!   [`findings`] keeps each departure with the example that reproduces it.
//! * [`lockstep`] — proptest-generated operation sequences checked step by step, shrunk
//!   to a minimal counterexample printed as a curl script and a Rust test.
//! * [`runner`] — runs both against a target with bounded concurrency.
//! * [`auth`] — the tokens sent to a broker with authentication on (section 14).
//! * [`report`] — terminal summary, JUnit XML and JSON; [`expect`] — expected failures.
//! * `embedded` (cargo feature `embedded`, default) — our own server in-process.
//! * [`watch`] — a proxy that checks real clients' traffic against the model as it
//!   passes, and `check` for a recorded history.
//! * `faults` (feature `embedded`) — the concurrent workload while PostgreSQL or a
//!   server process is paused or killed, on a deployment the harness starts.

#![warn(missing_docs)]

pub mod auth;
pub mod calls;
pub mod case;
pub mod catalog;
pub mod cli;
pub mod concurrent;
pub mod database;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod exchange;
pub mod expect;
pub mod failure;
#[cfg(feature = "embedded")]
pub mod faults;
pub mod findings;
pub mod health;
#[cfg(feature = "embedded")]
pub mod launch;
pub mod lockstep;
pub mod probe;
pub mod progress;
pub mod report;
pub mod rules;
pub mod runner;
pub mod select;
pub mod session;
pub mod target;
pub mod transport;
pub mod version;
pub mod watch;
