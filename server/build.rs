//! Rebuilds the server when a migration is added or removed. `sqlx::migrate!` embeds
//! `migrations/` at compile time and watches the files it found, so an edit to one of
//! them is seen, but a new file is not without this (sqlx's documented build script).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
