//! A JSON object read into a `serde_json::Value` with only the members a reader reads (by
//! name, whole or picked in turn), every other member skipped without being built: what the
//! stream readers' lifecycle events cost is mostly members they never look at (a Responses
//! `response.created` repeats the whole request). Member for member the same `Value` as a
//! whole parse gives (a repeated member: the last one, as `serde_json::Map` keeps it); a
//! picked member that is not an object is declined (`None`), for the caller to parse whole.
//!
//! The object is walked on its bytes ([`Walk`], which checks all of them as JSON) and only
//! the kept members' bytes go through serde; whatever that walk declines (a key with an
//! escape, a surrogate escape, deep nesting, invalid JSON) is read again by serde's visitor,
//! skipping the other members as `IgnoredAny`, as before.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The members of an object a reader reads: each by name, kept whole or picked in turn.
pub type Members = &'static [(&'static str, Pick)];

/// How one member is read.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// As a whole `Value`.
    Whole,
    /// An object of which only these members are read.
    Members(Members),
}

/// `data` (one JSON object) with only `members`; `None` when it is not valid JSON or a picked
/// member is not an object.
pub fn picked(data: &str, members: Members) -> Option<Value> {
    scanned(data, members).or_else(|| visited(data, members))
}

/// A kept member as [`found_members`] found it: its name, the picked member it is in (`None`:
/// at the top), and the text of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    pub within: Option<&'static str>,
    pub name: &'static str,
    pub text: &'a str,
}

/// The strict walk of [`picked`] alone, building nothing: each kept member's value text noted
/// in `found` (a picked one after its own members). `None` for whatever the walk declines, for
/// a kept member that repeats (a typed read of the event would refuse it), and for a number
/// with an exponent or of 300 digits or more anywhere (one a `Value` may not hold: [`picked`]
/// and a whole parse might refuse the event). A `Some` is valid JSON whose kept members appear
/// once each, each of which `serde_json` reads into a `Value` as [`picked`] reads it.
pub fn found_members<'a>(
    data: &'a str,
    members: Members,
    found: &mut Vec<Found<'a>>,
) -> Option<()> {
    let mut walk = Walk {
        data,
        bytes: data.as_bytes(),
        at: 0,
        found: Some(found),
    };
    walk.object(members, DEPTH, None)?;
    walk.space();
    (walk.at == data.len()).then_some(())
}

/// [`picked`] on the bytes: `None` for whatever [`Walk`] declines.
fn scanned(data: &str, members: Members) -> Option<Value> {
    let mut walk = Walk {
        data,
        bytes: data.as_bytes(),
        at: 0,
        found: None,
    };
    let value = walk.object(members, DEPTH, None)?;
    walk.space();
    (walk.at == data.len()).then_some(value)
}

/// The deepest nesting walked (serde_json stops at 128).
const DEPTH: u8 = 64;

/// A strict walk over one JSON text that checks every byte as JSON and builds only the kept
/// members (with serde, from their bytes). It declines (`None`) whatever it does not read
/// exactly as serde_json does — a key with an escape, a `\u` escape of a surrogate, nesting
/// deeper than [`DEPTH`] — besides invalid JSON; [`picked`] then reads it with the visitor.
struct Walk<'a, 'f> {
    data: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Where kept members are noted ([`picked_found`]); a repeated one is then declined.
    found: Option<&'f mut Vec<Found<'a>>>,
}

