//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

mod common;

mod compaction;
mod compatibility;
mod faults;
mod log;
mod manager;
mod model;
mod page_cache;
mod roll_flush;
mod tiered;
mod transactions;
mod validation;
