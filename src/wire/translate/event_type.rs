//! An event's top-level `type`, found by passing over the rest of its JSON without checking
//! it: a stream reader asks it only to leave out an event whose type it ignores, which it
//! would leave out just the same if the event were not JSON at all. So the answer needs to be
//! right for valid JSON alone (where it is what a whole `Value` parse gives: the last `type`
//! member, as `serde_json::Map` keeps it); whatever it cannot read as a parse would (an
//! escape in a top-level key or in the type's string, a text that is no object) it declines.

use crate::wire::json_scan::plain_run;

/// What a whole parse of the event would find as its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType<'a> {
    /// A string without escapes.
    Named(&'a str),
    /// No `type` member, or one that is not a string (`str_at` reads both as `""`).
    Unnamed,
}

/// `data`'s top-level `type` when `data` is valid JSON; `None`: declined (read it whole).
pub fn event_type(data: &str) -> Option<EventType<'_>> {
    let bytes = data.as_bytes();
    let mut at = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[at] != b'{' {
        return None;
    }
    at += 1;
    let mut depth = 1u32;
    // A top-level key comes next (after `{` or a top-level `,`).
    let mut key_next = true;
    let mut found = EventType::Unnamed;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                let (end, escaped) = string_end(bytes, at + 1)?;
                let is_key = depth == 1 && key_next;
                let string = &bytes[at + 1..end];
                at = end + 1;
                if !is_key {
                    continue;
                }
                key_next = false;
                if escaped {
                    // Its decoded name might be `type`.
                    return None;
                }
                if string != b"type" {
                    continue;
                }
                // The value after the colon.
                at += skip_space(&bytes[at..]);
                if bytes.get(at) != Some(&b':') {
                    return None;
                }
                at += 1;
                at += skip_space(&bytes[at..]);
                if bytes.get(at) == Some(&b'"') {
                    let (end, escaped) = string_end(bytes, at + 1)?;
                    if escaped {
                        return None;
                    }
                    found = EventType::Named(data.get(at + 1..end)?);
                    at = end + 1;
                } else {
                    // Not a string: the loop passes over it.
                    found = EventType::Unnamed;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                at += 1;
            }
            b'}' | b']' => {
                depth -= 1;
                at += 1;
                if depth == 0 {
                    return Some(found);
                }
            }
            b',' => {
                key_next = depth == 1;
                at += 1;
            }
            _ => at += 1,
        }
    }
    None
}

/// Where the string whose contents begin at `start` ends (its closing quote), and whether it
/// has an escape. Its plain runs are passed eight bytes at a time (most strings of an event
/// are short: a search call would cost more than the string).
fn string_end(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut at = start;
    let mut escaped = false;
    loop {
        at += plain_run(bytes.get(at..)?)?;
        match bytes[at] {
            b'"' => return Some((at, escaped)),
            b'\\' => {
                escaped = true;
                at += 2;
            }
            // A control byte: not JSON, whose answer does not matter.
            _ => at += 1,
        }
    }
}

fn skip_space(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// What a whole parse reads as the type (`None`: none, or not a string).
    fn parsed(data: &str) -> Option<String> {
        let value: Value = serde_json::from_str(data).expect("valid");
        value.get("type").and_then(Value::as_str).map(str::to_owned)
    }

    fn named(found: EventType<'_>) -> Option<String> {
        match found {
            EventType::Named(name) => Some(name.to_owned()),
            EventType::Unnamed => None,
        }
    }

    #[test]
    fn it_finds_the_type_a_parse_finds_in_valid_events() {
        let events = [
            r#"{"type":"response.output_text.done","text":"a \"type\":\"x\" {["}"#,
            r#"{"item":{"type":"message","content":[{"type":"output_text"}]},"type":"response.output_item.done"}"#,
            r#" { "sequence_number" : 3 , "type" : "response.content_part.done" } "#,
            r#"{"type":"a","x":[1,{"type":"b"}],"type":"response.in_progress"}"#,
            r#"{"type":7,"text":"no name"}"#,
            r#"{"part":{"type":"output_text"}}"#,
            r#"{"type":"response.completed","response":{"output":[{"text":"\\\"}\"]"}]}}"#,
            r#"{"text":"ends in a backslash \\","type":"response.output_text.done"}"#,
            r#"{"type":null}"#,
            "{}",
        ];
        for data in events {
            let found = event_type(data).unwrap_or_else(|| panic!("declined {data}"));
            assert_eq!(named(found), parsed(data), "{data}");
        }
    }

    #[test]
    fn it_declines_what_it_cannot_read_as_a_parse_reads() {
        for data in [
            r#"{"typ\u0065":"response.output_text.done"}"#,
            r#"{"type":"response.output_text.d\u006fne"}"#,
            r#"["type","response.output_text.done"]"#,
            r#"{"type":"response.output_text.done""#,
            "",
        ] {
            assert_eq!(event_type(data), None, "{data}");
        }
    }
}
