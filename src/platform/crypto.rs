//! Secrets at rest (LightRAG and, next, LLM API keys): XChaCha20-Poly1305 under the server's
//! [`MasterKey`], which lives in config (`MNOTE_SECRET_KEY` or the key file `./dev` generates
//! in the data dir), never in the database. A sealed value is `nonce(24) ‖ ciphertext+tag`;
//! the associated data names the row and purpose it belongs to, so a ciphertext copied to
//! another row does not open.

use chacha20poly1305::{
    KeyInit, XChaCha20Poly1305, XNonce,
    aead::{Aead, Payload},
};

const NONCE_LEN: usize = 24;

/// The 32-byte key secrets are sealed with. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterKey([u8; 32]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("the secret key must be 32 bytes, as 64 hex digits or base64")]
    BadKey,
    #[error("the stored secret cannot be opened with this server's key (wrong key, or the value was moved or altered)")]
    Unseal,
}

impl MasterKey {
    /// 64 hex digits, or base64 of 32 bytes (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Self, CryptoError> {
        use base64::Engine as _;
        let t = text.trim();
        let bytes = if t.len() == 64 && t.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(t).map_err(|_| CryptoError::BadKey)?
        } else {
            base64::engine::general_purpose::STANDARD.decode(t).map_err(|_| CryptoError::BadKey)?
        };
        let key: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::BadKey)?;
        Ok(MasterKey(key))
    }

    /// A fresh random key.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source");
        MasterKey(key)
    }

    /// The key as 64 hex digits (for writing a key file).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new_from_slice(&self.0).expect("32-byte key")
    }

    /// Encrypt `plaintext` bound to `aad`.
    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source");
        let nonce = XNonce::from(nonce);
        let ct = self.cipher().encrypt(&nonce, Payload { msg: plaintext, aad }).expect("encryption does not fail");
        let mut out = Vec::with_capacity(NONCE_LEN + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// Decrypt what [`MasterKey::seal`] produced with the same `aad`.
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < NONCE_LEN + 16 {
            return Err(CryptoError::Unseal);
        }
        let nonce = XNonce::try_from(&sealed[..NONCE_LEN]).map_err(|_| CryptoError::Unseal)?;
        self.cipher().decrypt(&nonce, Payload { msg: &sealed[NONCE_LEN..], aad }).map_err(|_| CryptoError::Unseal)
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_the_same_key_and_associated_data() {
        let k = MasterKey::generate();
        let sealed = k.seal(b"sk-lightrag", b"mnote:kb:1:lightrag_api_key:v1");
        assert!(!sealed.windows(11).any(|w| w == b"sk-lightrag"), "the ciphertext holds no plaintext");
        assert_eq!(k.open(&sealed, b"mnote:kb:1:lightrag_api_key:v1").unwrap(), b"sk-lightrag");
        assert_eq!(k.open(&sealed, b"mnote:kb:2:lightrag_api_key:v1"), Err(CryptoError::Unseal));
        assert_eq!(MasterKey::generate().open(&sealed, b"mnote:kb:1:lightrag_api_key:v1"), Err(CryptoError::Unseal));
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(k.open(&tampered, b"mnote:kb:1:lightrag_api_key:v1"), Err(CryptoError::Unseal));
        assert_eq!(k.open(&sealed[..10], b"x"), Err(CryptoError::Unseal));
        assert_ne!(k.seal(b"a", b""), k.seal(b"a", b""), "a fresh nonce each time");
    }

    #[test]
    fn keys_parse_from_hex_or_base64_and_never_print() {
        let k = MasterKey::generate();
        assert_eq!(MasterKey::parse(&format!(" {}\n", k.to_hex())).unwrap(), k);
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(MasterKey::parse(&b64).unwrap(), MasterKey([7u8; 32]));
        assert_eq!(MasterKey::parse("abcd"), Err(CryptoError::BadKey));
        assert_eq!(format!("{k:?}"), "MasterKey([redacted])");
    }
}
