//! The router's seal on a Gemini `thoughtSignature` (behaviour §15): the HMAC of an encrypted
//! item's seal (`seal`: the client it is handed to, the connection that made it and the
//! upstream's own signature, under the node's MAC key), in a form Google's clients keep. A
//! signature is `bytes` in Google's API: the google-genai SDKs decode it from base64 and encode
//! it again (Python in the URL-safe alphabet), so a sealed one is itself base64 — `qrg1…`, the
//! standard alphabet padded, of the magic, the form of the original, the connection, the MAC and
//! the original — and is read back in either alphabet, padded or not. A thinking block carried
//! to a Gemini client (behaviour §14) rides in a `thoughtSignature` too: its encrypted form
//! (`carried`) wrapped the same way (`qrt1…`).

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hmac::Mac;

use super::key::SealKey;

/// What a sealed signature's text starts with (the magic bytes in base64, either alphabet).
pub const SIGNATURE_PREFIX: &str = "qrg1";

/// The magic bytes: [`SIGNATURE_PREFIX`] decoded.
const MAGIC: [u8; 3] = [0xaa, 0xb8, 0x35];

/// The original was canonical standard base64 (Google's own form): kept decoded.
const FORM_DECODED: u8 = 0;

/// The original is kept as its text.
const FORM_TEXT: u8 = 1;

/// Bytes of the MAC kept in a seal (as an encrypted item's).
const MAC_BYTES: usize = 16;

/// Reads either alphabet (after `-`/`_` are mapped), with or without padding.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// A sealed signature, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedSignature {
    /// The connection that made it; `None` when the seal does not verify (another key,
    /// another client's, altered or forged).
    pub maker: Option<String>,
    /// The upstream's own signature.
    pub original: String,
}

impl SealKey {
    /// `original` (an upstream's `thoughtSignature`) sealed with the connection that made it,
    /// for the client it is handed to; `None` for a connection id longer than 255 bytes (config
    /// ids are short; such a signature is handed out as it came).
    pub fn seal_signature(&self, client: &str, connection: &str, original: &str) -> Option<String> {
        let connection_len = u8::try_from(connection.len()).ok()?;
        let mac = self
            .item_hmac(client, connection, original)
            .finalize()
            .into_bytes();
        let decoded = STANDARD
            .decode(original)
            .ok()
            .filter(|bytes| STANDARD.encode(bytes) == original);
        let mut raw = Vec::with_capacity(5 + connection.len() + MAC_BYTES + original.len());
        raw.extend_from_slice(&MAGIC);
        raw.push(if decoded.is_some() {
            FORM_DECODED
        } else {
            FORM_TEXT
        });
        raw.push(connection_len);
        raw.extend_from_slice(connection.as_bytes());
        raw.extend_from_slice(&mac[..MAC_BYTES]);
        match decoded {
            Some(bytes) => raw.extend_from_slice(&bytes),
            None => raw.extend_from_slice(original.as_bytes()),
        }
        Some(STANDARD.encode(raw))
    }

    /// What a sealed signature holds when `client` sends it; `None` when `text` is not in the
    /// sealed form at all (a signature the router did not hand out).
    pub fn open_signature(&self, client: &str, text: &str) -> Option<OpenedSignature> {
        if !text.starts_with(SIGNATURE_PREFIX) {
            return None;
        }
        let raw = lenient_decode(text)?;
        let rest = raw.strip_prefix(&MAGIC)?;
        let unverified = OpenedSignature {
            maker: None,
            original: String::new(),
        };
        let Some((&[form, connection_len], rest)) = rest.split_first_chunk::<2>() else {
            return Some(unverified);
        };
        let connection_len = usize::from(connection_len);
        if rest.len() < connection_len + MAC_BYTES {
            return Some(unverified);
        }
        let (connection, rest) = rest.split_at(connection_len);
        let (mac, original) = rest.split_at(MAC_BYTES);
        let original = match form {
            FORM_DECODED => STANDARD.encode(original),
            FORM_TEXT => match String::from_utf8(original.to_vec()) {
                Ok(text) => text,
                Err(_) => return Some(unverified),
            },
            _ => return Some(unverified),
        };
        let maker = std::str::from_utf8(connection)
            .ok()
            .filter(|connection| {
                self.item_hmac(client, connection, &original)
                    .verify_truncated_left(mac)
                    .is_ok()
            })
            .map(str::to_owned);
        Some(OpenedSignature { maker, original })
    }
}

/// What starts a Gemini signature a translation hands to a Messages client in a thinking
/// block's `signature` (the plain form: the node seals it before it leaves, as `qrg1…`).
pub const SIGNATURE_PLAIN_PREFIX: &str = "qrgplain1.";

/// What a carried thinking block's `thoughtSignature` starts with (behaviour §14 carried to a
/// Gemini client): the encrypted block (`qrt1.…`, `carried`) wrapped in base64 the same way.
pub const CARRIED_SIGNATURE_PREFIX: &str = "qrt1";

/// [`CARRIED_SIGNATURE_PREFIX`] decoded.
const CARRIED_MAGIC: [u8; 3] = [0xaa, 0xbb, 0x75];

/// An encrypted carried block (`qrt1.…`) as a `thoughtSignature` Google's clients keep.
pub fn carried_signature(encrypted: &str) -> String {
    let mut raw = Vec::with_capacity(CARRIED_MAGIC.len() + encrypted.len());
    raw.extend_from_slice(&CARRIED_MAGIC);
    raw.extend_from_slice(encrypted.as_bytes());
    STANDARD.encode(raw)
}

/// The encrypted carried block a `thoughtSignature` wraps (read in either base64 alphabet);
/// `None` when it is not one.
pub fn carried_in_signature(signature: &str) -> Option<String> {
    if !signature.starts_with(CARRIED_SIGNATURE_PREFIX) {
        return None;
    }
    let raw = lenient_decode(signature)?;
    String::from_utf8(raw.strip_prefix(&CARRIED_MAGIC)?.to_vec()).ok()
}

/// `text` decoded from base64 in either alphabet, padded or not.
fn lenient_decode(text: &str) -> Option<Vec<u8>> {
    let standard: String = text
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            other => other,
        })
        .collect();
    LENIENT.decode(standard).ok()
}
