//! The wall clock, read in one place.
//!
//! The model takes time as an input; the engines feed it (and their own short-lived
//! marks, such as "the database was just found away") from here, so no engine reads its
//! clock from another.

use queen_reference::time::Millis;

/// The wall clock in milliseconds since the Unix epoch.
pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}
