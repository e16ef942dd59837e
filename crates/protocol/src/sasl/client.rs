//! The client side of Kafka's SASL exchange, sans-IO: a SaslHandshake
//! (v1) naming the mechanism, then the mechanism's messages carried in
//! SaslAuthenticate (v1) requests. The caller sends each request
//! [`SaslClientExchange`] hands out, reads the answer and passes it back,
//! until the exchange says it is done. Strom's clients and the broker (for
//! its connections to other brokers) drive the same exchange over their
//! own sockets.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::plain::PlainMessage;
use super::scram::{ScramClient, ScramMechanism};
use super::{SaslError, PLAIN};
use crate::error_code::ErrorCode;
use crate::messages::{Request, Response};

/// The SaslHandshake version the exchange sends (v1: the messages follow
/// in SaslAuthenticate requests).
pub const HANDSHAKE_VERSION: i16 = 1;
/// The SaslAuthenticate version the exchange sends.
pub const AUTHENTICATE_VERSION: i16 = 1;

/// Why a client's SASL exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslClientError {
    /// The mechanism is not one Strom speaks.
    #[error(
        "SASL mechanism {mechanism} is not supported (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)"
    )]
    UnknownMechanism {
        /// The mechanism asked for.
        mechanism: String,
    },
    /// The broker refused the handshake (the mechanism is not enabled on
    /// its listener, or SASL is not).
    #[error("the broker refused SASL mechanism {mechanism} (error code {error_code}; it enables: {enabled})")]
    HandshakeRefused {
        /// The mechanism asked for.
        mechanism: String,
        /// The broker's error code.
        error_code: i16,
        /// The mechanisms the broker listed, comma-separated.
        enabled: String,
    },
    /// The broker refused the credentials.
    #[error(
        "the broker refused the {mechanism} authentication (error code {error_code}): {message}"
    )]
    AuthenticationRefused {
        /// The mechanism.
        mechanism: String,
        /// The broker's error code.
        error_code: i16,
        /// The broker's message, if it sent one.
        message: String,
    },
    /// A mechanism message from the broker did not verify or parse.
    #[error("the {mechanism} exchange failed")]
    Mechanism {
        /// The mechanism.
        mechanism: String,
        /// What failed.
        #[source]
        cause: SaslError,
    },
    /// The answer is not the response to the request just sent.
    #[error("expected a response to API key {expected_api_key}")]
    UnexpectedResponse {
        /// The API key of the request sent.
        expected_api_key: i16,
    },
}

/// The next request of an exchange, with the version to send it at.
#[derive(Debug, Clone, PartialEq)]
pub struct SaslRequest {
    /// The request.
    pub request: Request,
    /// Its API version.
    pub api_version: i16,
}

enum ExchangeState {
    AwaitingHandshake,
    AwaitingPlainAnswer,
    AwaitingServerFirst(ScramClient),
    AwaitingServerFinal(ScramClient),
    Done,
}

/// One client SASL exchange; see the module docs.
pub struct SaslClientExchange {
    mechanism: String,
    username: String,
    password: String,
    client_nonce: String,
    state: ExchangeState,
}

