use strom_config::parse_listeners;

use super::*;

fn parse(pairs: &[(&str, &str)]) -> Result<SecurityConfig, ConfigError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    let listeners = parse_listeners(
        "listeners",
        map.get("listeners")
            .map_or("PLAINTEXT://:9092", String::as_str),
    )?;
    SecurityConfig::from_map(&map, &listeners)
}

fn reason(error: ConfigError) -> (String, String) {
    match error {
        ConfigError::Invalid { key, problem, .. } => (key, problem.to_string()),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn kafkas_default_map_names_the_four_protocols() {
    let config = parse(&[
        ("listeners", "PLAINTEXT://:1,SASL_PLAINTEXT://:2"),
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
    ])
    .expect("valid");
    assert_eq!(config.listeners[0].protocol, SecurityProtocol::Plaintext);
    assert_eq!(
        config.listeners[1].protocol,
        SecurityProtocol::SaslPlaintext
    );
    let sasl = config.listeners[1].sasl.as_ref().expect("sasl");
    assert!(sasl.enables("PLAIN") && sasl.enables("SCRAM-SHA-512"));
    assert!(!sasl.enables("SCRAM-SHA-256"));
    assert!(config.authorizer.is_none());
}

#[test]
fn an_unmapped_listener_or_unknown_protocol_names_the_key() {
    let (key, _) = reason(parse(&[("listeners", "CLIENT://:1")]).unwrap_err());
    assert_eq!(key, "listener.security.protocol.map");
    let (key, _) = reason(
        parse(&[
            ("listeners", "CLIENT://:1"),
            ("listener.security.protocol.map", "CLIENT:KERBEROS"),
        ])
        .unwrap_err(),
    );
    assert_eq!(key, "listener.security.protocol.map");
}

#[test]
fn an_ssl_listener_needs_a_keystore() {
    let (key, reason) = reason(parse(&[("listeners", "SSL://:1")]).unwrap_err());
    assert_eq!(key, "ssl.keystore.location");
    assert!(reason.contains("SSL"), "{reason}");
    let (key, _) = reason_of(parse(&[
        ("listeners", "SSL://:1"),
        ("ssl.keystore.type", "JKS"),
        ("ssl.keystore.location", "/k.jks"),
    ]));
    assert_eq!(key, "ssl.keystore.type");
}

fn reason_of(result: Result<SecurityConfig, ConfigError>) -> (String, String) {
    reason(result.unwrap_err())
}

#[test]
fn listener_scoped_keys_win_over_global_ones() {
    let config = parse(&[
        ("listeners", "EXTERNAL://:1,INTERNAL://:2"),
        (
            "listener.security.protocol.map",
            "EXTERNAL:SASL_SSL,INTERNAL:SSL",
        ),
        ("ssl.keystore.location", "/global.pem"),
        (
            "listener.name.internal.ssl.keystore.location",
            "/internal.pem",
        ),
        ("listener.name.internal.ssl.client.auth", "required"),
        ("ssl.truststore.location", "/ca.pem"),
        (
            "listener.name.external.sasl.enabled.mechanisms",
            "SCRAM-SHA-512",
        ),
    ])
    .expect("valid");
    let external = config.listener("EXTERNAL").expect("external");
    let internal = config.listener("INTERNAL").expect("internal");
    let tls = |listener: &ListenerSecurity| listener.tls.clone().expect("tls");
    assert_eq!(
        tls(external).certificate_chain,
        PemSource::File("/global.pem".into())
    );
    assert_eq!(
        tls(internal).certificate_chain,
        PemSource::File("/internal.pem".into())
    );
    assert_eq!(tls(internal).client_auth, ClientAuth::Required);
    assert_eq!(tls(external).client_auth, ClientAuth::None);
    assert_eq!(
        external.sasl.as_ref().expect("sasl").enabled_mechanisms,
        vec!["SCRAM-SHA-512".to_owned()]
    );
}

#[test]
fn unsupported_mechanisms_and_client_auth_without_truststore_are_refused() {
    let (key, _) = reason_of(parse(&[
        ("listeners", "SASL_PLAINTEXT://:1"),
        ("sasl.enabled.mechanisms", "GSSAPI"),
    ]));
    assert_eq!(key, "sasl.enabled.mechanisms");
    let (key, _) = reason_of(parse(&[
        ("listeners", "SSL://:1"),
        ("ssl.keystore.location", "/k.pem"),
        ("ssl.client.auth", "required"),
    ]));
    assert_eq!(key, "ssl.client.auth");
}

#[test]
fn the_authorizer_switch_and_super_users() {
    let config = parse(&[
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin; User:CN=ops,O=Strom"),
    ])
    .expect("valid");
    let authorizer = config.authorizer.expect("enabled");
    assert_eq!(authorizer.super_users.len(), 2);
    assert_eq!(authorizer.super_users[1].name, "CN=ops,O=Strom");
    assert!(!authorizer.allow_everyone_if_no_acl_found);
    let config = parse(&[("strom.authorizer.enable", "true")]).expect("valid");
    assert!(config.authorizer.is_some());
    assert!(parse(&[("strom.authorizer.enable", "maybe")]).is_err());
}

#[test]
fn security_keys_are_known_in_both_forms() {
    assert!(is_security_key("ssl.keystore.location"));
    assert!(is_security_key(
        "listener.name.sasl_ssl.sasl.enabled.mechanisms"
    ));
    assert!(!is_security_key("ssl.keystore.locaton"));
}

#[test]
fn debug_output_leaves_out_the_key_password_and_inline_pem_text() {
    let config = parse(&[
        ("listeners", "SSL://:1"),
        ("ssl.keystore.type", "PEM"),
        (
            "ssl.keystore.certificate.chain",
            "-----BEGIN CERTIFICATE-----\nCERTSECRETTEXT\n-----END CERTIFICATE-----",
        ),
        (
            "ssl.keystore.key",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nKEYSECRETTEXT\n-----END ENCRYPTED PRIVATE KEY-----",
        ),
        ("ssl.key.password", "hunter2-password"),
    ])
    .expect("valid");
    let tls = config
        .listener("SSL")
        .and_then(|listener| listener.tls.clone())
        .expect("tls");
    assert_eq!(tls.key_password.as_deref(), Some("hunter2-password"));
    let shown = format!("{config:?} {tls:?}");
    for secret in ["hunter2-password", "KEYSECRETTEXT", "CERTSECRETTEXT"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("ssl.keystore.key"), "{shown}");
    assert!(shown.contains("(redacted)"), "{shown}");
}
