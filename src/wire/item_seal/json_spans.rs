//! Where `"encrypted_content"` (or another member's) strings sit in JSON text (a body or one SSE
//! event), found on the bytes without parsing the document; the bytes that leave such a member
//! out; a string written back as JSON. Seals nothing.

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

/// One `"<key>": "<string>"` member in JSON text: where its key starts (its opening quote) and
/// its string value's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberSpan {
    pub key_start: usize,
    pub value: ContentSpan,
}

impl MemberSpan {
    /// The bytes of `text` to cut to leave this member out of its object: the member and the
    /// comma that joins it to the next member (or, for the last, to the one before).
    pub fn removal(&self, text: &[u8]) -> (usize, usize) {
        let mut after = self.value.end;
        while text.get(after).is_some_and(|b| b.is_ascii_whitespace()) {
            after += 1;
        }
        if text.get(after) == Some(&b',') {
            return (self.key_start, after + 1);
        }
        let mut before = self.key_start;
        while before > 0 && text[before - 1].is_ascii_whitespace() {
            before -= 1;
        }
        if before > 0 && text[before - 1] == b',' {
            return (before - 1, self.value.end);
        }
        (self.key_start, self.value.end)
    }
}

/// Every `"encrypted_content"` key in `text` whose value is a string, in order. A match inside
/// another string (its quote escaped) or followed by anything but `: "…"` is skipped.
pub fn content_spans(text: &[u8]) -> Vec<ContentSpan> {
    string_members(text, FIELD)
        .into_iter()
        .map(|member| member.value)
        .collect()
}

/// Every `key` (quotes included, e.g. `b"\"thoughtSignature\""`) in `text` whose value is a
/// string, in order, as [`content_spans`] finds them.
pub fn string_members(text: &[u8], key: &[u8]) -> Vec<MemberSpan> {
    let mut spans = Vec::new();
    for at in memmem::find_iter(text, key) {
        if at > 0 && text[at - 1] == b'\\' {
            continue;
        }
        let mut i = at + key.len();
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
            spans.push(MemberSpan {
                key_start: at,
                value: ContentSpan { start, end },
            });
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
