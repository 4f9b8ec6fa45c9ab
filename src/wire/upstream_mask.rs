//! The one place secrets are masked out of what leaves the router (contract "Hostile input and
//! bounds"): upstream error bodies passed to the client, SSE events relayed after a stream
//! began, relayed header values, and URLs (userinfo, query) in messages, `check` and admin
//! output. The connection's own secrets are replaced wherever they appear and, in error text,
//! anything key-like too; the rest is kept byte for byte. It must not classify anything or
//! change anything but what it masks (a single word over 300 chars is cut by `mask_secrets`).

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderValue;
use memchr::memmem;
use quotaroute_actors::policy::classify::mask_secrets;

/// What replaces a secret.
pub const MASK: &str = "***";

/// `bytes` with every occurrence of each of `secrets` replaced (borrowed when none occurs).
pub fn mask_exact<'a>(bytes: &'a [u8], secrets: &[&str]) -> Cow<'a, [u8]> {
    let mut masked = Cow::Borrowed(bytes);
    // Most relayed values are shorter than any key: nothing to search.
    for secret in secrets
        .iter()
        .filter(|secret| !secret.is_empty() && secret.len() <= bytes.len())
    {
        // One searcher for the search and the replacing both.
        let finder = memmem::Finder::new(secret.as_bytes());
        if finder.find(&masked).is_some() {
            masked = Cow::Owned(replace_all(&masked, &finder, MASK.as_bytes()));
        }
    }
    masked
}

/// One secret's searcher, built once when the secret is loaded: a stream masks every write it
/// relays, and building a searcher per write cost more than the search.
pub struct EchoSearch(memmem::Finder<'static>);

impl EchoSearch {
    /// `None` for an empty secret (it matches nothing).
    pub fn new(secret: &str) -> Option<Self> {
        (!secret.is_empty()).then(|| Self(memmem::Finder::new(secret.as_bytes()).into_owned()))
    }

    /// How long the secret is: no shorter value can hold it.
    pub fn secret_len(&self) -> usize {
        self.0.needle().len()
    }
}

impl std::fmt::Debug for EchoSearch {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The needle is the secret: never printed.
        formatter.write_str("EchoSearch(***)")
    }
}

/// [`mask_exact`] with searchers built beforehand.
pub fn mask_found<'a>(bytes: &'a [u8], searches: &[Option<&EchoSearch>]) -> Cow<'a, [u8]> {
    let mut masked = Cow::Borrowed(bytes);
    for search in searches.iter().flatten() {
        let needle = search.0.needle();
        if needle.len() <= masked.len() && search.0.find(&masked).is_some() {
            masked = Cow::Owned(replace_all(&masked, &search.0, MASK.as_bytes()));
        }
    }
    masked
}

/// A relayed header value with `secrets` masked (the same value when none occurs).
pub fn mask_header_value(value: &HeaderValue, secrets: &[&str]) -> HeaderValue {
    masked_header_value(value, secrets).unwrap_or_else(|| value.clone())
}

/// A relayed header value with `secrets` masked, when one occurs in it.
pub fn masked_header_value(value: &HeaderValue, secrets: &[&str]) -> Option<HeaderValue> {
    header_value_of(mask_exact(value.as_bytes(), secrets))
}

/// [`masked_header_value`] with searchers built beforehand.
pub fn found_header_value(
    value: &HeaderValue,
    searches: &[Option<&EchoSearch>],
) -> Option<HeaderValue> {
    header_value_of(mask_found(value.as_bytes(), searches))
}

/// A masked value as a header value (`None`: nothing was masked).
fn header_value_of(masked: Cow<'_, [u8]>) -> Option<HeaderValue> {
    match masked {
        Cow::Borrowed(_) => None,
        Cow::Owned(masked) => {
            Some(HeaderValue::from_bytes(&masked).unwrap_or(HeaderValue::from_static(MASK)))
        }
    }
}

