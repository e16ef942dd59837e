//! `strom configs describe|alter` for topics and brokers.

use strom_client::admin_groups::{ConfigChange, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
use strom_client::{AdminClient, ClientError};

use crate::cli::{ConfigResource, ConfigsCommand};
use crate::context::{parse_key_values, Context};
use crate::error::ToolError;
use crate::output::Output;

/// Runs a `configs` command.
pub async fn run(
    context: &Context,
    command: ConfigsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        ConfigsCommand::Describe { resource, json } => {
            let (resource_type, name) = resolve(&admin, &resource).await?;
            let configs = admin
                .describe_configs(resource_type, &name)
                .await
                .map_err(|error| resource_error("describe configs of", &resource, &name, error))?;
            if json {
                out.line(&serde_json::json!(configs).to_string())
            } else {
                out.line(&format!("Configs for {} {name}:", kind(&resource)))?;
                configs.iter().try_for_each(|(key, value)| {
                    out.line(&format!("  {key}={}", value.as_deref().unwrap_or("")))
                })
            }
        }
        ConfigsCommand::Alter {
            resource,
            add_config,
            delete_config,
        } => {
            let mut changes: Vec<ConfigChange> = parse_key_values("--add-config", &add_config)?
                .into_iter()
                .map(|(key, value)| ConfigChange::Set(key, value))
                .collect();
            changes.extend(delete_config.into_iter().map(ConfigChange::Delete));
            if changes.is_empty() {
                return Err(ToolError::InvalidArgument {
                    what: "configs alter",
                    text: String::new(),
                    expected: "--add-config or --delete-config",
                });
            }
            let (resource_type, name) = resolve(&admin, &resource).await?;
            alter_resource(&admin, resource_type, &name, &changes).await?;
            out.line(&format!(
                "Completed updating the configs of {} {name}.",
                kind(&resource)
            ))
        }
    }
}

/// Applies config changes to a resource, naming it in errors.
pub async fn alter_resource(
    admin: &AdminClient,
    resource_type: i8,
    name: &str,
    changes: &[ConfigChange],
) -> Result<(), ToolError> {
    admin
        .incremental_alter_configs(resource_type, name, changes, false)
        .await
        .map_err(|error| match error {
            ClientError::Broker { code } => ToolError::rejected(
                if resource_type == RESOURCE_TYPE_TOPIC {
                    "alter configs of topic"
                } else {
                    "alter configs of broker"
                },
                name,
                code,
            ),
            other => ToolError::client("alter configs", other),
        })
}

async fn resolve(
    admin: &AdminClient,
    resource: &ConfigResource,
) -> Result<(i8, String), ToolError> {
    match (&resource.topic, resource.broker) {
        (Some(topic), _) => {
            crate::topics::topic_info(admin.cluster(), topic).await?;
            Ok((RESOURCE_TYPE_TOPIC, topic.clone()))
        }
        (None, Some(broker)) => Ok((RESOURCE_TYPE_BROKER, broker.to_string())),
        (None, None) => Err(ToolError::InvalidArgument {
            what: "resource",
            text: String::new(),
            expected: "--topic or --broker",
        }),
    }
}

fn kind(resource: &ConfigResource) -> &'static str {
    if resource.topic.is_some() {
        "topic"
    } else {
        "broker"
    }
}

fn resource_error(
    operation: &'static str,
    resource: &ConfigResource,
    name: &str,
    error: ClientError,
) -> ToolError {
    match error {
        ClientError::UnknownBroker { .. } if resource.broker.is_some() => {
            ToolError::InvalidArgument {
                what: "--broker",
                text: name.to_owned(),
                expected: "the id of a broker in the cluster",
            }
        }
        ClientError::Broker { code } => ToolError::rejected(operation, name, code),
        other => ToolError::client(operation, other),
    }
}
