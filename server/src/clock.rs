//! The wall clock, read in one place.
//!
//! The model takes time as an input; the engines feed it (and their own short-lived
//! marks, such as "the database was just found away") from here, so no engine reads its
//! clock from another.

/// The wall clock in milliseconds since the Unix epoch.
pub use queen_reference::time::wall_clock_ms as now_ms;
