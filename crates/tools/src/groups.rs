//! `strom groups list|describe|delete`, like `kafka-consumer-groups`;
//! `reset-offsets` is in [`crate::reset`].

use std::collections::BTreeMap;

use strom_client::admin::OffsetSpec;
use strom_client::{AdminClient, ClientError};
use strom_protocol::kafka::messages::{ApiKey, GroupId, OffsetFetchRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::cli::GroupsCommand;
use crate::context::Context;
use crate::error::ToolError;
use crate::group_description::{describe_group, GroupDescription, GroupMember};
use crate::output::Output;

/// The highest OffsetFetch version used (v8 batches several groups).
const MAX_OFFSET_FETCH_VERSION: i16 = 7;

/// Runs a `groups` command.
pub async fn run(
    context: &Context,
    command: GroupsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        GroupsCommand::List { json } => list(&admin, json, out).await,
        GroupsCommand::Describe { group, json } => describe(&admin, &group, json, out).await,
        GroupsCommand::Delete { groups } => delete(&admin, &groups, out).await,
        GroupsCommand::ResetOffsets(arguments) => crate::reset::run(&admin, arguments, out).await,
    }
}

async fn list(admin: &AdminClient, json: bool, out: &mut Output) -> Result<(), ToolError> {
    let groups = admin
        .list_groups()
        .await
        .map_err(|source| ToolError::client("list groups", source))?;
    if json {
        let groups: Vec<serde_json::Value> = groups
            .iter()
            .map(|group| {
                serde_json::json!({
                    "group": group.group_id,
                    "state": group.state,
                    "protocol_type": group.protocol_type,
                })
            })
            .collect();
        return out.line(&serde_json::Value::Array(groups).to_string());
    }
    groups
        .iter()
        .try_for_each(|group| out.line(&group.group_id))
}

/// Every committed offset of a group, by topic and partition.
pub async fn committed_offsets(
    admin: &AdminClient,
    group: &str,
) -> Result<BTreeMap<(String, i32), i64>, ToolError> {
    let cluster = admin.cluster();
    let failed = |source| ToolError::client("fetch committed offsets", source);
    let coordinator = cluster.find_coordinator(group, 0).await.map_err(failed)?;
    let connection = cluster
        .broker_connection(coordinator)
        .await
        .map_err(failed)?;
    let version = connection
        .api_version(ApiKey::OffsetFetch)
        .map_err(failed)?
        .min(MAX_OFFSET_FETCH_VERSION);
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(None);
    let pending = connection
        .submit_at(request.into(), version, cluster.config().request_timeout)
        .map_err(failed)?;
    let Response::OffsetFetch(response) = pending.await.map_err(failed)? else {
        return Err(failed(ClientError::UnexpectedResponse {
            api_key: ApiKey::OffsetFetch as i16,
        }));
    };
    if response.error_code != 0 {
        return Err(ToolError::rejected(
            "fetch committed offsets of group",
            group,
            ErrorCode::from_code(response.error_code),
        ));
    }
    let mut offsets = BTreeMap::new();
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.error_code == 0 && partition.committed_offset >= 0 {
                offsets.insert(
                    (topic.name.0.to_string(), partition.partition_index),
                    partition.committed_offset,
                );
            }
        }
    }
    Ok(offsets)
}

/// One row of `groups describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OffsetRow {
    topic: String,
    partition: i32,
    committed: Option<i64>,
    log_end: Option<i64>,
    member: Option<GroupMember>,
}

impl OffsetRow {
    fn lag(&self) -> Option<i64> {
        Some(self.log_end? - self.committed?).map(|lag| lag.max(0))
    }
}

async fn describe(
    admin: &AdminClient,
    group: &str,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let description = describe_group(admin, group).await?;
    let committed = committed_offsets(admin, group).await?;
    let Some(description) = description.or_else(|| {
        (!committed.is_empty()).then(|| GroupDescription {
            state: "Empty".to_owned(),
            protocol_type: "consumer".to_owned(),
            protocol: String::new(),
            members: Vec::new(),
            group_type: "classic",
            epochs: None,
        })
    }) else {
        return Err(ToolError::UnknownGroup {
            group: group.to_owned(),
        });
    };
    let rows = offset_rows(admin, &description, &committed).await?;
    if json {
        return out.line(&describe_json(group, &description, &rows).to_string());
    }
    describe_text(group, &description, &rows, out)
}

fn describe_text(
    group: &str,
    description: &GroupDescription,
    rows: &[OffsetRow],
    out: &mut Output,
) -> Result<(), ToolError> {
    let epochs = description
        .epochs
        .map(|(group_epoch, assignment_epoch)| {
            format!(", group epoch {group_epoch}, assignment epoch {assignment_epoch}")
        })
        .unwrap_or_default();
    out.line(&format!(
        "Group {group} is a {} group, {} ({} member(s), assignor {}{epochs})",
        description.group_type,
        description.state,
        description.members.len(),
        if description.protocol.is_empty() {
            "none"
        } else {
            &description.protocol
        }
    ))?;
    out.line(&format!(
        "{:<20} {:<24} {:>9} {:>14} {:>14} {:>8}  {:<40} {:<16} CLIENT-ID",
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST"
    ))?;
    for row in rows {
        let show =
            |value: Option<i64>| value.map_or_else(|| "-".to_owned(), |value| value.to_string());
        let (member_id, host, client_id) = row.member.as_ref().map_or(("-", "-", "-"), |member| {
            (
                member.member_id.as_str(),
                member.client_host.as_str(),
                member.client_id.as_str(),
            )
        });
        out.line(&format!(
            "{:<20} {:<24} {:>9} {:>14} {:>14} {:>8}  {:<40} {:<16} {}",
            group,
            row.topic,
            row.partition,
            show(row.committed),
            show(row.log_end),
            show(row.lag()),
            member_id,
            host,
            client_id
        ))?;
    }
    members_text(description, out)
}

