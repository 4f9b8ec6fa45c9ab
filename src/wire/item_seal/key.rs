//! The node's seal keys: the seals' HMAC key and the carried blocks' encryption key, each an
//! HMAC of the node's secret under a label of its own, never printed.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The label the seals' MAC key is derived under from the node's secret.
const MAC_LABEL: &[u8] = b"quotaroute encrypted item seal v2 hmac-sha256 key";

/// The label the carried blocks' encryption key is derived under from the node's secret.
const CIPHER_LABEL: &[u8] = b"quotaroute carried thinking v2 xchacha20poly1305 key";

/// The keys seals are made and checked with, and carried blocks encrypted with: derived from
/// the node's secret, never logged (its `Debug` prints nothing of them).
#[derive(Clone)]
pub struct SealKey {
    /// The seals' HMAC key: HMAC(secret, [`MAC_LABEL`]).
    pub(super) mac: [u8; 32],
    /// The carried blocks' XChaCha20-Poly1305 key: HMAC(secret, [`CIPHER_LABEL`]).
    pub(super) cipher: [u8; 32],
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// The keys of the node's secret (`node::seal_secret`): 32 random bytes of its own, or a
    /// cluster's `server.seal_key`. Nodes that share the secret read each other's seals.
    pub fn from_secret(secret: &[u8]) -> SealKey {
        SealKey {
            mac: keyed_hmac(secret, &[MAC_LABEL])
                .finalize()
                .into_bytes()
                .into(),
            cipher: keyed_hmac(secret, &[CIPHER_LABEL])
                .finalize()
                .into_bytes()
                .into(),
        }
    }
}

/// HMAC-SHA-256 under `key`, fed `parts`, each length-prefixed (so no two lists of parts give
/// the same input); finalized or verified by the caller.
pub(super) fn keyed_hmac(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it, and its error is
    // answered with the empty key only to keep this total.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| <Hmac<Sha256> as Mac>::new(&Default::default()));
    for part in parts {
        mac.update(&(part.len() as u64).to_le_bytes());
        mac.update(part);
    }
    mac
}
