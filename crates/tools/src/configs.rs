//! `strom configs describe|alter` for topics and brokers.

use strom_client::admin_groups::{ConfigChange, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
use strom_client::{AdminClient, ClientError};
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::{ApiKey, DescribeConfigsRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::cli::{ConfigResource, ConfigsCommand, QuotaEntityArgs, QuotaEntityType};
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
    if let Some(done) = crate::quota_configs::run(&admin, &command, out).await {
        return done;
    }
    run_on_resource(&admin, command, out).await
}

/// Runs a `configs` command on a topic or broker.
async fn run_on_resource(
    admin: &AdminClient,
    command: ConfigsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    match command {
        ConfigsCommand::Describe {
            resource,
            quota,
            all,
            json,
        } => describe(admin, with_broker_entity(resource, &quota)?, all, json, out).await,
        ConfigsCommand::Alter {
            resource,
            quota,
            add_config,
            delete_config,
        } => {
            let resource = with_broker_entity(resource, &quota)?;
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
            let (resource_type, name) = resolve(admin, &resource).await?;
            alter_resource(admin, resource_type, &name, &changes).await?;
            out.line(&format!(
                "Completed updating the configs of {} {name}.",
                kind(&resource)
            ))
        }
    }
}

/// `configs describe` of a topic or broker (or the broker defaults).
async fn describe(
    admin: &AdminClient,
    resource: ConfigResource,
    all: bool,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let (resource_type, name) = resolve(admin, &resource).await?;
    let entries = describe_entries(admin, resource_type, &name)
        .await
        .map_err(|error| resource_error("describe configs of", &resource, &name, error))?;
    let shown: Vec<&ConfigEntry> = entries
        .iter()
        .filter(|entry| all || !entry.is_default())
        .collect();
    if json {
        let map: serde_json::Map<String, serde_json::Value> = shown
            .iter()
            .map(|entry| (entry.name.clone(), serde_json::json!(entry.value)))
            .collect();
        return out.line(&serde_json::Value::Object(map).to_string());
    }
    out.line(&format!(
        "{} configs for {} {name}:",
        if all { "All" } else { "Non-default" },
        kind(&resource)
    ))?;
    shown.iter().try_for_each(|entry| {
        out.line(&format!(
            "  {}={} ({})",
            entry.name,
            entry.value.as_deref().unwrap_or(""),
            source_name(entry.source)
        ))
    })
}

/// Kafka's `DEFAULT_CONFIG` config source.
const SOURCE_DEFAULT: i8 = 5;

/// One config of a resource, with where its value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The config name.
    pub name: String,
    /// The value (`None` when unset or sensitive).
    pub value: Option<String>,
    /// Kafka's config source code (1 topic override, 4 static broker
    /// setting, 5 default, ...).
    pub source: i8,
}

impl ConfigEntry {
    /// Whether the value is the built-in default.
    pub fn is_default(&self) -> bool {
        self.source == SOURCE_DEFAULT
    }
}

/// Kafka's name of a config source code.
pub fn source_name(source: i8) -> &'static str {
    strom_protocol::config_source::name(source)
}

