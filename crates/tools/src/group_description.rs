//! A consumer group as DescribeGroups (classic groups) or
//! ConsumerGroupDescribe (KIP-848 consumer-protocol groups) reports it,
//! asked of its coordinator (used by `groups describe` and
//! `groups reset-offsets`).

use bytes::Bytes;
use strom_client::{AdminClient, ClientError};
use strom_protocol::kafka::messages::{
    ApiKey, ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId,
};
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
    /// The member epoch (consumer-protocol groups only).
    pub member_epoch: Option<i32>,
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
    /// The group type: `classic` or `consumer` (KIP-848).
    pub group_type: &'static str,
    /// The group epoch and the target assignment's epoch
    /// (consumer-protocol groups only).
    pub epochs: Option<(i32, i32)>,
}

/// Describes a group at its coordinator; a group the coordinator does not
/// know (state `Dead`) is reported as `None`. A group DescribeGroups does
/// not know is asked for with ConsumerGroupDescribe.
pub async fn describe_group(
    admin: &AdminClient,
    group: &str,
) -> Result<Option<GroupDescription>, ToolError> {
    match describe_classic_group(admin, group).await? {
        Some(description) => Ok(Some(description)),
        None => describe_consumer_group(admin, group).await,
    }
}

async fn describe_classic_group(
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
            member_epoch: None,
        })
        .collect();
    Ok(Some(GroupDescription {
        state: described.group_state.to_string(),
        protocol_type: described.protocol_type.to_string(),
        protocol: described.protocol_data.to_string(),
        members,
        group_type: "classic",
        epochs: None,
    }))
}

/// A consumer-protocol group through ConsumerGroupDescribe; `None` when the
/// coordinator does not know it as one (or does not serve the API).
async fn describe_consumer_group(
    admin: &AdminClient,
    group: &str,
) -> Result<Option<GroupDescription>, ToolError> {
    let cluster = admin.cluster();
    let failed = |source| ToolError::client("describe group", source);
    let coordinator = cluster.find_coordinator(group, 0).await.map_err(failed)?;
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
    let Ok(Response::ConsumerGroupDescribe(response)) = cluster.send_to(coordinator, request).await
    else {
        return Ok(None);
    };
    let Some(described) = response.groups.first() else {
        return Ok(None);
    };
    match ErrorCode::from_code(described.error_code) {
        ErrorCode::None => {}
        ErrorCode::GroupIdNotFound => return Ok(None),
        code => return Err(ToolError::rejected("describe group", group, code)),
    }
    let members = described
        .members
        .iter()
        .map(|member| GroupMember {
            member_id: member.member_id.to_string(),
            client_id: member.client_id.to_string(),
            client_host: member.client_host.to_string(),
            assignment: member
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|topic| {
                    let name = topic.topic_name.0.to_string();
                    topic
                        .partitions
                        .iter()
                        .map(move |partition| (name.clone(), *partition))
                })
                .collect(),
            member_epoch: Some(member.member_epoch),
        })
        .collect();
    Ok(Some(GroupDescription {
        state: described.group_state.to_string(),
        protocol_type: "consumer".to_owned(),
        protocol: described.assignor_name.to_string(),
        members,
        group_type: "consumer",
        epochs: Some((described.group_epoch, described.assignment_epoch)),
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
