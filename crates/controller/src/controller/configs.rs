//! Config commands: AlterConfigs (replace all) and IncrementalAlterConfigs.

use std::collections::{BTreeMap, BTreeSet};

use super::{ConfigEntry, Controller, ControllerResult, Pending};
use strom_protocol::broker_config::{dynamic_broker_key, BrokerKey};
use strom_protocol::topic_config::ConfigValueError;

use crate::config::{split_list, topic_config, ConfigDefinition};
use crate::error::{ApplyError, ConfigProblem, ControllerError};
use crate::image::{ConfigResource, MetadataImage};
use crate::records::{ConfigRecord, MetadataRecord, Record};

/// A resource and the complete set of configs it should have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceConfigs {
    /// The resource.
    pub resource: ConfigResource,
    /// Its configs; keys not listed are deleted.
    pub entries: Vec<ConfigEntry>,
}

/// An AlterConfigs request: replace each resource's configs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AlterConfigsRequest {
    /// Resources and their new configs.
    pub resources: Vec<ResourceConfigs>,
    /// Validate only; write nothing.
    pub validate_only: bool,
}

/// An IncrementalAlterConfigs operation (Kafka's `AlterConfigOp.OpType`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AlterConfigOperation {
    /// Set the value.
    Set(String),
    /// Delete the key (back to its default).
    Delete,
    /// Add entries to a list-valued key.
    Append(String),
    /// Remove entries from a list-valued key.
    Subtract(String),
}

/// One key's operation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigAlteration {
    /// The key.
    pub key: String,
    /// The operation.
    pub operation: AlterConfigOperation,
}

/// An IncrementalAlterConfigs request.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct IncrementalAlterConfigsRequest {
    /// Resources and their operations.
    pub resources: Vec<(ConfigResource, Vec<ConfigAlteration>)>,
    /// Validate only; write nothing.
    pub validate_only: bool,
}

/// The result for one resource.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceOutcome {
    /// The resource.
    pub resource: ConfigResource,
    /// The result.
    pub result: Result<(), ControllerError>,
}

impl Controller {
    /// Replaces the configs of each resource.
    pub fn alter_configs(
        &mut self,
        image: &MetadataImage,
        request: &AlterConfigsRequest,
    ) -> Result<ControllerResult<Vec<ResourceOutcome>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(request.resources.len());
        for resource in &request.resources {
            let planned = plan_replacement(&pending.image, resource);
            outcomes.push(record_outcome(&mut pending, &resource.resource, planned)?);
        }
        Ok(pending.finish(outcomes, request.validate_only))
    }

    /// Applies per-key operations to each resource.
    pub fn incremental_alter_configs(
        &mut self,
        image: &MetadataImage,
        request: &IncrementalAlterConfigsRequest,
    ) -> Result<ControllerResult<Vec<ResourceOutcome>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(request.resources.len());
        for (resource, alterations) in &request.resources {
            let planned = plan_alterations(&pending.image, resource, alterations);
            outcomes.push(record_outcome(&mut pending, resource, planned)?);
        }
        Ok(pending.finish(outcomes, request.validate_only))
    }
}

fn record_outcome(
    pending: &mut Pending,
    resource: &ConfigResource,
    planned: Result<Vec<MetadataRecord>, ControllerError>,
) -> Result<ResourceOutcome, ApplyError> {
    let result = match planned {
        Ok(records) => {
            pending.push(records)?;
            Ok(())
        }
        Err(error) => Err(error),
    };
    Ok(ResourceOutcome {
        resource: resource.clone(),
        result,
    })
}

/// What a key of one resource is: a topic key, or a dynamic broker key.
enum Definition {
    Topic(&'static ConfigDefinition),
    Broker(BrokerKey),
}

impl Definition {
    fn validate(&self, value: &str) -> Result<(), ConfigValueError> {
        match self {
            Definition::Topic(definition) => definition.validate(value),
            Definition::Broker(key) => key.validate(value),
        }
    }

    fn normalize(&self, value: &str) -> String {
        match self {
            Definition::Topic(definition) => definition.normalize(value),
            Definition::Broker(key) => key.normalize(value),
        }
    }

    fn default_value(&self) -> &'static str {
        match self {
            Definition::Topic(definition) => definition.default,
            Definition::Broker(key) => key.default_value(),
        }
    }

    fn is_list(&self) -> bool {
        match self {
            Definition::Topic(definition) => definition.is_list(),
            Definition::Broker(key) => key.is_list(),
        }
    }
}

