//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (the last two
//! for list-valued keys) on topic configs and on dynamic broker configs (a
//! broker by id, or the cluster default), as in AlterConfigs.

use strom_controller::controller::{
    AlterConfigOperation, ConfigAlteration, IncrementalAlterConfigsRequest as ControllerRequest,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::incremental_alter_configs_request::AlterableConfig;
use strom_protocol::kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strom_protocol::kafka::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use strom_protocol::messages::Response;

use super::alter_configs::{config_resource, responses, Planned};
use super::BrokerContext;

/// Handles an IncrementalAlterConfigs request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: IncrementalAlterConfigsRequest,
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
        let alterations = config_resource(resource.resource_type, &resource.resource_name)
            .and_then(|config_resource| {
                let alterations = resource
                    .configs
                    .iter()
                    .map(alteration)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((config_resource, alterations))
            });
        match alterations {
            Ok(alterations) => {
                planned.push(Planned::Sent(resources.len()));
                resources.push(alterations);
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
        let outcomes = broker
            .controller
            .incremental_alter_configs(controller_request)
            .await;
        broker.sync_metadata();
        outcomes
    };
    // Both alter APIs share the response shape; convert field by field.
    let results = responses(identities, planned, outcomes)
        .into_iter()
        .map(|response| {
            AlterConfigsResourceResponse::default()
                .with_error_code(response.error_code)
                .with_error_message(response.error_message)
                .with_resource_type(response.resource_type)
                .with_resource_name(response.resource_name)
        })
        .collect();
    Reply::Response(Response::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(results),
    ))
}

/// Kafka's `AlterConfigOp.OpType` codes.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn alteration(config: &AlterableConfig) -> Result<ConfigAlteration, Planned> {
    let value = config.value.as_ref().map(|value| value.to_string());
    let operation = match (config.config_operation, value) {
        (DELETE, _) => AlterConfigOperation::Delete,
        (SET, Some(value)) => AlterConfigOperation::Set(value),
        (APPEND, Some(value)) => AlterConfigOperation::Append(value),
        (SUBTRACT, Some(value)) => AlterConfigOperation::Subtract(value),
        (SET | APPEND | SUBTRACT, None) => {
            return Err(Planned::Refused {
                error: ErrorCode::InvalidRequest,
                message: "a null value is only valid with DELETE",
            })
        }
        _ => {
            return Err(Planned::Refused {
                error: ErrorCode::InvalidRequest,
                message: "unknown config operation",
            })
        }
    };
    Ok(ConfigAlteration {
        key: config.name.to_string(),
        operation,
    })
}
