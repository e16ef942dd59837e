//! DescribeConfigs for topics (every topic-level key with its effective
//! value and where it comes from) and for this broker (its properties under
//! Kafka's names).
//!
//! A topic key's value comes, in order of precedence, from the topic's own
//! override in the metadata image (`DYNAMIC_TOPIC_CONFIG`), from this
//! broker's dynamic config (`DYNAMIC_BROKER_CONFIG`), from the cluster-wide
//! dynamic default (`DYNAMIC_DEFAULT_BROKER_CONFIG`), from the broker's
//! `log.*` properties (`STATIC_BROKER_CONFIG`), or from Kafka's default
//! (`DEFAULT_CONFIG`). Broker resources are described in `broker_configs`.

use strom_controller::image::{ConfigResource, MetadataImage};
use strom_network::{Reply, RequestContext};
use strom_observability::view::ConfigEntryState;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use strom_protocol::kafka::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_protocol::topic_config::{ConfigDefinition, TOPIC_CONFIGS};

use super::broker_configs::{self, BrokerLayers, Sourced};
use super::config_docs::source;
use super::BrokerContext;

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
                broker_configs::cluster_default_entries(
                    image,
                    wanted,
                    include.synonyms,
                    include.documentation,
                )
            } else if name.parse::<i32>().ok() != Some(broker.config.node_id) {
                return failed(
                    result,
                    ErrorCode::InvalidRequest,
                    "unexpected broker id: only this broker's configs can be described",
                );
            } else {
                broker_configs::broker_entries(
                    broker,
                    image,
                    wanted,
                    include.synonyms,
                    include.documentation,
                )
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

/// Every source of a topic key's value, highest precedence first: the
/// topic's override, then the broker layers over the key's broker names.
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
    let names: Vec<&str> = definition
        .broker_synonyms()
        .map(|synonym| synonym.name)
        .collect();
    let layers = BrokerLayers::new(broker, image);
    sources.extend(layers.sources(
        &names,
        Some((definition.broker_name, Some(definition.default))),
    ));
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

/// Every topic-level config of `topic` with its effective value and its
/// source, as DescribeConfigs answers them (for the console); empty for an
/// unknown topic.
pub fn topic_config_entries(broker: &BrokerContext, topic: &str) -> Vec<ConfigEntryState> {
    let image = broker.controller.image();
    if image.topic_by_name(topic).is_none() {
        return Vec::new();
    }
    let include = Include {
        synonyms: false,
        documentation: false,
    };
    TOPIC_CONFIGS
        .iter()
        .map(|definition| {
            let entry = topic_entry(broker, &image, topic, definition, include);
            ConfigEntryState {
                name: definition.name.to_owned(),
                value: entry.value.map(|value| value.to_string()),
                source: source::name(entry.config_source),
            }
        })
        .collect()
}

fn synonym(sourced: &Sourced) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(sourced.name.clone()))
        .with_value(sourced.value.clone().map(StrBytes::from_string))
        .with_source(sourced.source)
}
