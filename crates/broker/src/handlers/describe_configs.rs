//! DescribeConfigs for topics (every topic-level key with its effective
//! value and where it comes from) and for this broker (its properties under
//! Kafka's names).
//!
//! A topic key's value comes, in order of precedence, from the topic's own
//! override in the metadata image (`DYNAMIC_TOPIC_CONFIG`), from the broker's
//! `log.*` properties (`STATIC_BROKER_CONFIG`), or from Kafka's default
//! (`DEFAULT_CONFIG`). Broker configs are all read-only: Strom has no dynamic
//! broker configuration (AlterConfigs refuses broker resources).

use strom_controller::image::{ConfigResource, MetadataImage};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use strom_protocol::kafka::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_protocol::topic_config::{self, config_type, ConfigDefinition, TOPIC_CONFIGS};

use super::config_docs::source;
use super::BrokerContext;
use crate::config::KNOWN_KEYS;

/// Kafka's resource type code of a topic.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's resource type code of a broker.
pub const RESOURCE_BROKER: i8 = 4;

/// What the request asked to include with each entry.
#[derive(Clone, Copy)]
struct Include {
    synonyms: bool,
    documentation: bool,
}

/// One config value and where it came from.
struct Sourced {
    name: String,
    value: Option<String>,
    source: i8,
}

/// Handles a DescribeConfigs request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeConfigsRequest,
) -> Reply {
    let image = broker.controller.image();
    let include = Include {
        synonyms: request.include_synonyms,
        documentation: request.include_documentation,
    };
    let results = request
        .resources
        .iter()
        .map(|resource| {
            match super::authorize_request::config_refusal(
                broker,
                context,
                strom_protocol::acl::operation::DESCRIBE_CONFIGS,
                resource.resource_type,
                &resource.resource_name,
            ) {
                Some(code) => DescribeConfigsResult::default()
                    .with_resource_type(resource.resource_type)
                    .with_resource_name(resource.resource_name.clone())
                    .with_error_code(code.code()),
                None => describe(broker, &image, resource, include),
            }
        })
        .collect();
    Reply::Response(Response::DescribeConfigs(
        DescribeConfigsResponse::default().with_results(results),
    ))
}

fn describe(
    broker: &BrokerContext,
    image: &MetadataImage,
    resource: &DescribeConfigsResource,
    include: Include,
) -> DescribeConfigsResult {
    let name = resource.resource_name.to_string();
    let result = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let wanted = |key: &str| {
        resource
            .configuration_keys
            .as_ref()
            .is_none_or(|keys| keys.iter().any(|wanted| wanted.as_str() == key))
    };
    let configs = match resource.resource_type {
        RESOURCE_TOPIC => {
            if image.topic_by_name(&name).is_none() {
                return failed(result, ErrorCode::UnknownTopicOrPartition, "unknown topic");
            }
            TOPIC_CONFIGS
                .iter()
                .filter(|definition| wanted(definition.name))
                .map(|definition| topic_entry(broker, image, &name, definition, include))
                .collect()
        }
        RESOURCE_BROKER => {
            if name.is_empty() {
                // Cluster-wide dynamic defaults: Strom keeps none.
                Vec::new()
            } else if name.parse::<i32>().ok() != Some(broker.config.node_id) {
                return failed(
                    result,
                    ErrorCode::InvalidRequest,
                    "unexpected broker id: only this broker's configs can be described",
                );
            } else {
                broker_entries(broker)
                    .into_iter()
                    .filter(|entry| wanted(&entry.name))
                    .map(|entry| broker_entry(entry, include))
                    .collect()
            }
        }
        _ => {
            return failed(
                result,
                ErrorCode::InvalidRequest,
                "unsupported resource type",
            )
        }
    };
    result.with_configs(configs)
}

fn failed(result: DescribeConfigsResult, error: ErrorCode, message: &str) -> DescribeConfigsResult {
    result
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
}

