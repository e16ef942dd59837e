//! `strom users set|delete|describe`: SCRAM credentials, as
//! `kafka-configs.sh --entity-type users` manages them. The password is
//! salted here (PBKDF2 with a random salt); only the salted password
//! travels (AlterUserScramCredentials), and the broker stores keys derived
//! from it.

use std::num::NonZeroU32;

use bytes::Bytes;
use ring::rand::{SecureRandom, SystemRandom};
use strom_client::{AdminClient, ClientError};
use strom_protocol::kafka::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use strom_protocol::kafka::messages::describe_user_scram_credentials_request::UserName;
use strom_protocol::kafka::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::{ErrorCode, Response};

use crate::cli::UsersCommand;
use crate::context::Context;
use crate::error::ToolError;
use crate::output::Output;

/// Runs a `users` command.
pub async fn run(
    context: &Context,
    command: UsersCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        UsersCommand::Set {
            user,
            password,
            mechanism,
            iterations,
        } => {
            let mechanism = mechanism_of(&mechanism)?;
            let count = NonZeroU32::new(iterations).ok_or(ToolError::InvalidArgument {
                what: "--iterations",
                text: iterations.to_string(),
                expected: "4096 to 16384",
            })?;
            let mut salt = [0u8; 32];
            SystemRandom::new()
                .fill(&mut salt)
                .map_err(|_| ToolError::InvalidArgument {
                    what: "salt",
                    text: String::new(),
                    expected: "a working system random generator",
                })?;
            let salted = mechanism.salted_password(&password, &salt, count);
            let upsertion = ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(user.clone()))
                .with_mechanism(mechanism.code())
                .with_iterations(i32::try_from(iterations).unwrap_or(i32::MAX))
                .with_salt(Bytes::copy_from_slice(&salt))
                .with_salted_password(Bytes::from(salted));
            let request =
                AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
            alter(&admin, request, &user).await?;
            out.line(&format!(
                "Set the {} credential of user {user}.",
                mechanism.name()
            ))
        }
        UsersCommand::Delete { user, mechanism } => {
            let mechanism = mechanism_of(&mechanism)?;
            let deletion = ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.clone()))
                .with_mechanism(mechanism.code());
            let request =
                AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]);
            alter(&admin, request, &user).await?;
            out.line(&format!(
                "Deleted the {} credential of user {user}.",
                mechanism.name()
            ))
        }
        UsersCommand::Describe { users } => describe(&admin, users, out).await,
    }
}

fn mechanism_of(name: &str) -> Result<ScramMechanism, ToolError> {
    ScramMechanism::from_name(name).ok_or(ToolError::InvalidArgument {
        what: "--mechanism",
        text: name.to_owned(),
        expected: "SCRAM-SHA-256 or SCRAM-SHA-512",
    })
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

async fn alter(
    admin: &AdminClient,
    request: AlterUserScramCredentialsRequest,
    user: &str,
) -> Result<(), ToolError> {
    let Response::AlterUserScramCredentials(response) = send(admin, request).await? else {
        return Err(unexpected());
    };
    match response.results.first() {
        Some(result) if result.error_code == 0 => Ok(()),
        Some(result) => Err(ToolError::rejected(
            "alter the SCRAM credentials of user",
            user,
            ErrorCode::from_code(result.error_code),
        )),
        None => Err(ToolError::MissingResult {
            operation: "alter the SCRAM credentials of user",
            resource: user.to_owned(),
        }),
    }
}

async fn describe(
    admin: &AdminClient,
    users: Vec<String>,
    out: &mut Output,
) -> Result<(), ToolError> {
    let names = (!users.is_empty()).then(|| {
        users
            .iter()
            .map(|user| UserName::default().with_name(StrBytes::from_string(user.clone())))
            .collect()
    });
    let request = DescribeUserScramCredentialsRequest::default().with_users(names);
    let Response::DescribeUserScramCredentials(response) = send(admin, request).await? else {
        return Err(unexpected());
    };
    if response.error_code != 0 {
        return Err(ToolError::rejected(
            "describe the SCRAM credentials of",
            "users",
            ErrorCode::from_code(response.error_code),
        ));
    }
    for result in response.results {
        if result.error_code != 0 {
            out.line(&format!(
                "{}: {}",
                result.user,
                ErrorCode::from_code(result.error_code)
            ))?;
            continue;
        }
        let credentials: Vec<String> = result
            .credential_infos
            .iter()
            .map(|info| {
                let name =
                    ScramMechanism::from_code(info.mechanism).map_or("unknown", |m| m.name());
                format!("{name} (iterations={})", info.iterations)
            })
            .collect();
        out.line(&format!("{}: {}", result.user, credentials.join(", ")))?;
    }
    Ok(())
}
