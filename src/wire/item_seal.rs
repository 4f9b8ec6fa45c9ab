//! The router's seal on encrypted items (behaviour §10 "Encrypted items"): every
//! `encrypted_content` an upstream hands out through the router is given back to the client as
//! `qrs1.<connection>.<mac>.<original>`, so a later request that carries it names the connection
//! (account) that made it — no table to look up or lose, the same on every node of a cluster and
//! after a restart. The MAC (HMAC-SHA-256, truncated to 128 bits) binds the connection and the
//! client the item was handed to (behaviour §11) to the original content, under the node's own
//! secret (`node::seal_secret`: generated once, or `server.seal_key` for a cluster; never
//! derived from anything a client knows), so a client can neither steer a request by forging a
//! seal nor use another client's: an item whose seal does not verify is unreadable, and left
//! out like any item no target can read.
//!
//! A thinking block the router itself carries for a Responses client (behaviour §14,
//! `translate::thinking_carry`) is not merely sealed but encrypted: in a translated answer its
//! plain form (`qrthink1.…`) leaves as `qrt1.<connection>.<nonce>.<ciphertext>`,
//! XChaCha20-Poly1305 under a key of its own (an HMAC of the node's secret under another label,
//! so the MAC key and the encryption key differ), a random 192-bit nonce per seal, and the
//! client and the connection as associated data: the client reads neither the text nor the
//! signature, and a blob re-tagged with another connection, replayed by another client,
//! truncated or altered does not open.
//!
//! Owns the keys, the sealed and encrypted forms and the byte-level search for
//! `encrypted_content` strings in JSON text; what a request does with its items is
//! `encrypted_items`'.

use std::borrow::Cow;

use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use memchr::memmem;
use sha2::Sha256;

/// What starts a sealed `encrypted_content`.
pub const SEAL_PREFIX: &str = "qrs1.";

/// What starts an encrypted carried thinking block.
pub const CARRIED_PREFIX: &str = "qrt1.";

/// What starts a carried thinking block's plain form (base64url of the block's JSON), as the
/// translation writes it; the node encrypts it before it leaves (`seal_all`).
pub const CARRIED_PLAIN_PREFIX: &str = "qrthink1.";

/// Bytes of an XChaCha20 nonce.
const NONCE_BYTES: usize = 24;

/// Bytes of a Poly1305 tag.
const TAG_BYTES: usize = 16;

/// Bytes of the MAC kept in a seal.
const MAC_BYTES: usize = 16;

/// The longest connection id a seal carries (config ids are short; a longer one is not sealed).
const MAX_CONNECTION_BYTES: usize = 256;

/// The label the seals' MAC key is derived under from the node's secret.
const MAC_LABEL: &[u8] = b"quotaroute encrypted item seal v2 hmac-sha256 key";

/// The label the carried blocks' encryption key is derived under from the node's secret.
const CIPHER_LABEL: &[u8] = b"quotaroute carried thinking v2 xchacha20poly1305 key";

const FIELD: &[u8] = b"\"encrypted_content\"";

/// The keys seals are made and checked with, and carried blocks encrypted with: derived from
/// the node's secret, never logged (its `Debug` prints nothing of them).
#[derive(Clone)]
pub struct SealKey {
    /// The seals' HMAC key: HMAC(secret, [`MAC_LABEL`]).
    mac: [u8; 32],
    /// The carried blocks' XChaCha20-Poly1305 key: HMAC(secret, [`CIPHER_LABEL`]).
    cipher: [u8; 32],
}

/// A carried block, opened: the connection it was encrypted for and its plaintext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub connection: String,
    pub plaintext: Vec<u8>,
}

/// HMAC-SHA-256 of `parts`, each length-prefixed (so no two lists of parts give the same
/// input), under `key`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return [0; 32];
    };
    for part in parts {
        mac.update(&(part.len() as u64).to_le_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
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
            mac: hmac_sha256(secret, &[MAC_LABEL]),
            cipher: hmac_sha256(secret, &[CIPHER_LABEL]),
        }
    }

    /// HMAC-SHA-256 of the client, the connection and the content, truncated.
    fn mac(&self, client: &str, connection: &str, content: &str) -> [u8; MAC_BYTES] {
        let full = hmac_sha256(
            &self.mac,
            &[client.as_bytes(), connection.as_bytes(), content.as_bytes()],
        );
        let mut mac = [0u8; MAC_BYTES];
        mac.copy_from_slice(&full[..MAC_BYTES]);
        mac
    }

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

    /// `content` sealed with the connection that made it, for the client it is handed to.
    pub fn seal(&self, client: &str, connection: &str, content: &str) -> String {
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{SEAL_PREFIX}{}.{}.{content}",
            engine.encode(connection.as_bytes()),
            engine.encode(self.mac(client, connection, content)),
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
            engine
                .decode(mac)
                .is_ok_and(|mac| constant_time_eq(&mac, &self.mac(client, connection, original)))
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
    /// The connection that made it; `None` when the seal does not verify (another key,
    /// another client's, or forged).
    pub maker: Option<String>,
    /// The upstream's own content.
    pub original: &'a str,
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
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

/// What an answer's `encrypted_content` strings can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Items {
    /// The upstream's own (a same-format answer): each sealed, its bytes kept.
    Upstream,
    /// A translated answer's: a carried thinking block's plain form is encrypted, anything
    /// else sealed.
    Translated,
}

