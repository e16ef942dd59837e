//! DescribeAcls: the ACL bindings matching a filter, grouped by resource
//! pattern. Needs DESCRIBE on the cluster.

use std::collections::BTreeMap;

use strom_controller::security_records::AccessControlEntryRecord;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource,
};
use strom_protocol::kafka::messages::{DescribeAclsRequest, DescribeAclsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_security::authorizer::AclFilter;

use super::authorization;
use super::BrokerContext;

/// Handles a DescribeAcls request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeAclsRequest,
) -> Reply {
    let refused = |code: ErrorCode, message: &'static str| {
        Reply::Response(Response::DescribeAcls(
            DescribeAclsResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_static_str(message))),
        ))
    };
    if let Some((code, message)) =
        authorization::acl_request_refusal(broker, context, operation::DESCRIBE)
    {
        return refused(code, message);
    }
    let filter = AclFilter {
        resource_type: request.resource_type_filter,
        resource_name: request.resource_name_filter.map(|name| name.to_string()),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.map(|p| p.to_string()),
        host: request.host_filter.map(|h| h.to_string()),
        operation: request.operation,
        permission_type: request.permission_type,
    };
    let image = broker.controller.image();
    let resources = group_by_resource(
        image
            .security()
            .acls()
            .filter(|acl| filter.matches(&authorization::binding(acl))),
    );
    Reply::Response(Response::DescribeAcls(
        DescribeAclsResponse::default().with_resources(resources),
    ))
}

/// Bindings grouped by resource pattern, as the response lists them.
pub fn group_by_resource<'a>(
    acls: impl Iterator<Item = &'a AccessControlEntryRecord>,
) -> Vec<DescribeAclsResource> {
    let mut grouped: BTreeMap<(i32, String, i32), Vec<AclDescription>> = BTreeMap::new();
    for acl in acls {
        let code = |value: i32| i8::try_from(value).unwrap_or_default();
        grouped
            .entry((
                acl.resource_type,
                acl.resource_name.clone(),
                acl.pattern_type,
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(acl.principal.clone()))
                    .with_host(StrBytes::from_string(acl.host.clone()))
                    .with_operation(code(acl.operation))
                    .with_permission_type(code(acl.permission_type)),
            );
    }
    grouped
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(i8::try_from(resource_type).unwrap_or_default())
                .with_resource_name(StrBytes::from_string(name))
                .with_pattern_type(i8::try_from(pattern_type).unwrap_or_default())
                .with_acls(acls)
        })
        .collect()
}
