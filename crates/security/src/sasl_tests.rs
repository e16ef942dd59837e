use std::collections::BTreeMap;
use std::sync::Arc;

use strom_protocol::sasl::plain::PlainMessage;
use strom_protocol::sasl::scram::ScramClient;

use super::*;
use crate::config::{SaslSettings, SecurityProtocol};
use crate::listener::ListenerRuntime;

struct Store(BTreeMap<(String, ScramMechanism), ScramCredential>);

impl CredentialStore for Store {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0.get(&(user.to_owned(), mechanism)).cloned()
    }
}

fn store() -> Store {
    let mut credentials = BTreeMap::new();
    for mechanism in ScramMechanism::ALL {
        let credential =
            ScramCredential::from_password(mechanism, "alice-secret", b"salt", 4096).expect("ok");
        credentials.insert(("alice".to_owned(), mechanism), credential);
    }
    Store(credentials)
}

fn session(mechanisms: &[&str]) -> Session {
    let mut listener = ListenerRuntime::plaintext("SASL_PLAINTEXT");
    listener.protocol = SecurityProtocol::SaslPlaintext;
    listener.sasl = Some(SaslSettings {
        enabled_mechanisms: mechanisms.iter().map(|m| (*m).to_owned()).collect(),
    });
    Session::new(Arc::new(listener), Principal::anonymous())
}

fn scram_login(session: &Session, password: &str) -> Result<(), SaslFailure> {
    handshake(session, "SCRAM-SHA-512", 1)?;
    let (mut client, first) =
        ScramClient::start(ScramMechanism::Sha512, "alice", password, "clientnonce");
    let server_first = authenticate(session, &first, &store(), || "servernonce".to_owned())?;
    let last = client.client_final(&server_first).expect("client final");
    let server_final = authenticate(session, &last, &store(), || unreachable!())?;
    client.finish(&server_final).expect("server verified");
    Ok(())
}

#[test]
fn scram_authenticates_and_gates_requests() {
    let session = session(&["SCRAM-SHA-512"]);
    assert!(session.may_serve(18), "ApiVersions before the handshake");
    assert!(!session.may_serve(3), "no Metadata before authentication");
    scram_login(&session, "alice-secret").expect("authenticated");
    assert_eq!(session.principal(), Principal::user("alice"));
    assert!(session.may_serve(3));
}

#[test]
fn a_wrong_password_fails_the_session() {
    let session = session(&["SCRAM-SHA-512"]);
    let failure = scram_login(&session, "wrong").unwrap_err();
    assert!(matches!(failure, SaslFailure::Failed { .. }));
    assert!(session.failed());
    assert!(!session.may_serve(18));
    assert_eq!(session.principal(), Principal::anonymous());
}

#[test]
fn plain_checks_the_password_against_the_scram_credential() {
    let session_ok = session(&["PLAIN"]);
    handshake(&session_ok, "PLAIN", 1).expect("enabled");
    let message = |password: &str| {
        PlainMessage {
            authorization_id: String::new(),
            username: "alice".into(),
            password: password.into(),
        }
        .encode()
    };
    authenticate(&session_ok, &message("alice-secret"), &store(), String::new).expect("ok");
    assert_eq!(session_ok.principal(), Principal::user("alice"));
    let session_bad = session(&["PLAIN"]);
    handshake(&session_bad, "PLAIN", 1).expect("enabled");
    let failure = authenticate(&session_bad, &message("nope"), &store(), String::new).unwrap_err();
    assert!(matches!(failure, SaslFailure::Failed { .. }));
}

#[test]
fn handshake_refusals() {
    let session = session(&["SCRAM-SHA-256"]);
    let failure = handshake(&session, "PLAIN", 1).unwrap_err();
    assert!(matches!(failure, SaslFailure::UnsupportedMechanism { .. }));
    handshake(&session, "SCRAM-SHA-256", 0).expect("enabled");
    assert!(session.expects_raw_token());
    assert!(matches!(
        handshake(&session, "SCRAM-SHA-256", 1).unwrap_err(),
        SaslFailure::IllegalState { .. }
    ));
    let plaintext = Session::new(
        Arc::new(ListenerRuntime::plaintext("PLAINTEXT")),
        Principal::anonymous(),
    );
    assert!(matches!(
        handshake(&plaintext, "PLAIN", 1).unwrap_err(),
        SaslFailure::IllegalState { .. }
    ));
    let fresh = self::session(&["PLAIN"]);
    assert!(matches!(
        authenticate(&fresh, b"x", &store(), String::new).unwrap_err(),
        SaslFailure::IllegalState { .. }
    ));
}

#[test]
fn passwords_are_verified_against_the_stored_credential() {
    let store = store();
    assert!(verify_password(&store, "alice", "alice-secret"));
    assert!(!verify_password(&store, "alice", "alice-secret "));
    assert!(!verify_password(&store, "alice", ""));
    assert!(!verify_password(&store, "bob", "alice-secret"));
    let mut only_sha256 = BTreeMap::new();
    only_sha256.insert(
        ("carol".to_owned(), ScramMechanism::Sha256),
        ScramCredential::from_password(ScramMechanism::Sha256, "carol-secret", b"s", 4096)
            .expect("ok"),
    );
    let store = Store(only_sha256);
    assert!(verify_password(&store, "carol", "carol-secret"));
    assert!(!verify_password(&store, "carol", "alice-secret"));
}

#[test]
fn keys_compare_equal_only_when_identical() {
    assert!(constant_time_eq(b"", b""));
    assert!(constant_time_eq(b"abc", b"abc"));
    assert!(!constant_time_eq(b"abc", b"abd"));
    assert!(!constant_time_eq(b"abc", b"ab"));
    assert!(!constant_time_eq(b"xbc", b"abc"));
}
