//! Security settings under Kafka's names, parsed once: the listener
//! security protocol map, TLS material and options per listener, SASL
//! mechanisms per listener, and the authorizer switch.
//!
//! A listener's setting is looked up as `listener.name.<name>.<key>` (the
//! listener name in lower case) first, then as `<key>`, as Kafka does.

use std::path::PathBuf;

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

impl SecurityConfig {
    /// The security of a listener.
    pub fn listener(&self, name: &str) -> Option<&ListenerSecurity> {
        self.listeners.iter().find(|l| l.listener == name)
    }
}