impl<'a> Walk<'a, '_> {
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace (not taken).
    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.bytes.get(self.at).copied()
    }

    /// `byte` next (after whitespace), taken.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        self.at - start
    }

    /// A number: `-`, no leading zero, a fraction and an exponent each with digits. When
    /// noting ([`found_members`]), one with an exponent or a run of 300 digits is declined.
    fn number(&mut self) -> Option<()> {
        const LONG: usize = 300;
        let noting = self.found.is_some();
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let first = *self.bytes.get(self.at)?;
        let whole = self.digits();
        if whole == 0 || (first == b'0' && whole > 1) || (noting && whole >= LONG) {
            return None;
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            let fraction = self.digits();
            if fraction == 0 || (noting && fraction >= LONG) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            if noting {
                return None;
            }
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// The rest of a string after its opening quote; whether it had an escape. Its plain
    /// bytes are passed eight at a time up to the first quote, backslash or control byte.
    fn string(&mut self) -> Option<bool> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        // The high bit of each byte equal to `byte`; none below the first such byte is set
        // otherwise (a borrow only runs upwards), so the lowest set bit is the first match.
        let equal = |word: u64, byte: u8| {
            let x = word ^ (ONES * u64::from(byte));
            x.wrapping_sub(ONES) & !x & HIGH
        };
        let bytes = self.bytes;
        let mut at = self.at;
        let mut escaped = false;
        loop {
            while let Some(chunk) = bytes.get(at..at + 8) {
                let word = u64::from_le_bytes(chunk.try_into().ok()?);
                let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
                let special = control | equal(word, b'"') | equal(word, b'\\');
                if special != 0 {
                    at += (special.trailing_zeros() / 8) as usize;
                    break;
                }
                at += 8;
            }
            match *bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    at += match *bytes.get(at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                        b'u' => {
                            let hex = self.data.get(at + 2..at + 6)?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            // A surrogate (paired or not) is left to the visitor.
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                            6
                        }
                        _ => return None,
                    };
                }
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let rest = self.bytes.get(self.at..)?;
        rest.starts_with(word).then(|| self.at += word.len())
    }

    /// Any value, checked and passed over.
    fn value(&mut self, depth: u8) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string().map(|_| ())
            }
            b'{' => {
                let depth = depth.checked_sub(1)?;
                self.at += 1;
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.eat(b'"')?;
                    self.string()?;
                    self.eat(b':')?;
                    self.value(depth)?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                let depth = depth.checked_sub(1)?;
                self.at += 1;
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.value(depth)?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Notes the member `name` (of the picked member `within`) whose value's text is
    /// `data[start..self.at]`; `None`: it repeats.
    fn note(
        &mut self,
        within: Option<&'static str>,
        name: &'static str,
        start: usize,
    ) -> Option<()> {
        let text = self.data.get(start..self.at)?;
        let found = self.found.as_mut()?;
        if found.iter().any(|f| f.within == within && f.name == name) {
            return None;
        }
        found.push(Found { within, name, text });
        Some(())
    }

    /// The object next with only `members`, nested at most `depth` deep; `within`: the picked
    /// member it is.
    fn object(
        &mut self,
        members: Members,
        depth: u8,
        within: Option<&'static str>,
    ) -> Option<Value> {
        let depth = depth.checked_sub(1)?;
        self.eat(b'{')?;
        let mut kept = Map::new();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(Value::Object(kept));
        }
        loop {
            self.eat(b'"')?;
            let start = self.at;
            if self.string()? {
                return None;
            }
            let key = self.bytes.get(start..self.at - 1)?;
            self.eat(b':')?;
            match members.iter().find(|(name, _)| name.as_bytes() == key) {
                Some((name, Pick::Whole)) => {
                    self.space();
                    let start = self.at;
                    self.value(depth)?;
                    if self.found.is_some() {
                        self.note(within, name, start)?;
                    } else {
                        // Checked as JSON by the walk: only this member's bytes are built.
                        let value = serde_json::from_str(self.data.get(start..self.at)?).ok()?;
                        kept.insert((*name).to_string(), value);
                    }
                }
                Some((name, Pick::Members(inner))) => {
                    self.space();
                    let start = self.at;
                    let value = self.object(inner, depth, Some(name))?;
                    if self.found.is_some() {
                        self.note(within, name, start)?;
                    } else {
                        kept.insert((*name).to_string(), value);
                    }
                }
                None => self.value(depth)?,
            }
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(Value::Object(kept));
                }
                _ => return None,
            }
        }
    }
}

/// [`picked`] through serde's visitor (the members not kept read as `IgnoredAny`).
fn visited(data: &str, members: Members) -> Option<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(data);
    let value = Picked(members).deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(value)
}

struct Picked(Members);

