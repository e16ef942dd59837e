//! Quota entities and keys.
//!
//! A quota entity is a user, a client id, or a user with a client id, where
//! each name may be a real name or `<default>` (Kafka's null entity name).
//! Users are principal names (the `alice` of `User:alice`), client ids the
//! `client.id` of the request header.

use std::fmt;

use crate::error::QuotaError;

/// Kafka's entity type name of a user.
pub const USER: &str = "user";
/// Kafka's entity type name of a client id.
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type name of an IP address (KIP-612; not supported).
pub const IP: &str = "ip";

/// The name of one part of an entity: a real name or `<default>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    /// A real user or client id.
    Named(String),
    /// `<default>`: applies to every user (or client id) without a quota of
    /// its own.
    Default,
}

impl EntityName {
    /// The name as it travels in AlterClientQuotas and DescribeClientQuotas:
    /// `None` is `<default>`.
    pub fn from_wire(name: Option<&str>) -> Self {
        match name {
            Some(name) => Self::Named(name.to_owned()),
            None => Self::Default,
        }
    }

    /// The name on the wire (`None` for `<default>`).
    pub fn to_wire(&self) -> Option<&str> {
        match self {
            Self::Named(name) => Some(name),
            Self::Default => None,
        }
    }
}

impl fmt::Display for EntityName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Named(name) => formatter.write_str(name),
            Self::Default => formatter.write_str("<default>"),
        }
    }
}

/// A quota entity: a user, a client id, or both. At least one is present
/// (the constructors and [`QuotaEntity::from_parts`] keep it so).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    user: Option<EntityName>,
    client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// `/users/<user>` (or `/users/<default>`).
    pub fn user(user: EntityName) -> Self {
        Self {
            user: Some(user),
            client_id: None,
        }
    }

    /// `/clients/<client-id>` (or `/clients/<default>`).
    pub fn client(client_id: EntityName) -> Self {
        Self {
            user: None,
            client_id: Some(client_id),
        }
    }

    /// `/users/<user>/clients/<client-id>`.
    pub fn user_client(user: EntityName, client_id: EntityName) -> Self {
        Self {
            user: Some(user),
            client_id: Some(client_id),
        }
    }

    /// An entity from the (type, name) parts of a request, checked as
    /// Kafka checks them: at least one part, no type twice, only `user` and
    /// `client-id` (`ip` is refused as unsupported), no empty name.
    pub fn from_parts<'a>(
        parts: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, QuotaError> {
        let mut user = None;
        let mut client_id = None;
        let mut any = false;
        for (entity_type, name) in parts {
            any = true;
            let slot = match entity_type {
                USER => &mut user,
                CLIENT_ID => &mut client_id,
                IP => {
                    return Err(QuotaError::UnsupportedEntityType {
                        entity_type: entity_type.to_owned(),
                    })
                }
                _ => {
                    return Err(QuotaError::UnknownEntityType {
                        entity_type: entity_type.to_owned(),
                    })
                }
            };
            if slot.is_some() {
                return Err(QuotaError::DuplicateEntityType {
                    entity_type: entity_type.to_owned(),
                });
            }
            if name == Some("") {
                return Err(QuotaError::EmptyEntityName {
                    entity_type: entity_type.to_owned(),
                });
            }
            *slot = Some(EntityName::from_wire(name));
        }
        if !any {
            return Err(QuotaError::EmptyEntity);
        }
        Ok(Self { user, client_id })
    }

    /// The user part.
    pub fn user_name(&self) -> Option<&EntityName> {
        self.user.as_ref()
    }

    /// The client id part.
    pub fn client_id_name(&self) -> Option<&EntityName> {
        self.client_id.as_ref()
    }

    /// The (type, name) parts, user first, as they travel (`None` is
    /// `<default>`).
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut parts = Vec::with_capacity(2);
        if let Some(user) = &self.user {
            parts.push((USER, user.to_wire()));
        }
        if let Some(client_id) = &self.client_id {
            parts.push((CLIENT_ID, client_id.to_wire()));
        }
        parts
    }
}

impl fmt::Display for QuotaEntity {
    /// Kafka's path form: `/users/alice/clients/<default>`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(user) = &self.user {
            write!(formatter, "/users/{user}")?;
        }
        if let Some(client_id) = &self.client_id {
            write!(formatter, "/clients/{client_id}")?;
        }
        Ok(())
    }
}

/// A quota key of user and client entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKey {
    /// `producer_byte_rate`: bytes per second of Produce requests.
    ProducerByteRate,
    /// `consumer_byte_rate`: bytes per second of Fetch responses.
    ConsumerByteRate,
    /// `request_percentage`: percent of one request handler thread's time.
    RequestPercentage,
    /// `controller_mutation_rate`: partitions created or deleted per second.
    ControllerMutationRate,
}

