//! PostgreSQL provider (issue 3): not built yet.
