//! Client quotas through the admin client (KIP-546): AlterClientQuotas and
//! DescribeClientQuotas, as Kafka's `Admin.alterClientQuotas` and
//! `Admin.describeClientQuotas`.
//!
//! An entity is a list of (type, name) parts, where the type is `user` or
//! `client-id` and a `None` name is `<default>`.

use std::collections::BTreeMap;

use strom_protocol::kafka::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use strom_protocol::kafka::messages::describe_client_quotas_request::ComponentData;
use strom_protocol::kafka::messages::{
    AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::admin::AdminClient;
use crate::error::ClientError;

/// A quota entity: (type, name) parts, `None` for `<default>`.
pub type QuotaEntityParts = Vec<(String, Option<String>)>;

/// The changes of one entity.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    /// The entity.
    pub entity: QuotaEntityParts,
    /// Each key with its new value; `None` removes the key.
    pub ops: Vec<(String, Option<f64>)>,
}

/// An entity and its quotas, as DescribeClientQuotas answers.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaEntry {
    /// The entity.
    pub entity: QuotaEntityParts,
    /// Its quotas by key.
    pub values: BTreeMap<String, f64>,
}

/// How one component of a describe filter matches names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name.
    Exact(String),
    /// The `<default>` entity.
    Default,
    /// Any entity with a name of its own.
    Specified,
}

impl AdminClient {
    /// AlterClientQuotas: one result per alteration, in order (a broker's
    /// refusal of one entity is that entity's error).
    pub async fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
    ) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let request = AlterClientQuotasRequest::default()
            .with_entries(alterations.iter().map(entry).collect())
            .with_validate_only(validate_only);
        let connection = self.cluster().any_connection().await?;
        let Response::AlterClientQuotas(response) = connection.send(request).await? else {
            return Err(ClientError::UnexpectedResponse {
                api_key: ApiKey::AlterClientQuotas as i16,
            });
        };
        Ok(response
            .entries
            .iter()
            .map(|entry| match ErrorCode::from_code(entry.error_code) {
                ErrorCode::None => Ok(()),
                code => Err(ClientError::Broker { code }),
            })
            .collect())
    }

    /// DescribeClientQuotas: the entities matching every component (with
    /// `strict`, having no other part) and their quotas.
    pub async fn describe_client_quotas(
        &self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<QuotaEntry>, ClientError> {
        let request = DescribeClientQuotasRequest::default()
            .with_components(components.iter().map(component).collect())
            .with_strict(strict);
        let connection = self.cluster().any_connection().await?;
        let Response::DescribeClientQuotas(response) = connection.send(request).await? else {
            return Err(ClientError::UnexpectedResponse {
                api_key: ApiKey::DescribeClientQuotas as i16,
            });
        };
        quota_entries(&response)
    }
}

fn entry(alteration: &QuotaAlteration) -> EntryData {
    EntryData::default()
        .with_entity(
            alteration
                .entity
                .iter()
                .map(|(entity_type, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_string(entity_type.clone()))
                        .with_entity_name(name.clone().map(StrBytes::from_string))
                })
                .collect(),
        )
        .with_ops(
            alteration
                .ops
                .iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(StrBytes::from_string(key.clone()))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

fn component((entity_type, matching): &(String, QuotaMatch)) -> ComponentData {
    let (match_type, name) = match matching {
        QuotaMatch::Exact(name) => (0, Some(StrBytes::from_string(name.clone()))),
        QuotaMatch::Default => (1, None),
        QuotaMatch::Specified => (2, None),
    };
    ComponentData::default()
        .with_entity_type(StrBytes::from_string(entity_type.clone()))
        .with_match_type(match_type)
        .with_match(name)
}

/// The typed answer; a top-level error code is the error.
pub fn quota_entries(
    response: &DescribeClientQuotasResponse,
) -> Result<Vec<QuotaEntry>, ClientError> {
    match ErrorCode::from_code(response.error_code) {
        ErrorCode::None => {}
        code => return Err(ClientError::Broker { code }),
    }
    Ok(response
        .entries
        .iter()
        .flatten()
        .map(|entry| QuotaEntry {
            entity: entry
                .entity
                .iter()
                .map(|part| {
                    (
                        part.entity_type.to_string(),
                        part.entity_name.as_ref().map(|name| name.to_string()),
                    )
                })
                .collect(),
            values: entry
                .values
                .iter()
                .map(|value| (value.key.to_string(), value.value))
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_protocol::kafka::messages::describe_client_quotas_response::{
        EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData,
    };

    #[test]
    fn an_alteration_becomes_ops_with_removals() {
        let data = entry(&QuotaAlteration {
            entity: vec![("user".into(), None)],
            ops: vec![
                ("producer_byte_rate".into(), Some(5.0)),
                ("request_percentage".into(), None),
            ],
        });
        assert_eq!(data.entity[0].entity_name, None);
        assert!(!data.ops[0].remove);
        assert_eq!(data.ops[0].value, 5.0);
        assert!(data.ops[1].remove);
        let exact = component(&("client-id".into(), QuotaMatch::Exact("app".into())));
        assert_eq!(
            (exact.match_type, exact._match.as_deref()),
            (0, Some("app"))
        );
        let any = component(&("user".into(), QuotaMatch::Specified));
        assert_eq!((any.match_type, any._match), (2, None));
    }

    #[test]
    fn a_describe_answer_is_typed_and_its_error_is_the_error() {
        let response = DescribeClientQuotasResponse::default().with_entries(Some(vec![
            DescribedEntry::default()
                .with_entity(vec![DescribedEntity::default()
                    .with_entity_type(StrBytes::from_static_str("user"))
                    .with_entity_name(None)])
                .with_values(vec![ValueData::default()
                    .with_key(StrBytes::from_static_str("consumer_byte_rate"))
                    .with_value(7.0)]),
        ]));
        let entries = quota_entries(&response).expect("no error");
        assert_eq!(entries[0].entity, vec![("user".to_owned(), None)]);
        assert_eq!(entries[0].values["consumer_byte_rate"], 7.0);
        let refused = DescribeClientQuotasResponse::default().with_error_code(42);
        assert!(matches!(
            quota_entries(&refused),
            Err(ClientError::Broker {
                code: ErrorCode::InvalidRequest
            })
        ));
    }
}
