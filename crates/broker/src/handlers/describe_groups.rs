//! DescribeGroups: state, protocol and members with their metadata and
//! assignments. An unknown group is described as Dead without error up to
//! v5 and, from v6 (KIP-1043), with GROUP_ID_NOT_FOUND, as Kafka does.

use strom_coordinator::{GroupDescription, GroupState};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use strom_protocol::kafka::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::may_on_group;
use super::errors::group_error_code;
use super::{authorized_operations, BrokerContext};

/// Kafka's "authorized operations not requested" marker.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Handles a DescribeGroups request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeGroupsRequest,
) -> Reply {
    let group_ids: Vec<String> = request.groups.iter().map(|id| id.0.to_string()).collect();
    // The group operations (KIP-430) the principal has: all of them without
    // an authorizer, as in Kafka.
    let operations = |group_id: &str| match request.include_authorized_operations {
        true => authorized_operations::group_allowed(|operation| {
            may_on_group(broker, context, operation, group_id)
        }),
        false => OPERATIONS_NOT_REQUESTED,
    };
    let described = broker.groups.coordinator.describe_groups(&group_ids);
    let groups = request
        .groups
        .iter()
        .zip(described)
        .map(|(group_id, result)| match result {
            _ if !may_on_group(broker, context, operation::DESCRIBE, group_id) => {
                DescribedGroup::default()
                    .with_group_id(group_id.clone())
                    .with_error_code(ErrorCode::GroupAuthorizationFailed.code())
            }
            Ok(description)
                if context.api_version >= 6 && description.state == GroupState::Dead =>
            {
                let message = format!("Group {} not found.", description.group_id);
                described_group(description)
                    .with_error_code(ErrorCode::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
                    .with_authorized_operations(operations(group_id))
            }
            Ok(description) => {
                described_group(description).with_authorized_operations(operations(group_id))
            }
            Err(error) => DescribedGroup::default()
                .with_group_id(group_id.clone())
                .with_error_code(group_error_code(&error).code())
                // The error message exists from v6 only.
                .with_error_message(
                    (context.api_version >= 6).then(|| StrBytes::from_string(error.to_string())),
                )
                .with_authorized_operations(operations(group_id)),
        })
        .collect();
    Reply::Response(Response::DescribeGroups(
        DescribeGroupsResponse::default().with_groups(groups),
    ))
}

fn described_group(description: GroupDescription) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(StrBytes::from_string(description.group_id).into())
        .with_group_state(StrBytes::from_static_str(description.state.kafka_name()))
        .with_protocol_type(StrBytes::from_string(description.protocol_type))
        .with_protocol_data(StrBytes::from_string(description.protocol_name))
        .with_members(
            description
                .members
                .into_iter()
                .map(|member| {
                    DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(member.member_id))
                        .with_group_instance_id(member.group_instance_id.map(StrBytes::from_string))
                        .with_client_id(StrBytes::from_string(member.client_id))
                        .with_client_host(StrBytes::from_string(member.client_host))
                        .with_member_metadata(member.metadata)
                        .with_member_assignment(member.assignment)
                })
                .collect(),
        )
}
