//! The authorizer, with the semantics of Kafka's StandardAuthorizer: ACL
//! bindings on topics, groups, the cluster and transactional ids, literal
//! (or `*`) and prefixed patterns, DENY winning over ALLOW, implied
//! operations (DESCRIBE by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS
//! by ALTER_CONFIGS), `super.users`, and `allow.everyone.if.no.acl.found`.
//! The codes are Kafka's.

use strom_controller::security_records::AccessControlEntryRecord;
use strom_protocol::error_code::ErrorCode;

use super::config::AuthorizerSettings;
use super::principal::Principal;
use crate::handlers::BrokerContext;
use crate::network::RequestContext;

/// Kafka's `ResourceType` codes.
pub mod resource {
    /// Any resource type (filters only).
    pub const ANY: i8 = 1;
    /// A topic.
    pub const TOPIC: i8 = 2;
    /// A consumer group.
    pub const GROUP: i8 = 3;
    /// The cluster (named `kafka-cluster`).
    pub const CLUSTER: i8 = 4;
    /// A transactional id.
    pub const TRANSACTIONAL_ID: i8 = 5;
}

/// Kafka's `PatternType` codes.
pub mod pattern {
    /// Any pattern type (filters only).
    pub const ANY: i8 = 1;
    /// Whatever would match a resource name (filters only).
    pub const MATCH: i8 = 2;
    /// The name itself, or `*` for every resource of the type.
    pub const LITERAL: i8 = 3;
    /// Every name that starts with the pattern.
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation` codes.
pub mod operation {
    /// Any operation (filters only).
    pub const ANY: i8 = 1;
    /// Every operation.
    pub const ALL: i8 = 2;
    /// READ.
    pub const READ: i8 = 3;
    /// WRITE.
    pub const WRITE: i8 = 4;
    /// CREATE.
    pub const CREATE: i8 = 5;
    /// DELETE.
    pub const DELETE: i8 = 6;
    /// ALTER.
    pub const ALTER: i8 = 7;
    /// DESCRIBE.
    pub const DESCRIBE: i8 = 8;
    /// CLUSTER_ACTION.
    pub const CLUSTER_ACTION: i8 = 9;
    /// DESCRIBE_CONFIGS.
    pub const DESCRIBE_CONFIGS: i8 = 10;
    /// ALTER_CONFIGS.
    pub const ALTER_CONFIGS: i8 = 11;
    /// IDEMPOTENT_WRITE.
    pub const IDEMPOTENT_WRITE: i8 = 12;
}

/// Kafka's `AclPermissionType` codes.
pub mod permission {
    /// Any permission (filters only).
    pub const ANY: i8 = 1;
    /// DENY.
    pub const DENY: i8 = 2;
    /// ALLOW.
    pub const ALLOW: i8 = 3;
}

/// The name of the cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// What is asked: an operation on a named resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action<'a> {
    /// The operation code.
    pub operation: i8,
    /// The resource type code.
    pub resource_type: i8,
    /// The resource name.
    pub name: &'a str,
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
    let Some(settings) = &broker.config.security.authorizer else {
        return true;
    };
    let image = broker.controller.image();
    let action = Action {
        operation,
        resource_type,
        name,
    };
    decide(
        settings,
        image.security().acls(),
        &context.session.principal(),
        &context.peer.ip().to_string(),
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

/// Whether the principal may WRITE some topic: a super user, or an ALLOW
/// of WRITE (or ALL) for it on any topic (KIP-679: enough for an
/// idempotent producer).
pub fn may_write_some_topic(broker: &BrokerContext, context: &RequestContext) -> bool {
    let Some(settings) = &broker.config.security.authorizer else {
        return true;
    };
    let principal = context.session.principal();
    if settings.super_users.contains(&principal) {
        return true;
    }
    let names = [
        principal.to_string(),
        format!("{}:*", principal.principal_type),
    ];
    let image = broker.controller.image();
    let found = image.security().acls().any(|acl| {
        acl.resource_type == i32::from(resource::TOPIC)
            && acl.permission_type == i32::from(permission::ALLOW)
            && (acl.operation == i32::from(operation::WRITE)
                || acl.operation == i32::from(operation::ALL))
            && names.contains(&acl.principal)
    });
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

fn resource_matches(acl: &AccessControlEntryRecord, resource_type: i8, name: &str) -> bool {
    acl.resource_type == i32::from(resource_type)
        && match i8::try_from(acl.pattern_type) {
            Ok(pattern::LITERAL) => acl.resource_name == name || acl.resource_name == "*",
            Ok(pattern::PREFIXED) => name.starts_with(&acl.resource_name),
            _ => false,
        }
}

/// Whether an ALLOW for `granted` covers `asked`.
fn implies(granted: i8, asked: i8) -> bool {
    use operation::*;
    granted == asked
        || granted == ALL
        || (asked == DESCRIBE && matches!(granted, READ | WRITE | DELETE | ALTER))
        || (asked == DESCRIBE_CONFIGS && granted == ALTER_CONFIGS)
}

/// The decision over `acls` (see the module docs).
pub fn decide<'a>(
    settings: &AuthorizerSettings,
    acls: impl Iterator<Item = &'a AccessControlEntryRecord>,
    principal: &Principal,
    host: &str,
    action: Action<'_>,
) -> bool {
    if settings.super_users.contains(principal) {
        return true;
    }
    let principal_text = principal.to_string();
    let wildcard = format!("{}:*", principal.principal_type);
    let mut any_on_resource = false;
    let mut allowed = false;
    for acl in acls.filter(|acl| resource_matches(acl, action.resource_type, action.name)) {
        any_on_resource = true;
        let applies = (acl.principal == principal_text || acl.principal == wildcard)
            && (acl.host == "*" || acl.host == host);
        if !applies {
            continue;
        }
        let Ok(granted) = i8::try_from(acl.operation) else {
            continue;
        };
        match i8::try_from(acl.permission_type) {
            Ok(permission::DENY) if granted == action.operation || granted == operation::ALL => {
                return false;
            }
            Ok(permission::ALLOW) if implies(granted, action.operation) => allowed = true,
            _ => {}
        }
    }
    allowed || (!any_on_resource && settings.allow_everyone_if_no_acl_found)
}

/// A DescribeAcls / DeleteAcls filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type code (ANY matches every type).
    pub resource_type: i8,
    /// Resource name, `None` for any.
    pub resource_name: Option<String>,
    /// Pattern type code (ANY, MATCH, LITERAL or PREFIXED).
    pub pattern_type: i8,
    /// Principal, `None` for any.
    pub principal: Option<String>,
    /// Host, `None` for any.
    pub host: Option<String>,
    /// Operation code (ANY matches every operation).
    pub operation: i8,
    /// Permission code (ANY matches both).
    pub permission_type: i8,
}

impl AclFilter {
    /// Whether `acl` matches the filter.
    pub fn matches(&self, acl: &AccessControlEntryRecord) -> bool {
        let code = |value: i8| i32::from(value);
        let resource_type =
            self.resource_type == resource::ANY || code(self.resource_type) == acl.resource_type;
        let pattern = match (self.pattern_type, &self.resource_name) {
            (pattern::ANY, None) | (pattern::MATCH, None) => true,
            (pattern::ANY, Some(name)) => *name == acl.resource_name,
            (pattern::MATCH, Some(name)) => match i8::try_from(acl.pattern_type) {
                Ok(pattern::LITERAL) => acl.resource_name == *name || acl.resource_name == "*",
                Ok(pattern::PREFIXED) => name.starts_with(&acl.resource_name),
                _ => false,
            },
            (kind, name) => {
                code(kind) == acl.pattern_type
                    && name.as_ref().is_none_or(|name| *name == acl.resource_name)
            }
        };
        let principal = self.principal.as_ref().is_none_or(|p| *p == acl.principal);
        let host = self.host.as_ref().is_none_or(|h| *h == acl.host);
        let operation = self.operation == operation::ANY || code(self.operation) == acl.operation;
        let permission = self.permission_type == permission::ANY
            || code(self.permission_type) == acl.permission_type;
        resource_type && pattern && principal && host && operation && permission
    }
}

#[cfg(test)]
#[path = "authorizer_tests.rs"]
mod tests;
