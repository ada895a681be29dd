//! The rule ids of PROTOCOL.md with their levels: the reference crate's typed constants
//! ([`queen_reference::rules`]), re-exported so cases write `ACK_2` and reports name it.

pub use queen_reference::rules::*;
