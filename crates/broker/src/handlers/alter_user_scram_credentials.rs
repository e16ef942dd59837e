//! AlterUserScramCredentials: sets and deletes SCRAM credentials through
//! the metadata log. The client sends the salted password; the broker
//! derives and stores the stored and server keys, never the password.
//! Needs ALTER on the cluster.

use std::collections::BTreeMap;

use strom_controller::controller::ScramChange;
use strom_controller::image::MetadataImage;
use strom_controller::security_records::UserScramCredentialRecord;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use strom_protocol::kafka::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use strom_protocol::kafka::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};

use super::authorization::authorize;
use super::errors::runtime_error_code;
use super::BrokerContext;

/// A per-user outcome before the write.
type Outcome = Result<(), (ErrorCode, &'static str)>;

/// Per-user outcomes and the changes of the users whose changes are valid.
#[derive(Default)]
struct Plan {
    outcomes: BTreeMap<String, Outcome>,
    changes: Vec<(String, ScramChange)>,
}

impl Plan {
    /// Records the first error of a user.
    fn fail(&mut self, name: &str, error: (ErrorCode, &'static str)) {
        if let Some(outcome) = self.outcomes.get_mut(name) {
            if outcome.is_ok() {
                *outcome = Err(error);
            }
        }
    }

    /// Request-level checks: authorization, duplicates, empty names.
    fn check_names(&mut self, request: &AlterUserScramCredentialsRequest, allowed: bool) {
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
            self.outcomes.entry(name).or_insert(Ok(()));
        }
        for ((name, _), count) in &seen {
            if !allowed {
                self.fail(
                    name,
                    (
                        ErrorCode::ClusterAuthorizationFailed,
                        "ALTER on the cluster is required",
                    ),
                );
            } else if *count > 1 {
                self.fail(
                    name,
                    (
                        ErrorCode::DuplicateResource,
                        "a user and mechanism appear twice",
                    ),
                );
            } else if name.is_empty() {
                self.fail(
                    name,
                    (ErrorCode::UnacceptableCredential, "the user name is empty"),
                );
            }
        }
    }

    fn deletion(&mut self, image: &MetadataImage, deletion: &ScramCredentialDeletion) {
        let name = deletion.name.to_string();
        let Some(mechanism) = ScramMechanism::from_code(deletion.mechanism) else {
            return self.fail(
                &name,
                (
                    ErrorCode::UnsupportedSaslMechanism,
                    "unknown SCRAM mechanism",
                ),
            );
        };
        let code = i32::from(mechanism.code());
        if image.security().scram_credential(&name, code).is_none() {
            self.fail(&name, (ErrorCode::ResourceNotFound, "no such credential"));
        }
        self.changes.push((
            name.clone(),
            ScramChange::Delete {
                name,
                mechanism: code,
            },
        ));
    }

    fn upsertion(&mut self, upsertion: &ScramCredentialUpsertion) {
        let name = upsertion.name.to_string();
        let Some(mechanism) = ScramMechanism::from_code(upsertion.mechanism) else {
            return self.fail(
                &name,
                (
                    ErrorCode::UnsupportedSaslMechanism,
                    "unknown SCRAM mechanism",
                ),
            );
        };
        let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
        let range = ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS;
        if !range.contains(&iterations)
            || upsertion.salt.is_empty()
            || upsertion.salted_password.len() != mechanism.hash_bytes()
        {
            return self.fail(&name, (ErrorCode::UnacceptableCredential, "iterations must be 4096 to 16384, with a salt and a salted password of the hash's length"));
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
        self.changes.push((name, ScramChange::Upsert(record)));
    }

    /// The changes to write: a user's changes apply only when all of them
    /// are valid.
    fn accepted(&mut self) -> Vec<ScramChange> {
        let outcomes = &self.outcomes;
        std::mem::take(&mut self.changes)
            .into_iter()
            .filter(|(name, _)| matches!(outcomes.get(name), Some(Ok(()))))
            .map(|(_, change)| change)
            .collect()
    }
}

/// Handles an AlterUserScramCredentials request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> Reply {
    let allowed = authorize(
        broker,
        context,
        operation::ALTER,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    let image = broker.controller.image();
    let mut plan = Plan::default();
    plan.check_names(&request, allowed);
    request
        .deletions
        .iter()
        .for_each(|deletion| plan.deletion(&image, deletion));
    request
        .upsertions
        .iter()
        .for_each(|upsertion| plan.upsertion(upsertion));
    let accepted = plan.accepted();
    let written = match accepted.is_empty() {
        true => Ok(Vec::new()),
        false => broker.controller.alter_scram_credentials(accepted).await,
    };
    broker.sync_metadata();
    let results = plan
        .outcomes
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
