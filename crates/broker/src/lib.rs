//! The Strom broker: a thin crate that composes the crates below it into
//! a Kafka broker.
//!
//! It owns the request handlers, one per Kafka API behind three dispatch
//! tables ([`handlers`], served by `strom-network`'s server through
//! [`handlers::Dispatcher`]), and the wiring: the hosted partitions
//! ([`replica_manager`], with the TCP transport of the follower fetch loop
//! in [`replica_fetch`] and ISR changes in [`isr`]), the group coordinator's
//! `__consumer_offsets` storage ([`groups`]), the cluster node's quorum
//! member and registration ([`cluster_node`]), and [`broker::start`] and
//! [`broker::RunningBroker::shutdown`] (its last steps, which close the
//! logs cleanly, in [`shutdown`]).
//!
//! It deliberately owns no protocol, storage, replication, controller,
//! group, security, network or metrics logic, nor the configuration:
//! `strom-broker-config` parses it (re-exported here as [`config`],
//! [`config_builder`] and [`cluster_config`]) and [`settings`] derives what
//! the parts it starts are configured with. Where a lower crate needs the
//! broker, it asks through a trait or plain values the broker supplies:
//! [`observe`] implements `strom-observability`'s `BrokerView`,
//! [`security`] adapts `strom-security`'s peer connections to the metadata
//! quorum, and the handlers' authorization helper fills the authorizer's
//! ACL bindings from the metadata image. The one piece of per-client state
//! it keeps is the incremental fetch sessions (a
//! [`strom_replication::fetch_session::FetchSessionCache`]).
//!
//! Two rules every handler follows:
//!
//! * **No disk wait on an async worker.** Handlers run on tokio workers; an
//!   fsync, file creation or directory sync they reach runs on the storage
//!   crate's threads, tokio's blocking pool or through [`blocking`]
//!   (`docs/storage.md` lists each one).
//! * **A poisoned partition is offline.** When a thread panicked holding a
//!   partition's lock, requests for that partition get
//!   `KAFKA_STORAGE_ERROR` instead of its possibly half-changed state
//!   ([`replica_manager`]; the whole policy is in `docs/architecture.md`,
//!   "What a poisoned lock means").
//!
//! Operators see a running broker through `strom-observability`
//! (Prometheus metrics under Kafka's names, counted with atomics on the
//! request path and computed from the broker's state at scrape time, and
//! the optional `strom.metrics.listener`: `/metrics`, health probes and a
//! read-only web console); [`observe`] shows it the broker's state and
//! [`metrics`] times each request.

pub mod blocking;
pub mod broker;
pub mod claims;
pub mod cluster_node;
pub mod dynamic_config;
pub mod environment;
pub mod error;
pub mod groups;
pub mod handlers;
pub mod isr;
pub mod launch;
pub mod markers;
pub mod metrics;
pub mod observe;
pub mod peer_pool;
pub mod quotas;
mod registration;
pub mod replica_fetch;
pub mod replica_manager;
pub mod security;
pub mod settings;
pub mod shutdown;
pub mod start_error;
pub mod tiered;
pub mod transactions;
pub mod txn_verification;

pub use strom_broker_config::{cluster_config, config, config_builder};

pub use broker::{start, start_with, RegistrationStep, RunningBroker, ShutdownReport, StartError};
pub use config::BrokerConfig;
pub use config_builder::{BrokerConfigBuilder, BuildError, ByteSize};
pub use environment::Environment;
pub use error::ConfigError;
