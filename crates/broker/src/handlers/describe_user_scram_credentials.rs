//! DescribeUserScramCredentials: each user's mechanisms and iteration
//! counts (never keys or salts). Needs DESCRIBE on the cluster.

use std::collections::BTreeMap;

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use strom_protocol::kafka::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::BrokerContext;

/// Handles a DescribeUserScramCredentials request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> Reply {
    if !authorize(
        broker,
        context,
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return Reply::Response(Response::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "DESCRIBE on the cluster is required",
                ))),
        ));
    }
    let image = broker.controller.image();
    let mut by_user: BTreeMap<String, Vec<CredentialInfo>> = BTreeMap::new();
    for credential in image.security().scram_credentials() {
        by_user.entry(credential.name.clone()).or_default().push(
            CredentialInfo::default()
                .with_mechanism(i8::try_from(credential.mechanism).unwrap_or_default())
                .with_iterations(i32::try_from(credential.iterations).unwrap_or(i32::MAX)),
        );
    }
    let wanted: Vec<String> = match request.users {
        Some(users) if !users.is_empty() => users.iter().map(|u| u.name.to_string()).collect(),
        _ => by_user.keys().cloned().collect(),
    };
    let mut seen = BTreeMap::new();
    for user in &wanted {
        *seen.entry(user.clone()).or_insert(0) += 1;
    }
    let results = seen
        .into_iter()
        .map(|(user, count)| {
            let result = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            match (count, by_user.get(&user)) {
                (2.., _) => result
                    .with_error_code(ErrorCode::DuplicateResource.code())
                    .with_error_message(Some(StrBytes::from_static_str("user named twice"))),
                (_, None) => result
                    .with_error_code(ErrorCode::ResourceNotFound.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "attempt to describe a user credential that does not exist",
                    ))),
                (_, Some(infos)) => result.with_credential_infos(infos.clone()),
            }
        })
        .collect();
    Reply::Response(Response::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default().with_results(results),
    ))
}
