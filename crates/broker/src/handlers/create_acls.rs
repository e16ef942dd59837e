//! CreateAcls: adds ACL bindings through the metadata log. Needs ALTER on
//! the cluster; without an authorizer Kafka answers `SECURITY_DISABLED`.

use strom_controller::security_records::AccessControlEntryRecord;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, pattern, permission, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_acls_request::AclCreation;
use strom_protocol::kafka::messages::create_acls_response::AclCreationResult;
use strom_protocol::kafka::messages::{CreateAclsRequest, CreateAclsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_security::Principal;

use super::authorization;
use super::errors::runtime_error_code;
use super::BrokerContext;

/// Handles a CreateAcls request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: CreateAclsRequest,
) -> Reply {
    let refuse = |code: ErrorCode, message: &'static str| {
        let results = request
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_static_str(message)))
            })
            .collect();
        Reply::Response(Response::CreateAcls(
            CreateAclsResponse::default().with_results(results),
        ))
    };
    if let Some((code, message)) =
        authorization::acl_request_refusal(broker, context, operation::ALTER)
    {
        return refuse(code, message);
    }
    let checked: Vec<Result<AccessControlEntryRecord, &'static str>> =
        request.creations.iter().map(validate).collect();
    let additions: Vec<_> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let written = broker.controller.alter_acls(additions, Vec::new()).await;
    let results = checked
        .iter()
        .map(|check| match (check, &written) {
            (Err(reason), _) => AclCreationResult::default()
                .with_error_code(ErrorCode::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_static_str(reason))),
            (Ok(_), Err(error)) => AclCreationResult::default()
                .with_error_code(runtime_error_code(error).code())
                .with_error_message(Some(StrBytes::from_string(error.to_string()))),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    broker.sync_metadata();
    Reply::Response(Response::CreateAcls(
        CreateAclsResponse::default().with_results(results),
    ))
}

/// Checks one creation as Kafka does and makes its record.
fn validate(creation: &AclCreation) -> Result<AccessControlEntryRecord, &'static str> {
    if !matches!(
        creation.resource_type,
        resource::TOPIC | resource::GROUP | resource::CLUSTER | resource::TRANSACTIONAL_ID
    ) {
        return Err("the resource type must be TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID");
    }
    if !matches!(
        creation.resource_pattern_type,
        pattern::LITERAL | pattern::PREFIXED
    ) {
        return Err("the pattern type must be LITERAL or PREFIXED");
    }
    if creation.resource_name.is_empty() {
        return Err("the resource name is empty");
    }
    if creation.resource_type == resource::CLUSTER && &*creation.resource_name != CLUSTER_NAME {
        return Err("the cluster resource is named kafka-cluster");
    }
    if !(operation::ALL..=operation::IDEMPOTENT_WRITE).contains(&creation.operation) {
        return Err("the operation must be a concrete operation");
    }
    if !matches!(
        creation.permission_type,
        permission::ALLOW | permission::DENY
    ) {
        return Err("the permission must be ALLOW or DENY");
    }
    if Principal::parse(&creation.principal).is_none() {
        return Err("the principal must be TYPE:NAME");
    }
    if creation.host.is_empty() {
        return Err("the host is empty");
    }
    Ok(AccessControlEntryRecord {
        resource_type: creation.resource_type.into(),
        resource_name: creation.resource_name.to_string(),
        pattern_type: creation.resource_pattern_type.into(),
        principal: creation.principal.to_string(),
        host: creation.host.to_string(),
        operation: creation.operation.into(),
        permission_type: creation.permission_type.into(),
    })
}
