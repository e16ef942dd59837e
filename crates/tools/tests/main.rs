//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

mod common;

mod admin;
mod broker;
mod clients;
mod cluster;
mod dump_log;
mod metadata_quorum;
mod perf_mock;
mod security;
mod transactions;
