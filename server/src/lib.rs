//! `queen-server`: a Queen-compatible broker over PostgreSQL.
//!
//! Not built yet; see issue 4. The crate exists so the workspace layout is fixed
//! from the start and later work only fills it in.
