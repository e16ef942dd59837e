//! How a node of a cluster connects to its peers, parsed once at start-up:
//! to the leaders it fetches from (the `inter.broker.listener.name`
//! listener, or `security.inter.broker.protocol`) and to the controllers
//! (the first of `controller.listener.names`).
//!
//! Each side takes the listener's protocol from
//! `listener.security.protocol.map` and its TLS material from the
//! listener's settings (`listener.name.<name>.ssl.*`, then `ssl.*`): the
//! truststore verifies the peer, the keystore is presented as the client
//! certificate (so `ssl.client.auth=required` holds between nodes), and
//! `ssl.endpoint.identification.algorithm` (`https`, Kafka's default, or
//! empty) says whether the peer's certificate must name the host dialled.
//! The inter-broker listener's SASL login is
//! `sasl.mechanism.inter.broker.protocol` (PLAIN unless set) with the
//! `username` and `password` of
//! `listener.name.<name>.<mechanism>.sasl.jaas.config`. A SASL controller
//! listener takes `sasl.mechanism.controller.protocol`, PLAIN only, with
//! the `username` and `password` of its JAAS entry for this node's login
//! and its `user_<name>` options as the users it accepts.

use std::collections::BTreeMap;

use strom_config::{invalid, ConfigError, ValueProblem};
use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::sasl::PLAIN;

use crate::config::{is_mapped, listener_security_of, SecurityProtocol, TlsSettings};
use crate::error::JaasError;
use crate::jaas;
use crate::sasl_client::SaslLogin;

/// The key naming the inter-broker SASL mechanism.
pub const INTER_BROKER_MECHANISM_KEY: &str = "sasl.mechanism.inter.broker.protocol";
/// The key naming the controller listener's SASL mechanism.
pub const CONTROLLER_MECHANISM_KEY: &str = "sasl.mechanism.controller.protocol";
/// Strom's default mechanism between nodes (Kafka's is GSSAPI, which
/// Strom does not offer).
pub const DEFAULT_INTER_BROKER_MECHANISM: &str = PLAIN;

/// How this node connects to one kind of peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerClientSecurity {
    /// The listener it connects to on the peer.
    pub listener: String,
    /// That listener's protocol.
    pub protocol: SecurityProtocol,
    /// The TLS material (SSL, SASL_SSL); its truststore is always set.
    pub tls: Option<TlsSettings>,
    /// Whether the peer's certificate must name the host dialled.
    pub verify_hostname: bool,
    /// The SASL login (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslLogin>,
}

impl PeerClientSecurity {
    /// Plain TCP to `listener`.
    pub fn plaintext(listener: &str) -> PeerClientSecurity {
        PeerClientSecurity {
            listener: listener.to_owned(),
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            verify_hostname: false,
            sasl: None,
        }
    }
}

/// How this node connects to its peers (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSecurity {
    /// Replica fetchers to the leaders' inter-broker listener.
    pub inter_broker: PeerClientSecurity,
    /// The quorum to the controllers' controller listener; its TLS
    /// settings also serve this node's own quorum listener.
    pub controller: PeerClientSecurity,
    /// With SASL on the controller listener: the users this node's quorum
    /// listener accepts.
    pub controller_users: Option<PlainUsers>,
}

/// The users a SASL controller listener accepts with PLAIN: the
/// `user_<name>="<password>"` options of its JAAS entry, as Kafka's
/// PlainLoginModule takes them.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainUsers {
    passwords: BTreeMap<String, String>,
}

impl PlainUsers {
    /// The `user_<name>` options of a JAAS entry.
    pub fn from_entry(entry: &jaas::JaasEntry) -> PlainUsers {
        PlainUsers {
            passwords: entry
                .options_with_prefix("user_")
                .map(|(user, password)| (user.to_owned(), password.to_owned()))
                .collect(),
        }
    }

    /// The users and their passwords.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.passwords
            .iter()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_set()
            .entries(self.passwords.keys())
            .finish()
    }
}

/// Parses how this node reaches `inter_broker_listener` and
/// `controller_listener`. A controller listener missing from
/// `listener.security.protocol.map` is PLAINTEXT (as before the map
/// applied to it); a node without an inter-broker listener (a
/// controller-only node) fetches from nobody.
pub fn parse(
    map: &BTreeMap<String, String>,
    inter_broker_listener: &str,
    controller_listener: &str,
) -> Result<PeerSecurity, ConfigError> {
    let mut controller = client_side(map, controller_listener)?;
    let mut controller_users = None;
    if controller.protocol.uses_sasl() {
        let (login, entry) = peer_login(map, controller_listener, LoginSide::Controller)?;
        controller.sasl = Some(login);
        controller_users = Some(PlainUsers::from_entry(&entry));
    }
    let mut inter_broker = client_side(map, inter_broker_listener)?;
    if inter_broker.protocol.uses_sasl() {
        let (login, _) = peer_login(map, inter_broker_listener, LoginSide::InterBroker)?;
        inter_broker.sasl = Some(login);
    }
    Ok(PeerSecurity {
        inter_broker,
        controller,
        controller_users,
    })
}