/// Who an answer's items are sealed for: the client it is handed to and the connection that
/// answered.
#[derive(Debug, Clone, Copy)]
pub struct SealedFor<'a> {
    pub client: &'a str,
    pub connection: &'a str,
}

/// `text` (a JSON body or one SSE event) with every `encrypted_content` string sealed for
/// `to`'s client and connection (carried thinking blocks of a translated answer encrypted);
/// borrowed when it holds none (or none that is not sealed already).
pub fn seal_all<'a>(
    text: &'a [u8],
    key: &SealKey,
    to: SealedFor<'_>,
    items: Items,
) -> Cow<'a, [u8]> {
    let SealedFor { client, connection } = to;
    if connection.len() > MAX_CONNECTION_BYTES || memmem::find(text, FIELD).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    for span in content_spans(text) {
        let Some(value) = span.value(text) else {
            continue;
        };
        let translated = items == Items::Translated;
        if value.starts_with(SEAL_PREFIX) || (translated && value.starts_with(CARRIED_PREFIX)) {
            continue;
        }
        let sealed = match value.strip_prefix(CARRIED_PLAIN_PREFIX) {
            // Never in clear: a block that cannot be encrypted leaves empty (and is left out
            // when it comes back).
            Some(plain) if translated => base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(plain)
                .ok()
                .and_then(|plaintext| key.seal_carried(client, connection, &plaintext))
                .unwrap_or_default(),
            _ => key.seal(client, connection, &value),
        };
        let out = out.get_or_insert_with(|| Vec::with_capacity(text.len() + 128));
        out.extend_from_slice(&text[copied_to..span.start]);
        write_json_string(out, &sealed);
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

/// What seals one answer's items: the key, the client it is handed to and the connection that
/// answered.
#[derive(Debug, Clone)]
pub struct ItemSealer {
    key: SealKey,
    client: std::sync::Arc<str>,
    connection: std::sync::Arc<str>,
    items: Items,
}

impl ItemSealer {
    pub fn new(
        key: SealKey,
        client: std::sync::Arc<str>,
        connection: std::sync::Arc<str>,
        items: Items,
    ) -> ItemSealer {
        ItemSealer {
            key,
            client,
            connection,
            items,
        }
    }

    /// [`seal_all`] for this answer.
    pub fn seal<'a>(&self, text: &'a [u8]) -> Cow<'a, [u8]> {
        let to = SealedFor {
            client: &self.client,
            connection: &self.connection,
        };
        seal_all(text, &self.key, to, self.items)
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
    use serde_json::Value;

    fn key() -> SealKey {
        SealKey::from_secret(&[7u8; 32])
    }

    /// The client every test seals for.
    const C: &str = "team-a";

    fn to(connection: &str) -> SealedFor<'_> {
        SealedFor {
            client: C,
            connection,
        }
    }

    #[test]
    fn s10_a_seal_names_its_connection_and_keeps_the_original() {
        let sealed = key().seal(C, "oa-2", "gAAAAAbc==");
        assert!(sealed.starts_with(SEAL_PREFIX));
        assert!(sealed.ends_with(".gAAAAAbc=="));
        let opened = key().open(C, &sealed).unwrap();
        assert_eq!(opened.maker.as_deref(), Some("oa-2"));
        assert_eq!(opened.original, "gAAAAAbc==");
        assert_eq!(key().open(C, "gAAAAAbc=="), None);
    }

    #[test]
    fn s10_a_seal_from_another_key_or_client_or_forged_names_no_maker() {
        let sealed = key().seal(C, "oa-2", "gAAAAAbc");
        let other = SealKey::from_secret(&[8u8; 32]);
        let opened = other.open(C, &sealed).unwrap();
        assert_eq!(opened.maker, None);
        assert_eq!(opened.original, "gAAAAAbc");
        // Sent by another client (behaviour §11): it does not open.
        assert_eq!(key().open("team-b", &sealed).unwrap().maker, None);
        assert_eq!(key().open("", &sealed).unwrap().maker, None);
        // The connection swapped for another: the MAC no longer matches.
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forged = sealed.replacen(&engine.encode("oa-2"), &engine.encode("oa-1"), 1);
        assert_eq!(key().open(C, &forged).unwrap().maker, None);
        // The client and connection are length-prefixed: moving a byte between them fails.
        let shifted = key().seal("team-ao", "a-2", "gAAAAAbc");
        assert_eq!(
            key()
                .open(
                    C,
                    &shifted.replacen(&engine.encode("a-2"), &engine.encode("oa-2"), 1)
                )
                .unwrap()
                .maker,
            None
        );
        assert_eq!(format!("{:?}", key()), "SealKey(***)");
    }

    #[test]
    fn s10_seal_all_rewrites_only_the_encrypted_strings() {
        let body = br#"{"output":[{"type":"reasoning","id":"rs_1","encrypted_content" : "gAAA\/1"},{"type":"message","content":[{"text":"say \"encrypted_content\": \"x\""}]}],"n":1}"#;
        let sealed = seal_all(body, &key(), to("oa-1"), Items::Upstream);
        let text = std::str::from_utf8(&sealed).unwrap();
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let content = value["output"][0]["encrypted_content"].as_str().unwrap();
        let opened = key().open(C, content).unwrap();
        assert_eq!(opened.maker.as_deref(), Some("oa-1"));
        assert_eq!(opened.original, "gAAA/1");
        assert_eq!(
            value["output"][1]["content"][0]["text"],
            "say \"encrypted_content\": \"x\""
        );
        assert!(text.ends_with(r#""n":1}"#));
        // Sealing twice changes nothing; no field, no copy.
        assert_eq!(
            seal_all(&sealed, &key(), to("oa-1"), Items::Upstream),
            sealed
        );
        assert!(matches!(
            seal_all(b"{\"a\":1}", &key(), to("oa-1"), Items::Upstream),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn s10_null_and_unterminated_contents_are_left_alone() {
        let body = br#"{"encrypted_content":null,"x":{"encrypted_content":"abc"#;
        assert_eq!(content_spans(body), Vec::new());
        assert!(matches!(
            seal_all(body, &key(), to("oa-1"), Items::Upstream),
            Cow::Borrowed(_)
        ));
    }

    /// Every way `text` could show in a sealed string: as it is, escaped, and base64 (standard
    /// or URL-safe, at each of the three alignments).
    fn in_clear(sealed: &str, text: &str) -> bool {
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        if sealed.contains(text) {
            return true;
        }
        (0..3).any(|shift| {
            let padded = format!("{}{text}", "x".repeat(shift));
            [STANDARD_NO_PAD, URL_SAFE_NO_PAD].iter().any(|engine| {
                let encoded = engine.encode(&padded);
                // The 4-character groups made of `text`'s bytes alone.
                let start = 4 * shift.div_ceil(3);
                let end = 4 * (padded.len() / 3);
                start + 8 <= end && sealed.contains(&encoded[start..end])
            })
        })
    }

    #[test]
    fn s14_a_carried_block_is_encrypted_for_its_connection() {
        let k = key();
        let plain = br#"{"type":"thinking","thinking":"secret plan","signature":"SIG-abcdef"}"#;
        let sealed = k.seal_carried(C, "an-1", plain).unwrap();
        assert!(sealed.starts_with(CARRIED_PREFIX));
        assert!(!in_clear(&sealed, "secret plan"), "{sealed}");
        assert!(!in_clear(&sealed, "SIG-abcdef"), "{sealed}");
        assert!(!in_clear(&sealed, "thinking"), "{sealed}");
        let opened = k.open_carried(C, &sealed).unwrap();
        assert_eq!(opened.connection, "an-1");
        assert_eq!(opened.plaintext, plain.to_vec());
        // A nonce of its own each time.
        let again = k.seal_carried(C, "an-1", plain).unwrap();
        assert_ne!(again, sealed);
        assert_eq!(k.open_carried(C, &again).unwrap().plaintext, plain.to_vec());
        // Not an HMAC seal, and an HMAC seal is not a carried block.
        assert_eq!(k.open(C, &sealed), None);
        assert_eq!(k.open_carried(C, &k.seal(C, "an-1", "qrthink1.e30")), None);
        // Another client's copy does not open.
        assert_eq!(k.open_carried("team-b", &sealed), None);
    }

    #[test]
    fn s14_a_carried_block_fails_closed() {
        let k = key();
        let sealed = k
            .seal_carried(C, "an-1", b"{\"type\":\"thinking\"}")
            .unwrap();
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        // Re-tagged with another connection: the associated data differs.
        let retagged = sealed.replacen(&engine.encode("an-1"), &engine.encode("an-2"), 1);
        assert_ne!(retagged, sealed);
        assert_eq!(k.open_carried(C, &retagged), None);
        // Another router's key.
        assert_eq!(
            SealKey::from_secret(&[8u8; 32]).open_carried(C, &sealed),
            None
        );
        // Truncated anywhere, or one character of the ciphertext changed.
        for cut in 0..sealed.len() {
            assert_eq!(k.open_carried(C, &sealed[..cut]), None, "cut at {cut}");
        }
        let (head, last) = sealed.split_at(sealed.len() - 6);
        let flipped = last.replacen(&last[..1], if &last[..1] == "A" { "B" } else { "A" }, 1);
        assert_eq!(k.open_carried(C, &format!("{head}{flipped}")), None);
        assert_eq!(k.open_carried(C, &format!("{sealed}.x")), None);
        assert_eq!(k.open_carried(C, "qrt1...."), None);
        // The seal key and the encryption key differ.
        assert_ne!(k.mac, k.cipher);
    }

    #[test]
    fn s14_translated_answers_encrypt_carried_blocks_and_keep_upstream_items() {
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let block = r#"{"type":"thinking","thinking":"secret plan","signature":"SIG-abcdef"}"#;
        let plain = format!("{CARRIED_PLAIN_PREFIX}{}", engine.encode(block));
        let body =
            format!(r#"{{"output":[{{"type":"reasoning","encrypted_content":"{plain}"}}]}}"#);
        let translated = seal_all(body.as_bytes(), &key(), to("an-1"), Items::Translated);
        let text = std::str::from_utf8(&translated).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        let content = value["output"][0]["encrypted_content"].as_str().unwrap();
        assert!(content.starts_with(CARRIED_PREFIX), "{content}");
        assert!(
            !in_clear(text, "secret plan") && !in_clear(text, "SIG-abcdef"),
            "{text}"
        );
        let opened = key().open_carried(C, content).unwrap();
        assert_eq!(opened.connection, "an-1");
        assert_eq!(opened.plaintext, block.as_bytes());
        assert_eq!(
            seal_all(&translated, &key(), to("an-1"), Items::Translated),
            translated
        );
        // In a same-format answer the same string is the upstream's own: sealed, its bytes kept.
        let upstream = seal_all(body.as_bytes(), &key(), to("oa-1"), Items::Upstream);
        let value: Value = serde_json::from_slice(&upstream).unwrap();
        let opened = key()
            .open(C, value["output"][0]["encrypted_content"].as_str().unwrap())
            .unwrap();
        assert_eq!(opened.maker.as_deref(), Some("oa-1"));
        assert_eq!(opened.original, plain);
        assert!(in_clear(
            std::str::from_utf8(&upstream).unwrap(),
            "SIG-abcdef"
        ));
        // A translated answer's other items are sealed as ever.
        let other = seal_all(
            br#"{"encrypted_content":"gAAAAAbc"}"#,
            &key(),
            to("an-1"),
            Items::Translated,
        );
        let value: Value = serde_json::from_slice(&other).unwrap();
        let opened = key()
            .open(C, value["encrypted_content"].as_str().unwrap())
            .unwrap();
        assert_eq!(opened.original, "gAAAAAbc");
    }

    /// Seals made by a released build still read, byte for byte: the seal of a fixed secret,
    /// client, connection and content is this exact string, and a carried block encrypted by
    /// that build opens.
    #[test]
    fn s10_golden_seals_stay_byte_identical() {
        let sealed = key().seal(C, "oa-2", "gAAAAAbc==");
        assert_eq!(sealed, "qrs1.b2EtMg.opfOjvTaiYE8P8vGbyNLMQ.gAAAAAbc==");
        let carried = "qrt1.YW4tMQ.Z0IwMwnNM22KGmgjKzwlsYE-0UsTUZBB.Dwx7KAB_jurWojQZnqT_VVVJ304pVVIeUcoXpT-xl6GugRY";
        let opened = key().open_carried(C, carried).unwrap();
        assert_eq!(opened.connection, "an-1");
        assert_eq!(opened.plaintext, b"{\"type\":\"thinking\"}".to_vec());
    }

    /// A seal whose MAC was cut short does not verify, however few bytes are left.
    #[test]
    fn s10_a_truncated_seal_mac_names_no_maker() {
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let sealed = key().seal(C, "oa-2", "gAAAAAbc");
        let mac = sealed.split('.').nth(2).unwrap();
        let full = engine.decode(mac).unwrap();
        for keep in 0..full.len() {
            let short = sealed.replacen(mac, &engine.encode(&full[..keep]), 1);
            assert_eq!(key().open(C, &short).unwrap().maker, None, "{keep} bytes kept");
        }
    }
}
