//! Rebuilds the server when a migration is added or removed. `sqlx::migrate!` embeds
//! `migrations/` at compile time and watches the files it found, so an edit to one of
//! them is seen, but a new file is not without this (sqlx's documented build script).
//! The function files under `sql/` are embedded with `include_str!`; a new one must be
//! listed in `pg/schema.rs`, which a unit test checks against this folder.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
}
