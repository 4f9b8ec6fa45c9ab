//! The AEAD carrier of a thinking block the router itself carries (`qrt1.<connection>.<nonce>.
//! <ciphertext>`): XChaCha20-Poly1305 under the node's cipher key, a fresh random nonce from
//! the OS per seal, the client and the connection as associated data. Knows nothing of JSON.

use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::key::SealKey;

/// What starts an encrypted carried thinking block.
pub const CARRIED_PREFIX: &str = "qrt1.";

/// What starts a carried thinking block's plain form (base64url of the block's JSON), as the
/// translation writes it; the node encrypts it before it leaves (`seal_all`).
pub const CARRIED_PLAIN_PREFIX: &str = "qrthink1.";

/// Bytes of an XChaCha20 nonce.
const NONCE_BYTES: usize = 24;

/// Bytes of a Poly1305 tag.
const TAG_BYTES: usize = 16;

/// A carried block, opened: the connection it was encrypted for and its plaintext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub connection: String,
    pub plaintext: Vec<u8>,
}

/// The associated data a carried block is encrypted with: the form, the client it is handed
/// to and the connection, each length-prefixed.
fn carried_aad(client: &str, connection: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(CARRIED_PREFIX.len() + 16 + client.len() + connection.len());
    aad.extend_from_slice(CARRIED_PREFIX.as_bytes());
    for part in [client, connection] {
        aad.extend_from_slice(&(part.len() as u64).to_le_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

impl SealKey {
    /// `plaintext` encrypted for `connection`, to be handed to `client`
    /// (`qrt1.<connection>.<nonce>.<ciphertext>`), a fresh random nonce each time; `None` only
    /// if the cipher refuses it (never for a body's size).
    pub fn seal_carried(&self, client: &str, connection: &str, plaintext: &[u8]) -> Option<String> {
        let cipher = XChaCha20Poly1305::new((&self.cipher).into());
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = carried_aad(client, connection);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .ok()?;
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        Some(format!(
            "{CARRIED_PREFIX}{}.{}.{}",
            engine.encode(connection.as_bytes()),
            engine.encode(nonce),
            engine.encode(sealed),
        ))
    }

    /// What an encrypted carried block holds and the connection it was made for, when `client`
    /// sends it; `None` when `text` is not one or does not open (altered, truncated, another
    /// key, another connection's tag, another client's): such an item is left out.
    pub fn open_carried(&self, client: &str, text: &str) -> Option<Carried> {
        let rest = text.strip_prefix(CARRIED_PREFIX)?;
        let mut parts = rest.split('.');
        let (connection, nonce, sealed) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let connection = String::from_utf8(engine.decode(connection).ok()?).ok()?;
        let nonce = engine.decode(nonce).ok()?;
        let sealed = engine.decode(sealed).ok()?;
        if nonce.len() != NONCE_BYTES || sealed.len() < TAG_BYTES {
            return None;
        }
        let cipher = XChaCha20Poly1305::new((&self.cipher).into());
        let plaintext = cipher
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: &carried_aad(client, &connection),
                },
            )
            .ok()?;
        Some(Carried {
            connection,
            plaintext,
        })
    }
}
