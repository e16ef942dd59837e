//! Security for Strom's listeners and for the connections between nodes.
//!
//! This crate owns what decides who a connection is and what it may do:
//! the security protocols of Kafka's listeners ([`SecurityProtocol`],
//! shared with `strom-client`'s `security.protocol`), the listeners'
//! security settings under Kafka's names ([`config`]), TLS for listeners
//! ([`tls`], with certificates re-read when their files change,
//! [`reload`]) and for connections to peers ([`tls_client`]), the server
//! side of SASL PLAIN and SCRAM over a connection's [`Session`]
//! ([`sasl`]), the client side of a SASL login ([`sasl_client`], one code
//! path for Strom's clients and for a broker's connections to its peers),
//! the one source of SCRAM nonces ([`nonce`]), principals and
//! `ssl.principal.mapping.rules` ([`principal`]), `sasl.jaas.config`
//! values ([`jaas`]), secured connections between nodes ([`peer`],
//! [`peer_sasl`], [`peer_config`]) and the ACL authorizer's decision
//! function ([`authorizer`]).
//!
//! It deliberately does not own the network server, request handling,
//! credentials or ACLs as stored, or Kafka error codes: the broker looks
//! SCRAM credentials up for [`sasl`] through [`sasl::CredentialStore`],
//! hands the ACL bindings of its metadata image to the authorizer, and
//! chooses the codes of its answers from the typed errors of [`error`].
//! It depends on `strom-protocol` and `strom-config` only (the settings
//! are read with `strom-config`'s [`strom_config::Lookup`] and refused
//! with its [`strom_config::ConfigError`]); in particular it knows nothing
//! of the controller's quorum, whose connector and acceptor traits the
//! broker implements over [`peer::PeerConnector`] and
//! [`peer::PeerAcceptor`].
//!
//! Two decisions a newcomer must know:
//!
//! * **The authorizer sees arguments, not a broker.** [`authorizer::decide`]
//!   takes the [`config::AuthorizerSettings`], the principal, the client's
//!   host, the action and the ACL bindings, each an
//!   [`authorizer::AclBinding`]: a plain borrowed view that the caller
//!   fills from its stored ACLs (the broker: the metadata image's ACL
//!   records), so no copy is made per request and this crate needs no
//!   controller type. The ACL codes themselves are Kafka's wire codes and
//!   live in [`strom_protocol::acl`].
//! * **No password is kept or compared in the clear.** A PLAIN login is
//!   checked by salting the given password with a stored SCRAM
//!   credential's salt; the controller listener's users from its JAAS
//!   entry are salted once at start-up ([`peer_sasl::ListenerUsers`]).
//!
//! The crate has no feature flags.

pub mod authorizer;
pub mod config;
pub mod error;
pub mod jaas;
pub mod listener;
pub mod nonce;
pub mod peer;
pub mod peer_config;
pub mod peer_sasl;
pub mod pem;
pub mod principal;
pub mod reload;
pub mod sasl;
pub mod sasl_client;
pub mod session;
pub mod tls;
pub mod tls_client;
pub mod truststore;

pub use config::{is_security_key, SecurityConfig, SecurityProtocol};
pub use error::SecurityError;
pub use listener::{listener_runtimes, ListenerRuntime};
pub use principal::Principal;
pub use session::Session;
