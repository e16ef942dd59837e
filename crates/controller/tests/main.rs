//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

mod support;

mod cluster_controller;
mod quorum;
mod quorum_simulation;
mod storage_agreement;
