//! `queen-conformance`: the suite third parties run against their broker.
//!
//! Not built yet; see issue 5. The crate exists so the workspace layout is fixed
//! from the start and later work only fills it in.
