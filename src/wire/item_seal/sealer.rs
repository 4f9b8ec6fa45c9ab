//! A body or stream event with every encrypted item sealed for one answer's client and
//! connection ([`seal_all`], [`ItemSealer`]); a translated answer's carried thinking blocks
//! encrypted instead; a Gemini answer's `thoughtSignature`s sealed in their base64 form.

use std::borrow::Cow;
use std::sync::LazyLock;

use base64::Engine;
use memchr::memmem::Finder;

use super::carried::{CARRIED_PLAIN_PREFIX, CARRIED_PREFIX};
use super::json_spans::{content_spans, string_members, write_json_string, ContentSpan, FIELD};
use super::key::SealKey;
use super::seal::SEAL_PREFIX;
use super::signature::{
    carried_in_signature, carried_signature, SIGNATURE_PLAIN_PREFIX, SIGNATURE_PREFIX,
};

/// The member a Gemini answer's signatures ride in, on any part.
pub const SIGNATURE_FIELD: &[u8] = b"\"thoughtSignature\"";

/// The searchers of the members [`seal_all`] looks for, each built once: building one costs
/// more than searching a stream event with it, and a sealed stream checks every event.
struct Needles {
    content: Finder<'static>,
    signature: Finder<'static>,
    plain_signature: Finder<'static>,
}

static NEEDLES: LazyLock<Needles> = LazyLock::new(|| Needles {
    content: Finder::new(FIELD),
    signature: Finder::new(SIGNATURE_FIELD),
    plain_signature: Finder::new(SIGNATURE_PLAIN_PREFIX.as_bytes()),
});

/// The longest connection id a seal carries (config ids are short; a longer one is not sealed).
const MAX_CONNECTION_BYTES: usize = 256;

/// What an answer's `encrypted_content` strings can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Items {
    /// The upstream's own (a same-format answer): each sealed, its bytes kept.
    Upstream,
    /// A translated answer's: a carried thinking block's plain form is encrypted, anything
    /// else sealed.
    Translated,
    /// A Gemini answer's `thoughtSignature`s (behaviour §15): each sealed (`seal_signature`).
    GeminiSignatures,
    /// A translated answer to a Gemini client: a carried thinking block's plain form in a
    /// `thoughtSignature` is encrypted (behaviour §14), anything else sealed.
    GeminiTranslated,
    /// A translated answer to a Messages client: a Gemini signature's plain form in a thinking
    /// block's `signature` is sealed (behaviour §15); nothing else is touched.
    MessagesTranslated,
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
    match items {
        Items::GeminiSignatures => return seal_signatures(text, key, to, false),
        Items::GeminiTranslated => return seal_signatures(text, key, to, true),
        Items::MessagesTranslated => return seal_plain_signatures(text, key, to),
        Items::Upstream | Items::Translated => {}
    }
    let SealedFor { client, connection } = to;
    if connection.len() > MAX_CONNECTION_BYTES || NEEDLES.content.find(text).is_none() {
        return Cow::Borrowed(text);
    }
    let translated = items == Items::Translated;
    replace_strings(text, content_spans(text), 128, |value| {
        if value.starts_with(SEAL_PREFIX) || (translated && value.starts_with(CARRIED_PREFIX)) {
            return None;
        }
        Some(match value.strip_prefix(CARRIED_PLAIN_PREFIX) {
            // Never in clear: a block that cannot be encrypted leaves empty (and is left out
            // when it comes back).
            Some(plain) if translated => base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(plain)
                .ok()
                .and_then(|plaintext| key.seal_carried(client, connection, &plaintext))
                .unwrap_or_default(),
            _ => key.seal(client, connection, value),
        })
    })
}

/// `text` with every `thoughtSignature` string sealed for `to`'s client and connection (one
/// sealed already, or that cannot be, is kept), a `translated` answer's carried thinking
/// blocks encrypted; borrowed when it holds none.
fn seal_signatures<'a>(
    text: &'a [u8],
    key: &SealKey,
    to: SealedFor<'_>,
    translated: bool,
) -> Cow<'a, [u8]> {
    if NEEDLES.signature.find(text).is_none() {
        return Cow::Borrowed(text);
    }
    let spans = string_members(text, SIGNATURE_FIELD)
        .into_iter()
        .map(|member| member.value);
    replace_strings(text, spans, 64, |value| {
        if value.starts_with(SIGNATURE_PREFIX) && key.open_signature(to.client, value).is_some() {
            return None;
        }
        match value.strip_prefix(CARRIED_PLAIN_PREFIX) {
            // Never in clear: a block that cannot be encrypted leaves empty (and is left out
            // when it comes back).
            Some(plain) if translated => Some(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(plain)
                    .ok()
                    .and_then(|plaintext| key.seal_carried(to.client, to.connection, &plaintext))
                    .map(|encrypted| carried_signature(&encrypted))
                    .unwrap_or_default(),
            ),
            _ if translated && carried_in_signature(value).is_some() => None,
            _ => key.seal_signature(to.client, to.connection, value),
        }
    })
}

/// The member a thinking block's signature rides in (an answer or a `signature_delta`).
const PLAIN_SIGNATURE_FIELD: &[u8] = b"\"signature\"";

/// `text` with every `signature` string in the plain form a translation wrote
/// ([`SIGNATURE_PLAIN_PREFIX`]) sealed for `to`; borrowed when it holds none.
fn seal_plain_signatures<'a>(text: &'a [u8], key: &SealKey, to: SealedFor<'_>) -> Cow<'a, [u8]> {
    if NEEDLES.plain_signature.find(text).is_none() {
        return Cow::Borrowed(text);
    }
    let spans = string_members(text, PLAIN_SIGNATURE_FIELD)
        .into_iter()
        .map(|member| member.value);
    replace_strings(text, spans, 64, |value| {
        let original = value.strip_prefix(SIGNATURE_PLAIN_PREFIX)?;
        // Never in clear with the marker: one that cannot be sealed leaves empty.
        Some(
            key.seal_signature(to.client, to.connection, original)
                .unwrap_or_default(),
        )
    })
}

/// `text` with each string at `spans` that `replace` answers for written as its answer (a
/// JSON string); borrowed when `replace` answers for none. `extra`: the room a copy reserves
/// beyond `text`'s length.
fn replace_strings<'a>(
    text: &'a [u8],
    spans: impl IntoIterator<Item = ContentSpan>,
    extra: usize,
    mut replace: impl FnMut(&str) -> Option<String>,
) -> Cow<'a, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    for span in spans {
        let Some(value) = span.value(text) else {
            continue;
        };
        let Some(replaced) = replace(&value) else {
            continue;
        };
        let out = out.get_or_insert_with(|| Vec::with_capacity(text.len() + extra));
        out.extend_from_slice(&text[copied_to..span.start]);
        write_json_string(out, &replaced);
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
