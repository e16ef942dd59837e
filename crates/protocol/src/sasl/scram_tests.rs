use proptest::prelude::*;

use super::*;

/// RFC 7677, section 3: the SCRAM-SHA-256 example exchange.
const RFC_CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> ScramCredential {
    let salt = BASE64.decode(RFC_SALT).expect("salt");
    ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096).expect("valid")
}

#[test]
fn the_client_side_reproduces_rfc_7677() {
    let (mut client, first) =
        ScramClient::start(ScramMechanism::Sha256, "user", "pencil", RFC_CLIENT_NONCE);
    assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let last = client
        .client_final(RFC_SERVER_FIRST.as_bytes())
        .expect("final");
    assert_eq!(String::from_utf8(last).expect("utf8"), RFC_CLIENT_FINAL);
    client
        .finish(RFC_SERVER_FINAL.as_bytes())
        .expect("server verified");
    assert_eq!(
        client.finish(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        Err(SaslError::InvalidServerSignature)
    );
}

#[test]
fn the_server_side_reproduces_rfc_7677() {
    let mut server = ScramServer::new(ScramMechanism::Sha256, RFC_SERVER_NONCE.to_owned());
    let step = server
        .step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |user| {
            (user == "user").then(rfc_credential)
        })
        .expect("first");
    assert_eq!(
        step,
        ServerStep::Continue(RFC_SERVER_FIRST.as_bytes().to_vec())
    );
    let step = server
        .step(RFC_CLIENT_FINAL.as_bytes(), |_| None)
        .expect("final");
    assert_eq!(
        step,
        ServerStep::Authenticated {
            response: RFC_SERVER_FINAL.as_bytes().to_vec(),
            username: "user".to_owned(),
        }
    );
    assert_eq!(
        server.step(b"again", |_| None),
        Err(SaslError::ExchangeComplete)
    );
}

fn exchange(mechanism: ScramMechanism, stored: &str, given: &str) -> Result<String, SaslError> {
    let credential = ScramCredential::from_password(mechanism, stored, b"salt-bytes", 4096)?;
    let mut server = ScramServer::new(mechanism, "servernonce".to_owned());
    let (mut client, first) = ScramClient::start(mechanism, "al,i=ce", given, "clientnonce");
    let ServerStep::Continue(server_first) = server.step(&first, |user| {
        (user == "al,i=ce").then(|| credential.clone())
    })?
    else {
        panic!("the first step continues");
    };
    let last = client.client_final(&server_first)?;
    match server.step(&last, |_| None)? {
        ServerStep::Authenticated { response, username } => {
            client.finish(&response)?;
            Ok(username)
        }
        ServerStep::Continue(_) => panic!("the second step ends the exchange"),
    }
}

#[test]
fn both_mechanisms_authenticate_the_right_password_only() {
    for mechanism in ScramMechanism::ALL {
        assert_eq!(exchange(mechanism, "pw", "pw"), Ok("al,i=ce".to_owned()));
        assert_eq!(
            exchange(mechanism, "pw", "wrong"),
            Err(SaslError::InvalidCredentials)
        );
    }
}

#[test]
fn an_unknown_user_is_refused_at_the_first_message() {
    let mut server = ScramServer::new(ScramMechanism::Sha512, "s".to_owned());
    assert_eq!(
        server.step(b"n,,n=bob,r=abc", |_| None),
        Err(SaslError::InvalidCredentials)
    );
}

#[test]
fn malformed_client_messages_are_refused() {
    for message in [
        &b""[..],
        b"n,,",
        b"n,,r=abc,n=user",
        b"p=tls-unique,,n=user,r=abc",
        b"x,,n=user,r=abc",
        b"n,,n=us=er,r=abc",
        b"n,,n=user,r=a b",
        b"n,,n=user,r=abc,m=ext",
        b"n,,n=,r=abc",
        b"\xff,,n=user,r=abc",
    ] {
        assert!(ClientFirst::parse(message).is_err(), "{message:?}");
    }
    for message in [
        &b""[..],
        b"c=biws,r=abc",
        b"r=abc,c=biws,p=AAAA",
        b"c=biws,r=abc,p=!!",
    ] {
        assert!(ClientFinal::parse(message).is_err(), "{message:?}");
    }
    let huge = vec![b'a'; super::super::MAX_MESSAGE_BYTES + 1];
    assert!(matches!(
        ClientFirst::parse(&huge),
        Err(SaslError::TooLong { .. })
    ));
}

#[test]
fn a_replayed_final_with_another_nonce_is_refused() {
    let mut server = ScramServer::new(ScramMechanism::Sha256, "other".to_owned());
    server
        .step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |_| {
            Some(rfc_credential())
        })
        .expect("first");
    assert_eq!(
        server.step(RFC_CLIENT_FINAL.as_bytes(), |_| None),
        Err(SaslError::NonceMismatch)
    );
}

#[test]
fn iteration_counts_outside_kafkas_range_are_refused() {
    for iterations in [0, 4095, 16385] {
        assert!(matches!(
            ScramCredential::from_password(ScramMechanism::Sha256, "pw", b"s", iterations),
            Err(SaslError::Iterations { .. })
        ));
    }
}

#[test]
fn names_and_codes_are_kafkas() {
    assert_eq!(
        ScramMechanism::from_name("SCRAM-SHA-512"),
        Some(ScramMechanism::Sha512)
    );
    assert_eq!(ScramMechanism::from_code(1), Some(ScramMechanism::Sha256));
    assert_eq!(ScramMechanism::from_code(3), None);
}

proptest! {
    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = ClientFirst::parse(&bytes);
        let _ = ClientFinal::parse(&bytes);
        let _ = ServerFirst::parse(&bytes);
        let _ = ServerFinal::parse(&bytes);
    }

    #[test]
    fn names_round_trip_through_escaping(name in "[a-z,=]{1,16}") {
        prop_assert_eq!(decode_name("t", "n", &encode_name(&name)), Ok(name));
    }
}
