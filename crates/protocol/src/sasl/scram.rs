//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them:
//! no channel binding (`n,,` or `y,,`), an optional authorization id,
//! extensions after the nonce accepted and ignored.
//!
//! The exchange: client-first `n,,n=user,r=cnonce`; server-first
//! `r=cnonce+snonce,s=salt,i=iterations`; client-final
//! `c=biws,r=cnonce+snonce,p=proof`; server-final `v=signature` (or
//! `e=reason`). The server keeps a [`ScramCredential`] per user and
//! mechanism: salt, iterations, `StoredKey = H(HMAC(SaltedPassword, "Client
//! Key"))` and `ServerKey = HMAC(SaltedPassword, "Server Key")`.

use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};

use super::{utf8, SaslError};

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// Every mechanism, in Kafka's order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];
    /// The fewest iterations Kafka accepts.
    pub const MIN_ITERATIONS: u32 = 4096;
    /// The most iterations Kafka accepts.
    pub const MAX_ITERATIONS: u32 = 16384;

    /// The SASL name, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a SASL name.
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|mechanism| mechanism.name() == name)
    }

    /// Kafka's code in AlterUserScramCredentials / DescribeUserScramCredentials
    /// (1 for SHA-256, 2 for SHA-512).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a Kafka code.
    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|mechanism| mechanism.code() == code)
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// The length of the hash in bytes.
    pub fn hash_bytes(self) -> usize {
        self.digest_algorithm().output_len()
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), data)
            .as_ref()
            .to_vec()
    }

    /// `Hi(password, salt, iterations)`: the salted password.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let mut salted = vec![0; self.hash_bytes()];
        pbkdf2::derive(
            self.pbkdf2_algorithm(),
            iterations,
            salt,
            password.as_bytes(),
            &mut salted,
        );
        salted
    }
}

/// What the server stores for one user and mechanism: never the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(ClientKey)`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count.
    pub iterations: u32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of a password; `iterations` must be in
    /// [`ScramMechanism::MIN_ITERATIONS`]`..=`[`ScramMechanism::MAX_ITERATIONS`].
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, SaslError> {
        let count = checked_iterations(iterations)?;
        let salted = mechanism.salted_password(password, salt, count);
        Ok(ScramCredential::from_salted_password(
            mechanism, &salted, salt, iterations,
        ))
    }
}

fn checked_iterations(iterations: u32) -> Result<NonZeroU32, SaslError> {
    let range = ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS;
    match NonZeroU32::new(iterations) {
        Some(count) if range.contains(&iterations) => Ok(count),
        _ => Err(SaslError::Iterations {
            iterations,
            min: ScramMechanism::MIN_ITERATIONS,
            max: ScramMechanism::MAX_ITERATIONS,
        }),
    }
}

/// The client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The GS2 header (`n,,` or `n,a=id,`), echoed in client-final's `c=`.
    pub gs2_header: String,
    /// The authorization id, if given.
    pub authorization_id: Option<String>,
    /// The user name, unescaped.
    pub username: String,
    /// The client's nonce.
    pub nonce: String,
    /// The message without the GS2 header (part of the AuthMessage).
    pub bare: String,
}

const CLIENT_FIRST: &str = "client-first";
const SERVER_FIRST: &str = "server-first";
const CLIENT_FINAL: &str = "client-final";
const SERVER_FINAL: &str = "server-final";

impl ClientFirst {
    /// Parses a client-first message.
    pub fn parse(bytes: &[u8]) -> Result<ClientFirst, SaslError> {
        let text = utf8(CLIENT_FIRST, bytes)?;
        let (flag, rest) = text.split_once(',').ok_or(SaslError::MissingAttribute {
            message: CLIENT_FIRST,
            attribute: "gs2-header",
        })?;
        match flag {
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(SaslError::ChannelBindingUnsupported),
            _ => {
                return Err(SaslError::InvalidAttribute {
                    message: CLIENT_FIRST,
                    attribute: "gs2-cbind-flag",
                })
            }
        }
        let (authzid, bare) = rest.split_once(',').ok_or(SaslError::MissingAttribute {
            message: CLIENT_FIRST,
            attribute: "gs2-header",
        })?;
        let authorization_id = match authzid {
            "" => None,
            _ => Some(decode_name(
                CLIENT_FIRST,
                "a",
                attribute(CLIENT_FIRST, "a", authzid)?,
            )?),
        };
        let mut attributes = bare.split(',');
        let username = next_attribute(CLIENT_FIRST, "n", &mut attributes)?;
        let nonce = next_attribute(CLIENT_FIRST, "r", &mut attributes)?;
        if attributes.any(|extension| extension.starts_with("m=")) {
            return Err(SaslError::InvalidAttribute {
                message: CLIENT_FIRST,
                attribute: "m",
            });
        }
        check_nonce(CLIENT_FIRST, nonce)?;
        Ok(ClientFirst {
            gs2_header: text[..text.len() - bare.len()].to_owned(),
            authorization_id,
            username: decode_name(CLIENT_FIRST, "n", username)?,
            nonce: nonce.to_owned(),
            bare: bare.to_owned(),
        })
    }
}

