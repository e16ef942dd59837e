//! Workspace-level tests for Strom.
//!
//! This package holds no library code. Its tests check properties of the whole
//! workspace: `layering.rs` reads `cargo metadata` and fails when a crate
//! depends on a crate above it; `producer_broker.rs` runs strom-producer against
//! an in-process broker. The Python interop suite lives in `interop/`; the
//! programs in `src/bin/` let it drive Strom's Rust clients
//! (`strom-interop-producer`: records as JSON lines on stdin, one JSON
//! outcome per record on stdout).
