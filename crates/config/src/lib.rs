//! Kafka-style configuration plumbing for Strom, with no server in it.
//!
//! This crate owns the pieces every Strom program reads its settings with:
//! Java `.properties` text ([`properties`], the format of Kafka's
//! `server.properties` and of client property files), the
//! `meta.properties` identity of a log directory ([`meta_properties`]),
//! typed reads of a property map with defaults and per-listener keys
//! ([`Lookup`]), Kafka's listeners (`NAME://host:port`, [`listener`]) and
//! what an empty host or `localhost` means ([`host`]), the boolean spelling
//! ([`value`]), and the configuration errors ([`ConfigError`],
//! [`ValueProblem`]) with the one constructor of an invalid value,
//! [`invalid`]. [`error_chain`] prints an error with its sources on one
//! line.
//!
//! It deliberately does not know any component's keys or defaults: the
//! broker's `server.properties` table, the security settings and the
//! clients' properties stay with the crates that act on them and pass
//! their default tables to [`Lookup::with_defaults`]. It has no async
//! runtime and no network; it touches the disk only in [`meta_properties`].
//!
//! Decisions a newcomer must know:
//! - **One vocabulary for bad values.** A bad value is a key, the value as
//!   given and a [`ValueProblem`], built by [`invalid`] as an
//!   [`InvalidValue`]. Each configuration error type turns that into its
//!   own "invalid value" case through `From` (this crate's
//!   [`ConfigError::Invalid`]; `strom-client`'s `ConfigError::InvalidValue`,
//!   which the producer and consumer share), so `?` converts it and the
//!   clients keep the error type their callers match on.
//! - **Booleans are read one way, and the parser stays in
//!   `strom-protocol`.** `true` or `false`, in any case, around whitespace
//!   (Kafka's `ConfigDef`); every spelling any Strom crate accepted before
//!   is among them. Topic configurations are validated in `strom-protocol`
//!   (`topic_config`), which sits below this crate and cannot depend on
//!   it, so [`value::parse_boolean`] is that crate's function re-exported,
//!   not a copy.
//!
//! The crate depends on `strom-protocol` only (for the topic
//! configuration errors and the boolean parser) and has no feature flags.

pub mod error;
pub mod host;
pub mod listener;
pub mod lookup;
pub mod meta_properties;
pub mod properties;
pub mod value;

pub use error::{
    error_chain, invalid, ConfigError, InvalidValue, MetaPropertiesError, ValueProblem,
};
pub use listener::{parse_listeners, Listener};
pub use lookup::Lookup;
pub use properties::parse_properties;
