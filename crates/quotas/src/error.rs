//! Errors of quota alterations. Every variant is answered with Kafka's
//! `INVALID_REQUEST` (code 42) at the broker, as Kafka's
//! `ClientQuotaControlManager` does.

/// Why an entity or a quota value of an alteration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum QuotaError {
    /// The entity names no entity type.
    #[error("invalid empty client quota entity")]
    EmptyEntity,
    /// The entity names an entity type twice.
    #[error("duplicate entity type {entity_type} in a client quota entity")]
    DuplicateEntityType {
        /// The repeated type.
        entity_type: String,
    },
    /// The entity type is neither `user`, `client-id` nor `ip`.
    #[error("unhandled client quota entity type: {entity_type}")]
    UnknownEntityType {
        /// The type named.
        entity_type: String,
    },
    /// `ip` entities (KIP-612 connection rates) are not supported.
    #[error("client quota entity type {entity_type} is not supported")]
    UnsupportedEntityType {
        /// The type named.
        entity_type: String,
    },
    /// An entity name is the empty string (`<default>` is a null name).
    #[error("empty {entity_type} not supported")]
    EmptyEntityName {
        /// The type whose name is empty.
        entity_type: String,
    },
    /// The same entity appears twice in one request.
    #[error("ignoring duplicate entity {entity}")]
    DuplicateEntity {
        /// The entity, as Kafka prints it.
        entity: String,
    },
    /// One alteration names a key twice.
    #[error("duplicate quota key {key}")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// The key is not a user or client quota key.
    #[error("invalid configuration key {key}")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A byte rate that is not a whole number.
    #[error("configuration {key} must be a Long value (got {value})")]
    NotInteger {
        /// The key.
        key: String,
        /// The value given.
        value: f64,
    },
    /// A value that is negative, zero, or not a finite number.
    #[error("configuration {key} must be a positive number (got {value})")]
    NotPositive {
        /// The key.
        key: String,
        /// The value given.
        value: f64,
    },
}
