use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};

use super::*;
use crate::sasl::scram::{ScramCredential, ScramServer, ServerStep};

fn handshake_answer(error_code: i16) -> Response {
    Response::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(error_code)
            .with_mechanisms(vec![StrBytes::from_static_str("SCRAM-SHA-512")]),
    )
}

fn authenticate_answer(bytes: Vec<u8>) -> Response {
    Response::SaslAuthenticate(SaslAuthenticateResponse::default().with_auth_bytes(bytes.into()))
}

/// The token of a SaslAuthenticate request.
fn token(request: &SaslRequest) -> Vec<u8> {
    assert_eq!(request.api_version, AUTHENTICATE_VERSION);
    match &request.request {
        Request::SaslAuthenticate(authenticate) => authenticate.auth_bytes.to_vec(),
        other => panic!("not a SaslAuthenticate request: {other:?}"),
    }
}

/// Runs a SCRAM-SHA-512 exchange against a server that holds `password`'s
/// credential for `broker`; the client uses `given`.
fn scram_exchange(password: &str, given: &str) -> Result<Option<SaslRequest>, SaslClientError> {
    let mechanism = ScramMechanism::Sha512;
    let stored = ScramCredential::from_password(mechanism, password, b"salt", 4096).expect("valid");
    let mut server = ScramServer::new(mechanism, "server-nonce".to_owned());
    let (mut exchange, first) =
        SaslClientExchange::start("SCRAM-SHA-512", "broker", given, "client-nonce")
            .expect("known mechanism");
    assert_eq!(first.api_version, HANDSHAKE_VERSION);
    assert!(
        matches!(&first.request, Request::SaslHandshake(h) if h.mechanism.as_str() == "SCRAM-SHA-512")
    );
    let client_first = exchange
        .on_response(&handshake_answer(0))?
        .expect("client-first");
    let lookup = |user: &str| (user == "broker").then(|| stored.clone());
    let server_first = match server.step(&token(&client_first), lookup) {
        Ok(ServerStep::Continue(bytes)) => bytes,
        other => panic!("not server-first: {other:?}"),
    };
    let client_final = exchange
        .on_response(&authenticate_answer(server_first))?
        .expect("client-final");
    match server.step(&token(&client_final), lookup) {
        Ok(ServerStep::Authenticated { response, username }) => {
            assert_eq!(username, "broker");
            exchange.on_response(&authenticate_answer(response))
        }
        // The broker answers a wrong proof with an error code.
        Err(_) => exchange.on_response(&Response::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(ErrorCode::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str("invalid credentials"))),
        )),
        Ok(other) => panic!("unexpected step: {other:?}"),
    }
}

#[test]
fn a_scram_exchange_with_the_right_password_completes() {
    assert_eq!(scram_exchange("secret", "secret"), Ok(None));
}

#[test]
fn a_scram_exchange_with_a_wrong_password_is_refused_with_the_brokers_code() {
    let error = scram_exchange("secret", "wrong").expect_err("refused");
    assert_eq!(
        error,
        SaslClientError::AuthenticationRefused {
            mechanism: "SCRAM-SHA-512".to_owned(),
            error_code: ErrorCode::SaslAuthenticationFailed.code(),
            message: "invalid credentials".to_owned(),
        }
    );
}

#[test]
fn a_forged_server_final_is_refused() {
    let (mut exchange, _) =
        SaslClientExchange::start("SCRAM-SHA-256", "user", "pencil", "nonce").expect("known");
    exchange.on_response(&handshake_answer(0)).expect("first");
    let server_first = b"r=nonceSERVER,s=c2FsdA==,i=4096".to_vec();
    exchange
        .on_response(&authenticate_answer(server_first))
        .expect("final");
    let forged = b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".to_vec();
    assert!(matches!(
        exchange.on_response(&authenticate_answer(forged)),
        Err(SaslClientError::Mechanism {
            cause: SaslError::InvalidServerSignature,
            ..
        })
    ));
}

#[test]
fn plain_sends_one_message_and_completes_on_success() {
    let (mut exchange, _) =
        SaslClientExchange::start(PLAIN, "broker", "secret", "unused").expect("known");
    let message = exchange
        .on_response(&handshake_answer(0))
        .expect("accepted")
        .expect("the PLAIN message");
    assert_eq!(token(&message), b"\0broker\0secret");
    assert_eq!(
        exchange.on_response(&authenticate_answer(Vec::new())),
        Ok(None)
    );
    assert!(exchange
        .on_response(&authenticate_answer(Vec::new()))
        .is_err());
}

#[test]
fn a_refused_handshake_names_the_brokers_mechanisms() {
    let (mut exchange, _) =
        SaslClientExchange::start(PLAIN, "broker", "secret", "unused").expect("known");
    let code = ErrorCode::UnsupportedSaslMechanism.code();
    assert_eq!(
        exchange.on_response(&handshake_answer(code)),
        Err(SaslClientError::HandshakeRefused {
            mechanism: PLAIN.to_owned(),
            error_code: code,
            enabled: "SCRAM-SHA-512".to_owned(),
        })
    );
}

#[test]
fn another_response_or_mechanism_is_refused() {
    assert!(matches!(
        SaslClientExchange::start("GSSAPI", "broker", "secret", "n"),
        Err(SaslClientError::UnknownMechanism { .. })
    ));
    let (mut exchange, _) =
        SaslClientExchange::start(PLAIN, "broker", "secret", "unused").expect("known");
    assert_eq!(
        exchange.on_response(&authenticate_answer(Vec::new())),
        Err(SaslClientError::UnexpectedResponse {
            expected_api_key: ApiKey::SaslHandshake as i16
        })
    );
}
