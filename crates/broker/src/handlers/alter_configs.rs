//! AlterConfigs: replaces a topic's configs. The controller validates and
//! records them; the broker's metadata follower applies them to the logs.
//!
//! A broker resource (KIP-226) is one broker by id or, with an empty name,
//! the cluster-wide default; the controller accepts only the keys Kafka
//! marks dynamic (see `strom_protocol::broker_config`) and every broker
//! applies them when the records reach its metadata image.

use strom_controller::controller::{
    AlterConfigsRequest as ControllerRequest, ConfigEntry, ResourceConfigs, ResourceOutcome,
};
use strom_controller::error::RuntimeError;
use strom_controller::image::ConfigResource;
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_configs_response::AlterConfigsResourceResponse;
use strom_protocol::kafka::messages::{AlterConfigsRequest, AlterConfigsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::errors::{controller_error_code, runtime_error_code};
use super::BrokerContext;

/// A resource's result before it is encoded: its type and name, and either
/// a refusal decided here or the index of its controller outcome.
pub(super) enum Planned {
    /// Refused by the broker.
    Refused {
        /// The code.
        error: ErrorCode,
        /// Why.
        message: &'static str,
    },
    /// Sent to the controller, at this position of its request.
    Sent(usize),
}

/// Which resources a config alteration may name: a topic, a broker by id,
/// or the cluster-wide broker default (an empty broker name).
pub(super) fn config_resource(resource_type: i8, name: &str) -> Result<ConfigResource, Planned> {
    match resource_type {
        RESOURCE_TOPIC => Ok(ConfigResource::Topic(name.to_owned())),
        RESOURCE_BROKER if name.is_empty() => Ok(ConfigResource::Broker(None)),
        RESOURCE_BROKER => match name.parse::<i32>() {
            Ok(id) if id >= 0 => Ok(ConfigResource::Broker(Some(id))),
            _ => Err(Planned::Refused {
                error: ErrorCode::InvalidRequest,
                message:
                    "a broker resource is named by a broker id, or empty for the cluster default",
            }),
        },
        _ => Err(Planned::Refused {
            error: ErrorCode::InvalidRequest,
            message: "unsupported resource type",
        }),
    }
}

/// The per-resource responses, in request order.
pub(super) fn responses(
    identities: Vec<(i8, StrBytes)>,
    planned: Vec<Planned>,
    outcomes: Result<Vec<ResourceOutcome>, RuntimeError>,
) -> Vec<AlterConfigsResourceResponse> {
    identities
        .into_iter()
        .zip(planned)
        .map(|((resource_type, resource_name), planned)| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name);
            let failure = match planned {
                Planned::Refused { error, message } => Some((error, message.to_owned())),
                Planned::Sent(index) => match &outcomes {
                    Ok(outcomes) => match outcomes.get(index).map(|outcome| &outcome.result) {
                        Some(Ok(())) => None,
                        Some(Err(error)) => Some((controller_error_code(error), error.to_string())),
                        None => Some((
                            ErrorCode::UnknownServerError,
                            "the controller returned too few results".to_owned(),
                        )),
                    },
                    Err(error) => Some((runtime_error_code(error), error.to_string())),
                },
            };
            match failure {
                None => response,
                Some((error, message)) => response
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect()
}

/// Handles an AlterConfigs request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AlterConfigsRequest,
) -> Reply {
    let mut identities = Vec::with_capacity(request.resources.len());
    let mut planned = Vec::with_capacity(request.resources.len());
    let mut resources = Vec::new();
    for resource in &request.resources {
        identities.push((resource.resource_type, resource.resource_name.clone()));
        if let Some(error) = super::authorize_request::config_refusal(
            broker,
            context,
            strom_protocol::acl::operation::ALTER_CONFIGS,
            resource.resource_type,
            &resource.resource_name,
        ) {
            planned.push(Planned::Refused {
                error,
                message: "ALTER_CONFIGS on the resource is required",
            });
            continue;
        }
        match config_resource(resource.resource_type, &resource.resource_name) {
            Ok(config_resource) => {
                planned.push(Planned::Sent(resources.len()));
                resources.push(ResourceConfigs {
                    resource: config_resource,
                    entries: resource
                        .configs
                        .iter()
                        .map(|config| ConfigEntry {
                            key: config.name.to_string(),
                            value: config.value.as_ref().map(|value| value.to_string()),
                        })
                        .collect(),
                });
            }
            Err(refused) => planned.push(refused),
        }
    }
    let outcomes = if resources.is_empty() {
        Ok(Vec::new())
    } else {
        let controller_request = ControllerRequest {
            resources,
            validate_only: request.validate_only,
        };
        let outcomes = broker.controller.alter_configs(controller_request).await;
        broker.sync_metadata();
        outcomes
    };
    Reply::Response(Response::AlterConfigs(
        AlterConfigsResponse::default().with_responses(responses(identities, planned, outcomes)),
    ))
}
