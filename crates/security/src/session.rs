//! The authentication state of one connection.

use std::sync::{Arc, Mutex, MutexGuard};

use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::sasl::scram::ScramServer;

use crate::listener::ListenerRuntime;
use crate::principal::Principal;

/// Where a connection's authentication stands.
#[derive(Debug)]
pub enum AuthState {
    /// Authenticated (or on a listener without SASL): requests are served.
    Authenticated(Principal),
    /// A SASL listener before SaslHandshake.
    AwaitingHandshake,
    /// SaslHandshake chose `mechanism`; `raw` after a v0 handshake, when the
    /// tokens come as bare frames instead of SaslAuthenticate requests.
    Handshaken {
        /// The chosen mechanism.
        mechanism: String,
        /// Whether tokens come as bare frames.
        raw: bool,
    },
    /// A SCRAM exchange after its first message.
    Scram {
        /// The server side of the exchange.
        server: Box<ScramServer>,
        /// Whether tokens come as bare frames.
        raw: bool,
    },
    /// Authentication failed: the connection closes after the answer.
    Failed,
}

/// One connection's listener and authentication state.
#[derive(Debug)]
pub struct Session {
    listener: Arc<ListenerRuntime>,
    state: Mutex<AuthState>,
}

impl Session {
    /// A new connection on `listener`, authenticated as `principal` unless
    /// the listener uses SASL (the TLS principal, or ANONYMOUS).
    pub fn new(listener: Arc<ListenerRuntime>, principal: Principal) -> Session {
        let state = match listener.sasl {
            Some(_) => AuthState::AwaitingHandshake,
            None => AuthState::Authenticated(principal),
        };
        Session {
            listener,
            state: Mutex::new(state),
        }
    }

    /// The listener of the connection.
    pub fn listener(&self) -> &ListenerRuntime {
        &self.listener
    }

    /// The state, locked (a poisoned lock still holds a valid state).
    pub fn state(&self) -> MutexGuard<'_, AuthState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The authenticated principal (ANONYMOUS before authentication).
    pub fn principal(&self) -> Principal {
        match &*self.state() {
            AuthState::Authenticated(principal) => principal.clone(),
            _ => Principal::anonymous(),
        }
    }

    /// Whether requests are served (SASL done, or no SASL on the listener).
    pub fn authenticated(&self) -> bool {
        matches!(&*self.state(), AuthState::Authenticated(_))
    }

    /// Whether a request of `api_key` may be served now: before SASL
    /// authentication completes only ApiVersions, SaslHandshake and
    /// SaslAuthenticate are.
    pub fn may_serve(&self, api_key: i16) -> bool {
        match &*self.state() {
            AuthState::Authenticated(_) => true,
            AuthState::Failed => false,
            AuthState::AwaitingHandshake => {
                api_key == ApiKey::ApiVersions as i16 || api_key == ApiKey::SaslHandshake as i16
            }
            AuthState::Handshaken { raw: false, .. } | AuthState::Scram { raw: false, .. } => {
                api_key == ApiKey::SaslAuthenticate as i16
            }
            AuthState::Handshaken { raw: true, .. } | AuthState::Scram { raw: true, .. } => false,
        }
    }

    /// Whether the next frame is a bare SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            &*self.state(),
            AuthState::Handshaken { raw: true, .. } | AuthState::Scram { raw: true, .. }
        )
    }

    /// Whether the connection must close once its answers are sent.
    pub fn failed(&self) -> bool {
        matches!(&*self.state(), AuthState::Failed)
    }
}
