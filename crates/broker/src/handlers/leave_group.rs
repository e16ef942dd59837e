//! LeaveGroup: v0-v2 name one member and answer with a top-level error;
//! v3+ batch members (static ones by instance id) with per-member errors.

use strom_coordinator::LeaveMember;
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::leave_group_response::MemberResponse;
use strom_protocol::kafka::messages::{LeaveGroupRequest, LeaveGroupResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::{group_error_code, group_result_code};
use super::BrokerContext;

/// Handles a LeaveGroup request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: LeaveGroupRequest,
) -> Reply {
    let batched = context.api_version >= 3;
    let members: Vec<LeaveMember> = if batched {
        request
            .members
            .iter()
            .map(|member| LeaveMember {
                member_id: member.member_id.to_string(),
                group_instance_id: member.group_instance_id.as_ref().map(ToString::to_string),
            })
            .collect()
    } else {
        vec![LeaveMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let result = broker
        .groups
        .coordinator
        .leave_group(&request.group_id.0, &members);
    let response = match result {
        Err(error) => {
            LeaveGroupResponse::default().with_error_code(group_error_code(&error).code())
        }
        Ok(results) if batched => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(results)
                .map(|(member, result)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(member.member_id))
                        .with_group_instance_id(member.group_instance_id.map(StrBytes::from_string))
                        .with_error_code(group_result_code(&result))
                })
                .collect(),
        ),
        Ok(results) => {
            let code = results
                .first()
                .map_or(ErrorCode::None.code(), group_result_code);
            LeaveGroupResponse::default().with_error_code(code)
        }
    };
    Reply::Response(Response::LeaveGroup(response))
}
