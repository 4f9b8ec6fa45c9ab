//! Client keys as SHA-256 digests (only digests are kept in memory) and the lookup from a
//! presented key to its client, built once per config load.
//!
//! A presented key is hashed, the digest is looked up in a `HashMap` (its timing depends on the
//! digest, which tells nothing about the key's bytes), and the match is confirmed with a
//! constant-time comparison.

use std::collections::HashMap;

use quotaroute_actors::policy::clients::key_digest::KeyDigest;
use sha2::{Digest, Sha256};

/// The digest of `key` as a client sends it.
pub fn digest_of(key: &str) -> KeyDigest {
    KeyDigest(Sha256::digest(key.as_bytes()).into())
}

/// `key_sha256` as written in the config: 64 hex digits, either case.
pub fn parse_hex_digest(text: &str) -> Option<KeyDigest> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        let pair = text.get(index * 2..index * 2 + 2)?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(KeyDigest(digest))
}

/// Digest → index of the client that owns it.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    by_digest: HashMap<KeyDigest, usize>,
}

impl Directory {
    /// `owners[i]` are the digests of client `i`'s keys (validation has refused duplicates;
    /// a duplicate here keeps its first owner).
    pub fn build<'a>(owners: impl IntoIterator<Item = (usize, &'a KeyDigest)>) -> Self {
        let mut by_digest = HashMap::new();
        for (index, digest) in owners {
            by_digest.entry(*digest).or_insert(index);
        }
        Directory { by_digest }
    }

    /// The client owning `key`, if any.
    pub fn lookup(&self, key: &str) -> Option<usize> {
        let presented = digest_of(key);
        let (stored, index) = self.by_digest.get_key_value(&presented)?;
        constant_time_eq::constant_time_eq_32(&stored.0, &presented.0).then_some(*index)
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_found_by_its_digest_only() {
        let a = digest_of("sk-a");
        let b = digest_of("sk-b");
        let directory = Directory::build([(0, &a), (1, &b)]);
        assert_eq!(directory.lookup("sk-a"), Some(0));
        assert_eq!(directory.lookup("sk-b"), Some(1));
        assert_eq!(directory.lookup("sk-c"), None);
        assert_eq!(directory.lookup(""), None);
    }

    #[test]
    fn hex_digests_parse_in_either_case() {
        // sha256("abc")
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(parse_hex_digest(hex), Some(digest_of("abc")));
        assert_eq!(
            parse_hex_digest(&hex.to_uppercase()),
            Some(digest_of("abc"))
        );
        assert_eq!(parse_hex_digest("abc"), None);
        assert_eq!(parse_hex_digest(&"zz".repeat(32)), None);
        assert_eq!(format!("{:?}", digest_of("abc")), "sha256:***");
    }
}
