//! The metadata record of client quotas (record tag 16 of
//! [`Record`](crate::records::Record)), Kafka's `ClientQuotaRecord`: one
//! key of one entity set to a value, or removed.

/// One part of a quota entity: its type (`user` or `client-id`) and its
/// name (`None` is `<default>`).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct QuotaEntityData {
    /// `user` or `client-id`.
    #[prost(string, tag = "1")]
    pub entity_type: String,
    /// The name; absent for `<default>`.
    #[prost(string, optional, tag = "2")]
    pub entity_name: Option<String>,
}

/// A client quota was set, or removed when `remove` is true.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ClientQuotaRecord {
    /// The entity, user part first.
    #[prost(message, repeated, tag = "1")]
    pub entity: Vec<QuotaEntityData>,
    /// The quota key, e.g. `producer_byte_rate`.
    #[prost(string, tag = "2")]
    pub key: String,
    /// The value (ignored when `remove`).
    #[prost(double, tag = "3")]
    pub value: f64,
    /// Whether the key is removed.
    #[prost(bool, tag = "4")]
    pub remove: bool,
}

impl ClientQuotaRecord {
    /// The record that sets `key` of `entity` to `value` (`None`: removes it).
    pub fn new(
        entity: &strom_quotas::QuotaEntity,
        key: strom_quotas::QuotaKey,
        value: Option<f64>,
    ) -> Self {
        Self {
            entity: entity
                .parts()
                .into_iter()
                .map(|(entity_type, name)| QuotaEntityData {
                    entity_type: entity_type.to_owned(),
                    entity_name: name.map(str::to_owned),
                })
                .collect(),
            key: key.name().to_owned(),
            value: value.unwrap_or(0.0),
            remove: value.is_none(),
        }
    }
}