/// The server-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFirst {
    /// The client's nonce followed by the server's.
    pub nonce: String,
    /// The user's salt.
    pub salt: Vec<u8>,
    /// The iteration count.
    pub iterations: u32,
}

impl ServerFirst {
    /// Encodes the message.
    pub fn encode(&self) -> String {
        format!(
            "r={},s={},i={}",
            self.nonce,
            BASE64.encode(&self.salt),
            self.iterations
        )
    }

    /// Parses a server-first message (client side).
    pub fn parse(bytes: &[u8]) -> Result<ServerFirst, SaslError> {
        let text = utf8(SERVER_FIRST, bytes)?;
        let mut attributes = text.split(',');
        let first = attributes.next().unwrap_or_default();
        if let Ok(reason) = attribute(SERVER_FIRST, "e", first) {
            return Err(SaslError::ServerError {
                reason: reason.to_owned(),
            });
        }
        let nonce = attribute(SERVER_FIRST, "r", first)?;
        check_nonce(SERVER_FIRST, nonce)?;
        let salt = next_attribute(SERVER_FIRST, "s", &mut attributes)?;
        let iterations = next_attribute(SERVER_FIRST, "i", &mut attributes)?;
        Ok(ServerFirst {
            nonce: nonce.to_owned(),
            salt: decode_base64(SERVER_FIRST, "s", salt)?,
            iterations: iterations
                .parse()
                .map_err(|_| SaslError::InvalidAttribute {
                    message: SERVER_FIRST,
                    attribute: "i",
                })?,
        })
    }
}

/// The client-final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The channel binding attribute, decoded (the GS2 header again).
    pub channel_binding: Vec<u8>,
    /// The combined nonce.
    pub nonce: String,
    /// The client's proof.
    pub proof: Vec<u8>,
    /// The message up to (not including) `,p=` (part of the AuthMessage).
    pub without_proof: String,
}

impl ClientFinal {
    /// Parses a client-final message.
    pub fn parse(bytes: &[u8]) -> Result<ClientFinal, SaslError> {
        let text = utf8(CLIENT_FINAL, bytes)?;
        let (without_proof, proof) =
            text.rsplit_once(",p=").ok_or(SaslError::MissingAttribute {
                message: CLIENT_FINAL,
                attribute: "p",
            })?;
        let mut attributes = without_proof.split(',');
        let channel_binding = next_attribute(CLIENT_FINAL, "c", &mut attributes)?;
        let nonce = next_attribute(CLIENT_FINAL, "r", &mut attributes)?;
        check_nonce(CLIENT_FINAL, nonce)?;
        Ok(ClientFinal {
            channel_binding: decode_base64(CLIENT_FINAL, "c", channel_binding)?,
            nonce: nonce.to_owned(),
            proof: decode_base64(CLIENT_FINAL, "p", proof)?,
            without_proof: without_proof.to_owned(),
        })
    }
}

/// The server-final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerFinal {
    /// `v=`: the server's signature.
    Verifier(Vec<u8>),
    /// `e=`: the server's error.
    Error(String),
}

impl ServerFinal {
    /// Encodes the message.
    pub fn encode(&self) -> String {
        match self {
            ServerFinal::Verifier(signature) => format!("v={}", BASE64.encode(signature)),
            ServerFinal::Error(reason) => format!("e={reason}"),
        }
    }

