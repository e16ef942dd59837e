//! ListGroups: the groups this coordinator owns, filtered by state (v4+)
//! and type (v5+; every Strom group is `classic`).

use strom_coordinator::GroupState;
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

/// Handles a ListGroups request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListGroupsRequest,
) -> Reply {
    let version = context.api_version;
    let types_match = version < 5
        || request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|group_type| group_type.eq_ignore_ascii_case(CLASSIC));
    let filter: Vec<String> = if version >= 4 {
        request
            .states_filter
            .iter()
            .map(ToString::to_string)
            .collect()
    } else {
        Vec::new()
    };
    let states: Vec<GroupState> = filter
        .iter()
        .filter_map(|name| GroupState::from_kafka_name(name))
        .collect();
    // A filter naming only states that do not exist matches nothing.
    let nothing = !filter.is_empty() && states.is_empty();
    let listings = if types_match && !nothing {
        match broker.groups.coordinator.list_groups(&states) {
            Ok(listings) => listings,
            Err(error) => {
                return Reply::Response(Response::ListGroups(
                    ListGroupsResponse::default()
                        .with_error_code(super::errors::group_error_code(&error).code()),
                ))
            }
        }
    } else {
        Vec::new()
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
        .filter(|(group_id, _, _)| {
            all || may_on_group(broker, context, operation::DESCRIBE, group_id)
        })
        .map(|(group_id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group_id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state.kafka_name()))
                .with_group_type(StrBytes::from_static_str(CLASSIC))
        })
        .collect();
    Reply::Response(Response::ListGroups(
        ListGroupsResponse::default().with_groups(groups),
    ))
}
