//! A member of a JSON object found by its key in raw bytes, with any JSON whitespace (space,
//! tab, line feed, carriage return) around its colon: `"text":"a"`, `"text": "a"` and
//! `"text" :\n "a"` are the same member. The byte searches that run on every relayed event
//! (`content_bytes`, `stream_watch`) use it instead of a parse, so an upstream that pretty-prints
//! its events is read as one that does not. A search, not a parse: it never says what an event
//! means, only where a key's value starts.

use memchr::memmem::Finder;

/// Searches for one key (built once: building a searcher costs more than a search).
pub struct MemberFinder {
    /// The key with its quotes: `"text"`.
    key: Finder<'static>,
}

impl MemberFinder {
    /// A finder of the member named `quoted_key`, quotes included (`b"\"text\""`).
    pub fn new(quoted_key: &'static [u8]) -> Self {
        MemberFinder {
            key: Finder::new(quoted_key),
        }
    }

    /// The value of each member of that key in `data`, in order: the bytes from its first
    /// byte (after the colon and any whitespace) to the end of `data`. A key not followed by a
    /// colon (the same text as a string value, `"type":"text"`) is no member.
    pub fn values<'s, 'd>(
        &'s self,
        data: &'d [u8],
    ) -> impl Iterator<Item = &'d [u8]> + use<'s, 'd> {
        let key_len = self.key.needle().len();
        self.key.find_iter(data).filter_map(move |at| {
            let after_key = data.get(at + key_len..)?;
            let after_colon = skip_whitespace(after_key).strip_prefix(b":")?;
            Some(skip_whitespace(after_colon))
        })
    }

    /// The first member of that key whose value is a string: its text from just after the
    /// opening quote to the end of `data`.
    pub fn first_string<'d>(&self, data: &'d [u8]) -> Option<&'d [u8]> {
        self.values(data)
            .find_map(|value| value.strip_prefix(b"\""))
    }

    /// Whether `data` has a member of that key whose value is not `null`.
    pub fn has_non_null(&self, data: &[u8]) -> bool {
        self.values(data).any(|value| !value.starts_with(b"null"))
    }
}

/// `bytes` without its leading JSON whitespace.
fn skip_whitespace(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(bytes.len());
    bytes.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_found_with_any_json_spacing_around_its_colon() {
        let text = MemberFinder::new(b"\"text\"");
        for data in [
            r#"{"text":"hi"}"#,
            r#"{"text": "hi"}"#,
            r#"{"text" : "hi"}"#,
            "{\"text\"\t:\n\r \"hi\"}",
        ] {
            assert_eq!(
                text.first_string(data.as_bytes()),
                Some(&b"hi\"}"[..]),
                "{data}"
            );
        }
        // The key's text as a value, or escaped inside a string, is no member.
        assert_eq!(text.first_string(br#"{"type":"text"}"#), None);
        assert_eq!(text.first_string(br#"{"type": "text", "x": 1}"#), None);
        assert_eq!(text.first_string(br#"{"a":"{\"text\": \"no\"}"}"#), None);
        // A non-string value is skipped for a later string one.
        assert_eq!(
            text.first_string(br#"{"text": null, "b": {"text" :"yes"}}"#),
            Some(&b"yes\"}}"[..])
        );
        let usage = MemberFinder::new(b"\"usage\"");
        assert!(!usage.has_non_null(br#"{"usage":null}"#));
        assert!(!usage.has_non_null(br#"{"usage" :  null}"#));
        assert!(usage.has_non_null(br#"{"usage" : {"a": 1}}"#));
        assert!(!usage.has_non_null(br#"{"usage"}"#));
    }
}
