//! SCRAM nonces, drawn in one place: the broker's server nonces and the
//! client nonces of every login (Strom's clients and the broker's own
//! connections to its peers).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};

/// Random bytes in a nonce (RFC 5802 asks for a sequence of random
/// printable characters; 24 bytes give 32 characters).
const NONCE_BYTES: usize = 24;

/// A fresh nonce: 24 random bytes in base64 (printable, no commas);
/// `None` if the system's generator fails (an exchange must not go on
/// with a predictable nonce).
pub fn scram_nonce() -> Option<String> {
    let mut bytes = [0u8; NONCE_BYTES];
    SystemRandom::new().fill(&mut bytes).ok()?;
    Some(BASE64.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_fresh_printable_and_without_commas() {
        let first = scram_nonce().expect("a nonce");
        let second = scram_nonce().expect("a nonce");
        assert_ne!(first, second);
        assert_eq!(first.len(), 32);
        assert!(first.chars().all(|c| c.is_ascii_graphic() && c != ','));
    }
}
