//! Upstream error bodies made fit to pass to the client (contract "Client API": "with any
//! echoed key masked"): the connection's own secrets and anything key-like are masked, the rest
//! of the body is kept byte for byte. It must not classify the error
//! or change anything but what it masks (a single word over 300 chars is cut by `mask_secrets`).

use std::borrow::Cow;

use memchr::memmem;
use quotaroute_actors::policy::classify::mask_secrets;

/// What replaces a secret.
const MASK: &str = "***";

/// An upstream error body fit to pass to the client: every occurrence of `secrets` (the
/// connection's own credentials) is replaced, then anything key-like (`sk-…`, starred key
/// echoes, the word after `Bearer`) is masked inside each JSON string — or each word of a
/// non-JSON body. The rest of a JSON body is kept byte for byte.
pub fn mask_upstream_body(body: &[u8], secrets: &[&str]) -> Vec<u8> {
    let mut masked = body.to_vec();
    for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
        masked = replace_all(&masked, secret.as_bytes(), MASK.as_bytes());
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&masked).is_ok() {
        mask_json_strings(&masked)
    } else {
        mask_words(&String::from_utf8_lossy(&masked))
            .into_owned()
            .into_bytes()
    }
}

fn replace_all(haystack: &[u8], needle: &[u8], replacement: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut copied_to = 0;
    for found in memmem::find_iter(haystack, needle) {
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
    use serde_json::Value;

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
