//! The workspace's invariants, checked from the source by `cargo test`
//! (`tests/tidy.rs`): which crate may depend on which, which module of the
//! library may import which, that only `engine` modules call chdb-rust,
//! that the query-language and codec crates know no server, that no two
//! modules of a crate import each other, and that every source file says
//! what it is for. ARCHITECTURE.md marks each invariant checked here.
//!
//! No code: this crate exists for its test.
