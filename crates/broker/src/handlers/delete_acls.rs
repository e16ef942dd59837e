//! DeleteAcls: removes the ACL bindings matching each filter. Needs ALTER
//! on the cluster.

use strom_controller::security_records::AccessControlEntryRecord;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use strom_protocol::kafka::messages::{DeleteAclsRequest, DeleteAclsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_security::authorizer::AclFilter;

use super::authorization;
use super::errors::runtime_error_code;
use super::BrokerContext;

/// Handles a DeleteAcls request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DeleteAclsRequest,
) -> Reply {
    let refuse = |code: ErrorCode, message: &'static str| {
        let results = request
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_static_str(message)))
            })
            .collect();
        Reply::Response(Response::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(results),
        ))
    };
    if let Some((code, message)) =
        authorization::acl_request_refusal(broker, context, operation::ALTER)
    {
        return refuse(code, message);
    }
    let image = broker.controller.image();
    let matched: Vec<Vec<AccessControlEntryRecord>> = request
        .filters
        .iter()
        .map(|filter| {
            let filter = AclFilter {
                resource_type: filter.resource_type_filter,
                resource_name: filter.resource_name_filter.as_ref().map(|n| n.to_string()),
                pattern_type: filter.pattern_type_filter,
                principal: filter.principal_filter.as_ref().map(|p| p.to_string()),
                host: filter.host_filter.as_ref().map(|h| h.to_string()),
                operation: filter.operation,
                permission_type: filter.permission_type,
            };
            image
                .security()
                .acls()
                .filter(|acl| filter.matches(&authorization::binding(acl)))
                .cloned()
                .collect()
        })
        .collect();
    let removals = matched.iter().flatten().cloned().collect();
    let written = broker.controller.alter_acls(Vec::new(), removals).await;
    broker.sync_metadata();
    let results = matched
        .into_iter()
        .map(|acls| match &written {
            Err(error) => DeleteAclsFilterResult::default()
                .with_error_code(runtime_error_code(error).code())
                .with_error_message(Some(StrBytes::from_string(error.to_string()))),
            Ok(()) => DeleteAclsFilterResult::default()
                .with_matching_acls(acls.iter().map(matching).collect()),
        })
        .collect();
    Reply::Response(Response::DeleteAcls(
        DeleteAclsResponse::default().with_filter_results(results),
    ))
}

fn matching(acl: &AccessControlEntryRecord) -> DeleteAclsMatchingAcl {
    let code = |value: i32| i8::try_from(value).unwrap_or_default();
    DeleteAclsMatchingAcl::default()
        .with_resource_type(code(acl.resource_type))
        .with_resource_name(StrBytes::from_string(acl.resource_name.clone()))
        .with_pattern_type(code(acl.pattern_type))
        .with_principal(StrBytes::from_string(acl.principal.clone()))
        .with_host(StrBytes::from_string(acl.host.clone()))
        .with_operation(code(acl.operation))
        .with_permission_type(code(acl.permission_type))
}
