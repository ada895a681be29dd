//! `queen-reference`: the wire types of the Queen protocol and a pure, in-memory
//! reference model of it.
//!
//! * [`wire`] — request parsing and validation, the route table, response types and
//!   answers, shared by every crate.
//! * [`model`] — the state machine, one module per operation; [`engine`] and [`render`]
//!   run it as a deterministic broker.
//! * [`choice`] and [`policy`] — the points the spec leaves open, answered once (an
//!   engine) or every way (a checker).
//! * [`checker`] — the worlds consistent with a broker's answers, and [`finding`], [`diff`]
//!   for what differs and under which rule ([`rules`]); [`variant`] — named ways a broker
//!   breaks one rule, which the checker reports as the cause of what it saw.
//! * [`ids`] — model handles to a broker's ids; [`time`] — time as an input: exact or
//!   interval-valued moments; [`shared`] — structurally shared collections.
//!
//! See `ARCHITECTURE.md` at the workspace root for how the pieces fit together.

#![warn(missing_docs)]

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
#[cfg(feature = "sequence")]
pub mod sequence;
pub mod shared;
pub mod time;
pub mod variant;
pub mod wire;

/// The version of `spec/PROTOCOL.md` this model implements.
pub const SPEC_VERSION: &str = env!("QUEEN_SPEC_VERSION");

/// `spec/PROTOCOL.md` itself, as this crate was built with it (the crate carries it, so a
/// packaged crate has it too).
pub const SPEC_TEXT: &str = include_str!("../PROTOCOL.md");
