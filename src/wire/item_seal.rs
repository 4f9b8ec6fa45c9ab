//! The router's seal on encrypted items (behaviour §10 "Encrypted items"): every
//! `encrypted_content` an upstream hands out through the router is given back to the client as
//! `qrs1.<connection>.<mac>.<original>`, so a later request that carries it names the connection
//! (account) that made it — no table to look up or lose, the same on every node of a cluster and
//! after a restart. The MAC (HMAC-SHA-256, truncated to 128 bits) binds the connection to the
//! original content under a key derived from the node's config, so a client cannot steer a
//! request by forging a seal; an item whose seal does not verify is still restored to the
//! upstream's own bytes, only without a known maker.
//!
//! Owns the key, the sealed form and the byte-level search for `encrypted_content` strings in
//! JSON text; what a request does with its items is `encrypted_items`'.

use std::borrow::Cow;

use base64::Engine;
use memchr::memmem;
use sha2::{Digest, Sha256};

/// What starts a sealed `encrypted_content`.
pub const SEAL_PREFIX: &str = "qrs1.";

/// Bytes of the MAC kept in a seal.
const MAC_BYTES: usize = 16;

/// The longest connection id a seal carries (config ids are short; a longer one is not sealed).
const MAX_CONNECTION_BYTES: usize = 256;

const FIELD: &[u8] = b"\"encrypted_content\"";

/// The key seals are made and checked with: derived once per config load from the node's
/// secrets, never logged (its `Debug` prints nothing of it).
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// The key derived from `secrets` (the admin key, else the clients' key digests): nodes of a
    /// cluster share their config, so they share the key; a restart keeps it.
    pub fn derive<'a>(secrets: impl IntoIterator<Item = &'a [u8]>) -> SealKey {
        let mut hasher = Sha256::new();
        hasher.update(b"quotaroute encrypted item seal v1");
        for secret in secrets {
            hasher.update((secret.len() as u64).to_le_bytes());
            hasher.update(secret);
        }
        SealKey(hasher.finalize().into())
    }

    /// HMAC-SHA-256 (RFC 2104) of `connection` and `content`, each length-prefixed.
    fn mac(&self, connection: &str, content: &str) -> [u8; MAC_BYTES] {
        let mut inner_pad = [0x36u8; 64];
        let mut outer_pad = [0x5cu8; 64];
        for (at, byte) in self.0.iter().enumerate() {
            inner_pad[at] ^= byte;
            outer_pad[at] ^= byte;
        }
        let inner = Sha256::new()
            .chain_update(inner_pad)
            .chain_update((connection.len() as u64).to_le_bytes())
            .chain_update(connection.as_bytes())
            .chain_update(content.as_bytes())
            .finalize();
        let outer = Sha256::new()
            .chain_update(outer_pad)
            .chain_update(inner)
            .finalize();
        let mut mac = [0u8; MAC_BYTES];
        mac.copy_from_slice(&outer[..MAC_BYTES]);
        mac
    }

    /// `content` sealed with the connection that made it.
    pub fn seal(&self, connection: &str, content: &str) -> String {
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{SEAL_PREFIX}{}.{}.{content}",
            engine.encode(connection.as_bytes()),
            engine.encode(self.mac(connection, content)),
        )
    }

    /// What a sealed string holds; `None` when `text` is not in the sealed form at all.
    pub fn open<'a>(&self, text: &'a str) -> Option<Opened<'a>> {
        let rest = text.strip_prefix(SEAL_PREFIX)?;
        let (connection, rest) = rest.split_once('.')?;
        let (mac, original) = rest.split_once('.')?;
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let connection = engine
            .decode(connection)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        let verified = connection.filter(|connection| {
            engine
                .decode(mac)
                .is_ok_and(|mac| constant_time_eq(&mac, &self.mac(connection, original)))
        });
        Some(Opened {
            maker: verified,
            original,
        })
    }
}

/// A sealed `encrypted_content`, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The connection that made it; `None` when the seal does not verify (another key, or
    /// forged).
    pub maker: Option<String>,
    /// The upstream's own content.
    pub original: &'a str,
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One `"encrypted_content": "<string>"` in JSON text: the byte span of the string token
/// (quotes included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentSpan {
    pub start: usize,
    pub end: usize,
}

impl ContentSpan {
    /// The string's value (escapes undone); `None` when it is not a valid JSON string.
    pub fn value<'a>(&self, text: &'a [u8]) -> Option<Cow<'a, str>> {
        let token = &text[self.start..self.end];
        let inner = &token[1..token.len() - 1];
        if !inner.contains(&b'\\') {
            return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
        }
        serde_json::from_slice::<String>(token).ok().map(Cow::Owned)
    }
}

