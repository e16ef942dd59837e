//! The authorizer, with the semantics of Kafka's StandardAuthorizer: ACL
//! bindings on topics, groups, the cluster and transactional ids, literal
//! (or `*`) and prefixed patterns, DENY winning over ALLOW, implied
//! operations (DESCRIBE by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS
//! by ALTER_CONFIGS), `super.users`, and `allow.everyone.if.no.acl.found`.
//! The codes are Kafka's, from [`strom_protocol::acl`].
//!
//! The authorizer sees no broker state: its callers pass the settings,
//! the principal, the client's host and the ACL bindings, each binding as
//! an [`AclBinding`], a borrowed view of one stored ACL that the caller
//! fills from wherever its ACLs live (the broker: the metadata image's
//! ACL records). A view rather than a trait the records implement: this
//! crate cannot name the controller's record type, the broker cannot
//! implement this crate's trait for it, and a view costs no copy.

use strom_protocol::acl::{operation, pattern, permission, resource};

use crate::config::AuthorizerSettings;
use crate::principal::Principal;

/// One ACL binding as the authorizer reads it: Kafka's codes (as the
/// metadata log stores them) and the names, borrowed from the stored ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclBinding<'a> {
    /// The resource type code.
    pub resource_type: i32,
    /// The resource name or prefix (`*` for every resource of the type).
    pub resource_name: &'a str,
    /// The pattern type code (LITERAL or PREFIXED).
    pub pattern_type: i32,
    /// The principal, `User:alice` (or `User:*`).
    pub principal: &'a str,
    /// The host, or `*`.
    pub host: &'a str,
    /// The operation code.
    pub operation: i32,
    /// The permission code (ALLOW or DENY).
    pub permission_type: i32,
}

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

fn resource_matches(acl: &AclBinding<'_>, resource_type: i8, name: &str) -> bool {
    acl.resource_type == i32::from(resource_type)
        && match i8::try_from(acl.pattern_type) {
            Ok(pattern::LITERAL) => acl.resource_name == name || acl.resource_name == "*",
            Ok(pattern::PREFIXED) => name.starts_with(acl.resource_name),
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
    acls: impl Iterator<Item = AclBinding<'a>>,
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

/// Whether `principal` may WRITE some topic: a super user, or an ALLOW
/// of WRITE (or ALL) for it on any topic (KIP-679: enough for an
/// idempotent producer).
pub fn may_write_some_topic<'a>(
    settings: &AuthorizerSettings,
    mut acls: impl Iterator<Item = AclBinding<'a>>,
    principal: &Principal,
) -> bool {
    if settings.super_users.contains(principal) {
        return true;
    }
    let names = [
        principal.to_string(),
        format!("{}:*", principal.principal_type),
    ];
    acls.any(|acl| {
        acl.resource_type == i32::from(resource::TOPIC)
            && acl.permission_type == i32::from(permission::ALLOW)
            && (acl.operation == i32::from(operation::WRITE)
                || acl.operation == i32::from(operation::ALL))
            && names.iter().any(|name| name == acl.principal)
    })
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
    pub fn matches(&self, acl: &AclBinding<'_>) -> bool {
        let code = |value: i8| i32::from(value);
        let resource_type =
            self.resource_type == resource::ANY || code(self.resource_type) == acl.resource_type;
        let pattern = match (self.pattern_type, &self.resource_name) {
            (pattern::ANY, None) | (pattern::MATCH, None) => true,
            (pattern::ANY, Some(name)) => name == acl.resource_name,
            (pattern::MATCH, Some(name)) => match i8::try_from(acl.pattern_type) {
                Ok(pattern::LITERAL) => acl.resource_name == name || acl.resource_name == "*",
                Ok(pattern::PREFIXED) => name.starts_with(acl.resource_name),
                _ => false,
            },
            (kind, name) => {
                code(kind) == acl.pattern_type
                    && name.as_ref().is_none_or(|name| name == acl.resource_name)
            }
        };
        let principal = self.principal.as_ref().is_none_or(|p| p == acl.principal);
        let host = self.host.as_ref().is_none_or(|h| h == acl.host);
        let operation = self.operation == operation::ANY || code(self.operation) == acl.operation;
        let permission = self.permission_type == permission::ANY
            || code(self.permission_type) == acl.permission_type;
        resource_type && pattern && principal && host && operation && permission
    }
}

#[cfg(test)]
#[path = "authorizer_tests.rs"]
mod tests;