    /// Parses a server-final message (client side).
    pub fn parse(bytes: &[u8]) -> Result<ServerFinal, SaslError> {
        let text = utf8(SERVER_FINAL, bytes)?;
        let first = text.split(',').next().unwrap_or_default();
        if let Ok(reason) = attribute(SERVER_FINAL, "e", first) {
            return Ok(ServerFinal::Error(reason.to_owned()));
        }
        let signature = attribute(SERVER_FINAL, "v", first)?;
        Ok(ServerFinal::Verifier(decode_base64(
            SERVER_FINAL,
            "v",
            signature,
        )?))
    }
}

/// The AuthMessage both sides sign.
fn auth_message(client_first_bare: &str, server_first: &str, client_final: &str) -> Vec<u8> {
    format!("{client_first_bare},{server_first},{client_final}").into_bytes()
}

fn xor(left: &[u8], right: &[u8]) -> Vec<u8> {
    left.iter().zip(right).map(|(a, b)| a ^ b).collect()
}

/// Equality in time independent of where the inputs differ.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

fn attribute<'a>(
    message: &'static str,
    name: &'static str,
    item: &'a str,
) -> Result<&'a str, SaslError> {
    item.strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or(SaslError::MissingAttribute {
            message,
            attribute: name,
        })
}

fn next_attribute<'a>(
    message: &'static str,
    name: &'static str,
    attributes: &mut impl Iterator<Item = &'a str>,
) -> Result<&'a str, SaslError> {
    attribute(message, name, attributes.next().unwrap_or_default())
}

fn check_nonce(message: &'static str, nonce: &str) -> Result<(), SaslError> {
    if nonce.is_empty() || !nonce.bytes().all(|byte| (0x21..=0x7e).contains(&byte)) {
        return Err(SaslError::InvalidAttribute {
            message,
            attribute: "r",
        });
    }
    Ok(())
}

fn decode_base64(
    message: &'static str,
    name: &'static str,
    text: &str,
) -> Result<Vec<u8>, SaslError> {
    BASE64
        .decode(text)
        .map_err(|_| SaslError::InvalidAttribute {
            message,
            attribute: name,
        })
}

/// Undoes SASLname escaping (`=2C` is `,`, `=3D` is `=`).
fn decode_name(message: &'static str, name: &'static str, text: &str) -> Result<String, SaslError> {
    let invalid = SaslError::InvalidAttribute {
        message,
        attribute: name,
    };
    let mut decoded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find('=') {
        decoded.push_str(&rest[..position]);
        let escape = rest.get(position..position + 3).ok_or(invalid.clone())?;
        match escape {
            "=2C" => decoded.push(','),
            "=3D" => decoded.push('='),
            _ => return Err(invalid),
        }
        rest = &rest[position + 3..];
    }
    decoded.push_str(rest);
    if decoded.is_empty() {
        return Err(invalid);
    }
    Ok(decoded)
}

/// Applies SASLname escaping.
fn encode_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Where a server-side exchange stands.
#[derive(Debug)]
enum ServerState {
    AwaitingClientFirst,
    AwaitingClientFinal(Box<Exchange>),
    Complete,
}

/// What the server keeps between client-first and client-final.
#[derive(Debug)]
struct Exchange {
    client_first: ClientFirst,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

/// What the server sends after a client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// Send this (server-first) and wait for client-final.
    Continue(Vec<u8>),
    /// The client is authenticated as `username`: send this (server-final).
    Authenticated {
        /// The server-final message.
        response: Vec<u8>,
        /// The authenticated user.
        username: String,
    },
}

/// The server side of one SCRAM exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    server_nonce: String,
    state: ServerState,
}

impl ScramServer {
    /// A new exchange; `server_nonce` must be fresh random printable ASCII
    /// without commas (base64 of 18 or more random bytes, say).
    pub fn new(mechanism: ScramMechanism, server_nonce: String) -> ScramServer {
        ScramServer {
            mechanism,
            server_nonce,
            state: ServerState::AwaitingClientFirst,
        }
    }

