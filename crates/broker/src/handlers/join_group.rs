//! JoinGroup: parks until the rebalance completes, so the answer is
//! deferred and the connection keeps reading other requests meanwhile.

use strom_coordinator::{GroupError, JoinRequest, JoinResponse, Protocol};
use strom_network::{Reply, RequestContext};
use strom_protocol::kafka::messages::join_group_response::JoinGroupResponseMember;
use strom_protocol::kafka::messages::{JoinGroupRequest, JoinGroupResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::group_error_code;
use super::BrokerContext;

/// Handles a JoinGroup request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: JoinGroupRequest,
) -> Reply {
    let version = context.api_version;
    let group_id = request.group_id.0.to_string();
    let join = JoinRequest {
        request_id: 0,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
        client_id: context.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", context.peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|protocol| Protocol {
                name: protocol.name.to_string(),
                metadata: protocol.metadata.clone(),
            })
            .collect(),
        require_known_member_id: version >= 4,
    };
    let coordinator = broker.groups.coordinator.clone();
    Reply::Deferred(Box::pin(async move {
        let result = coordinator.join_group(&group_id, join).await;
        Some(Response::JoinGroup(response(version, result)).into())
    }))
}

fn response(version: i16, result: Result<JoinResponse, GroupError>) -> JoinGroupResponse {
    let response = match result {
        Ok(joined) => JoinGroupResponse::default()
            .with_generation_id(joined.generation_id)
            .with_protocol_type(joined.protocol_type.map(StrBytes::from_string))
            .with_protocol_name(joined.protocol_name.map(StrBytes::from_string))
            .with_leader(StrBytes::from_string(joined.leader_id))
            // SkipAssignment exists from v9 only.
            .with_skip_assignment(version >= 9 && joined.skip_assignment)
            .with_member_id(StrBytes::from_string(joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|member| {
                        JoinGroupResponseMember::default()
                            .with_member_id(StrBytes::from_string(member.member_id))
                            .with_group_instance_id(
                                member.group_instance_id.map(StrBytes::from_string),
                            )
                            .with_metadata(member.metadata)
                    })
                    .collect(),
            ),
        Err(error) => {
            let member_id = match &error {
                GroupError::MemberIdRequired { member_id } => member_id.clone(),
                _ => String::new(),
            };
            JoinGroupResponse::default()
                .with_error_code(group_error_code(&error).code())
                .with_generation_id(-1)
                .with_member_id(StrBytes::from_string(member_id))
        }
    };
    // Before v7 the protocol name is not nullable: Kafka sends "".
    if version < 7 && response.protocol_name.is_none() {
        return response.with_protocol_name(Some(StrBytes::from_static_str("")));
    }
    response
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use strom_coordinator::{GroupError, JoinResponse, JoinedMember};
    use strom_protocol::kafka::protocol::Encodable;

    use super::response;

    fn encodes(version: i16, result: Result<JoinResponse, GroupError>) -> bool {
        response(version, result)
            .encode(&mut BytesMut::new(), version)
            .is_ok()
    }

    #[test]
    fn every_version_encodes_a_static_leader_rejoin_and_errors() {
        let rejoin = JoinResponse {
            generation_id: 3,
            protocol_type: Some("consumer".to_owned()),
            protocol_name: Some("range".to_owned()),
            leader_id: "leader".to_owned(),
            member_id: "leader".to_owned(),
            skip_assignment: true,
            members: vec![JoinedMember {
                member_id: "leader".to_owned(),
                group_instance_id: Some("static".to_owned()),
                metadata: Bytes::from_static(b"subscription"),
            }],
        };
        for version in 0..=9 {
            assert!(encodes(version, Ok(rejoin.clone())), "v{version}");
            assert!(
                encodes(
                    version,
                    Err(GroupError::MemberIdRequired {
                        member_id: "new".to_owned()
                    })
                ),
                "v{version}"
            );
        }
        assert!(!response(8, Ok(rejoin.clone())).skip_assignment);
        assert!(response(9, Ok(rejoin)).skip_assignment);
        let failed = response(
            6,
            Err(GroupError::MemberIdRequired {
                member_id: "new".to_owned(),
            }),
        );
        assert_eq!(failed.member_id.as_str(), "new");
        assert_eq!(failed.protocol_name.as_deref(), Some(""));
    }
}
