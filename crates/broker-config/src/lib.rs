//! The Strom broker's configuration: Kafka's broker property names parsed
//! once into typed values.
//!
//! This crate owns what a broker is configured with, before anything
//! starts: [`BrokerConfig`] ([`config`]), which reads a `server.properties`
//! map (file contents merged with command-line overrides) into typed
//! values, with the table of broker keys Strom acts on and their Kafka
//! defaults ([`config::KNOWN_KEYS`]), the warnings for keys it does not act
//! on ([`ConfigWarning`]), the listeners and advertised listeners, and the
//! topic-level defaults under topic-level names
//! ([`BrokerConfig::topic_defaults`]); the typed builder
//! ([`BrokerConfigBuilder`] in [`config_builder`], with [`ByteSize`]) for
//! services that embed a broker; and the settings of a node of a cluster
//! ([`ClusterConfig`] in [`cluster_config`]: `process.roles`, the
//! controller quorum's voters, the controller and inter-broker listeners,
//! heartbeats and timeouts).
//!
//! It deliberately does not derive the settings of the components the
//! broker starts (the log manager's, the controller's, the replica
//! fetchers'): the broker does that from a [`BrokerConfig`]
//! (`strom_broker::settings`), so this crate knows no replication,
//! controller or network type. Properties the broker reads at start-up
//! beside the table (`strom.metrics.listener`, `strom.log.format`) are
//! listed here and parsed there. It has no async runtime, no network and
//! no disk access. The plumbing (`.properties` text, typed reads with
//! defaults, listener syntax, the error vocabulary) is `strom-config`'s;
//! the security settings are `strom-security`'s, which
//! [`BrokerConfig::security`] holds; the topic configuration table is
//! `strom-protocol`'s.
//!
//! Decisions a newcomer must know:
//! - **Kafka's names, Kafka's defaults.** Every key keeps the name and the
//!   default it has in Kafka's `server.properties` (Strom's own keys start
//!   with `strom.`); a broker `log.*` key is the default of the topic key it
//!   is a synonym of, with Kafka's precedence (`ms` before `minutes` before
//!   `hours`).
//! - **Unknown keys are warned, invalid values are errors.** A key Kafka
//!   defines that Strom does not act on, or a key nobody defines, is a
//!   [`ConfigWarning`] for the start-up log; a value that does not parse or
//!   is out of range is a [`ConfigError`] naming the key. The builder is
//!   stricter: it writes each value under its Kafka name and parses the
//!   result with [`BrokerConfig::from_map`] (one set of rules for both
//!   forms), and a warning is a [`BuildError`] there.
//!
//! The crate has no feature flags.

pub mod cluster_config;
pub mod config;
pub mod config_builder;
pub mod consumer_group_config;
pub mod error;

pub use cluster_config::{ClusterConfig, ProcessRoles};
pub use config::{BrokerConfig, ConfigWarning, TransactionConfig};
pub use config_builder::{BrokerConfigBuilder, ByteSize};
pub use consumer_group_config::ConsumerGroupSettings;
pub use error::{BuildError, ConfigError, ValueProblem};