    /// The mechanism of the exchange.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the next client message; `lookup` finds a user's credential
    /// for this mechanism. Any error ends the exchange.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ServerStep, SaslError> {
        match std::mem::replace(&mut self.state, ServerState::Complete) {
            ServerState::AwaitingClientFirst => self.client_first(message, lookup),
            ServerState::AwaitingClientFinal(exchange) => self.client_final(message, &exchange),
            ServerState::Complete => Err(SaslError::ExchangeComplete),
        }
    }

    fn client_first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ServerStep, SaslError> {
        let client_first = ClientFirst::parse(message)?;
        if client_first
            .authorization_id
            .as_ref()
            .is_some_and(|id| *id != client_first.username)
        {
            return Err(SaslError::InvalidCredentials);
        }
        let credential = lookup(&client_first.username).ok_or(SaslError::InvalidCredentials)?;
        let nonce = format!("{}{}", client_first.nonce, self.server_nonce);
        let server_first = ServerFirst {
            nonce: nonce.clone(),
            salt: credential.salt.clone(),
            iterations: credential.iterations,
        }
        .encode();
        let response = server_first.clone().into_bytes();
        self.state = ServerState::AwaitingClientFinal(Box::new(Exchange {
            client_first,
            server_first,
            nonce,
            credential,
        }));
        Ok(ServerStep::Continue(response))
    }

    fn client_final(&self, message: &[u8], exchange: &Exchange) -> Result<ServerStep, SaslError> {
        let Exchange {
            client_first,
            server_first,
            nonce,
            credential,
        } = exchange;
        let client_final = ClientFinal::parse(message)?;
        if client_final.nonce != *nonce {
            return Err(SaslError::NonceMismatch);
        }
        if client_final.channel_binding != client_first.gs2_header.as_bytes() {
            return Err(SaslError::InvalidAttribute {
                message: CLIENT_FINAL,
                attribute: "c",
            });
        }
        let auth = auth_message(
            &client_first.bare,
            server_first,
            &client_final.without_proof,
        );
        let signature = self.mechanism.hmac(&credential.stored_key, &auth);
        if client_final.proof.len() != signature.len() {
            return Err(SaslError::InvalidCredentials);
        }
        let client_key = xor(&client_final.proof, &signature);
        if !constant_time_eq(&self.mechanism.hash(&client_key), &credential.stored_key) {
            return Err(SaslError::InvalidCredentials);
        }
        let server_signature = self.mechanism.hmac(&credential.server_key, &auth);
        Ok(ServerStep::Authenticated {
            response: ServerFinal::Verifier(server_signature)
                .encode()
                .into_bytes(),
            username: client_first.username.clone(),
        })
    }
}

/// The client side of one SCRAM exchange.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange; `client_nonce` must be fresh random printable
    /// ASCII without commas. Returns the client and its client-first
    /// message.
    pub fn start(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        client_nonce: &str,
    ) -> (ScramClient, Vec<u8>) {
        let client_first_bare = format!("n={},r={client_nonce}", encode_name(username));
        let message = format!("n,,{client_first_bare}").into_bytes();
        let client = ScramClient {
            mechanism,
            password: password.to_owned(),
            client_first_bare,
            client_nonce: client_nonce.to_owned(),
            expected_server_signature: None,
        };
        (client, message)
    }

    /// Takes server-first and returns client-final.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, SaslError> {
        let parsed = ServerFirst::parse(server_first)?;
        if !parsed.nonce.starts_with(&self.client_nonce) || parsed.nonce == self.client_nonce {
            return Err(SaslError::NonceMismatch);
        }
        let iterations = checked_iterations(parsed.iterations)?;
        let salted = self
            .mechanism
            .salted_password(&self.password, &parsed.salt, iterations);
        let without_proof = format!("c={},r={}", BASE64.encode("n,,"), parsed.nonce);
        let server_first_text = std::str::from_utf8(server_first).unwrap_or_default();
        let auth = auth_message(&self.client_first_bare, server_first_text, &without_proof);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let signature = self.mechanism.hmac(&stored_key, &auth);
        let proof = xor(&client_key, &signature);
        let server_key = self.mechanism.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(self.mechanism.hmac(&server_key, &auth));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks server-final.
    pub fn finish(&self, server_final: &[u8]) -> Result<(), SaslError> {
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or(SaslError::InvalidServerSignature)?;
        match ServerFinal::parse(server_final)? {
            ServerFinal::Verifier(signature) if constant_time_eq(&signature, expected) => Ok(()),
            ServerFinal::Verifier(_) => Err(SaslError::InvalidServerSignature),
            ServerFinal::Error(reason) => Err(SaslError::ServerError { reason }),
        }
    }
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
