//! SyncGroup: followers park until the leader's assignment arrives, so the
//! answer is deferred.

use strom_coordinator::{GroupError, SyncRequest, SyncResponse};
use strom_network::{Reply, RequestContext};
use strom_protocol::kafka::messages::{SyncGroupRequest, SyncGroupResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::group_error_code;
use super::BrokerContext;

/// Handles a SyncGroup request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: SyncGroupRequest,
) -> Reply {
    let version = context.api_version;
    let group_id = request.group_id.0.to_string();
    let sync = SyncRequest {
        request_id: 0,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
        generation_id: request.generation_id,
        // v5+ carries the protocol type and name; checked when present.
        protocol_type: (version >= 5)
            .then(|| request.protocol_type.as_ref().map(ToString::to_string))
            .flatten(),
        protocol_name: (version >= 5)
            .then(|| request.protocol_name.as_ref().map(ToString::to_string))
            .flatten(),
        assignments: request
            .assignments
            .iter()
            .map(|assignment| {
                (
                    assignment.member_id.to_string(),
                    assignment.assignment.clone(),
                )
            })
            .collect(),
    };
    let coordinator = broker.groups.coordinator.clone();
    Reply::Deferred(Box::pin(async move {
        let result = coordinator.sync_group(&group_id, sync).await;
        Some(Response::SyncGroup(response(result)).into())
    }))
}

fn response(result: Result<SyncResponse, GroupError>) -> SyncGroupResponse {
    match result {
        Ok(synced) => SyncGroupResponse::default()
            .with_protocol_type(synced.protocol_type.map(StrBytes::from_string))
            .with_protocol_name(synced.protocol_name.map(StrBytes::from_string))
            .with_assignment(synced.assignment),
        Err(error) => SyncGroupResponse::default().with_error_code(group_error_code(&error).code()),
    }
}
