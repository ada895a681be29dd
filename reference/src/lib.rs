//! `queen-reference`: the wire types of the Queen protocol and a pure, in-memory
//! reference model of it.
//!
//! * [`wire`] — request parsing/validation and response types, shared by every crate.
//! * [`time`] — time as an input: exact or interval-valued moments.
//!
//! See `ARCHITECTURE.md` at the workspace root for how the pieces fit together.

pub mod checker;
pub mod choice;
pub mod diff;
pub mod engine;
pub mod finding;
pub mod ids;
pub mod model;
pub mod policy;
pub mod render;
pub mod rules;
pub mod shared;
pub mod time;
pub mod wire;

/// The version of `spec/PROTOCOL.md` this model implements.
pub const SPEC_VERSION: &str = env!("QUEEN_SPEC_VERSION");
