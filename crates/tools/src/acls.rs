//! `strom acls add|list|remove`, as `kafka-acls.sh` manages ACLs: one
//! resource (`--topic`, `--group`, `--cluster` or `--transactional-id`,
//! literal or `--prefixed`), principals, hosts and operations.

use strom_client::{AdminClient, ClientError};
use strom_protocol::acl::{operation, pattern, permission, resource, CLUSTER_NAME};
use strom_protocol::kafka::messages::create_acls_request::AclCreation;
use strom_protocol::kafka::messages::delete_acls_request::DeleteAclsFilter;
use strom_protocol::kafka::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::cli::{AclArguments, AclsCommand};
use crate::context::Context;
use crate::error::ToolError;
use crate::output::Output;

/// Kafka's operation names, with their codes.
const OPERATIONS: &[(&str, i8)] = &[
    ("All", operation::ALL),
    ("Read", operation::READ),
    ("Write", operation::WRITE),
    ("Create", operation::CREATE),
    ("Delete", operation::DELETE),
    ("Alter", operation::ALTER),
    ("Describe", operation::DESCRIBE),
    ("ClusterAction", operation::CLUSTER_ACTION),
    ("DescribeConfigs", operation::DESCRIBE_CONFIGS),
    ("AlterConfigs", operation::ALTER_CONFIGS),
    ("IdempotentWrite", operation::IDEMPOTENT_WRITE),
];
/// Kafka's resource type names, with their codes.
const RESOURCE_TYPES: &[(&str, i8)] = &[
    ("Topic", resource::TOPIC),
    ("Group", resource::GROUP),
    ("Cluster", resource::CLUSTER),
    ("TransactionalId", resource::TRANSACTIONAL_ID),
];

