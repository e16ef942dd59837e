//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

#[allow(dead_code)]
mod common;

mod admin;
mod client_quotas;
mod cluster;
mod cluster_security;
mod console_acls;
mod consumer_groups;
mod coordinator_failover;
mod dynamic_broker_configs;
mod elections;
mod fetch_sessions;
mod groups;
mod injected_environment;
mod late_listeners;
mod metrics_http;
mod quorum;
mod replication;
mod routing;
mod shutdown;
mod start;
mod tiered;
mod topic_configs;
mod transactions;
mod txn_verification;
mod unknown_resources;
