//! A consumer group as DescribeGroups reports it, asked of its coordinator
//! (used by `groups describe` and `groups reset-offsets`).

use bytes::Bytes;
use strom_client::{AdminClient, ClientError};
use strom_protocol::kafka::messages::{ApiKey, DescribeGroupsRequest, GroupId};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::error::ToolError;

/// A group member as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id.
    pub member_id: String,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// Assigned partitions (consumer groups only).
    pub assignment: Vec<(String, i32)>,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The state (`Stable`, `Empty`, `Dead`, ...).
    pub state: String,
    /// The protocol type (`consumer`).
    pub protocol_type: String,
    /// The assignor in use.
    pub protocol: String,
    /// The members.
    pub members: Vec<GroupMember>,
}

/// Describes a group at its coordinator; a group the coordinator does not
/// know (state `Dead`) is reported as `None`.
pub async fn describe_group(
    admin: &AdminClient,
    group: &str,
) -> Result<Option<GroupDescription>, ToolError> {
    let cluster = admin.cluster();
    let failed = |source| ToolError::client("describe group", source);
    let coordinator = cluster.find_coordinator(group, 0).await.map_err(failed)?;
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
    let Response::DescribeGroups(response) = cluster
        .send_to(coordinator, request)
        .await
        .map_err(failed)?
    else {
        return Err(failed(ClientError::UnexpectedResponse {
            api_key: ApiKey::DescribeGroups as i16,
        }));
    };
    let Some(described) = response.groups.first() else {
        return Ok(None);
    };
    match ErrorCode::from_code(described.error_code) {
        ErrorCode::None => {}
        ErrorCode::GroupIdNotFound => return Ok(None),
        code => return Err(ToolError::rejected("describe group", group, code)),
    }
    if described.group_state.as_str() == "Dead" {
        return Ok(None);
    }
    let consumer = described.protocol_type.as_str() == "consumer";
    let members = described
        .members
        .iter()
        .map(|member| GroupMember {
            member_id: member.member_id.to_string(),
            client_id: member.client_id.to_string(),
            client_host: member.client_host.to_string(),
            assignment: if consumer {
                decode_assignment(&member.member_assignment)
            } else {
                Vec::new()
            },
        })
        .collect();
    Ok(Some(GroupDescription {
        state: described.group_state.to_string(),
        protocol_type: described.protocol_type.to_string(),
        protocol: described.protocol_data.to_string(),
        members,
    }))
}

fn decode_assignment(bytes: &Bytes) -> Vec<(String, i32)> {
    if bytes.is_empty() {
        return Vec::new();
    }
    strom_consumer::assignor::decode_assignment(bytes)
        .map(|assignment| {
            assignment
                .partitions
                .into_iter()
                .map(|partition| (partition.topic.to_string(), partition.partition))
                .collect()
        })
        .unwrap_or_default()
}
