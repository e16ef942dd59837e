//! `strom topics list|describe|create|delete|alter`.

use std::collections::BTreeMap;

use strom_client::admin::NewTopic;
use strom_client::admin_groups::{ConfigChange, RESOURCE_TYPE_TOPIC};
use strom_client::{AdminClient, TopicInfo};
use strom_protocol::ErrorCode;

use crate::cli::TopicsCommand;
use crate::context::{parse_key_values, Context};
use crate::error::ToolError;
use crate::output::Output;
use crate::topic_metadata::{all_topics, topic_info};

/// Runs a `topics` command.
pub async fn run(
    context: &Context,
    command: TopicsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        TopicsCommand::List { internal, json } => list(&admin, internal, json, out).await,
        TopicsCommand::Describe { topics, json } => describe(&admin, &topics, json, out).await,
        TopicsCommand::Create {
            topic,
            partitions,
            replication_factor,
            configs,
            if_not_exists,
        } => {
            let mut new_topic = NewTopic::new(
                &topic,
                partitions.unwrap_or(-1),
                replication_factor.unwrap_or(-1),
            );
            new_topic.configs = parse_key_values("--config", &configs)?;
            create(&admin, new_topic, if_not_exists, out).await
        }
        TopicsCommand::Delete { topics, if_exists } => {
            delete(&admin, &topics, if_exists, out).await
        }
        TopicsCommand::Alter {
            topic,
            partitions,
            configs,
            delete_configs,
        } => {
            let mut changes: Vec<ConfigChange> = parse_key_values("--config", &configs)?
                .into_iter()
                .map(|(key, value)| ConfigChange::Set(key, value))
                .collect();
            changes.extend(delete_configs.into_iter().map(ConfigChange::Delete));
            alter(&admin, &topic, partitions, &changes, out).await
        }
    }
}

async fn list(
    admin: &AdminClient,
    internal: bool,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let topics = all_topics(admin.cluster()).await?;
    let names: Vec<&String> = topics
        .iter()
        .filter(|(_, info)| internal || !info.is_internal)
        .map(|(name, _)| name)
        .collect();
    if json {
        out.line(&serde_json::json!(names).to_string())
    } else {
        names.iter().try_for_each(|name| out.line(name))
    }
}

async fn describe(
    admin: &AdminClient,
    wanted: &[String],
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let mut topics = all_topics(admin.cluster()).await?;
    let selected: Vec<TopicInfo> = if wanted.is_empty() {
        topics
            .into_values()
            .filter(|info| !info.is_internal)
            .collect()
    } else {
        wanted
            .iter()
            .map(|name| {
                topics.remove(name).ok_or_else(|| ToolError::UnknownTopic {
                    topic: name.clone(),
                })
            })
            .collect::<Result<_, _>>()?
    };
    for info in &selected {
        let configs: BTreeMap<String, Option<String>> =
            crate::configs::describe_entries(admin, RESOURCE_TYPE_TOPIC, &info.name)
                .await
                .map_err(|source| ToolError::client("describe topic configs", source))?
                .into_iter()
                .filter(|entry| !entry.is_default())
                .map(|entry| (entry.name, entry.value))
                .collect();
        if json {
            out.line(&describe_json(info, &configs).to_string())?;
        } else {
            describe_text(info, &configs, out)?;
        }
    }
    Ok(())
}

fn describe_json(
    info: &TopicInfo,
    configs: &BTreeMap<String, Option<String>>,
) -> serde_json::Value {
    let partitions: Vec<serde_json::Value> = info
        .partitions
        .iter()
        .map(|partition| {
            serde_json::json!({
                "partition": partition.partition,
                "leader": partition.leader,
                "leader_epoch": partition.leader_epoch,
                "replicas": partition.replicas,
                "isr": partition.isr,
            })
        })
        .collect();
    serde_json::json!({
        "topic": info.name,
        "topic_id": info.topic_id.to_string(),
        "internal": info.is_internal,
        "partition_count": info.partitions.len(),
        "replication_factor": replication_factor(info),
        "configs": configs,
        "partitions": partitions,
    })
}

