//! Security settings under Kafka's names, parsed once: the listener
//! security protocol map, TLS material and options per listener, SASL
//! mechanisms per listener, and the authorizer switch.
//!
//! A listener's setting is looked up as `listener.name.<name>.<key>` (the
//! listener name in lower case) first, then as `<key>`, as Kafka does
//! (`strom-config`'s [`Lookup::for_listener`]). A value that cannot be
//! used is a [`ConfigError`] with [`ValueProblem::Security`] saying why.

use std::collections::BTreeMap;
use std::path::PathBuf;

use strom_config::{invalid, ConfigError, Listener, Lookup, ValueProblem};
use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::sasl::PLAIN;

use crate::principal::{MappingRules, Principal};

/// Kafka's security protocols (a listener's, and a client's
/// `security.protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// No TLS, no SASL (a client's default).
    #[default]
    Plaintext,
    /// TLS, principal from the client certificate (or ANONYMOUS).
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol of a Kafka name (case-insensitive).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|protocol| protocol.name().eq_ignore_ascii_case(name))
    }

    /// Whether connections are encrypted.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// A client certificate is asked for; without one the client is ANONYMOUS.
    Requested,
    /// A trusted client certificate is required.
    Required,
}

/// Where PEM text comes from: a file or the property itself. Its Debug
/// output names an inline property and the length of its text, never the
/// text (it may be a private key).
#[derive(Clone, PartialEq, Eq)]
pub enum PemSource {
    /// A file (`ssl.keystore.location`, `ssl.truststore.location`).
    File(PathBuf),
    /// Inline text (`ssl.keystore.certificate.chain`, `ssl.keystore.key`,
    /// `ssl.truststore.certificates`), with the key that held it.
    Inline {
        /// The property.
        key: String,
        /// Its PEM text.
        text: String,
    },
}

/// The TLS settings of one listener. Its Debug output leaves out
/// `ssl.key.password` and inline PEM text.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// Certificate chain (and key, for a keystore file).
    pub certificate_chain: PemSource,
    /// The private key (the keystore file again, or inline).
    pub private_key: PemSource,
    /// `ssl.key.password`: decrypts an encrypted PKCS#8 private key.
    pub key_password: Option<String>,
    /// Trusted client certificate authorities.
    pub truststore: Option<PemSource>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLS 1.2 and/or TLS 1.3.
    pub enabled_protocols: Vec<String>,
    /// `ssl.cipher.suites` (empty: rustls's defaults).
    pub cipher_suites: Vec<String>,
}

impl std::fmt::Debug for PemSource {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => formatter.debug_tuple("File").field(path).finish(),
            Self::Inline { key, text } => formatter
                .debug_struct("Inline")
                .field("key", key)
                .field("text_bytes", &text.len())
                .finish(),
        }
    }
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsSettings")
            .field("certificate_chain", &self.certificate_chain)
            .field("private_key", &self.private_key)
            .field(
                "key_password",
                &self.key_password.as_ref().map(|_| "(redacted)"),
            )
            .field("truststore", &self.truststore)
            .field("client_auth", &self.client_auth)
            .field("enabled_protocols", &self.enabled_protocols)
            .field("cipher_suites", &self.cipher_suites)
            .finish()
    }
}

/// The SASL settings of one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in the configured order.
    pub enabled_mechanisms: Vec<String>,
}

impl SaslSettings {
    /// Whether `mechanism` is enabled.
    pub fn enables(&self, mechanism: &str) -> bool {
        self.enabled_mechanisms.iter().any(|m| m == mechanism)
    }
}

/// One listener's security.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSecurity {
    /// The listener name.
    pub listener: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// TLS settings, for SSL and SASL_SSL.
    pub tls: Option<TlsSettings>,
    /// SASL settings, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslSettings>,
}

/// The authorizer settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`.
    pub super_users: Vec<Principal>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

/// Every security setting of the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    /// Per listener, in the order of `listeners`.
    pub listeners: Vec<ListenerSecurity>,
    /// `ssl.principal.mapping.rules`.
    pub principal_mapping: MappingRules,
    /// The authorizer, when `authorizer.class.name` (or
    /// `strom.authorizer.enable=true`) turns it on.
    pub authorizer: Option<AuthorizerSettings>,
}

/// Security keys Strom acts on (besides their `listener.name.*.` forms).
pub const SECURITY_KEYS: &[&str] = &[
    "listener.security.protocol.map",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.protocol",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol",
    "authorizer.class.name",
    "strom.authorizer.enable",
    "super.users",
    "allow.everyone.if.no.acl.found",
];

