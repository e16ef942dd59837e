//! DescribeClientQuotas (KIP-546): the quotas of the entities a filter
//! matches, from the metadata image. Needs DESCRIBE_CONFIGS on the cluster.
//! A component must name `user`, `client-id` or `ip` once, with match type
//! 0 (exact, with a name), 1 (`<default>`) or 2 (any named entity, no
//! name); anything else is `INVALID_REQUEST`. Strom keeps no `ip` quotas,
//! so an `ip` component matches nothing.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_client_quotas_request::ComponentData;
use strom_protocol::kafka::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use strom_protocol::kafka::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_quotas::entity::{CLIENT_ID, IP, USER};
use strom_quotas::table::{FilterComponent, NameMatch};

use super::authorization::authorize;
use super::BrokerContext;

/// Handles a DescribeClientQuotas request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeClientQuotasRequest,
) -> Reply {
    let allowed = authorize(
        broker,
        context,
        operation::DESCRIBE_CONFIGS,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    if !allowed {
        return refuse(
            ErrorCode::ClusterAuthorizationFailed,
            "DESCRIBE_CONFIGS on the cluster is required".to_owned(),
        );
    }
    let filter = match filter(&request.components) {
        Ok(filter) => filter,
        Err(message) => return refuse(ErrorCode::InvalidRequest, message),
    };
    let image = broker.controller.image();
    let table = image.client_quotas().table();
    let entries = match filter {
        Some(components) => table
            .describe(&components, request.strict)
            .into_iter()
            .map(|(entity, quotas)| {
                EntryData::default()
                    .with_entity(
                        entity
                            .parts()
                            .into_iter()
                            .map(|(entity_type, name)| {
                                EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str(entity_type))
                                    .with_entity_name(
                                        name.map(|n| StrBytes::from_string(n.to_owned())),
                                    )
                            })
                            .collect(),
                    )
                    .with_values(
                        quotas
                            .iter()
                            .map(|(key, value)| {
                                ValueData::default()
                                    .with_key(StrBytes::from_static_str(key.name()))
                                    .with_value(*value)
                            })
                            .collect(),
                    )
            })
            .collect(),
        None => Vec::new(),
    };
    Reply::Response(Response::DescribeClientQuotas(
        DescribeClientQuotasResponse::default().with_entries(Some(entries)),
    ))
}

fn refuse(code: ErrorCode, message: String) -> Reply {
    Reply::Response(Response::DescribeClientQuotas(
        DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None),
    ))
}

/// The filter's components; `Ok(None)` when it names `ip` (nothing
/// matches).
fn filter(components: &[ComponentData]) -> Result<Option<Vec<FilterComponent>>, String> {
    let mut seen = Vec::with_capacity(components.len());
    let mut matches_nothing = false;
    let mut checked = Vec::with_capacity(components.len());
    for component in components {
        let entity_type = component.entity_type.as_str();
        if seen.contains(&entity_type) {
            return Err(format!("duplicate entity type {entity_type} in the filter"));
        }
        seen.push(entity_type);
        let name = match (component.match_type, &component._match) {
            (0, Some(name)) => NameMatch::Exact(Some(name.to_string())),
            (0, None) => return Err("match type 0 (exact) needs a match string".to_owned()),
            (1, None) => NameMatch::Default,
            (2, None) => NameMatch::Specified,
            (1 | 2, Some(_)) => return Err("match types 1 and 2 take no match string".to_owned()),
            (other, _) => return Err(format!("unknown match type {other}")),
        };
        match entity_type {
            USER | CLIENT_ID => checked.push(FilterComponent {
                is_user: entity_type == USER,
                name,
            }),
            IP => matches_nothing = true,
            other => return Err(format!("unhandled client quota entity type: {other}")),
        }
    }
    if matches_nothing && !checked.is_empty() {
        return Err("an ip component cannot be combined with user or client-id".to_owned());
    }
    Ok((!matches_nothing).then_some(checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(
        entity_type: &'static str,
        match_type: i8,
        name: Option<&'static str>,
    ) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_static_str(entity_type))
            .with_match_type(match_type)
            .with_match(name.map(StrBytes::from_static_str))
    }

    #[test]
    fn filters_are_checked_as_kafka_checks_them() {
        assert_eq!(
            filter(&[component(USER, 0, Some("a")), component(CLIENT_ID, 1, None)]),
            Ok(Some(vec![
                FilterComponent {
                    is_user: true,
                    name: NameMatch::Exact(Some("a".into()))
                },
                FilterComponent {
                    is_user: false,
                    name: NameMatch::Default
                },
            ]))
        );
        assert_eq!(filter(&[component(IP, 2, None)]), Ok(None));
        assert!(filter(&[component(USER, 0, None)]).is_err());
        assert!(filter(&[component(USER, 1, Some("a"))]).is_err());
        assert!(filter(&[component(USER, 3, None)]).is_err());
        assert!(filter(&[component("group", 2, None)]).is_err());
        assert!(filter(&[component(USER, 2, None), component(USER, 1, None)]).is_err());
        assert!(filter(&[component(IP, 2, None), component(USER, 1, None)]).is_err());
    }
}