fn describe_text(
    info: &TopicInfo,
    configs: &BTreeMap<String, Option<String>>,
    out: &mut Output,
) -> Result<(), ToolError> {
    let configs_text: Vec<String> = configs
        .iter()
        .map(|(key, value)| format!("{key}={}", value.as_deref().unwrap_or("")))
        .collect();
    out.line(&format!(
        "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
        info.name,
        info.topic_id,
        info.partitions.len(),
        replication_factor(info),
        configs_text.join(",")
    ))?;
    for partition in &info.partitions {
        out.line(&format!(
            "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
            info.name,
            partition.partition,
            partition
                .leader
                .map_or_else(|| "none".to_owned(), |leader| leader.to_string()),
            join_ids(&partition.replicas),
            join_ids(&partition.isr)
        ))?;
    }
    Ok(())
}

fn replication_factor(info: &TopicInfo) -> usize {
    info.partitions
        .first()
        .map_or(0, |partition| partition.replicas.len())
}

fn join_ids(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

async fn create(
    admin: &AdminClient,
    topic: NewTopic,
    if_not_exists: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let name = topic.name.clone();
    let mut results = admin
        .create_topics(std::slice::from_ref(&topic), false)
        .await
        .map_err(|source| ToolError::client("create topic", source))?;
    match resource_outcome("create topic", &name, results.remove(&name)) {
        Ok(()) => out.line(&format!("Created topic {name}.")),
        Err(ToolError::Rejected {
            code: ErrorCode::TopicAlreadyExists,
            ..
        }) if if_not_exists => out.line(&format!("Topic {name} already exists.")),
        Err(ToolError::Rejected {
            code: ErrorCode::TopicAlreadyExists,
            ..
        }) => Err(ToolError::TopicExists { topic: name }),
        Err(error) => Err(error),
    }
}

async fn delete(
    admin: &AdminClient,
    topics: &[String],
    if_exists: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let mut results = admin
        .delete_topics(&names)
        .await
        .map_err(|source| ToolError::client("delete topics", source))?;
    let mut first_error = None;
    for name in topics {
        match resource_outcome("delete topic", name, results.remove(name)) {
            Ok(()) => out.line(&format!("Deleted topic {name}."))?,
            Err(ToolError::Rejected {
                code: ErrorCode::UnknownTopicOrPartition,
                ..
            }) if if_exists => out.line(&format!("Topic {name} does not exist."))?,
            Err(ToolError::Rejected {
                code: ErrorCode::UnknownTopicOrPartition,
                ..
            }) => {
                first_error.get_or_insert(ToolError::UnknownTopic {
                    topic: name.clone(),
                });
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn alter(
    admin: &AdminClient,
    topic: &str,
    partitions: Option<i32>,
    changes: &[ConfigChange],
    out: &mut Output,
) -> Result<(), ToolError> {
    topic_info(admin.cluster(), topic).await?;
    if partitions.is_none() && changes.is_empty() {
        return Err(ToolError::InvalidArgument {
            what: "alter",
            text: topic.to_owned(),
            expected: "--partitions, --config or --delete-config",
        });
    }
    if let Some(count) = partitions {
        let mut results = admin
            .create_partitions(&[(topic, count)], false)
            .await
            .map_err(|source| ToolError::client("add partitions", source))?;
        resource_outcome("add partitions to topic", topic, results.remove(topic))?;
        out.line(&format!("Topic {topic} now has {count} partitions."))?;
    }
    if !changes.is_empty() {
        crate::configs::alter_resource(admin, RESOURCE_TYPE_TOPIC, topic, changes).await?;
        out.line(&format!("Updated the configs of topic {topic}."))?;
    }
    Ok(())
}

/// One resource's outcome in a multi-resource answer as a [`ToolError`]
/// naming the resource (`None`: the answer did not mention it).
pub fn resource_outcome(
    operation: &'static str,
    resource: &str,
    outcome: Option<Result<(), strom_client::ClientError>>,
) -> Result<(), ToolError> {
    match outcome {
        Some(Ok(())) => Ok(()),
        Some(Err(strom_client::ClientError::Broker { code })) => {
            Err(ToolError::rejected(operation, resource, code))
        }
        Some(Err(source)) => Err(ToolError::client(operation, source)),
        None => Err(ToolError::MissingResult {
            operation,
            resource: resource.to_owned(),
        }),
    }
}
