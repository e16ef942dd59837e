//! The Strom broker: a thin crate that composes the server crates into a
//! Kafka broker.
//!
//! It owns one handler per Kafka API behind a dispatch table (served by
//! `strom-network`'s server). Its configuration is `strom-broker-config`'s,
//! re-exported here ([`config`], with a typed builder in [`config_builder`]
//! beside the property-string form, and [`cluster_config`]); what the parts
//! it starts are configured with is derived in [`settings`]. It deliberately
//! owns no protocol, storage, replication, controller or group logic: those live in
//! the crates below it, and this crate only wires them together ([`groups`]
//! gives the group coordinator its `__consumer_offsets` storage and loads
//! the partitions this broker leads). The one piece of state it keeps of its

//! own is per-client: incremental fetch sessions (a
//! [`strom_replication::fetch_session::FetchSessionCache`]). TLS, SASL and
//! the ACL authorizer's decisions are `strom-security`'s; [`security`] only
//! adapts them to the quorum and the metadata image.
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
pub mod cluster_node;
pub mod environment;
pub mod error;
pub mod groups;
pub mod handlers;
pub mod isr;
pub mod launch;
pub mod metrics;
pub mod observe;
mod registration;
pub mod replica_fetch;
pub mod replica_manager;
pub mod security;
pub mod settings;
pub mod start_error;

pub use strom_broker_config::{cluster_config, config, config_builder};

pub use broker::{start, start_with, RegistrationStep, RunningBroker, StartError};
pub use config::BrokerConfig;
pub use config_builder::{BrokerConfigBuilder, BuildError, ByteSize};
pub use environment::Environment;
pub use error::ConfigError;
