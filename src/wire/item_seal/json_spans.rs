//! Where `"encrypted_content"` strings sit in JSON text (a body or one SSE event), found on the
//! bytes without parsing the document, and a string written back as JSON. Seals nothing.

use std::borrow::Cow;

use memchr::memmem;

/// The key whose string values are encrypted items.
pub(super) const FIELD: &[u8] = b"\"encrypted_content\"";

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

/// Appends `text` as a quoted JSON string.
pub fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a `&str` into a Vec cannot fail; the fallback only keeps this total.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}