impl std::fmt::Debug for SaslClientExchange {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SaslClientExchange")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl SaslClientExchange {
    /// Starts an exchange as `username` with `password` over `mechanism`
    /// (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); `client_nonce` is a fresh
    /// random printable ASCII string without commas (used by SCRAM).
    /// Returns the exchange and the SaslHandshake to send first.
    pub fn start(
        mechanism: &str,
        username: &str,
        password: &str,
        client_nonce: &str,
    ) -> Result<(SaslClientExchange, SaslRequest), SaslClientError> {
        if mechanism != PLAIN && ScramMechanism::from_name(mechanism).is_none() {
            return Err(SaslClientError::UnknownMechanism {
                mechanism: mechanism.to_owned(),
            });
        }
        let exchange = SaslClientExchange {
            mechanism: mechanism.to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
            client_nonce: client_nonce.to_owned(),
            state: ExchangeState::AwaitingHandshake,
        };
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_string(mechanism.to_owned()));
        let first = SaslRequest {
            request: Request::SaslHandshake(handshake),
            api_version: HANDSHAKE_VERSION,
        };
        Ok((exchange, first))
    }

    /// The mechanism of the exchange.
    pub fn mechanism(&self) -> &str {
        &self.mechanism
    }

    /// Takes the answer to the last request: `Ok(Some(next))` is the next
    /// request to send, `Ok(None)` means the connection is authenticated.
    pub fn on_response(
        &mut self,
        response: &Response,
    ) -> Result<Option<SaslRequest>, SaslClientError> {
        let state = std::mem::replace(&mut self.state, ExchangeState::Done);
        match state {
            ExchangeState::AwaitingHandshake => self.on_handshake(response).map(Some),
            ExchangeState::AwaitingPlainAnswer => self.authenticated(response).map(|_| None),
            ExchangeState::AwaitingServerFirst(mut client) => {
                let server_first = self.authenticated(response)?;
                let client_final = client
                    .client_final(&server_first)
                    .map_err(|cause| self.mechanism_error(cause))?;
                self.state = ExchangeState::AwaitingServerFinal(client);
                Ok(Some(authenticate(client_final)))
            }
            ExchangeState::AwaitingServerFinal(client) => {
                let server_final = self.authenticated(response)?;
                client
                    .finish(&server_final)
                    .map_err(|cause| self.mechanism_error(cause))?;
                Ok(None)
            }
            ExchangeState::Done => Err(self.mechanism_error(SaslError::ExchangeComplete)),
        }
    }

    fn on_handshake(&mut self, response: &Response) -> Result<SaslRequest, SaslClientError> {
        let Response::SaslHandshake(answer) = response else {
            return Err(SaslClientError::UnexpectedResponse {
                expected_api_key: ApiKey::SaslHandshake as i16,
            });
        };
        if answer.error_code != ErrorCode::None.code() {
            let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(SaslClientError::HandshakeRefused {
                mechanism: self.mechanism.clone(),
                error_code: answer.error_code,
                enabled: enabled.join(","),
            });
        }
        let Some(scram) = ScramMechanism::from_name(&self.mechanism) else {
            self.state = ExchangeState::AwaitingPlainAnswer;
            let message = PlainMessage {
                authorization_id: String::new(),
                username: self.username.clone(),
                password: self.password.clone(),
            };
            return Ok(authenticate(message.encode()));
        };
        let (client, client_first) =
            ScramClient::start(scram, &self.username, &self.password, &self.client_nonce);
        self.state = ExchangeState::AwaitingServerFirst(client);
        Ok(authenticate(client_first))
    }

    /// The bytes of a successful SaslAuthenticate answer.
    fn authenticated(&self, response: &Response) -> Result<Bytes, SaslClientError> {
        match response {
            Response::SaslAuthenticate(answer) if answer.error_code == ErrorCode::None.code() => {
                Ok(answer.auth_bytes.clone())
            }
            Response::SaslAuthenticate(answer) => Err(SaslClientError::AuthenticationRefused {
                mechanism: self.mechanism.clone(),
                error_code: answer.error_code,
                message: answer
                    .error_message
                    .as_ref()
                    .map_or_else(String::new, |message| message.to_string()),
            }),
            _ => Err(SaslClientError::UnexpectedResponse {
                expected_api_key: ApiKey::SaslAuthenticate as i16,
            }),
        }
    }

    fn mechanism_error(&self, cause: SaslError) -> SaslClientError {
        SaslClientError::Mechanism {
            mechanism: self.mechanism.clone(),
            cause,
        }
    }
}

fn authenticate(token: Vec<u8>) -> SaslRequest {
    SaslRequest {
        request: Request::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
        ),
        api_version: AUTHENTICATE_VERSION,
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