/// One relayed SSE event (its whole original bytes) with `secrets` masked; an error event's
/// text is masked like an error body (key-like words too).
pub fn mask_sse_event(raw: &Bytes, secrets: &[&str], error_event: bool) -> Bytes {
    let exact = mask_exact(raw, secrets);
    if !error_event {
        return match exact {
            Cow::Borrowed(_) => raw.clone(),
            Cow::Owned(masked) => Bytes::from(masked),
        };
    }
    // Line by line: each `data:` payload as an error body (JSON strings or words), the field
    // names and line ends kept.
    let mut out = Vec::with_capacity(exact.len());
    for line in exact.split_inclusive(|&b| b == b'\n') {
        let Some(payload) = line.strip_prefix(b"data:") else {
            out.extend_from_slice(line);
            continue;
        };
        let body_end = payload
            .iter()
            .rposition(|&b| b != b'\n' && b != b'\r')
            .map_or(0, |at| at + 1);
        let (text, line_end) = payload.split_at(body_end);
        let lead = usize::from(text.first() == Some(&b' '));
        out.extend_from_slice(b"data:");
        out.extend_from_slice(&text[..lead]);
        out.extend_from_slice(&mask_upstream_body(&text[lead..], &[]));
        out.extend_from_slice(line_end);
    }
    Bytes::from(out)
}

/// A URL fit to print: its userinfo and query replaced by `***`, the rest kept.
pub fn mask_url(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        return mask_secrets(text);
    };
    if !url.username().is_empty() || url.password().is_some() {
        let _ = url.set_username(MASK);
        let _ = url.set_password(None);
    }
    if url.query().is_some() {
        url.set_query(Some(MASK));
    }
    url.to_string()
}

/// A message for a log line, a client or an admin answer: `secrets` and anything key-like
/// masked, URLs with credentials cut (see [`mask_url`]).
pub fn mask_text(text: &str, secrets: &[&str]) -> String {
    let exact = mask_exact(text.as_bytes(), secrets);
    let text = String::from_utf8_lossy(&exact);
    let mut out = String::with_capacity(text.len());
    let mut copied_to = 0;
    for (start, word) in words(&text) {
        if word.contains("://") {
            out.push_str(&text[copied_to..start]);
            out.push_str(&mask_url(word));
            copied_to = start + word.len();
        }
    }
    out.push_str(&text[copied_to..]);
    mask_words(&out).into_owned()
}

/// An upstream error body fit to pass to the client: every occurrence of `secrets` (the
/// connection's own credentials) is replaced, then anything key-like (`sk-…`, starred key
/// echoes, the word after `Bearer`) is masked inside each JSON string — or each word of a
/// non-JSON body. The rest of a JSON body is kept byte for byte.
pub fn mask_upstream_body(body: &[u8], secrets: &[&str]) -> Vec<u8> {
    let masked = mask_exact(body, secrets);
    if serde_json::from_slice::<serde::de::IgnoredAny>(&masked).is_ok() {
        mask_json_strings(&masked)
    } else {
        mask_words(&String::from_utf8_lossy(&masked))
            .into_owned()
            .into_bytes()
    }
}

/// `haystack` with every occurrence of `finder`'s needle replaced by `replacement`.
fn replace_all(haystack: &[u8], finder: &memmem::Finder<'_>, replacement: &[u8]) -> Vec<u8> {
    let needle = finder.needle();
    let mut out = Vec::with_capacity(haystack.len());
    let mut copied_to = 0;
    for found in finder.find_iter(haystack) {
        if found < copied_to {
            continue;
        }
        out.extend_from_slice(&haystack[copied_to..found]);
        out.extend_from_slice(replacement);
        copied_to = found + needle.len();
    }
    out.extend_from_slice(&haystack[copied_to..]);
    out
}

/// Masks inside every string literal of a valid JSON document, keeping all other bytes.
fn mask_json_strings(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let mut copied_to = 0;
    let mut at = 0;
    while let Some(offset) = memchr::memchr(b'"', &json[at..]) {
        let start = at + offset;
        let Some(end) = string_literal_end(json, start) else {
            break;
        };
        let literal = &json[start..end];
        let replaced = std::str::from_utf8(literal)
            .ok()
            .and_then(|literal| serde_json::from_str::<String>(literal).ok())
            .and_then(|text| match mask_words(&text) {
                Cow::Owned(masked) => serde_json::to_vec(&masked).ok(),
                Cow::Borrowed(_) => None,
            });
        if let Some(replaced) = replaced {
            out.extend_from_slice(&json[copied_to..start]);
            out.extend_from_slice(&replaced);
            copied_to = end;
        }
        at = end;
    }
    out.extend_from_slice(&json[copied_to..]);
    out
}

