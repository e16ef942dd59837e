//! AlterClientQuotas (KIP-546): sets and removes client quotas through the
//! metadata log, so every broker enforces the same values and they outlive
//! a restart. Needs ALTER_CONFIGS on the cluster. Each entity is checked
//! whole by the controller (`strom_controller::controller::quotas`); a bad
//! entity is answered `INVALID_REQUEST` and changes nothing.

use strom_controller::controller::{
    AlterClientQuotasRequest as Alteration, ClientQuotaAlteration, QuotaOp,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_client_quotas_request::EntryData;
use strom_protocol::kafka::messages::alter_client_quotas_response::{
    EntityData as ResponseEntity, EntryData as ResponseEntry,
};
use strom_protocol::kafka::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::errors::runtime_error_code;
use super::BrokerContext;

/// Handles an AlterClientQuotas request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AlterClientQuotasRequest,
) -> Reply {
    let allowed = authorize(
        broker,
        context,
        operation::ALTER_CONFIGS,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    if !allowed {
        let message = "ALTER_CONFIGS on the cluster is required".to_owned();
        return answer(&request.entries, |_| {
            (ErrorCode::ClusterAuthorizationFailed, Some(message.clone()))
        });
    }
    let alteration = Alteration {
        alterations: request.entries.iter().map(alteration).collect(),
        validate_only: request.validate_only,
    };
    let outcome = broker.controller.alter_client_quotas(alteration).await;
    if !request.validate_only {
        broker.sync_metadata();
    }
    match outcome {
        Ok(results) => answer(&request.entries, |index| match results.get(index) {
            Some(Ok(())) => (ErrorCode::None, None),
            Some(Err(error)) => (ErrorCode::InvalidRequest, Some(error.to_string())),
            None => (ErrorCode::UnknownServerError, None),
        }),
        Err(error) => answer(&request.entries, |_| {
            (runtime_error_code(&error), Some(error.to_string()))
        }),
    }
}

/// The controller's form of one entry.
fn alteration(entry: &EntryData) -> ClientQuotaAlteration {
    ClientQuotaAlteration {
        entity: entry
            .entity
            .iter()
            .map(|part| {
                (
                    part.entity_type.to_string(),
                    part.entity_name.as_ref().map(|name| name.to_string()),
                )
            })
            .collect(),
        ops: entry
            .ops
            .iter()
            .map(|op| QuotaOp {
                key: op.key.to_string(),
                value: (!op.remove).then_some(op.value),
            })
            .collect(),
    }
}

/// The response: one entry per request entry, with the code `outcome`
/// gives its index.
fn answer(entries: &[EntryData], outcome: impl Fn(usize) -> (ErrorCode, Option<String>)) -> Reply {
    let entries = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let (code, message) = outcome(index);
            ResponseEntry::default()
                .with_error_code(code.code())
                .with_error_message(message.map(StrBytes::from_string))
                .with_entity(
                    entry
                        .entity
                        .iter()
                        .map(|part| {
                            ResponseEntity::default()
                                .with_entity_type(part.entity_type.clone())
                                .with_entity_name(part.entity_name.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    Reply::Response(Response::AlterClientQuotas(
        AlterClientQuotasResponse::default().with_entries(entries),
    ))
}
