//! SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`.

use super::{utf8, SaslError};

/// The one message of a PLAIN exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The identity to act as (empty: the user itself).
    pub authorization_id: String,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl PlainMessage {
    /// Parses the client's message.
    pub fn parse(bytes: &[u8]) -> Result<PlainMessage, SaslError> {
        const MESSAGE: &str = "PLAIN";
        let text = utf8(MESSAGE, bytes)?;
        let mut fields = text.split('\0');
        let (Some(authorization_id), Some(username), Some(password), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(SaslError::MissingAttribute {
                message: MESSAGE,
                attribute: "authcid",
            });
        };
        if username.is_empty() || password.is_empty() {
            return Err(SaslError::InvalidAttribute {
                message: MESSAGE,
                attribute: "authcid",
            });
        }
        Ok(PlainMessage {
            authorization_id: authorization_id.to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
        })
    }

    /// Encodes the message (client side).
    pub fn encode(&self) -> Vec<u8> {
        format!(
            "{}\0{}\0{}",
            self.authorization_id, self.username, self.password
        )
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let message = PlainMessage {
            authorization_id: String::new(),
            username: "alice".into(),
            password: "secret".into(),
        };
        assert_eq!(PlainMessage::parse(&message.encode()), Ok(message));
        assert!(PlainMessage::parse(b"alice\0secret").is_err());
        assert!(PlainMessage::parse(b"\0alice\0secret\0more").is_err());
        assert!(PlainMessage::parse(b"\0\0secret").is_err());
        assert!(PlainMessage::parse(b"\0alice\0\xff").is_err());
    }
}