/// The index just past the string literal opening at `start` (a `"`).
fn string_literal_end(json: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        let offset = memchr::memchr2(b'"', b'\\', &json[at..])?;
        at += offset;
        if json[at] == b'\\' {
            at += 2;
        } else {
            return Some(at + 1);
        }
    }
}

/// Runs [`mask_secrets`] on each whitespace-separated word (so long text is not truncated) and
/// masks the word after `Bearer`. Borrowed when nothing changed.
fn mask_words(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut changed = false;
    let mut copied_to = 0;
    let mut after_bearer = false;
    for (start, word) in words(text) {
        let replacement = if after_bearer {
            Some(Cow::Borrowed(MASK))
        } else {
            let masked = mask_secrets(word);
            (masked != word).then_some(Cow::Owned(masked))
        };
        after_bearer = word
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .eq_ignore_ascii_case("bearer");
        if let Some(replacement) = replacement {
            if !changed {
                out.reserve(text.len());
                changed = true;
            }
            out.push_str(&text[copied_to..start]);
            out.push_str(&replacement);
            copied_to = start + word.len();
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied_to..]);
    Cow::Owned(out)
}

/// Each maximal run of non-whitespace, with its byte offset.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(char::is_whitespace)
        .filter(|word| !word.is_empty())
        .map(move |word| (word.as_ptr() as usize - text.as_ptr() as usize, word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    proptest! {
        /// Searchers built once mask what a search per call masks: overlapping and adjacent
        /// echoes, a secret longer than the bytes, an empty one, two secrets at once.
        #[test]
        fn searches_built_once_mask_what_mask_exact_masks(
            bytes in "(ab|abab|k-1|x|\\n|é){0,24}",
            first in "(ab|aba|k-1|b){0,3}",
            second in "(ab|k|x){0,2}",
        ) {
            let searches = [EchoSearch::new(&first), EchoSearch::new(&second)];
            let searches = [searches[0].as_ref(), searches[1].as_ref()];
            prop_assert_eq!(
                mask_found(bytes.as_bytes(), &searches),
                mask_exact(bytes.as_bytes(), &[&first, &second])
            );
        }
    }

    #[test]
    fn contract_upstream_body_never_echoes_the_key() {
        let key = "sk-proj-Abc123Def456Ghi789Jkl012";
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: sk-proj-Abc1********************l012. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key","echo":"{key}"}}}}"#
        );
        let masked = String::from_utf8(mask_upstream_body(body.as_bytes(), &[key])).unwrap();
        assert!(!masked.contains("Abc1"), "{masked}");
        assert!(!masked.contains("l012"), "{masked}");
        let value: Value = serde_json::from_str(&masked).unwrap();
        assert_eq!(value["error"]["code"], "invalid_api_key");
        assert_eq!(value["error"]["param"], Value::Null);
        assert_eq!(value["error"]["echo"], "***");
        assert!(value["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("https://platform.openai.com/account/api-keys."));
    }

    #[test]
    fn contract_upstream_body_without_secrets_is_kept_byte_for_byte() {
        let body = br#"{ "type": "error",
  "error": {"type": "overloaded_error", "message": "Overloaded \u00e9 claude-3-5-sonnet-20241022"} }"#;
        assert_eq!(
            mask_upstream_body(body, &["sk-ant-api03-secret"]),
            body.to_vec()
        );
    }

    #[test]
    fn contract_non_json_upstream_body_is_masked_word_by_word() {
        let body = b"<html>Unauthorized: Bearer abc.def.ghi for key sk-ant-api03-XYZ</html>";
        let masked = String::from_utf8(mask_upstream_body(body, &[])).unwrap();
        assert_eq!(masked, "<html>Unauthorized: Bearer *** for key ***</html>");
        // Exact secrets go even when they do not look like keys.
        let masked = mask_upstream_body(b"token=plainsecret;", &["plainsecret"]);
        assert_eq!(masked, b"token=***;".to_vec());
    }
}