/// Every source of a topic key's value, highest precedence first.
fn topic_sources(
    broker: &BrokerContext,
    image: &MetadataImage,
    topic: &str,
    definition: &ConfigDefinition,
) -> Vec<Sourced> {
    let mut sources = Vec::new();
    let resource = ConfigResource::Topic(topic.to_owned());
    if let Some(value) = image.config(&resource, definition.name) {
        sources.push(Sourced {
            name: definition.name.to_owned(),
            value: Some(value.to_owned()),
            source: source::DYNAMIC_TOPIC_CONFIG,
        });
    }
    let properties = broker.config.properties();
    for synonym in definition.broker_synonyms() {
        if let Some(value) = properties.get(synonym.name) {
            sources.push(Sourced {
                name: synonym.name.to_owned(),
                value: Some(value.trim().to_owned()),
                source: source::STATIC_BROKER_CONFIG,
            });
        }
    }
    sources.push(Sourced {
        name: definition.broker_name.to_owned(),
        value: Some(definition.default.to_owned()),
        source: source::DEFAULT_CONFIG,
    });
    sources
}

fn topic_entry(
    broker: &BrokerContext,
    image: &MetadataImage,
    topic: &str,
    definition: &ConfigDefinition,
    include: Include,
) -> DescribeConfigsResourceResult {
    let sources = topic_sources(broker, image, topic, definition);
    // The effective value: a topic override as stored; a broker property as
    // the broker converted it (hours and minutes become milliseconds).
    let (value, config_source) = match sources.first() {
        Some(first) if first.source == source::STATIC_BROKER_CONFIG => (
            broker
                .config
                .topic_defaults()
                .get(definition.name)
                .cloned()
                .or_else(|| first.value.clone()),
            first.source,
        ),
        Some(first) => (first.value.clone(), first.source),
        None => (Some(definition.default.to_owned()), source::DEFAULT_CONFIG),
    };
    let synonyms = if include.synonyms {
        sources.iter().map(synonym).collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(definition.name))
        .with_value(value.map(StrBytes::from_string))
        .with_read_only(false)
        .with_config_source(config_source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(definition.kind.config_type())
        .with_documentation(
            include
                .documentation
                .then_some(definition.documentation)
                .map(StrBytes::from_static_str),
        )
}

fn synonym(sourced: &Sourced) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(sourced.name.clone()))
        .with_value(sourced.value.clone().map(StrBytes::from_string))
        .with_source(sourced.source)
}

/// The broker's configuration under Kafka's names: every key Strom knows,
/// with the operator's value or the default.
fn broker_entries(broker: &BrokerContext) -> Vec<Sourced> {
    let properties = broker.config.properties();
    let sourced = |name: &str, default: Option<&str>| match properties.get(name) {
        Some(value) => Sourced {
            name: name.to_owned(),
            value: Some(value.trim().to_owned()),
            source: source::STATIC_BROKER_CONFIG,
        },
        None => Sourced {
            name: name.to_owned(),
            value: default.filter(|value| !value.is_empty()).map(str::to_owned),
            source: source::DEFAULT_CONFIG,
        },
    };
    let mut entries: Vec<Sourced> = KNOWN_KEYS
        .iter()
        .map(|(name, default)| sourced(name, Some(default)))
        .collect();
    for (synonym, _) in topic_config::broker_synonyms() {
        if entries.iter().any(|entry| entry.name == synonym.name) {
            continue;
        }
        entries.push(sourced(synonym.name, synonym.default));
    }
    entries.sort_by(|left, right| left.name.cmp(&right.name));
    entries
}

fn broker_entry(entry: Sourced, include: Include) -> DescribeConfigsResourceResult {
    let synonyms = if include.synonyms {
        vec![synonym(&entry)]
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(entry.name))
        .with_value(entry.value.map(StrBytes::from_string))
        .with_read_only(true)
        .with_config_source(entry.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(config_type::STRING)
}