/// Whether `key` is a security key (so not an unknown one).
pub fn is_security_key(key: &str) -> bool {
    let key = match key.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map_or(rest, |(_, key)| key),
        None => key,
    };
    SECURITY_KEYS.contains(&key) || key.ends_with("sasl.jaas.config")
}

/// Kafka's default `listener.security.protocol.map`.
const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

impl SecurityConfig {
    /// Parses the security settings of `listeners` from the properties.
    pub fn from_map(
        map: &BTreeMap<String, String>,
        listeners: &[Listener],
    ) -> Result<SecurityConfig, ConfigError> {
        let lookup = Lookup::new(map);
        let protocols = protocol_map(map)?;
        let listeners = listeners
            .iter()
            .map(|listener| listener_security(&lookup, &protocols, &listener.name))
            .collect::<Result<Vec<_>, _>>()?;
        let mapping_text = map
            .get("ssl.principal.mapping.rules")
            .map(|text| text.trim().to_owned())
            .unwrap_or_else(|| "DEFAULT".to_owned());
        let principal_mapping = MappingRules::parse(&mapping_text).map_err(|reason| {
            invalid(
                "ssl.principal.mapping.rules",
                &mapping_text,
                ValueProblem::security(reason),
            )
        })?;
        Ok(SecurityConfig {
            listeners,
            principal_mapping,
            authorizer: authorizer(&lookup)?,
        })
    }

    /// The security of a listener.
    pub fn listener(&self, name: &str) -> Option<&ListenerSecurity> {
        self.listeners.iter().find(|l| l.listener == name)
    }
}

/// The name whose `listener.name.NAME.ssl.*` keys configure TLS on the
/// broker's HTTP listener (`strom.metrics.listener=https://...`); without
/// them the broker-wide `ssl.*` keys apply, as for a Kafka listener.
pub const HTTP_LISTENER_NAME: &str = "http";

/// The TLS settings of the broker's HTTP listener (see
/// [`HTTP_LISTENER_NAME`]): the same keys and rules as a Kafka listener's.
pub fn http_tls_settings(map: &BTreeMap<String, String>) -> Result<TlsSettings, ConfigError> {
    tls_settings(&Lookup::new(map), HTTP_LISTENER_NAME)
}

/// The security of one listener, whether or not this node binds it (the
/// listener of a peer this node connects to).
pub(crate) fn listener_security_of(
    map: &BTreeMap<String, String>,
    listener: &str,
) -> Result<ListenerSecurity, ConfigError> {
    listener_security(&Lookup::new(map), &protocol_map(map)?, listener)
}

/// Whether `listener.security.protocol.map` (or Kafka's default map)
/// names `listener`.
pub(crate) fn is_mapped(
    map: &BTreeMap<String, String>,
    listener: &str,
) -> Result<bool, ConfigError> {
    Ok(protocol_map(map)?.contains_key(&listener.to_ascii_uppercase()))
}

fn protocol_map(
    map: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    const KEY: &str = "listener.security.protocol.map";
    let text = map
        .get(KEY)
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| DEFAULT_PROTOCOL_MAP.to_owned());
    let mut protocols = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (listener, protocol) = item.split_once(':').ok_or_else(|| {
            invalid(
                KEY,
                &text,
                ValueProblem::security("expected LISTENER:PROTOCOL pairs"),
            )
        })?;
        let protocol = SecurityProtocol::from_name(protocol.trim()).ok_or_else(|| {
            invalid(
                KEY,
                &text,
                ValueProblem::security(
                    "the protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                ),
            )
        })?;
        protocols.insert(listener.trim().to_ascii_uppercase(), protocol);
    }
    Ok(protocols)
}

fn listener_security(
    lookup: &Lookup<'_>,
    protocols: &BTreeMap<String, SecurityProtocol>,
    listener: &str,
) -> Result<ListenerSecurity, ConfigError> {
    let protocol = *protocols
        .get(&listener.to_ascii_uppercase())
        .ok_or_else(|| {
            invalid(
                "listener.security.protocol.map",
                listener,
                ValueProblem::security("the listener has no security protocol in the map"),
            )
        })?;
    let tls = match protocol.uses_tls() {
        true => Some(tls_settings(lookup, listener)?),
        false => None,
    };
    let sasl = match protocol.uses_sasl() {
        true => Some(sasl_settings(lookup, listener)?),
        false => None,
    };
    Ok(ListenerSecurity {
        listener: listener.to_owned(),
        protocol,
        tls,
        sasl,
    })
}