fn name_of(table: &[(&'static str, i8)], code: i8) -> &'static str {
    table
        .iter()
        .find(|(_, c)| *c == code)
        .map_or("Unknown", |(name, _)| name)
}

fn operation_code(name: &str) -> Result<i8, ToolError> {
    let wanted: String = name.chars().filter(|c| *c != '_' && *c != '-').collect();
    OPERATIONS
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(&wanted))
        .map(|(_, code)| *code)
        .ok_or(ToolError::InvalidArgument {
            what: "--operation",
            text: name.to_owned(),
            expected: "All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs or IdempotentWrite",
        })
}

/// The resource type and name the arguments name, if any.
fn resource(arguments: &AclArguments) -> Option<(i8, String)> {
    match (
        &arguments.topic,
        &arguments.group,
        &arguments.transactional_id,
    ) {
        (Some(topic), _, _) => Some((resource::TOPIC, topic.clone())),
        (_, Some(group), _) => Some((resource::GROUP, group.clone())),
        (_, _, Some(id)) => Some((resource::TRANSACTIONAL_ID, id.clone())),
        _ if arguments.cluster => Some((resource::CLUSTER, CLUSTER_NAME.to_owned())),
        _ => None,
    }
}

/// Runs an `acls` command.
pub async fn run(
    context: &Context,
    command: AclsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        AclsCommand::Add(arguments) => add(&admin, &arguments, out).await,
        AclsCommand::List(arguments) => list(&admin, &arguments, out).await,
        AclsCommand::Remove(arguments) => remove(&admin, &arguments, out).await,
    }
}

fn no_resource() -> ToolError {
    ToolError::InvalidArgument {
        what: "resource",
        text: String::new(),
        expected: "--topic, --group, --cluster or --transactional-id",
    }
}

async fn send(
    admin: &AdminClient,
    request: impl Into<strom_protocol::Request>,
) -> Result<Response, ToolError> {
    let controller = admin
        .describe_cluster()
        .await
        .map_err(|error| ToolError::client("describe the cluster", error))?
        .controller_id;
    admin
        .cluster()
        .send_to(controller, request)
        .await
        .map_err(|error| ToolError::client("send the request", error))
}

fn unexpected() -> ToolError {
    ToolError::client(
        "read the answer",
        ClientError::UnexpectedResponse { api_key: -1 },
    )
}

async fn add(
    admin: &AdminClient,
    arguments: &AclArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let (resource_type, name) = resource(arguments).ok_or_else(no_resource)?;
    let pattern = if arguments.prefixed {
        pattern::PREFIXED
    } else {
        pattern::LITERAL
    };
    let permission = if arguments.deny {
        permission::DENY
    } else {
        permission::ALLOW
    };
    let mut creations = Vec::new();
    for principal in &arguments.principals {
        for operation in &arguments.operations {
            creations.push(
                AclCreation::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(StrBytes::from_string(name.clone()))
                    .with_resource_pattern_type(pattern)
                    .with_principal(StrBytes::from_string(principal.clone()))
                    .with_host(StrBytes::from_string(arguments.host.clone()))
                    .with_operation(operation_code(operation)?)
                    .with_permission_type(permission),
            );
        }
    }
    let count = creations.len();
    let Response::CreateAcls(response) = send(
        admin,
        CreateAclsRequest::default().with_creations(creations),
    )
    .await?
    else {
        return Err(unexpected());
    };
    if let Some(failed) = response
        .results
        .iter()
        .find(|result| result.error_code != 0)
    {
        return Err(ToolError::rejected(
            "add ACLs on",
            &name,
            ErrorCode::from_code(failed.error_code),
        ));
    }
    out.line(&format!(
        "Added {count} ACL binding(s) on {} {name}.",
        name_of(RESOURCE_TYPES, resource_type)
    ))
}

fn filter(arguments: &AclArguments) -> Result<DeleteAclsFilter, ToolError> {
    let (resource_type, name) = match resource(arguments) {
        Some((kind, name)) => (kind, Some(StrBytes::from_string(name))),
        None => (resource::ANY, None),
    };
    let operation = match arguments.operations.as_slice() {
        [] => operation::ANY,
        [one] => operation_code(one)?,
        _ => {
            return Err(ToolError::InvalidArgument {
                what: "--operation",
                text: arguments.operations.join(","),
                expected: "at most one operation in a filter",
            })
        }
    };
    Ok(DeleteAclsFilter::default()
        .with_resource_type_filter(resource_type)
        .with_resource_name_filter(name)
        .with_pattern_type_filter(match (resource(arguments), arguments.prefixed) {
            (None, _) => pattern::ANY,
            (Some(_), true) => pattern::PREFIXED,
            (Some(_), false) => pattern::LITERAL,
        })
        .with_principal_filter(
            arguments
                .principals
                .first()
                .cloned()
                .map(StrBytes::from_string),
        )
        .with_host_filter(None)
        .with_operation(operation)
        .with_permission_type(match (arguments.allow, arguments.deny) {
            (true, false) => permission::ALLOW,
            (false, true) => permission::DENY,
            _ => permission::ANY,
        }))
}

async fn list(
    admin: &AdminClient,
    arguments: &AclArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let f = filter(arguments)?;
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(f.resource_type_filter)
        .with_resource_name_filter(f.resource_name_filter)
        .with_pattern_type_filter(f.pattern_type_filter)
        .with_principal_filter(f.principal_filter)
        .with_host_filter(f.host_filter)
        .with_operation(f.operation)
        .with_permission_type(f.permission_type);
    let Response::DescribeAcls(response) = send(admin, request).await? else {
        return Err(unexpected());
    };
    if response.error_code != 0 {
        return Err(ToolError::rejected(
            "list ACLs of",
            "the cluster",
            ErrorCode::from_code(response.error_code),
        ));
    }
    for resource in response.resources {
        let pattern = if resource.pattern_type == pattern::PREFIXED {
            "PREFIXED"
        } else {
            "LITERAL"
        };
        out.line(&format!(
            "{} {} ({pattern}):",
            name_of(RESOURCE_TYPES, resource.resource_type),
            resource.resource_name
        ))?;
        for acl in resource.acls {
            out.line(&format!(
                "  {} {} {} from host {}",
                acl.principal,
                if acl.permission_type == permission::DENY {
                    "DENY"
                } else {
                    "ALLOW"
                },
                name_of(OPERATIONS, acl.operation),
                acl.host
            ))?;
        }
    }
    Ok(())
}

async fn remove(
    admin: &AdminClient,
    arguments: &AclArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    if resource(arguments).is_none() {
        return Err(no_resource());
    }
    let request = DeleteAclsRequest::default().with_filters(vec![filter(arguments)?]);
    let Response::DeleteAcls(response) = send(admin, request).await? else {
        return Err(unexpected());
    };
    let removed = match response.filter_results.first() {
        Some(result) if result.error_code != 0 => {
            return Err(ToolError::rejected(
                "remove ACLs of",
                "the resource",
                ErrorCode::from_code(result.error_code),
            ))
        }
        Some(result) => result.matching_acls.len(),
        None => 0,
    };
    out.line(&format!("Removed {removed} ACL binding(s)."))
}
