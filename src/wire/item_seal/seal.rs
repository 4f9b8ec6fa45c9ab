//! The HMAC seal on an upstream's `encrypted_content` (`qrs1.<connection>.<mac>.<original>`):
//! made for a client and the connection that answered, and checked in constant time by the
//! `hmac` crate. Finds no items in bodies (`json_spans`) and encrypts nothing (`carried`).

use base64::Engine;
use hmac::Mac;

use super::key::{keyed_hmac, SealKey};

/// What starts a sealed `encrypted_content`.
pub const SEAL_PREFIX: &str = "qrs1.";

/// Bytes of the MAC kept in a seal.
const MAC_BYTES: usize = 16;

/// A sealed `encrypted_content`, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The connection that made it; `None` when the seal does not verify (another key,
    /// another client's, or forged).
    pub maker: Option<String>,
    /// The upstream's own content.
    pub original: &'a str,
}

impl SealKey {
    /// The HMAC-SHA-256 of the client, the connection and the content, not yet finalized.
    pub(super) fn item_hmac(
        &self,
        client: &str,
        connection: &str,
        content: &str,
    ) -> hmac::Hmac<sha2::Sha256> {
        keyed_hmac(
            &self.mac,
            &[client.as_bytes(), connection.as_bytes(), content.as_bytes()],
        )
    }

    /// `content` sealed with the connection that made it, for the client it is handed to.
    pub fn seal(&self, client: &str, connection: &str, content: &str) -> String {
        let full = self
            .item_hmac(client, connection, content)
            .finalize()
            .into_bytes();
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{SEAL_PREFIX}{}.{}.{content}",
            engine.encode(connection.as_bytes()),
            engine.encode(&full[..MAC_BYTES]),
        )
    }

    /// What a sealed string holds when `client` sends it; `None` when `text` is not in the
    /// sealed form at all.
    pub fn open<'a>(&self, client: &str, text: &'a str) -> Option<Opened<'a>> {
        let rest = text.strip_prefix(SEAL_PREFIX)?;
        let (connection, rest) = rest.split_once('.')?;
        let (mac, original) = rest.split_once('.')?;
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let connection = engine
            .decode(connection)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        let verified = connection.filter(|connection| {
            // A tag of exactly the kept length: `verify_truncated_left` alone would take a
            // shorter prefix (one byte guessed in 256 tries).
            engine.decode(mac).is_ok_and(|mac| {
                mac.len() == MAC_BYTES
                    && self
                        .item_hmac(client, connection, original)
                        .verify_truncated_left(&mac)
                        .is_ok()
            })
        });
        Some(Opened {
            maker: verified,
            original,
        })
    }
}
