//! queen-reference
