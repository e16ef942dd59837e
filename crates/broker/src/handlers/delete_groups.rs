//! DeleteGroups: removes empty groups and their offsets (NON_EMPTY_GROUP
//! while members remain, GROUP_ID_NOT_FOUND for unknown groups,
//! GROUP_AUTHORIZATION_FAILED without DELETE on the group).

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::delete_groups_response::DeletableGroupResult;
use strom_protocol::kafka::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::may_on_group;
use super::errors::{group_error_code, group_result_code};
use super::BrokerContext;

/// Handles a DeleteGroups request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DeleteGroupsRequest,
) -> Reply {
    let (group_ids, denied): (Vec<String>, Vec<String>) = request
        .groups_names
        .iter()
        .map(|id| id.0.to_string())
        .partition(|group| may_on_group(broker, context, operation::DELETE, group));
    let refused = denied.into_iter().map(|group_id| {
        DeletableGroupResult::default()
            .with_group_id(GroupId(StrBytes::from_string(group_id)))
            .with_error_code(ErrorCode::GroupAuthorizationFailed.code())
    });
    let results: Vec<DeletableGroupResult> =
        match broker.groups.coordinator.delete_groups(&group_ids) {
            Ok(results) => results
                .into_iter()
                .map(|(group_id, result)| {
                    DeletableGroupResult::default()
                        .with_group_id(GroupId(StrBytes::from_string(group_id)))
                        .with_error_code(group_result_code(&result))
                })
                .collect(),
            Err(error) => group_ids
                .into_iter()
                .map(|group_id| {
                    DeletableGroupResult::default()
                        .with_group_id(GroupId(StrBytes::from_string(group_id)))
                        .with_error_code(group_error_code(&error).code())
                })
                .collect(),
        };
    let results = results.into_iter().chain(refused).collect();
    Reply::Response(Response::DeleteGroups(
        DeleteGroupsResponse::default().with_results(results),
    ))
}