/// The definition of `key` for this resource kind. A topic key that is not
/// known is an invalid config; a broker key that is not dynamic is refused
/// as read-only, and a per-broker-only key at the cluster default too.
fn definition_for(resource: &ConfigResource, key: &str) -> Result<Definition, ControllerError> {
    match resource {
        ConfigResource::Topic(_) => topic_config(key)
            .map(Definition::Topic)
            .ok_or_else(|| invalid(key, None, ConfigProblem::UnknownKey)),
        ConfigResource::Broker(broker) => {
            let dynamic =
                dynamic_broker_key(key).ok_or_else(|| ControllerError::ReadOnlyConfig {
                    key: key.to_owned(),
                })?;
            if broker.is_none() && dynamic.per_broker_only() {
                return Err(ControllerError::PerBrokerConfig {
                    key: key.to_owned(),
                });
            }
            Ok(Definition::Broker(dynamic))
        }
    }
}

fn check_resource(image: &MetadataImage, resource: &ConfigResource) -> Result<(), ControllerError> {
    match resource {
        ConfigResource::Topic(name) if image.topic_by_name(name).is_none() => {
            Err(ControllerError::UnknownTopic { name: name.clone() })
        }
        _ => Ok(()),
    }
}

fn invalid(key: &str, value: Option<&str>, reason: ConfigProblem) -> ControllerError {
    ControllerError::InvalidConfig {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        reason,
    }
}

fn plan_replacement(
    image: &MetadataImage,
    request: &ResourceConfigs,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let resource = &request.resource;
    check_resource(image, resource)?;
    let mut wanted = BTreeMap::new();
    for entry in &request.entries {
        let value = entry.value.as_deref();
        let present =
            value.ok_or_else(|| invalid(&entry.key, None, ConfigProblem::MissingValue))?;
        let definition = definition_for(resource, &entry.key)?;
        definition
            .validate(present)
            .map_err(|reason| invalid(&entry.key, value, reason.into()))?;
        let normalized = definition.normalize(present);
        if wanted.insert(entry.key.as_str(), normalized).is_some() {
            return Err(invalid(&entry.key, value, ConfigProblem::DuplicateKey));
        }
    }
    let current = image.configs(resource);
    let deletions = current
        .keys()
        .filter(|key| !wanted.contains_key(key.as_str()))
        .map(|key| config_record(resource, key, None));
    let updates = wanted
        .iter()
        .filter(|(key, value)| current.get(**key) != Some(*value))
        .map(|(key, value)| config_record(resource, key, Some(value)));
    Ok(deletions.chain(updates).collect())
}

fn plan_alterations(
    image: &MetadataImage,
    resource: &ConfigResource,
    alterations: &[ConfigAlteration],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    check_resource(image, resource)?;
    let current = image.configs(resource);
    let mut seen = BTreeSet::new();
    let mut records = Vec::new();
    for alteration in alterations {
        let key = alteration.key.as_str();
        if !seen.insert(key) {
            return Err(invalid(key, None, ConfigProblem::DuplicateKey));
        }
        let definition = definition_for(resource, key)?;
        let base = current
            .get(key)
            .map_or(definition.default_value(), String::as_str);
        let new_value = match &alteration.operation {
            AlterConfigOperation::Set(value) => Some(value.clone()),
            AlterConfigOperation::Delete => None,
            AlterConfigOperation::Append(value) | AlterConfigOperation::Subtract(value) => {
                if !definition.is_list() {
                    return Err(invalid(key, Some(value), ConfigProblem::NotAList));
                }
                let append = matches!(alteration.operation, AlterConfigOperation::Append(_));
                Some(combine_lists(base, value, append))
            }
        };
        let new_value = match new_value {
            Some(value) => {
                definition
                    .validate(&value)
                    .map_err(|reason| invalid(key, Some(&value), reason.into()))?;
                Some(definition.normalize(&value))
            }
            None => None,
        };
        if current.get(key) != new_value.as_ref() {
            records.push(config_record(resource, key, new_value.as_deref()));
        }
    }
    Ok(records)
}

/// Appends the entries of `change` not yet in `base`, or removes them.
fn combine_lists(base: &str, change: &str, append: bool) -> String {
    let mut entries: Vec<&str> = split_list(base);
    let changes = split_list(change);
    if append {
        for entry in changes {
            if !entries.contains(&entry) {
                entries.push(entry);
            }
        }
    } else {
        entries.retain(|entry| !changes.contains(entry));
    }
    entries.join(",")
}

fn config_record(resource: &ConfigResource, key: &str, value: Option<&str>) -> MetadataRecord {
    let (resource_type, resource_name) = resource.to_record_parts();
    MetadataRecord::new(Record::Config(ConfigRecord {
        resource_type: resource_type as i32,
        resource_name,
        name: key.to_owned(),
        value: value.map(str::to_owned),
    }))
}
