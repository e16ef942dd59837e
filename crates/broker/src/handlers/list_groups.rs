//! ListGroups: the groups this coordinator owns, filtered by state (v4+)
//! and type (v5+): `classic` groups and `consumer` (KIP-848) groups, whose
//! protocol type is `consumer` and states Empty, Assigning, Reconciling and
//! Stable.

use strom_coordinator::GroupError;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::kafka::messages::list_groups_response::ListedGroup;
use strom_protocol::kafka::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::{authorize, may_on_group};
use super::BrokerContext;

/// The group type of the classic protocol (KIP-848 names).
const CLASSIC: &str = "classic";

/// The group type of the consumer protocol (KIP-848).
const CONSUMER: &str = "consumer";

/// One listed group: id, protocol type, state name, group type.
type Listed = (String, String, &'static str, &'static str);

/// Handles a ListGroups request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListGroupsRequest,
) -> Reply {
    let version = context.api_version;
    let type_wanted = |group_type: &str| {
        version < 5
            || request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|wanted| wanted.eq_ignore_ascii_case(group_type))
    };
    let filter: Vec<String> = if version >= 4 {
        request
            .states_filter
            .iter()
            .map(ToString::to_string)
            .collect()
    } else {
        Vec::new()
    };
    let state_wanted =
        |state: &str| filter.is_empty() || filter.iter().any(|s| s.eq_ignore_ascii_case(state));
    let listings = match listings(broker) {
        Ok(listings) => listings,
        Err(error) => {
            return Reply::Response(Response::ListGroups(
                ListGroupsResponse::default()
                    .with_error_code(super::errors::group_error_code(&error).code()),
            ))
        }
    };
    // DESCRIBE on the cluster lists every group; otherwise the groups the
    // principal may DESCRIBE.
    let all = authorize(
        broker,
        context,
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    let groups = listings
        .into_iter()
        .filter(|(_, _, state, group_type)| type_wanted(group_type) && state_wanted(state))
        .filter(|(group_id, ..)| {
            all || may_on_group(broker, context, operation::DESCRIBE, group_id)
        })
        .map(|(group_id, protocol_type, state, group_type)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group_id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str(group_type))
        })
        .collect();
    Reply::Response(Response::ListGroups(
        ListGroupsResponse::default().with_groups(groups),
    ))
}

/// Every group of both protocols, in group id order.
fn listings(broker: &BrokerContext) -> Result<Vec<Listed>, GroupError> {
    let coordinator = &broker.groups.coordinator;
    let classic = coordinator.list_groups(&[])?;
    let consumer = coordinator.list_consumer_groups()?;
    let mut listed: Vec<Listed> =
        classic
            .into_iter()
            .map(|(group_id, protocol_type, state)| {
                (group_id, protocol_type, state.kafka_name(), CLASSIC)
            })
            .chain(consumer.into_iter().map(|(group_id, state)| {
                (group_id, CONSUMER.to_owned(), state.kafka_name(), CONSUMER)
            }))
            .collect();
    listed.sort();
    Ok(listed)
}
