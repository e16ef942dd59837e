//! AlterUserScramCredentials: sets and deletes SCRAM credentials through
//! the metadata log. The client sends the salted password; the broker
//! derives and stores the stored and server keys, never the password.
//! Needs ALTER on the cluster.

use std::collections::BTreeMap;

use strom_controller::controller::ScramChange;
use strom_controller::security_records::UserScramCredentialRecord;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use strom_protocol::kafka::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};

use super::errors::runtime_error_code;
use super::BrokerContext;
use crate::network::{Reply, RequestContext};
use crate::security::authorizer::{authorize, operation, resource, CLUSTER_NAME};

/// A per-user outcome before the write.
type Outcome = Result<(), (ErrorCode, &'static str)>;

/// Handles an AlterUserScramCredentials request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> Reply {
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut changes: Vec<(String, ScramChange)> = Vec::new();
    let allowed = authorize(
        broker,
        context,
        operation::ALTER,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    let names = request
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .chain(
            request
                .upsertions
                .iter()
                .map(|u| (u.name.to_string(), u.mechanism)),
        );
    let mut seen = BTreeMap::new();
    for (name, mechanism) in names {
        *seen.entry((name.clone(), mechanism)).or_insert(0) += 1;
        outcomes.entry(name).or_insert(Ok(()));
    }
    let mut fail = |name: &str, error: (ErrorCode, &'static str)| {
        if let Some(outcome) = outcomes.get_mut(name) {
            if outcome.is_ok() {
                *outcome = Err(error);
            }
        }
    };
    for ((name, _), count) in &seen {
        if !allowed {
            fail(
                name,
                (
                    ErrorCode::ClusterAuthorizationFailed,
                    "ALTER on the cluster is required",
                ),
            );
        } else if *count > 1 {
            fail(
                name,
                (
                    ErrorCode::DuplicateResource,
                    "a user and mechanism appear twice",
                ),
            );
        } else if name.is_empty() {
            fail(
                name,
                (ErrorCode::UnacceptableCredential, "the user name is empty"),
            );
        }
    }
    let image = broker.controller.image();
    for deletion in &request.deletions {
        let name = deletion.name.to_string();
        match ScramMechanism::from_code(deletion.mechanism) {
            None => fail(
                &name,
                (
                    ErrorCode::UnsupportedSaslMechanism,
                    "unknown SCRAM mechanism",
                ),
            ),
            Some(mechanism) => {
                let code = i32::from(mechanism.code());
                if image.security().scram_credential(&name, code).is_none() {
                    fail(&name, (ErrorCode::ResourceNotFound, "no such credential"));
                }
                changes.push((
                    name.clone(),
                    ScramChange::Delete {
                        name,
                        mechanism: code,
                    },
                ));
            }
        }
    }
    for upsertion in &request.upsertions {
        let name = upsertion.name.to_string();
        let Some(mechanism) = ScramMechanism::from_code(upsertion.mechanism) else {
            fail(
                &name,
                (
                    ErrorCode::UnsupportedSaslMechanism,
                    "unknown SCRAM mechanism",
                ),
            );
            continue;
        };
        let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
        let range = ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS;
        if !range.contains(&iterations)
            || upsertion.salt.is_empty()
            || upsertion.salted_password.len() != mechanism.hash_bytes()
        {
            fail(&name, (ErrorCode::UnacceptableCredential, "iterations must be 4096 to 16384, with a salt and a salted password of the hash's length"));
            continue;
        }
        let credential = ScramCredential::from_salted_password(
            mechanism,
            &upsertion.salted_password,
            &upsertion.salt,
            iterations,
        );
        let record = UserScramCredentialRecord {
            name: name.clone(),
            mechanism: i32::from(mechanism.code()),
            salt: credential.salt,
            stored_key: credential.stored_key,
            server_key: credential.server_key,
            iterations,
        };
        changes.push((name, ScramChange::Upsert(record)));
    }
    // A user's changes apply only when all of them are valid.
    let accepted: Vec<ScramChange> = changes
        .into_iter()
        .filter(|(name, _)| matches!(outcomes.get(name), Some(Ok(()))))
        .map(|(_, change)| change)
        .collect();
    let written = match accepted.is_empty() {
        true => Ok(Vec::new()),
        false => broker.controller.alter_scram_credentials(accepted).await,
    };
    broker.sync_metadata();
    let results = outcomes
        .into_iter()
        .map(|(user, outcome)| {
            let result =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
            match (outcome, &written) {
                (Err((code, message)), _) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_static_str(message))),
                (Ok(()), Err(error)) => result
                    .with_error_code(runtime_error_code(error).code())
                    .with_error_message(Some(StrBytes::from_string(error.to_string()))),
                (Ok(()), Ok(_)) => result,
            }
        })
        .collect();
    Reply::Response(Response::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse::default().with_results(results),
    ))
}
