//! SASL mechanisms as Kafka speaks them: the messages of PLAIN (RFC 4616)
//! and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), and the SCRAM
//! computations both sides need.
//!
//! Sans-IO like the rest of the crate: callers pass in the random nonces and
//! salts they draw and get bytes back. The broker runs the server side
//! ([`scram::ScramServer`]), the clients the client side
//! ([`scram::ScramClient`]), driven through Kafka's SaslHandshake and
//! SaslAuthenticate requests by [`client::SaslClientExchange`]. Only salted credentials
//! ([`scram::ScramCredential`]) are ever kept, never a password.

pub mod client;
pub mod plain;
pub mod scram;

/// The mechanism names of `sasl.enabled.mechanisms` and `sasl.mechanism`.
pub const PLAIN: &str = "PLAIN";

/// Why a SASL message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// A message is not valid UTF-8.
    #[error("the {message} message is not UTF-8")]
    NotUtf8 {
        /// Which message.
        message: &'static str,
    },
    /// A required attribute is missing or out of order.
    #[error("the {message} message lacks the `{attribute}` attribute")]
    MissingAttribute {
        /// Which message.
        message: &'static str,
        /// The attribute's letter (or name).
        attribute: &'static str,
    },
    /// An attribute's value does not parse.
    #[error("the {message} message has an invalid `{attribute}` value")]
    InvalidAttribute {
        /// Which message.
        message: &'static str,
        /// The attribute's letter (or name).
        attribute: &'static str,
    },
    /// A message is longer than any legitimate one.
    #[error("the {message} message has {length_bytes} bytes, more than {max_bytes}")]
    TooLong {
        /// Which message.
        message: &'static str,
        /// Its length.
        length_bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// The client asked for channel binding, which Kafka does not offer.
    #[error("channel binding is not supported")]
    ChannelBindingUnsupported,
    /// The nonce of the final message is not the one the server sent.
    #[error("the nonce does not match the exchange")]
    NonceMismatch,
    /// The iteration count is outside what is accepted.
    #[error("{iterations} iterations is outside {min}..={max}")]
    Iterations {
        /// The count given.
        iterations: u32,
        /// The least accepted.
        min: u32,
        /// The most accepted.
        max: u32,
    },
    /// The user is not known, or the password or proof is wrong.
    #[error("authentication failed: invalid credentials")]
    InvalidCredentials,
    /// The server's signature does not verify (client side).
    #[error("the server's signature is wrong")]
    InvalidServerSignature,
    /// The server reported an error (client side).
    #[error("the server refused the exchange: {reason}")]
    ServerError {
        /// The server's `e=` value.
        reason: String,
    },
    /// A message arrived when the exchange expected none.
    #[error("the exchange is already complete")]
    ExchangeComplete,
}

/// The longest SASL message accepted from the wire (PLAIN or SCRAM): far
/// more than a legitimate name, nonce and proof need.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

fn check_length(message: &'static str, bytes: &[u8]) -> Result<(), SaslError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(SaslError::TooLong {
            message,
            length_bytes: bytes.len(),
            max_bytes: MAX_MESSAGE_BYTES,
        });
    }
    Ok(())
}

fn utf8<'a>(message: &'static str, bytes: &'a [u8]) -> Result<&'a str, SaslError> {
    check_length(message, bytes)?;
    std::str::from_utf8(bytes).map_err(|_| SaslError::NotUtf8 { message })
}
