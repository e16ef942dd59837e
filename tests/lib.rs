//! Workspace-level tests for Strom.
//!
//! This package holds no library code. Its tests check properties of the whole
//! workspace: `layering.rs` reads `cargo metadata` and fails when a crate
//! depends on a crate above it. The Python interop suite lives in `interop/`.
