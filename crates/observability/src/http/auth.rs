//! Who may use the HTTP listener: `strom.http.authentication` and
//! `strom.http.authenticate.metrics`, and HTTP Basic logins checked
//! against the broker's SCRAM users.
//!
//! With `strom.http.authentication=none` (the default) nothing is asked
//! and the console shows everything: only for a listener on a loopback
//! address. With `basic`, the console page and its API answer 401 with a
//! `WWW-Authenticate: Basic realm="strom"` challenge unless the request
//! carries the credentials of a SCRAM user ([`crate::BrokerView::authenticate`]),
//! and then show only what that user's ACLs let it describe and read.
//! `/metrics` and the health probes need credentials too when
//! `strom.http.authenticate.metrics=true`.
//!
//! A password is checked by a key derivation, so the check runs on
//! tokio's blocking pool, never on the async workers that also serve the
//! Kafka listeners. Each refused password is counted in
//! `strom_http_authentication_failures_total`.

use std::net::SocketAddr;

use base64::Engine;
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::Request;
use tracing::debug;

use super::HttpState;
use crate::error::HttpSecurityError;
use crate::view::Viewer;

/// The property choosing how the listener authenticates.
pub const AUTHENTICATION_KEY: &str = "strom.http.authentication";

/// The property saying whether `/metrics` and the health probes need
/// credentials too.
pub const AUTHENTICATE_METRICS_KEY: &str = "strom.http.authenticate.metrics";

/// The challenge of a 401 answer.
pub const CHALLENGE: &str = "Basic realm=\"strom\"";

/// Most bytes of an `Authorization` header value read; a longer one is
/// refused like a wrong password (hyper caps all headers at
/// [`super::MAX_HEADER_BYTES`] before that).
pub const MAX_AUTHORIZATION_BYTES: usize = 4096;

/// How the listener authenticates its clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpAuthentication {
    /// Not at all (the default): for a loopback listener only.
    #[default]
    None,
    /// HTTP Basic against the broker's SCRAM users.
    Basic,
}

/// The listener's security settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpSecurity {
    /// How clients are authenticated.
    pub authentication: HttpAuthentication,
    /// Whether `/metrics` and the health probes need credentials too.
    pub authenticate_metrics: bool,
}

impl HttpSecurity {
    /// The settings from the values of [`AUTHENTICATION_KEY`] and
    /// [`AUTHENTICATE_METRICS_KEY`] (`None` or empty: the default).
    pub fn parse(
        authentication: Option<&str>,
        authenticate_metrics: Option<&str>,
    ) -> Result<HttpSecurity, HttpSecurityError> {
        let authentication = match authentication.map(str::trim) {
            None | Some("") | Some("none") => HttpAuthentication::None,
            Some("basic") => HttpAuthentication::Basic,
            Some(other) => {
                return Err(HttpSecurityError::Authentication {
                    value: other.to_owned(),
                })
            }
        };
        let authenticate_metrics = match authenticate_metrics.map(str::trim) {
            None | Some("") | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(HttpSecurityError::AuthenticateMetrics {
                    value: other.to_owned(),
                })
            }
        };
        Ok(HttpSecurity {
            authentication,
            authenticate_metrics,
        })
    }

    /// Whether a request for `path` must carry credentials.
    pub fn protects(&self, path: &str) -> bool {
        let probe = path == "/metrics" || path.starts_with("/health/");
        self.authentication == HttpAuthentication::Basic && (self.authenticate_metrics || !probe)
    }
}

/// The user and password of an `Authorization: Basic ...` header value;
/// `None` for another scheme, bad base64, text that is not UTF-8, no `:`,
/// an empty user or a value over [`MAX_AUTHORIZATION_BYTES`].
pub(crate) fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return None;
    }
    let (scheme, token) = value.to_str().ok()?.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    (!user.is_empty()).then(|| (user.to_owned(), password.to_owned()))
}

/// Why a request is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No credentials, or wrong ones: 401 with the challenge.
    Unauthenticated,
    /// No broker yet to check the credentials against: 503.
    Starting,
}

/// Who sends `request`: `Ok(None)` when its path needs no credentials,
/// `Ok(Some(viewer))` when they are right, else why it is refused.
pub(crate) async fn login<B>(
    state: &HttpState,
    request: &Request<B>,
    peer: SocketAddr,
) -> Result<Option<Viewer>, Refusal> {
    if !state.security.protects(request.uri().path()) {
        return Ok(None);
    }
    let Some((user, password)) = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(basic_credentials)
    else {
        return Err(Refusal::Unauthenticated);
    };
    let Some(broker) = state.broker() else {
        return Err(Refusal::Starting);
    };
    let name = user.clone();
    let verified = tokio::task::spawn_blocking(move || broker.authenticate(&name, &password))
        .await
        .unwrap_or(false);
    if !verified {
        state.authentication_failures.inc();
        debug!(%peer, %user, "HTTP login refused");
        return Err(Refusal::Unauthenticated);
    }
    Ok(Some(Viewer {
        user,
        host: peer.ip(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(text: &str) -> HeaderValue {
        let token = base64::engine::general_purpose::STANDARD.encode(text);
        HeaderValue::from_str(&format!("Basic {token}")).expect("ascii")
    }

    #[test]
    fn basic_credentials_are_user_and_password() {
        assert_eq!(
            basic_credentials(&basic("alice:pa:ss")),
            Some(("alice".to_owned(), "pa:ss".to_owned()))
        );
        assert_eq!(
            basic_credentials(&basic("alice:")),
            Some(("alice".to_owned(), String::new()))
        );
        let lower = HeaderValue::from_static("basic YWxpY2U6eA==");
        assert_eq!(
            basic_credentials(&lower),
            Some(("alice".to_owned(), "x".to_owned()))
        );
    }

    #[test]
    fn malformed_credentials_are_none() {
        assert_eq!(basic_credentials(&basic(":password")), None);
        assert_eq!(basic_credentials(&basic("no-colon")), None);
        for value in ["Bearer abc", "Basic", "Basic !!!", "Basic /w==", ""] {
            let header = HeaderValue::from_static(value);
            assert_eq!(basic_credentials(&header), None, "{value}");
        }
        let long = format!("alice:{}", "x".repeat(MAX_AUTHORIZATION_BYTES));
        assert_eq!(basic_credentials(&basic(&long)), None);
    }

    #[test]
    fn settings_parse_and_protect_paths() {
        assert_eq!(HttpSecurity::parse(None, None), Ok(HttpSecurity::default()));
        let basic = HttpSecurity::parse(Some("basic"), Some("false")).expect("valid");
        assert!(basic.protects("/console") && basic.protects("/api/topics"));
        assert!(basic.protects("/") && basic.protects("/nothing"));
        assert!(!basic.protects("/metrics") && !basic.protects("/health/ready"));
        let all = HttpSecurity::parse(Some(" basic "), Some("true")).expect("valid");
        assert!(all.protects("/metrics") && all.protects("/health/live"));
        let none = HttpSecurity::parse(Some("none"), Some("true")).expect("valid");
        assert!(!none.protects("/api/topics") && !none.protects("/metrics"));
        assert_eq!(
            HttpSecurity::parse(Some("digest"), None),
            Err(HttpSecurityError::Authentication {
                value: "digest".to_owned()
            })
        );
        assert_eq!(
            HttpSecurity::parse(None, Some("yes")),
            Err(HttpSecurityError::AuthenticateMetrics {
                value: "yes".to_owned()
            })
        );
    }
}