/// The members section of `groups describe`: each member's assignment.
fn members_text(description: &GroupDescription, out: &mut Output) -> Result<(), ToolError> {
    if description.members.is_empty() {
        return Ok(());
    }
    out.line("")?;
    out.line(&format!(
        "{:<40} {:<16} {:<20} ASSIGNMENT",
        "MEMBER-ID", "HOST", "CLIENT-ID"
    ))?;
    for member in &description.members {
        let assignment: Vec<String> = member
            .assignment
            .iter()
            .map(|(topic, partition)| format!("{topic}-{partition}"))
            .collect();
        out.line(&format!(
            "{:<40} {:<16} {:<20} {}",
            member.member_id,
            member.client_host,
            member.client_id,
            if assignment.is_empty() {
                "-".to_owned()
            } else {
                assignment.join(",")
            }
        ))?;
    }
    Ok(())
}

async fn offset_rows(
    admin: &AdminClient,
    description: &GroupDescription,
    committed: &BTreeMap<(String, i32), i64>,
) -> Result<Vec<OffsetRow>, ToolError> {
    let mut owners: BTreeMap<(String, i32), Option<GroupMember>> =
        committed.keys().map(|key| (key.clone(), None)).collect();
    for member in &description.members {
        for (topic, partition) in &member.assignment {
            owners.insert((topic.clone(), *partition), Some(member.clone()));
        }
    }
    let progress =
        crate::progress::Progress::bar(owners.len() as u64, "looking up log end offsets");
    let mut rows = Vec::with_capacity(owners.len());
    for ((topic, partition), member) in owners {
        let log_end = admin
            .list_offset(&topic, partition, OffsetSpec::Latest)
            .await
            .ok()
            .map(|listed| listed.offset);
        progress.advance(1);
        rows.push(OffsetRow {
            committed: committed.get(&(topic.clone(), partition)).copied(),
            topic,
            partition,
            log_end,
            member,
        });
    }
    progress.finish();
    Ok(rows)
}

fn describe_json(
    group: &str,
    description: &GroupDescription,
    rows: &[OffsetRow],
) -> serde_json::Value {
    let members: Vec<serde_json::Value> = description
        .members
        .iter()
        .map(|member| {
            let assignment: Vec<serde_json::Value> = member
                .assignment
                .iter()
                .map(|(topic, partition)| serde_json::json!({"topic": topic, "partition": partition}))
                .collect();
            serde_json::json!({
                "member_id": member.member_id,
                "client_id": member.client_id,
                "host": member.client_host,
                "member_epoch": member.member_epoch,
                "assignment": assignment,
            })
        })
        .collect();
    let offsets: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "topic": row.topic,
                "partition": row.partition,
                "committed_offset": row.committed,
                "log_end_offset": row.log_end,
                "lag": row.lag(),
                "member_id": row.member.as_ref().map(|member| member.member_id.clone()),
            })
        })
        .collect();
    serde_json::json!({
        "group": group,
        "type": description.group_type,
        "group_epoch": description.epochs.map(|(group_epoch, _)| group_epoch),
        "assignment_epoch": description.epochs.map(|(_, assignment_epoch)| assignment_epoch),
        "state": description.state,
        "protocol_type": description.protocol_type,
        "assignor": description.protocol,
        "members": members,
        "offsets": offsets,
    })
}

async fn delete(admin: &AdminClient, groups: &[String], out: &mut Output) -> Result<(), ToolError> {
    let mut first_error = None;
    for group in groups {
        match admin.delete_group(group).await {
            Ok(()) => out.line(&format!("Deleted group {group}."))?,
            Err(ClientError::Broker {
                code: ErrorCode::GroupIdNotFound,
            }) => {
                first_error.get_or_insert(ToolError::UnknownGroup {
                    group: group.clone(),
                });
            }
            Err(ClientError::Broker { code }) => {
                first_error.get_or_insert(ToolError::rejected("delete group", group, code));
            }
            Err(other) => {
                first_error.get_or_insert(ToolError::client("delete group", other));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_needs_both_offsets() {
        let mut row = OffsetRow {
            topic: "t".to_owned(),
            partition: 0,
            committed: Some(3),
            log_end: Some(10),
            member: None,
        };
        assert_eq!(row.lag(), Some(7));
        row.committed = None;
        assert_eq!(row.lag(), None);
        row.committed = Some(12);
        assert_eq!(row.lag(), Some(0));
    }
}
