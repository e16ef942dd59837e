//! Errors of the broker configuration.
//!
//! A `server.properties` map that cannot be used is a [`ConfigError`]
//! (`strom-config`'s, naming the key, the value as given and the
//! [`ValueProblem`]); the typed builder refuses with a [`BuildError`],
//! which carries the same `ConfigError` for a value the rules refuse.

use std::path::PathBuf;

pub use strom_config::{ConfigError, ValueProblem};

/// Why [`BrokerConfigBuilder::build`] refused the configuration.
///
/// [`BrokerConfigBuilder::build`]: crate::config_builder::BrokerConfigBuilder::build
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A value the broker's configuration rules refuse: the same rules, and
    /// the same error, as for the value in `server.properties`.
    #[error(transparent)]
    Invalid(ConfigError),
    /// A topic-level default (a broker `log.*` key) the log rules refuse.
    #[error(transparent)]
    TopicDefault(strom_storage::error::ConfigError),
    /// A duration that is not a whole number of the property's unit.
    #[error("`{key}` takes a whole number of {unit}; {nanos} ns is not")]
    NotWholeUnit {
        /// The Kafka property name.
        key: String,
        /// The property's unit (`milliseconds` or `minutes`).
        unit: &'static str,
        /// The duration given, in nanoseconds.
        nanos: u128,
    },
    /// A duration or size beyond what the property can hold.
    #[error("`{key}` is at most {max} (in its unit); {value} is too large")]
    TooLarge {
        /// The Kafka property name.
        key: String,
        /// The value given, in the property's unit.
        value: u128,
        /// The largest value the property holds.
        max: u128,
    },
    /// A log directory that `log.dirs` cannot express: it contains a comma,
    /// begins or ends with white space, or is not UTF-8.
    #[error("log directory `{path}` cannot be written in log.dirs")]
    LogDir {
        /// The directory.
        path: PathBuf,
    },
    /// A key set with [`BrokerConfigBuilder::property`] that Kafka does not
    /// define (probably a typo).
    ///
    /// [`BrokerConfigBuilder::property`]: crate::config_builder::BrokerConfigBuilder::property
    #[error("unknown configuration key `{key}`")]
    UnknownProperty {
        /// The key.
        key: String,
    },
    /// A Kafka key set with [`BrokerConfigBuilder::property`] that Strom
    /// accepts but does not act on.
    ///
    /// [`BrokerConfigBuilder::property`]: crate::config_builder::BrokerConfigBuilder::property
    #[error("configuration key `{key}` has no effect in Strom")]
    IgnoredProperty {
        /// The key.
        key: String,
    },
}