fn tls_settings(lookup: &Lookup<'_>, listener: &str) -> Result<TlsSettings, ConfigError> {
    for store in ["ssl.keystore.type", "ssl.truststore.type"] {
        if let Some((key, value)) = lookup.for_listener(listener, store) {
            if !value.eq_ignore_ascii_case("PEM") {
                return Err(
                    invalid(&key, &value, ValueProblem::security("Strom reads PEM only")).into(),
                );
            }
        }
    }
    let (certificate_chain, private_key) = keystore(lookup, listener)?;
    let truststore = match (
        lookup.for_listener(listener, "ssl.truststore.location"),
        lookup.for_listener(listener, "ssl.truststore.certificates"),
    ) {
        (Some((_, path)), _) => Some(PemSource::File(path.into())),
        (None, Some((key, text))) => Some(PemSource::Inline { key, text }),
        (None, None) => None,
    };
    let client_auth = match lookup.for_listener(listener, "ssl.client.auth") {
        None => ClientAuth::None,
        Some((key, value)) => match value.to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => {
                return Err(invalid(
                    &key,
                    &value,
                    ValueProblem::security("expected none, requested or required"),
                )
                .into())
            }
        },
    };
    if client_auth != ClientAuth::None && truststore.is_none() {
        return Err(invalid(
            "ssl.client.auth",
            "requested/required",
            ValueProblem::security(
                "client certificates need ssl.truststore.location or ssl.truststore.certificates",
            ),
        )
        .into());
    }
    let (_, enabled_protocols) =
        lookup.list_for_listener(listener, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3");
    let (_, cipher_suites) = lookup.list_for_listener(listener, "ssl.cipher.suites", "");
    Ok(TlsSettings {
        certificate_chain,
        private_key,
        key_password: lookup
            .for_listener(listener, "ssl.key.password")
            .map(|(_, v)| v),
        truststore,
        client_auth,
        enabled_protocols,
        cipher_suites,
    })
}

fn keystore(lookup: &Lookup<'_>, listener: &str) -> Result<(PemSource, PemSource), ConfigError> {
    if let Some((_, path)) = lookup.for_listener(listener, "ssl.keystore.location") {
        let path = PathBuf::from(path);
        return Ok((PemSource::File(path.clone()), PemSource::File(path)));
    }
    match (
        lookup.for_listener(listener, "ssl.keystore.certificate.chain"),
        lookup.for_listener(listener, "ssl.keystore.key"),
    ) {
        (Some((chain_key, chain)), Some((key_key, key))) => Ok((
            PemSource::Inline {
                key: chain_key,
                text: chain,
            },
            PemSource::Inline {
                key: key_key,
                text: key,
            },
        )),
        _ => Err(invalid(
            "ssl.keystore.location",
            "",
            ValueProblem::security(format!(
                "listener {listener} uses TLS and needs ssl.keystore.location or \
                 ssl.keystore.certificate.chain with ssl.keystore.key"
            )),
        )
        .into()),
    }
}

fn sasl_settings(lookup: &Lookup<'_>, listener: &str) -> Result<SaslSettings, ConfigError> {
    let (key, enabled_mechanisms) = lookup.list_for_listener(
        listener,
        "sasl.enabled.mechanisms",
        "SCRAM-SHA-256,SCRAM-SHA-512",
    );
    for mechanism in &enabled_mechanisms {
        if mechanism != PLAIN && ScramMechanism::from_name(mechanism).is_none() {
            return Err(invalid(
                &key,
                mechanism,
                ValueProblem::security("Strom supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"),
            )
            .into());
        }
    }
    if enabled_mechanisms.is_empty() {
        return Err(invalid(
            &key,
            "",
            ValueProblem::security("at least one mechanism is required"),
        )
        .into());
    }
    Ok(SaslSettings { enabled_mechanisms })
}

fn authorizer(lookup: &Lookup<'_>) -> Result<Option<AuthorizerSettings>, ConfigError> {
    let enabled = !lookup.value("authorizer.class.name").is_empty()
        || lookup.boolean_or("strom.authorizer.enable", false)?;
    if !enabled {
        return Ok(None);
    }
    let super_users = lookup
        .value("super.users")
        .split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            Principal::parse(item).ok_or_else(|| {
                invalid(
                    "super.users",
                    item,
                    ValueProblem::security("expected TYPE:NAME principals separated by ;"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found: lookup
            .boolean_or("allow.everyone.if.no.acl.found", false)?,
    }))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
