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

use strom_protocol::sasl::PLAIN;

use crate::config::{SecurityProtocol, TlsSettings};
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
