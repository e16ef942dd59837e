//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

mod common;

mod consumer_groups;
mod consumer_records;
mod consumer_simulation;

mod loading;
mod membership;
mod offsets;
mod records;
mod runtime;
mod runtime_transactions;
mod simulation;
mod transactions;
