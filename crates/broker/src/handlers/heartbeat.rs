//! Heartbeat: keeps a member's session alive and tells it to rejoin while
//! the group rebalances.

use strom_coordinator::HeartbeatRequest as MemberHeartbeat;
use strom_network::{Reply, RequestContext};
use strom_protocol::kafka::messages::{HeartbeatRequest, HeartbeatResponse};
use strom_protocol::messages::Response;

use super::errors::group_result_code;
use super::BrokerContext;

/// Handles a Heartbeat request.
pub fn handle(
    broker: &BrokerContext,
    _context: &RequestContext,
    request: HeartbeatRequest,
) -> Reply {
    let heartbeat = MemberHeartbeat {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
        generation_id: request.generation_id,
    };
    let result = broker
        .groups
        .coordinator
        .heartbeat(&request.group_id.0, &heartbeat);
    Reply::Response(Response::Heartbeat(
        HeartbeatResponse::default().with_error_code(group_result_code(&result)),
    ))
}