/// The configs of a topic or broker with their sources (DescribeConfigs,
/// sent to the broker itself for broker configs, else to the controller).
pub async fn describe_entries(
    admin: &AdminClient,
    resource_type: i8,
    name: &str,
) -> Result<Vec<ConfigEntry>, ClientError> {
    let cluster = admin.cluster();
    let metadata = cluster.refresh_metadata().await?;
    let target = match name.parse::<i32>() {
        Ok(broker_id) if resource_type == RESOURCE_TYPE_BROKER => broker_id,
        _ if metadata.brokers.contains_key(&metadata.controller_id) => metadata.controller_id,
        _ => metadata
            .brokers
            .keys()
            .min()
            .copied()
            .ok_or(ClientError::NoBrokerAvailable { attempted: 0 })?,
    };
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None)]);
    let Response::DescribeConfigs(response) = cluster.send_to(target, request).await? else {
        return Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::DescribeConfigs as i16,
        });
    };
    let result = response
        .results
        .first()
        .ok_or(ClientError::UnexpectedResponse {
            api_key: ApiKey::DescribeConfigs as i16,
        })?;
    match ErrorCode::from_code(result.error_code) {
        ErrorCode::None => {}
        code => return Err(ClientError::Broker { code }),
    }
    let mut entries: Vec<ConfigEntry> = result
        .configs
        .iter()
        .map(|config| ConfigEntry {
            name: config.name.to_string(),
            value: config.value.as_ref().map(|value| value.to_string()),
            source: config.config_source,
        })
        .collect();
    entries.sort_by(|left, right| left.name.cmp(&right.name));
    Ok(entries)
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
                } else if name.is_empty() {
                    "alter the cluster-wide broker defaults"
                } else {
                    "alter configs of broker"
                },
                name,
                code,
            ),
            other => ToolError::client("alter configs", other),
        })
}

/// `--entity-type brokers` with `--entity-name ID` or `--entity-default`
/// (kafka-configs.sh's form) as `--broker ID` or `--broker-defaults`.
fn with_broker_entity(
    mut resource: ConfigResource,
    entity: &QuotaEntityArgs,
) -> Result<ConfigResource, ToolError> {
    if entity.entity_type != Some(QuotaEntityType::Brokers) {
        return Ok(resource);
    }
    match (&entity.entity_name, entity.entity_default) {
        (Some(name), _) => {
            let id = name
                .parse::<i32>()
                .map_err(|_| ToolError::InvalidArgument {
                    what: "--entity-name",
                    text: name.clone(),
                    expected: "a broker id (a number) with --entity-type brokers",
                })?;
            resource.broker = Some(id);
        }
        (None, true) => resource.broker_defaults = true,
        (None, false) => {
            return Err(ToolError::InvalidArgument {
                what: "--entity-type brokers",
                text: String::new(),
                expected: "--entity-name ID or --entity-default",
            })
        }
    }
    Ok(resource)
}

async fn resolve(
    admin: &AdminClient,
    resource: &ConfigResource,
) -> Result<(i8, String), ToolError> {
    match (&resource.topic, resource.broker) {
        (Some(topic), _) => {
            crate::topic_metadata::topic_info(admin.cluster(), topic).await?;
            Ok((RESOURCE_TYPE_TOPIC, topic.clone()))
        }
        (None, Some(broker)) => Ok((RESOURCE_TYPE_BROKER, broker.to_string())),
        (None, None) if resource.broker_defaults => Ok(broker_defaults()),
        (None, None) => Err(ToolError::InvalidArgument {
            what: "resource",
            text: String::new(),
            expected: "--topic, --broker, --broker-defaults or a client quota entity (--entity-type, --user, --client)",
        }),
    }
}

fn kind(resource: &ConfigResource) -> &'static str {
    if resource.topic.is_some() {
        "topic"
    } else if resource.broker_defaults {
        "the cluster-wide broker defaults"
    } else {
        "broker"
    }
}

/// The cluster-wide default broker resource: a broker resource with an
/// empty name (KIP-226).
fn broker_defaults() -> (i8, String) {
    (RESOURCE_TYPE_BROKER, String::new())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_have_kafkas_names() {
        assert_eq!(source_name(1), "DYNAMIC_TOPIC_CONFIG");
        assert_eq!(source_name(5), "DEFAULT_CONFIG");
        assert_eq!(source_name(42), "UNKNOWN");
        let entry = ConfigEntry {
            name: "retention.ms".to_owned(),
            value: Some("1".to_owned()),
            source: SOURCE_DEFAULT,
        };
        assert!(entry.is_default());
        assert!(!ConfigEntry { source: 1, ..entry }.is_default());
    }
}
