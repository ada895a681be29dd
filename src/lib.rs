//! Shared helpers for the workspace-level integration tests in `tests/`.
//!
//! The tests themselves live in `tests/`; this library holds what several of
//! them need, so each test file stays about one subject.