impl QuotaKey {
    /// Every key, in Kafka's order.
    pub const ALL: [QuotaKey; 4] = [
        Self::ProducerByteRate,
        Self::ConsumerByteRate,
        Self::RequestPercentage,
        Self::ControllerMutationRate,
    ];

    /// The key's position in [`QuotaKey::ALL`].
    pub fn index(self) -> usize {
        match self {
            Self::ProducerByteRate => 0,
            Self::ConsumerByteRate => 1,
            Self::RequestPercentage => 2,
            Self::ControllerMutationRate => 3,
        }
    }

    /// Kafka's name of the key.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProducerByteRate => "producer_byte_rate",
            Self::ConsumerByteRate => "consumer_byte_rate",
            Self::RequestPercentage => "request_percentage",
            Self::ControllerMutationRate => "controller_mutation_rate",
        }
    }

    /// The key of a name.
    pub fn from_name(name: &str) -> Result<Self, QuotaError> {
        Self::ALL
            .into_iter()
            .find(|key| key.name() == name)
            .ok_or_else(|| QuotaError::UnknownKey {
                key: name.to_owned(),
            })
    }

    /// Whether Kafka types the key as a `LONG` (the byte rates) rather than
    /// a `DOUBLE`.
    pub fn is_integer(self) -> bool {
        matches!(self, Self::ProducerByteRate | Self::ConsumerByteRate)
    }

    /// Checks a value for this key: finite and above zero, and a whole
    /// number for the byte rates (within Kafka's epsilon of 1e-6).
    pub fn check_value(self, value: f64) -> Result<f64, QuotaError> {
        if !value.is_finite() || value <= 0.0 {
            return Err(QuotaError::NotPositive {
                key: self.name().to_owned(),
                value,
            });
        }
        if self.is_integer() && (value - value.round()).abs() > 1e-6 {
            return Err(QuotaError::NotInteger {
                key: self.name().to_owned(),
                value,
            });
        }
        Ok(value)
    }
}

impl fmt::Display for QuotaKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_built_from_request_parts_and_printed_as_kafka_paths() {
        let entity =
            QuotaEntity::from_parts([(USER, Some("alice")), (CLIENT_ID, None)]).expect("valid");
        assert_eq!(
            entity,
            QuotaEntity::user_client(EntityName::Named("alice".into()), EntityName::Default)
        );
        assert_eq!(entity.to_string(), "/users/alice/clients/<default>");
        assert_eq!(
            entity.parts(),
            vec![(USER, Some("alice")), (CLIENT_ID, None)]
        );
        let client = QuotaEntity::from_parts([(CLIENT_ID, Some("app"))]).expect("valid");
        assert_eq!(client.to_string(), "/clients/app");
    }

    #[test]
    fn bad_entities_are_refused() {
        assert_eq!(QuotaEntity::from_parts([]), Err(QuotaError::EmptyEntity));
        assert!(matches!(
            QuotaEntity::from_parts([(USER, Some("a")), (USER, Some("b"))]),
            Err(QuotaError::DuplicateEntityType { .. })
        ));
        assert!(matches!(
            QuotaEntity::from_parts([("group", Some("a"))]),
            Err(QuotaError::UnknownEntityType { .. })
        ));
        assert!(matches!(
            QuotaEntity::from_parts([(IP, Some("127.0.0.1"))]),
            Err(QuotaError::UnsupportedEntityType { .. })
        ));
        assert!(matches!(
            QuotaEntity::from_parts([(CLIENT_ID, Some(""))]),
            Err(QuotaError::EmptyEntityName { .. })
        ));
    }

    #[test]
    fn keys_have_kafka_names_and_value_rules() {
        for key in QuotaKey::ALL {
            assert_eq!(QuotaKey::from_name(key.name()), Ok(key));
        }
        assert!(matches!(
            QuotaKey::from_name("producer_byte_rates"),
            Err(QuotaError::UnknownKey { .. })
        ));
        let bytes = QuotaKey::ProducerByteRate;
        assert_eq!(bytes.check_value(1024.0), Ok(1024.0));
        assert!(matches!(
            bytes.check_value(10.5),
            Err(QuotaError::NotInteger { .. })
        ));
        assert!(matches!(
            bytes.check_value(-1.0),
            Err(QuotaError::NotPositive { .. })
        ));
        assert!(matches!(
            bytes.check_value(0.0),
            Err(QuotaError::NotPositive { .. })
        ));
        assert!(matches!(
            bytes.check_value(f64::NAN),
            Err(QuotaError::NotPositive { .. })
        ));
        assert_eq!(QuotaKey::RequestPercentage.check_value(12.5), Ok(12.5));
        assert_eq!(QuotaKey::ControllerMutationRate.check_value(0.5), Ok(0.5));
    }
}
