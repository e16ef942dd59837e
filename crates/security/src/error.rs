//! The typed errors of the crate: setting up a listener's TLS or the TLS
//! client to peers, opening and securing peer connections, the SASL
//! exchanges (the server's steps, a client login, the controller
//! listener's PLAIN check) and `sasl.jaas.config` values. None carries a
//! Kafka error code: the broker chooses those from these types at its
//! edge.

use std::path::PathBuf;

use strom_protocol::sasl::client::SaslClientError;
use strom_protocol::sasl::SaslError;
use strom_protocol::{FrameError, MessageError};

/// Why the security of a listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A listener's TLS material or options.
    #[error("listener {listener}: TLS cannot be set up")]
    Tls {
        /// The listener.
        listener: String,
        /// The cause.
        #[source]
        source: TlsSetupError,
    },
    /// The TLS client this node connects to its peers' listener with.
    #[error("connections to other nodes' listener {listener}: TLS cannot be set up")]
    PeerTls {
        /// The peers' listener.
        listener: String,
        /// The cause.
        #[source]
        source: TlsClientError,
    },
    /// A listener of `listeners` without security settings (not parsed).
    #[error("listener {listener} has no security settings")]
    UnknownListener {
        /// The listener.
        listener: String,
    },
}

/// Why one request/response exchange on a connection being set up failed
/// (see [`crate::sasl_client::call`]).
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Writing or reading failed, or the peer closed the connection.
    #[error("i/o failed")]
    Io(#[source] std::io::Error),
    /// The response frame is malformed (or larger than allowed).
    #[error("the response frame is malformed")]
    Frame(#[source] FrameError),
    /// The request did not encode, or the response did not decode.
    #[error("the request or its response does not fit the protocol")]
    Message(#[source] MessageError),
}

/// Why a client's SASL login failed (see [`crate::sasl_client::login`]).
#[derive(Debug, thiserror::Error)]
pub enum SaslLoginError {
    /// A request or response of the exchange could not be carried.
    #[error("the SASL exchange failed")]
    Exchange(#[source] ExchangeError),
    /// The system random generator failed (no SCRAM nonce).
    #[error("the system random generator failed")]
    Random,
    /// The broker refused the login, or its answer did not verify.
    #[error("SASL authentication failed")]
    Refused(#[source] SaslClientError),
}

/// Why a listener's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A PEM file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No certificate in the keystore or truststore.
    #[error("no PEM certificate in {origin}")]
    NoCertificate {
        /// The file or property.
        origin: String,
    },
    /// No usable private key in the keystore.
    #[error("no unencrypted PEM private key in {origin}")]
    NoPrivateKey {
        /// The file or property.
        origin: String,
    },
    /// An encrypted private key without `ssl.key.password`.
    #[error("the private key in {origin} is encrypted and ssl.key.password is not set")]
    EncryptedKey {
        /// The file or property.
        origin: String,
    },
    /// `ssl.key.password` does not decrypt the encrypted private key: a
    /// wrong password, or an encryption scheme that is not supported.
    #[error(
        "ssl.key.password does not decrypt the private key in {origin} (a wrong password, or an \
         encryption other than PKCS#8 PBES2 with PBKDF2 or scrypt and AES-CBC)"
    )]
    KeyDecryption {
        /// The file or property.
        origin: String,
        /// What the decryption reported.
        #[source]
        source: pkcs8::Error,
    },
    /// A protocol rustls does not offer.
    #[error("ssl.enabled.protocols: `{protocol}` is not supported (TLSv1.2 and TLSv1.3 are)")]
    Protocol {
        /// The protocol named.
        protocol: String,
    },
    /// A cipher suite rustls does not offer for the enabled protocols.
    #[error("ssl.cipher.suites: `{suite}` is not offered (rustls offers {offered})")]
    CipherSuite {
        /// The suite named.
        suite: String,
        /// The suites that are offered.
        offered: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration refused")]
    Rustls(#[source] rustls::Error),
    /// The client certificate verifier could not be built.
    #[error("ssl.truststore: no usable trust anchor")]
    Truststore(#[source] rustls::server::VerifierBuilderError),
}

/// Why a peer's TLS client could not be set up, beyond the listener's own
/// material.
#[derive(Debug, thiserror::Error)]
pub enum TlsClientError {
    /// The listener's material or options.
    #[error(transparent)]
    Setup(#[from] TlsSetupError),
    /// The truststore is needed to verify peers.
    #[error("no truststore to verify other nodes with (ssl.truststore.location)")]
    NoTruststore,
    /// The server verifier could not be built.
    #[error("ssl.truststore: no usable trust anchor")]
    Truststore(#[source] rustls::client::VerifierBuilderError),
}

/// Why a connection to a peer could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Connecting, the TLS handshake, writing or reading failed.
    #[error("i/o with {address} failed")]
    Io {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed: the peer's certificate did not verify, or
    /// the peer refused this node's certificate.
    #[error("the TLS handshake with {address} failed")]
    Tls {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The system random generator failed (no SCRAM nonce).
    #[error("no random nonce for the SASL login to {address}")]
    Random {
        /// The peer's `host:port`.
        address: String,
    },
    /// The host of the address is no TLS server name.
    #[error("{address} has no host usable as a TLS server name")]
    ServerName {
        /// The peer's `host:port`.
        address: String,
    },
    /// The peer refused this node's SASL login (or its proof did not
    /// verify).
    #[error("SASL authentication with {address} failed")]
    Authentication {
        /// The peer's `host:port`.
        address: String,
        /// Why.
        #[source]
        cause: SaslClientError,
    },
    /// A request or response did not encode or decode.
    #[error("the exchange with {address} is malformed")]
    Codec {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl PeerError {
    /// Whether the peer and this node did not accept each other (TLS
    /// certificates or SASL credentials), as opposed to a network failure:
    /// worth a warning, since retrying will not help until the
    /// certificates, the user or the password are fixed.
    pub fn is_authentication(&self) -> bool {
        matches!(
            self,
            PeerError::Authentication { .. } | PeerError::Tls { .. }
        )
    }
}

/// Why a quorum connection was not authenticated.
#[derive(Debug, thiserror::Error)]
pub enum PeerSaslError {
    /// Reading or writing failed.
    #[error("i/o failed during SASL authentication")]
    Io(#[from] std::io::Error),
    /// A frame outside `0..=512 KiB`.
    #[error("a frame of {size} bytes before authentication")]
    FrameSize {
        /// The declared size.
        size: i32,
    },
    /// Something other than SaslHandshake v1 then SaslAuthenticate.
    #[error("expected SaslHandshake v1 then SaslAuthenticate")]
    UnexpectedRequest,
    /// A mechanism other than PLAIN.
    #[error("SASL mechanism {mechanism} is not offered on the controller listener")]
    Mechanism {
        /// The mechanism asked for.
        mechanism: String,
    },
    /// The user or password is wrong.
    #[error("authentication as a controller listener user failed")]
    Refused(#[source] SaslError),
}

/// Why a `sasl.jaas.config` value cannot be used. The messages never
/// repeat the text: it holds a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    /// No login module class.
    #[error("no login module is named")]
    Empty,
    /// The word after the class is not a JAAS control flag.
    #[error("the login module's control flag must be required, requisite, sufficient or optional")]
    ControlFlag,
    /// An option that is not `name=value`.
    #[error("option {position} is not name=value")]
    Option {
        /// 1-based position of the option.
        position: usize,
    },
    /// A quoted value without its closing quote.
    #[error("a quoted value is not closed")]
    UnterminatedQuote,
    /// The entry does not end with `;`.
    #[error("the login module entry must end with `;`")]
    MissingSemicolon,
    /// Text after the `;` (a second login module).
    #[error("exactly one login module is allowed")]
    SeveralModules,
    /// A required option is not there (or is empty).
    #[error("the `{option}` option is missing")]
    MissingOption {
        /// The option.
        option: &'static str,
    },
}

/// Why a SASL step failed, as the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslFailure {
    /// The message is not legal now (no handshake, no SASL on the listener).
    #[error("unexpected SASL request: {reason}")]
    IllegalState {
        /// Why.
        reason: &'static str,
    },
    /// The mechanism is not enabled on the listener.
    #[error("mechanism {mechanism} is not enabled")]
    UnsupportedMechanism {
        /// The mechanism asked for.
        mechanism: String,
    },
    /// Authentication failed.
    #[error("authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")]
    Failed {
        /// The mechanism.
        mechanism: String,
        /// The cause, for the broker's log.
        #[source]
        cause: SaslError,
    },
}
