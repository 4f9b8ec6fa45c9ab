//! A client key's SHA-256 digest, as the limits name a client's keys (only digests are kept in
//! memory). Hashing a presented key is the node's (`src/clients/identity.rs`).

use std::fmt;

/// The SHA-256 digest of a client key. `Debug` never prints it (a digest of a short key could
/// be searched for).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyDigest(pub [u8; 32]);

impl fmt::Debug for KeyDigest {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("sha256:***")
    }
}
