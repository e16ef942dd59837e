//! The handlers' questions to the authorizer: each takes the broker's
//! context and the request's, and asks `strom-security`'s decision
//! function with the configured settings, the connection's principal and
//! host, and the ACL bindings of the current metadata image. Without an
//! authorizer configured every question is answered yes.

use strom_controller::security_records::AccessControlEntryRecord;
use strom_network::RequestContext;
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_security::authorizer::{self, AclBinding, Action};
use strom_security::Principal;

use super::BrokerContext;

/// The authorizer's view of a stored ACL.
pub fn binding(acl: &AccessControlEntryRecord) -> AclBinding<'_> {
    AclBinding {
        resource_type: acl.resource_type,
        resource_name: &acl.resource_name,
        pattern_type: acl.pattern_type,
        principal: &acl.principal,
        host: &acl.host,
        operation: acl.operation,
        permission_type: acl.permission_type,
    }
}

/// Whether the connection of `context` may perform `operation` on the
/// resource; always true when no authorizer is configured.
pub fn authorize(
    broker: &BrokerContext,
    context: &RequestContext,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> bool {
    let action = Action {
        operation,
        resource_type,
        name,
    };
    authorize_principal(
        broker,
        &context.session.principal(),
        &context.peer.ip().to_string(),
        action,
    )
}

/// Whether `principal`, connecting from `host`, may perform `action`
/// (a Kafka connection's question, and the console's for its viewer);
/// always true when no authorizer is configured.
pub fn authorize_principal(
    broker: &BrokerContext,
    principal: &Principal,
    host: &str,
    action: Action<'_>,
) -> bool {
    let Some(settings) = &broker.config.security.authorizer else {
        return true;
    };
    let image = broker.controller.image();
    authorizer::decide(
        settings,
        image.security().acls().map(binding),
        principal,
        host,
        action,
    )
}

/// WRITE on a topic (Produce).
pub fn may_write(broker: &BrokerContext, context: &RequestContext, topic: &str) -> bool {
    authorize(broker, context, operation::WRITE, resource::TOPIC, topic)
}

/// DESCRIBE on a topic (Metadata, ListOffsets, OffsetFetch).
pub fn may_describe_topic(broker: &BrokerContext, context: &RequestContext, topic: &str) -> bool {
    authorize(broker, context, operation::DESCRIBE, resource::TOPIC, topic)
}

/// An operation on a group.
pub fn may_on_group(
    broker: &BrokerContext,
    context: &RequestContext,
    operation: i8,
    group: &str,
) -> bool {
    authorize(broker, context, operation, resource::GROUP, group)
}

/// Whether the principal may WRITE some topic (KIP-679: enough for an
/// idempotent producer); see [`authorizer::may_write_some_topic`].
pub fn may_write_some_topic(broker: &BrokerContext, context: &RequestContext) -> bool {
    let Some(settings) = &broker.config.security.authorizer else {
        return true;
    };
    let image = broker.controller.image();
    let found = authorizer::may_write_some_topic(
        settings,
        image.security().acls().map(binding),
        &context.session.principal(),
    );
    found
}

/// Whether an authorizer is configured.
pub fn enabled(broker: &BrokerContext) -> bool {
    broker.config.security.authorizer.is_some()
}

/// Why an ACL request (CreateAcls and DeleteAcls need ALTER on the
/// cluster, DescribeAcls DESCRIBE) is refused, as Kafka answers it: no
/// authorizer configured, or the principal lacks that operation.
pub fn acl_request_refusal(
    broker: &BrokerContext,
    context: &RequestContext,
    cluster_operation: i8,
) -> Option<(ErrorCode, &'static str)> {
    if !enabled(broker) {
        return Some((ErrorCode::SecurityDisabled, "no authorizer is configured"));
    }
    if authorize(
        broker,
        context,
        cluster_operation,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return None;
    }
    let message = if cluster_operation == operation::DESCRIBE {
        "DESCRIBE on the cluster is required"
    } else {
        "ALTER on the cluster is required"
    };
    Some((ErrorCode::ClusterAuthorizationFailed, message))
}
