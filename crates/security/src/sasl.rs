//! The SASL exchange of a connection: SaslHandshake picks a mechanism,
//! SaslAuthenticate (or bare tokens after a v0 handshake) carries the
//! messages. PLAIN passwords (and the HTTP listener's Basic logins,
//! through [`verify_password`]) are checked against the stored SCRAM
//! credentials, so no password is stored anywhere.

use strom_protocol::sasl::plain::PlainMessage;
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism, ScramServer, ServerStep};
use strom_protocol::sasl::{SaslError, PLAIN};

use crate::error::SaslFailure;
use crate::principal::Principal;
use crate::session::{AuthState, Session};

/// Where SCRAM credentials are looked up.
pub trait CredentialStore {
    /// The credential of `user` for `mechanism`, if any.
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

/// SaslHandshake: chooses `mechanism` (version 0: bare tokens follow).
pub fn handshake(session: &Session, mechanism: &str, version: i16) -> Result<(), SaslFailure> {
    let Some(settings) = &session.listener().sasl else {
        return Err(SaslFailure::IllegalState {
            reason: "SASL is not enabled on this listener",
        });
    };
    let mut state = session.state();
    if !matches!(*state, AuthState::AwaitingHandshake) {
        return Err(SaslFailure::IllegalState {
            reason: "a SaslHandshake was already received",
        });
    }
    if !settings.enables(mechanism) {
        return Err(SaslFailure::UnsupportedMechanism {
            mechanism: mechanism.to_owned(),
        });
    }
    *state = AuthState::Handshaken {
        mechanism: mechanism.to_owned(),
        raw: version == 0,
    };
    Ok(())
}

/// SaslAuthenticate: the next token. On success returns the bytes to send;
/// on failure the session is [`AuthState::Failed`] and the connection must
/// close after the answer.
pub fn authenticate(
    session: &Session,
    token: &[u8],
    store: &dyn CredentialStore,
    server_nonce: impl FnOnce() -> String,
) -> Result<Vec<u8>, SaslFailure> {
    let mut state = session.state();
    let result = match std::mem::replace(&mut *state, AuthState::Failed) {
        AuthState::Handshaken { mechanism, .. } if mechanism == PLAIN => plain(token, store)
            .map(|user| (Vec::new(), AuthState::Authenticated(Principal::user(user))))
            .map_err(|cause| failed(&mechanism, cause)),
        AuthState::Handshaken { mechanism, raw } => {
            let Some(scram) = ScramMechanism::from_name(&mechanism) else {
                return Err(SaslFailure::UnsupportedMechanism { mechanism });
            };
            let server = Box::new(ScramServer::new(scram, server_nonce()));
            scram_step(server, raw, token, store)
        }
        AuthState::Scram { server, raw } => scram_step(server, raw, token, store),
        AuthState::Authenticated(principal) => {
            *state = AuthState::Authenticated(principal);
            return Err(SaslFailure::IllegalState {
                reason: "the connection is already authenticated",
            });
        }
        AuthState::AwaitingHandshake | AuthState::Failed => Err(SaslFailure::IllegalState {
            reason: "SaslAuthenticate before SaslHandshake",
        }),
    };
    match result {
        Ok((bytes, next)) => {
            *state = next;
            Ok(bytes)
        }
        Err(failure) => Err(failure),
    }
}

fn failed(mechanism: &str, cause: SaslError) -> SaslFailure {
    SaslFailure::Failed {
        mechanism: mechanism.to_owned(),
        cause,
    }
}

fn scram_step(
    mut server: Box<ScramServer>,
    raw: bool,
    token: &[u8],
    store: &dyn CredentialStore,
) -> Result<(Vec<u8>, AuthState), SaslFailure> {
    let mechanism = server.mechanism();
    let step = server
        .step(token, |user| store.scram_credential(user, mechanism))
        .map_err(|cause| failed(mechanism.name(), cause))?;
    Ok(match step {
        ServerStep::Continue(bytes) => (bytes, AuthState::Scram { server, raw }),
        ServerStep::Authenticated { response, username } => (
            response,
            AuthState::Authenticated(Principal::user(username)),
        ),
    })
}

/// Checks a PLAIN message against the stored SCRAM credentials (either
/// mechanism) and returns the user.
pub(crate) fn plain(token: &[u8], store: &dyn CredentialStore) -> Result<String, SaslError> {
    let message = PlainMessage::parse(token)?;
    if !message.authorization_id.is_empty() && message.authorization_id != message.username {
        return Err(SaslError::InvalidCredentials);
    }
    if verify_password(store, &message.username, &message.password) {
        Ok(message.username)
    } else {
        Err(SaslError::InvalidCredentials)
    }
}

/// The salt of the credential a password of an unknown user is derived
/// with, so that an unknown user costs what a known one does.
const UNKNOWN_USER_SALT: &[u8] = b"strom-unknown-user";

/// Whether `password` is `user`'s, as a SCRAM login would find: the
/// password is salted with the salt and iterations of the user's stored
/// credential (SCRAM-SHA-512 first, else SCRAM-SHA-256) and the resulting
/// stored key compared with the stored one in constant time. A user
/// without a credential is refused after the same derivation with a
/// fixed salt, so that the time taken does not tell who exists. This is
/// how PLAIN logins and HTTP Basic logins (the console's) are checked.
pub fn verify_password(store: &dyn CredentialStore, user: &str, password: &str) -> bool {
    let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
        .into_iter()
        .find_map(|mechanism| Some((mechanism, store.scram_credential(user, mechanism)?)));
    let Some((mechanism, stored)) = stored else {
        let _ = ScramCredential::from_password(
            ScramMechanism::Sha512,
            password,
            UNKNOWN_USER_SALT,
            ScramMechanism::MIN_ITERATIONS,
        );
        return false;
    };
    match ScramCredential::from_password(mechanism, password, &stored.salt, stored.iterations) {
        Ok(given) => constant_time_eq(&given.stored_key, &stored.stored_key),
        Err(_) => false,
    }
}

/// Equality in time independent of where the inputs differ.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

#[cfg(test)]
#[path = "sasl_tests.rs"]
mod tests;
