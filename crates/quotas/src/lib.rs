//! Kafka's client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599),
//! sans-IO.
//!
//! This crate owns what a quota is and what it decides:
//!
//! - [`entity`]: quota entities (a user, a client id, a user with a client
//!   id, and the `<default>` of each), the four keys a user or client
//!   entity may carry (`producer_byte_rate`, `consumer_byte_rate`,
//!   `request_percentage`, `controller_mutation_rate`) and the validation
//!   of an alteration (Kafka's `ClientQuotaControlManager` rules).
//! - [`table`]: the configured quotas and the resolution of the one that
//!   applies to a (principal, client id) in KIP-55's eight-level order,
//!   with the key its usage is accounted under.
//! - [`rate`]: a rate measured over Kafka's sampled windows
//!   (`quota.window.num` samples of `quota.window.size.seconds`), Kafka's
//!   throttle time formula, and the token bucket of controller mutations.
//! - [`manager`]: [`ClientQuotaManager`], which records a client's usage
//!   against the quota that applies to it and answers the throttle time.
//!
//! It deliberately does not own where quotas are stored (the controller's
//! metadata log, as `ClientQuotaRecord`s), the clock, or what a throttle
//! does to a connection (the broker and the network server): every call
//! takes the time as `now_ms` (a monotonic reading, `strom_clock::Clock`'s
//! in the broker) and returns a number of milliseconds.
//!
//! Design decisions a newcomer must know:
//! - **Accounting follows the matched entity.** As in Kafka, the usage of
//!   every client that resolves to the same quota entity is summed: a
//!   `/users/alice` quota is shared by all of alice's client ids, while a
//!   `/users/<default>` quota gives each user a rate of its own.
//! - **Record first, then decide.** Usage is recorded even when it is over
//!   the quota, and the throttle time is how long the measured rate needs
//!   to come back to the quota; a client is never refused for bytes
//!   (KIP-219), only delayed. Controller mutations are the exception
//!   (KIP-599): a request arriving while the bucket is empty is refused.
//!
//! The crate has no feature flags.

pub mod entity;
pub mod error;
pub mod manager;
pub mod rate;
pub mod table;

pub use entity::{EntityName, QuotaEntity, QuotaKey};
pub use error::QuotaError;
pub use manager::{ClientQuotaManager, QuotaUsage};
pub use rate::{throttle_time_ms, QuotaWindow, SampledRate, TokenBucket};
pub use table::{QuotaTable, ResolvedQuota, UsageKey};