/// Every `"encrypted_content"` key in `text` whose value is a string, in order. A match inside
/// another string (its quote escaped) or followed by anything but `: "…"` is skipped.
pub fn content_spans(text: &[u8]) -> Vec<ContentSpan> {
    let mut spans = Vec::new();
    for at in memmem::find_iter(text, FIELD) {
        if at > 0 && text[at - 1] == b'\\' {
            continue;
        }
        let mut i = at + FIELD.len();
        while text.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
            i += 1;
        }
        if text.get(i) != Some(&b':') {
            continue;
        }
        i += 1;
        while text.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
            i += 1;
        }
        if text.get(i) != Some(&b'"') {
            continue;
        }
        let start = i;
        i += 1;
        let mut closed = None;
        while let Some(&byte) = text.get(i) {
            match byte {
                b'\\' => i += 2,
                b'"' => {
                    closed = Some(i + 1);
                    break;
                }
                _ => i += 1,
            }
        }
        if let Some(end) = closed {
            spans.push(ContentSpan { start, end });
        }
    }
    spans
}

/// `text` (a JSON body or one SSE event) with every `encrypted_content` string sealed for
/// `connection`; borrowed when it holds none (or none that is not sealed already).
pub fn seal_all<'a>(text: &'a [u8], key: &SealKey, connection: &str) -> Cow<'a, [u8]> {
    if connection.len() > MAX_CONNECTION_BYTES || memmem::find(text, FIELD).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    for span in content_spans(text) {
        let Some(value) = span.value(text) else {
            continue;
        };
        if value.starts_with(SEAL_PREFIX) {
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(text.len() + 128));
        out.extend_from_slice(&text[copied_to..span.start]);
        write_json_string(out, &key.seal(connection, &value));
        copied_to = span.end;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.extend_from_slice(&text[copied_to..]);
            Cow::Owned(out)
        }
    }
}

/// What seals one answer's items: the key and the connection that answered.
#[derive(Debug, Clone)]
pub struct ItemSealer {
    key: SealKey,
    connection: std::sync::Arc<str>,
}

impl ItemSealer {
    pub fn new(key: SealKey, connection: std::sync::Arc<str>) -> ItemSealer {
        ItemSealer { key, connection }
    }

    /// [`seal_all`] for this answer.
    pub fn seal<'a>(&self, text: &'a [u8]) -> Cow<'a, [u8]> {
        seal_all(text, &self.key, &self.connection)
    }
}

/// Appends `text` as a quoted JSON string.
pub fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a `&str` into a Vec cannot fail; the fallback only keeps this total.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealKey {
        SealKey::derive([b"admin-key".as_slice()])
    }

    #[test]
    fn s10_a_seal_names_its_connection_and_keeps_the_original() {
        let sealed = key().seal("oa-2", "gAAAAAbc==");
        assert!(sealed.starts_with(SEAL_PREFIX));
        assert!(sealed.ends_with(".gAAAAAbc=="));
        let opened = key().open(&sealed).unwrap();
        assert_eq!(opened.maker.as_deref(), Some("oa-2"));
        assert_eq!(opened.original, "gAAAAAbc==");
        assert_eq!(key().open("gAAAAAbc=="), None);
    }

    #[test]
    fn s10_a_seal_from_another_key_or_forged_names_no_maker() {
        let sealed = key().seal("oa-2", "gAAAAAbc");
        let other = SealKey::derive([b"another".as_slice()]);
        let opened = other.open(&sealed).unwrap();
        assert_eq!(opened.maker, None);
        assert_eq!(opened.original, "gAAAAAbc");
        // The connection swapped for another: the MAC no longer matches.
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forged = sealed.replacen(&engine.encode("oa-2"), &engine.encode("oa-1"), 1);
        assert_eq!(key().open(&forged).unwrap().maker, None);
        assert!(!format!("{:?}", key()).contains("admin"));
    }

    #[test]
    fn s10_seal_all_rewrites_only_the_encrypted_strings() {
        let body = br#"{"output":[{"type":"reasoning","id":"rs_1","encrypted_content" : "gAAA\/1"},{"type":"message","content":[{"text":"say \"encrypted_content\": \"x\""}]}],"n":1}"#;
        let sealed = seal_all(body, &key(), "oa-1");
        let text = std::str::from_utf8(&sealed).unwrap();
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let content = value["output"][0]["encrypted_content"].as_str().unwrap();
        let opened = key().open(content).unwrap();
        assert_eq!(opened.maker.as_deref(), Some("oa-1"));
        assert_eq!(opened.original, "gAAA/1");
        assert_eq!(
            value["output"][1]["content"][0]["text"],
            "say \"encrypted_content\": \"x\""
        );
        assert!(text.ends_with(r#""n":1}"#));
        // Sealing twice changes nothing; no field, no copy.
        assert_eq!(seal_all(&sealed, &key(), "oa-1"), sealed);
        assert!(matches!(
            seal_all(b"{\"a\":1}", &key(), "oa-1"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn s10_null_and_unterminated_contents_are_left_alone() {
        let body = br#"{"encrypted_content":null,"x":{"encrypted_content":"abc"#;
        assert_eq!(content_spans(body), Vec::new());
        assert!(matches!(seal_all(body, &key(), "oa-1"), Cow::Borrowed(_)));
    }
}