fn client_side(
    map: &BTreeMap<String, String>,
    listener: &str,
) -> Result<PeerClientSecurity, ConfigError> {
    if listener.is_empty() || !is_mapped(map, listener)? {
        return Ok(PeerClientSecurity::plaintext(listener));
    }
    let security = listener_security_of(map, listener)?;
    let mut side = PeerClientSecurity::plaintext(listener);
    side.protocol = security.protocol;
    if let Some(tls) = security.tls {
        if tls.truststore.is_none() {
            return Err(invalid(
                &format!(
                    "listener.name.{}.ssl.truststore.location",
                    listener.to_ascii_lowercase()
                ),
                "",
                ValueProblem::security(format!(
                    "other nodes connect to listener {listener} over TLS and verify it with \
                     ssl.truststore.location or ssl.truststore.certificates"
                )),
            )
            .into());
        }
        side.verify_hostname = endpoint_identification(map, listener)?;
        side.tls = Some(tls);
    }
    Ok(side)
}

/// `ssl.endpoint.identification.algorithm`: `https` (the default) checks
/// the host name, an empty value does not.
fn endpoint_identification(
    map: &BTreeMap<String, String>,
    listener: &str,
) -> Result<bool, ConfigError> {
    const KEY: &str = "ssl.endpoint.identification.algorithm";
    let scoped = format!("listener.name.{}.{KEY}", listener.to_ascii_lowercase());
    let found = [scoped, KEY.to_owned()]
        .into_iter()
        .find_map(|key| map.get(&key).map(|value| (key, value.trim().to_owned())));
    match found {
        None => Ok(true),
        Some((_, value)) if value.is_empty() => Ok(false),
        Some((_, value)) if value.eq_ignore_ascii_case("https") => Ok(true),
        Some((key, value)) => Err(invalid(
            &key,
            &value,
            ValueProblem::security("expected https or an empty value"),
        )
        .into()),
    }
}

/// The two kinds of peer login, with what differs between them.
#[derive(Clone, Copy)]
enum LoginSide {
    InterBroker,
    Controller,
}

impl LoginSide {
    fn mechanism_key(self) -> &'static str {
        match self {
            LoginSide::InterBroker => INTER_BROKER_MECHANISM_KEY,
            LoginSide::Controller => CONTROLLER_MECHANISM_KEY,
        }
    }

    /// Why `mechanism` cannot be used on this side, if it cannot.
    fn refusal(self, mechanism: &str) -> Option<String> {
        let known = mechanism == PLAIN || ScramMechanism::from_name(mechanism).is_some();
        match (self, mechanism) {
            (_, "GSSAPI" | "OAUTHBEARER") => Some(format!(
                "{mechanism} is not supported between nodes; use {} (Strom's default is PLAIN)",
                self.offered()
            )),
            (LoginSide::InterBroker, _) if known => None,
            (LoginSide::Controller, PLAIN) => None,
            (LoginSide::Controller, _) if known => Some(
                "the controller listener takes PLAIN with the users of its JAAS entry: SCRAM \
                 credentials live in the metadata log, which is read through the quorum"
                    .to_owned(),
            ),
            _ => Some(format!("expected {}", self.offered())),
        }
    }

    fn offered(self) -> &'static str {
        match self {
            LoginSide::InterBroker => "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
            LoginSide::Controller => "PLAIN",
        }
    }
}

/// The mechanism of this node's login to peers' SASL `listener`: one
/// the side offers and the listener enables.
fn peer_mechanism(
    map: &BTreeMap<String, String>,
    listener: &str,
    side: LoginSide,
) -> Result<String, ConfigError> {
    let mechanism_key = side.mechanism_key();
    let mechanism = map
        .get(mechanism_key)
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
        .unwrap_or(DEFAULT_INTER_BROKER_MECHANISM)
        .to_owned();
    if let Some(reason) = side.refusal(&mechanism) {
        return Err(invalid(mechanism_key, &mechanism, ValueProblem::security(reason)).into());
    }
    let enabled = listener_security_of(map, listener)?
        .sasl
        .is_some_and(|sasl| sasl.enables(&mechanism));
    if !enabled {
        return Err(invalid(
            mechanism_key,
            &mechanism,
            ValueProblem::security(format!(
                "listener {listener} does not enable it in sasl.enabled.mechanisms"
            )),
        )
        .into());
    }
    Ok(mechanism)
}

/// This node's login to peers' SASL `listener`, and the parsed JAAS entry
/// it came from.
fn peer_login(
    map: &BTreeMap<String, String>,
    listener: &str,
    side: LoginSide,
) -> Result<(SaslLogin, jaas::JaasEntry), ConfigError> {
    let mechanism = peer_mechanism(map, listener, side)?;
    let key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    let text = map
        .get(&key)
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| {
            invalid(
                &key,
                "",
                ValueProblem::security(format!(
                    "listener {listener} uses SASL ({mechanism}) between nodes: this node's \
                     username and password are required"
                )),
            )
        })?;
    let hidden = |error: JaasError| {
        invalid(
            &key,
            "(not shown: it holds a password)",
            ValueProblem::security(error.to_string()),
        )
    };
    let entry = jaas::parse(text).map_err(hidden)?;
    let (username, password) = entry.credentials().map_err(hidden)?;
    let login = SaslLogin {
        mechanism,
        username,
        password,
    };
    if matches!(side, LoginSide::Controller) && entry.options_with_prefix("user_").next().is_none()
    {
        return Err(invalid(
            &key,
            "(not shown: it holds a password)",
            ValueProblem::security(
                "the controller listener accepts the users of its JAAS entry \
             (user_<name>=\"<password>\" options) and it names none",
            ),
        )
        .into());
    }
    Ok((login, entry))
}

#[cfg(test)]
#[path = "peer_config_tests.rs"]
mod tests;
