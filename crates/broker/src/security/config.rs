//! Security settings under Kafka's names, parsed once: the listener
//! security protocol map, TLS material and options per listener, SASL
//! mechanisms per listener, and the authorizer switch.
//!
//! A listener's setting is looked up as `listener.name.<name>.<key>` (the
//! listener name in lower case) first, then as `<key>`, as Kafka does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::sasl::PLAIN;

use strom_security::config::{
    AuthorizerSettings, ClientAuth, ListenerSecurity, PemSource, SaslSettings, SecurityConfig,
    SecurityProtocol, TlsSettings,
};
use strom_security::principal::{MappingRules, Principal};

use crate::config::Listener;
use crate::error::ConfigError;

/// Kafka's default `listener.security.protocol.map`.
const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

struct Lookup<'a> {
    map: &'a BTreeMap<String, String>,
}

impl Lookup<'_> {
    /// A listener's value: `listener.name.<name>.<key>`, then `<key>`, with
    /// the key it came from.
    fn get(&self, listener: &str, key: &str) -> Option<(String, String)> {
        let scoped = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        [scoped, key.to_owned()].into_iter().find_map(|name| {
            self.map
                .get(&name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
                .map(|value| (name, value))
        })
    }

    fn list(&self, listener: &str, key: &str, default: &str) -> (String, Vec<String>) {
        let (name, text) = self
            .get(listener, key)
            .unwrap_or_else(|| (key.to_owned(), default.to_owned()));
        let items = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect();
        (name, items)
    }
}

/// A security value that cannot be used.
pub(super) fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        problem: crate::error::ValueProblem::Security {
            reason: reason.to_owned(),
        },
    }
}

/// Parses the security settings of `listeners` from the properties.
pub fn from_map(
    map: &BTreeMap<String, String>,
    listeners: &[Listener],
) -> Result<SecurityConfig, ConfigError> {
    let lookup = Lookup { map };
    let protocols = protocol_map(map)?;
    let listeners = listeners
        .iter()
        .map(|listener| listener_security(&lookup, &protocols, &listener.name))
        .collect::<Result<Vec<_>, _>>()?;
    let mapping_text = map
        .get("ssl.principal.mapping.rules")
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|| "DEFAULT".to_owned());
    let principal_mapping = MappingRules::parse(&mapping_text)
        .map_err(|reason| invalid("ssl.principal.mapping.rules", &mapping_text, reason))?;
    Ok(SecurityConfig {
        listeners,
        principal_mapping,
        authorizer: authorizer(map)?,
    })
}

/// The security of one listener, whether or not this node binds it (the
/// listener of a peer this node connects to).
pub(super) fn listener_security_of(
    map: &BTreeMap<String, String>,
    listener: &str,
) -> Result<ListenerSecurity, ConfigError> {
    listener_security(&Lookup { map }, &protocol_map(map)?, listener)
}

/// Whether `listener.security.protocol.map` (or Kafka's default map)
/// names `listener`.
pub(super) fn is_mapped(
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
        let (listener, protocol) = item
            .split_once(':')
            .ok_or_else(|| invalid(KEY, &text, "expected LISTENER:PROTOCOL pairs"))?;
        let protocol = SecurityProtocol::from_name(protocol.trim()).ok_or_else(|| {
            invalid(
                KEY,
                &text,
                "the protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
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
                "the listener has no security protocol in the map",
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
        if let Some((key, value)) = lookup.get(listener, store) {
            if !value.eq_ignore_ascii_case("PEM") {
                return Err(invalid(&key, &value, "Strom reads PEM only"));
            }
        }
    }
    let (certificate_chain, private_key) = keystore(lookup, listener)?;
    let truststore = match (
        lookup.get(listener, "ssl.truststore.location"),
        lookup.get(listener, "ssl.truststore.certificates"),
    ) {
        (Some((_, path)), _) => Some(PemSource::File(path.into())),
        (None, Some((key, text))) => Some(PemSource::Inline { key, text }),
        (None, None) => None,
    };
    let client_auth = match lookup.get(listener, "ssl.client.auth") {
        None => ClientAuth::None,
        Some((key, value)) => match value.to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => {
                return Err(invalid(
                    &key,
                    &value,
                    "expected none, requested or required",
                ))
            }
        },
    };
    if client_auth != ClientAuth::None && truststore.is_none() {
        return Err(invalid(
            "ssl.client.auth",
            "requested/required",
            "client certificates need ssl.truststore.location or ssl.truststore.certificates",
        ));
    }
    let (_, enabled_protocols) = lookup.list(listener, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3");
    let (_, cipher_suites) = lookup.list(listener, "ssl.cipher.suites", "");
    Ok(TlsSettings {
        certificate_chain,
        private_key,
        key_password: lookup.get(listener, "ssl.key.password").map(|(_, v)| v),
        truststore,
        client_auth,
        enabled_protocols,
        cipher_suites,
    })
}

fn keystore(lookup: &Lookup<'_>, listener: &str) -> Result<(PemSource, PemSource), ConfigError> {
    if let Some((_, path)) = lookup.get(listener, "ssl.keystore.location") {
        let path = PathBuf::from(path);
        return Ok((PemSource::File(path.clone()), PemSource::File(path)));
    }
    match (
        lookup.get(listener, "ssl.keystore.certificate.chain"),
        lookup.get(listener, "ssl.keystore.key"),
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
            &format!(
                "listener {listener} uses TLS and needs ssl.keystore.location or \
                 ssl.keystore.certificate.chain with ssl.keystore.key"
            ),
        )),
    }
}

fn sasl_settings(lookup: &Lookup<'_>, listener: &str) -> Result<SaslSettings, ConfigError> {
    let (key, enabled_mechanisms) = lookup.list(
        listener,
        "sasl.enabled.mechanisms",
        "SCRAM-SHA-256,SCRAM-SHA-512",
    );
    for mechanism in &enabled_mechanisms {
        if mechanism != PLAIN && ScramMechanism::from_name(mechanism).is_none() {
            return Err(invalid(
                &key,
                mechanism,
                "Strom supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512",
            ));
        }
    }
    if enabled_mechanisms.is_empty() {
        return Err(invalid(&key, "", "at least one mechanism is required"));
    }
    Ok(SaslSettings { enabled_mechanisms })
}

fn authorizer(map: &BTreeMap<String, String>) -> Result<Option<AuthorizerSettings>, ConfigError> {
    let get = |key: &str| map.get(key).map(|value| value.trim()).unwrap_or("");
    let boolean = |key: &str| match get(key).to_ascii_lowercase().as_str() {
        "" | "false" => Ok(false),
        "true" => Ok(true),
        other => Err(invalid(key, other, "expected true or false")),
    };
    let enabled = !get("authorizer.class.name").is_empty() || boolean("strom.authorizer.enable")?;
    if !enabled {
        return Ok(None);
    }
    let super_users = get("super.users")
        .split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            Principal::parse(item).ok_or_else(|| {
                invalid(
                    "super.users",
                    item,
                    "expected TYPE:NAME principals separated by ;",
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found: boolean("allow.everyone.if.no.acl.found")?,
    }))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