impl<'de> DeserializeSeed<'de> for Picked {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Picked {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().find(|(name, _)| *name == key) {
                Some((name, Pick::Whole)) => {
                    kept.insert((*name).to_string(), map.next_value::<Value>()?);
                }
                Some((name, Pick::Members(members))) => {
                    kept.insert((*name).to_string(), map.next_value_seed(Picked(members))?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const INNER: Members = &[("id", Pick::Whole), ("usage", Pick::Whole)];
    const OUTER: Members = &[
        ("type", Pick::Whole),
        ("response", Pick::Members(INNER)),
        ("d\u{e9}", Pick::Whole),
    ];

    #[test]
    fn only_the_named_members_are_kept_as_a_whole_parse_reads_them() {
        let data = r#"{"type":"t","x":{"deep":[1,{"a":"\u00e9"}]},"response":{"id":"r","usage":{"n":1.5},"big":"…"},"d\u00e9":null,"type":"last"}"#;
        let value = picked(data, OUTER).unwrap();
        assert_eq!(
            value,
            json!({"type": "last", "response": {"id": "r", "usage": {"n": 1.5}}, "dé": null})
        );
        let whole: Value = serde_json::from_str(data).unwrap();
        for key in ["type", "dé"] {
            assert_eq!(value[key], whole[key]);
        }
        assert_eq!(value["response"]["usage"], whole["response"]["usage"]);
    }

    /// Real-shaped Responses events (a lifecycle event repeating the response, items with
    /// text, escapes and non-ASCII, usage, an error) and shapes the walk declines.
    fn events() -> Vec<String> {
        let text = r#"Hé \"q\" \\ \n\u00e9\u0001 🦀 </b>"#;
        vec![
            format!(
                r#"{{"type":"response.created","sequence_number":0,"response":{{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are {text}","max_output_tokens":64,"model":"gpt-4o-mini","output":[],"reasoning":{{"effort":null}},"temperature":0.7,"top_p":1.0,"tools":[{{"type":"function","name":"f","parameters":{{"type":"object"}}}}],"usage":null,"metadata":{{}}}}}}"#
            ),
            format!(
                r#"{{"item":{{"content":[{{"annotations":[{{"type":"url_citation","start_index":0,"end_index":3,"url":"https://x.test/?a=1&b=2","title":"T"}}],"text":"{text}","type":"output_text"}}],"id":"msg_1","role":"assistant","status":"completed","type":"message"}},"output_index":1,"sequence_number":9,"type":"response.output_item.done"}}"#
            ),
            r#"{"item":{"arguments":"{\"city\":\"Paris\"}","call_id":"call_1","id":"fc_1","name":"get_weather","status":"completed","type":"function_call"},"output_index":0,"type":"response.output_item.done"}"#.to_string(),
            format!(
                r#"{{"type":"response.completed","response":{{"id":"resp_1","model":"gpt-4o-mini","status":"incomplete","incomplete_details":{{"reason":"max_output_tokens"}},"output":[{{"id":"rs_1","summary":[{{"text":"{text}","type":"summary_text"}}],"type":"reasoning","encrypted_content":"gAAA+/=="}}],"usage":{{"input_tokens":12,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":64,"output_tokens_details":{{"reasoning_tokens":32}},"total_tokens":76}}}}}}"#
            ),
            r#"{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"The server had an error"}}}"#.to_string(),
            r#"{"type":"error","code":"rate_limit_exceeded","message":"Slow down","param":null,"sequence_number":3}"#.to_string(),
            r#"{"type":"response.output_text.annotation.added","annotation":{"type":"url_citation","start_index":0,"end_index":-1,"url":"u","title":null},"annotation_index":0}"#.to_string(),
            r#"{"type":"t","response":{"usage":{"n":-1.5e-3,"m":1E+3,"o":-0}}}"#.to_string(),
            r#"{"type":"t","x":12345678901234567890,"response":{}}"#.to_string(),
            // Declined by the walk, read by the visitor.
            r#"{"type":"t","x":"\ud83e\udd80","response":{"id":"r"}}"#.to_string(),
            format!(r#"{{"type":"t","x":{}1{}}}"#, "[".repeat(70), "]".repeat(70)),
            r#"{"t\u0079pe":"t","response":{"id":"r"}}"#.to_string(),
        ]
    }

    // The members the Responses reader picks: the walk is tested on what the node reads.
    use crate::wire::translate::responses::read_stream::READ;

    #[test]
    fn the_walk_reads_real_events_as_the_visitor_does() {
        let events = events();
        for (n, event) in events.iter().enumerate() {
            let visited = visited(event, READ);
            assert!(visited.is_some(), "{event}");
            assert_eq!(picked(event, READ), visited, "{event}");
            // The real shapes are read by the walk itself; the last three are declined by it.
            assert_eq!(
                scanned(event, READ).is_some(),
                n < events.len() - 3,
                "{event}"
            );
        }
    }

    #[test]
    fn any_event_broken_anywhere_reads_as_the_visitor_reads_it() {
        let swaps = [
            "", "\"", "\\", ",", ":", "{", "}", "[", "]", " ", "0", "1", "-", ".", "e", "x", "n",
            "\u{1}", "\u{1f}", "\u{7f}", "é", "\\u00", "\\ud800", "\"a\":",
        ];
        let mut cases = 0;
        for event in events() {
            let ends: Vec<usize> = event.char_indices().map(|(at, _)| at).collect();
            for (n, &at) in ends.iter().enumerate() {
                let next = ends.get(n + 1).copied().unwrap_or(event.len());
                // Each character replaced by a third of the swaps (each swap at every third
                // character), or one of the first swaps put before it.
                for (k, swap) in swaps.iter().enumerate() {
                    if (n + k) % 3 != 0 {
                        continue;
                    }
                    let replaced = format!("{}{swap}{}", &event[..at], &event[next..]);
                    let put = (k < 6).then(|| format!("{}{swap}{}", &event[..at], &event[at..]));
                    for broken in std::iter::once(replaced).chain(put) {
                        assert_eq!(picked(&broken, READ), visited(&broken, READ), "{broken}");
                        cases += 1;
                    }
                }
            }
            for cut in ends {
                assert_eq!(picked(&event[..cut], READ), None, "{}", &event[..cut]);
            }
        }
        assert!(cases > 5_000, "{cases}");
    }

    #[test]
    fn what_a_whole_parse_reads_otherwise_is_declined() {
        for declined in [
            r#"{"type":"t","response":"not an object"}"#,
            r#"{"type":"t","response":null}"#,
            r#"{"type":"t"} trailing"#,
            r#"{"type":"t","x":[}"#,
            r#"["type"]"#,
            "not json",
        ] {
            assert_eq!(picked(declined, OUTER), None, "{declined}");
        }
    }
}
