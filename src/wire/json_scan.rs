//! A strict reader of JSON: one walk over the bytes that checks all of them as JSON and hands
//! out the members a shape reads, without serde's visitors (the stream readers' text shapes,
//! the typed answers, a relayed answer's summary, a request's routing members). It declines
//! (`None`) whatever it does not read exactly as `serde_json` does — an exponent, an integer of
//! more than 18 digits, a `\u` escape of a surrogate, nesting deeper than [`DEPTH`] — so a
//! shape built on it accepts only what serde reads the same way; the shape's caller reads
//! every declined body or event as it did before.

use std::borrow::Cow;

/// The deepest nesting read (serde_json stops at 128).
pub const DEPTH: u8 = 64;

/// A position in one event's JSON text.
pub struct Scan<'a> {
    text: &'a str,
    pub(crate) at: usize,
    /// Where the values that may differ between a stream's chunks are, when asked
    /// ([`Scan::recording`]): what `chunk_template` makes a template of.
    holes: Option<Vec<Hole>>,
}

/// A value a chunk template leaves open: any other value of its kind reads the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoleKind {
    /// A string passed over.
    String,
    /// A number passed over.
    Number,
    /// A string the shape hands out (a text piece).
    Text,
    /// A whole number the shape reads into its count `slot`.
    Count(u8),
}

/// One open value of a recorded scan: its bytes `start..end` in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    pub start: usize,
    pub end: usize,
    pub kind: HoleKind,
}

impl<'a> Scan<'a> {
    pub fn new(text: &'a str) -> Self {
        Scan {
            text,
            at: 0,
            holes: None,
        }
    }

    /// A scan that records its open values ([`Scan::holes`]).
    pub fn recording(text: &'a str) -> Self {
        Scan {
            text,
            at: 0,
            holes: Some(Vec::new()),
        }
    }

    /// The open values recorded, in order.
    pub fn holes(self) -> Vec<Hole> {
        self.holes.unwrap_or_default()
    }

    fn record(&mut self, start: usize, kind: HoleKind) {
        if let Some(holes) = self.holes.as_mut() {
            holes.push(Hole {
                start,
                end: self.at,
                kind,
            });
        }
    }

    /// A string the shape hands out ([`HoleKind::Text`] when recording).
    pub fn text(&mut self) -> Option<Cow<'a, str>> {
        self.space();
        let start = self.at;
        let text = self.string()?;
        self.record(start, HoleKind::Text);
        Some(text)
    }

    /// A string handed out that a template leaves open as one passed over
    /// ([`HoleKind::String`] when recording: another chunk may hold another string there).
    pub fn passed_string(&mut self) -> Option<Cow<'a, str>> {
        self.space();
        let start = self.at;
        let text = self.string()?;
        self.record(start, HoleKind::String);
        Some(text)
    }

    /// A whole number of at most 18 digits read into count `slot` ([`HoleKind::Count`] when
    /// recording); `None` for anything else.
    pub fn count(&mut self, slot: u8) -> Option<u64> {
        self.space();
        let start = self.at;
        let count = match self.plain_count() {
            Some(count) => count,
            None => self.number()??,
        };
        self.record(start, HoleKind::Count(slot));
        Some(count)
    }

    /// `null` (`Some(None)`), or a whole number of at most 18 digits as [`Scan::count`] reads
    /// it into slot 0: serde's `Option<u64>`, and a usage count serde reads with no flaw.
    pub fn count_or_null(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        Some(Some(self.count(0)?))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// `byte` next (after whitespace), taken.
    fn eat(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Nothing but whitespace is left.
    pub fn end(&mut self) -> Option<()> {
        self.space();
        (self.at == self.text.len()).then_some(())
    }

    /// A string, its escapes decoded (borrowed when it has none: its bytes then hold no quote,
    /// backslash or control byte, [`plain`]).
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let text = self.text;
        let bytes = text.as_bytes();
        let start = self.at;
        // The plain bytes up to the next quote, backslash or control byte: nearly every string
        // (every key) ends there, borrowed, without the escape decoder's frame.
        let at = start + plain_run(bytes.get(start..)?)?;
        if *bytes.get(at)? == b'"' {
            self.at = at + 1;
            return Some(Cow::Borrowed(text.get(start..at)?));
        }
        self.escaped(start, at).map(Cow::Owned)
    }

    /// The rest of a string from `run` (its plain bytes up to `at`, where a backslash or a
    /// control byte stands), its escapes decoded.
    #[cold]
    #[inline(never)]
    fn escaped(&mut self, mut run: usize, mut at: usize) -> Option<String> {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut whole = String::new();
        loop {
            match *bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    whole.push_str(text.get(run..at)?);
                    return Some(whole);
                }
                b'\\' => {
                    whole.push_str(text.get(run..at)?);
                    let (c, width) = match *bytes.get(at + 1)? {
                        b'"' => ('"', 2),
                        b'\\' => ('\\', 2),
                        b'/' => ('/', 2),
                        b'b' => ('\u{8}', 2),
                        b'f' => ('\u{c}', 2),
                        b'n' => ('\n', 2),
                        b'r' => ('\r', 2),
                        b't' => ('\t', 2),
                        b'u' => {
                            let hex = text.get(at + 2..at + 6)?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            let code = u32::from_str_radix(hex, 16).ok()?;
                            // A surrogate (paired or not) is left to serde_json.
                            (char::from_u32(code)?, 6)
                        }
                        _ => return None,
                    };
                    whole.push(c);
                    at += width;
                    run = at;
                }
                // A control byte: not JSON.
                _ => return None,
            }
            // The plain bytes up to the next quote, backslash or control byte.
            at += plain_run(bytes.get(at..)?)?;
        }
    }

    /// A whole number of 1 to 18 digits right here (no whitespace before it, no sign,
    /// fraction or exponent, no leading zero): its value, as [`Scan::number`] reads the same
    /// number into `Some(Some(_))`. `None` for anything else, with nothing taken: a template's
    /// counts (most are such numbers) read without `number`'s general walk.
    #[inline]
    pub fn plain_count(&mut self) -> Option<u64> {
        let bytes = self.text.as_bytes();
        let first = self.at;
        let mut at = first;
        // Wrapping past 18 digits, which are declined below.
        let mut value: u64 = 0;
        while let Some(digit) = bytes.get(at).map(|byte| byte.wrapping_sub(b'0')) {
            if digit > 9 {
                break;
            }
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            at += 1;
        }
        let digits = at - first;
        let leading_zero = digits > 1 && bytes.get(first) == Some(&b'0');
        let more = matches!(bytes.get(at), Some(b'.' | b'e' | b'E'));
        if digits == 0 || digits > 18 || leading_zero || more {
            return None;
        }
        self.at = at;
        Some(value)
    }

    /// A number; its value when it is a whole number of at most 18 digits without a sign
    /// (`Some(None)`: another number, read and checked).
    pub fn number(&mut self) -> Option<Option<u64>> {
        self.space();
        let bytes = self.text.as_bytes();
        let negative = self.peek()? == b'-';
        if negative {
            self.at += 1;
        }
        let digits = |scan: &mut Scan<'_>| {
            let start = scan.at;
            while bytes.get(scan.at).is_some_and(u8::is_ascii_digit) {
                scan.at += 1;
            }
            scan.at - start
        };
        let first = self.at;
        // The whole part's value, read as its digits are passed over (wrapping past 18
        // digits, which are declined below).
        let mut value: u64 = 0;
        while let Some(digit) = bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
            self.at += 1;
        }
        let whole = self.at - first;
        // No leading zeros, at least one digit, at most 18.
        if whole == 0 || whole > 18 || (whole > 1 && bytes.get(first) == Some(&b'0')) {
            return None;
        }
        let mut fraction = false;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return None;
            }
            fraction = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            return None;
        }
        if negative || fraction {
            return Some(None);
        }
        Some(Some(value))
    }

    /// The text read from `start` (an earlier [`Scan::at`]) to here.
    pub fn read_since(&self, start: usize) -> Option<&'a str> {
        self.text.get(start..self.at)
    }

    /// `null` next: taken (true); else nothing is taken.
    pub fn null(&mut self) -> bool {
        self.space();
        let rest = self.text.as_bytes().get(self.at..).unwrap_or_default();
        let found = rest.starts_with(b"null");
        if found {
            self.at += 4;
        }
        found
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word).then(|| self.at += word.len())
    }

    /// Where the next value starts (whitespace passed over).
    pub fn value_start(&mut self) -> usize {
        self.space();
        self.at
    }

    /// The next byte after whitespace, not taken.
    pub fn next_byte(&mut self) -> Option<u8> {
        self.space();
        self.peek()
    }

    /// Any value, checked and passed over: its text as it stands.
    pub fn value(&mut self, depth: u8) -> Option<&'a str> {
        let start = self.value_start();
        self.skip(depth)?;
        self.read_since(start)
    }

    /// Any value, checked and passed over.
    pub fn skip(&mut self, depth: u8) -> Option<()> {
        if self.holes.is_none() {
            return self.pass_over(depth);
        }
        self.skip_recording(depth)
    }

    /// [`Scan::skip`] of a scan that records no holes: one loop over the value's bytes, the
    /// containers open kept as bits (set: an object) instead of a call per member. It takes
    /// and declines exactly what the recording walk does (a container's members are read one
    /// level deeper, `depth` levels at most).
    fn pass_over(&mut self, depth: u8) -> Option<()> {
        let mut objects: u64 = 0;
        let mut open: u8 = 0;
        loop {
            // A value.
            self.space();
            match self.peek()? {
                b'"' => self.pass_string()?,
                container @ (b'{' | b'[') => {
                    let (object, close) = (container == b'{', container + 2);
                    self.at += 1;
                    self.space();
                    if self.peek()? == close {
                        self.at += 1;
                    } else {
                        if open >= depth {
                            return None;
                        }
                        open += 1;
                        objects = (objects << 1) | u64::from(object);
                        if object {
                            self.pass_key()?;
                        }
                        continue;
                    }
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => {
                    if self.plain_count().is_none() {
                        self.number()?;
                    }
                }
                _ => return None,
            }
            // After a value: the containers it closes, up to the next member.
            loop {
                if open == 0 {
                    return Some(());
                }
                self.space();
                let object = objects & 1 == 1;
                match (self.peek()?, object) {
                    (b',', _) => {
                        self.at += 1;
                        if object {
                            self.pass_key()?;
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => {
                        self.at += 1;
                        open -= 1;
                        objects >>= 1;
                    }
                    _ => return None,
                }
            }
        }
    }

    /// A member's key and its colon, passed over.
    fn pass_key(&mut self) -> Option<()> {
        self.space();
        if self.peek()? != b'"' {
            return None;
        }
        self.pass_string()?;
        self.eat(b':')
    }

    /// The string at the quote here, checked as [`Scan::string`] checks it and passed over.
    fn pass_string(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let start = self.at + 1;
        let at = start + plain_run(bytes.get(start..)?)?;
        if *bytes.get(at)? == b'"' {
            self.at = at + 1;
            return Some(());
        }
        self.escaped(start, at).map(drop)
    }

    /// [`Scan::skip`] of a scan that records: one call per member, each value's hole noted.
    fn skip_recording(&mut self, depth: u8) -> Option<()> {
        self.space();
        match self.peek()? {
            b'"' => {
                let start = self.at;
                self.string()?;
                self.record(start, HoleKind::String);
                Some(())
            }
            b'{' => self.object(|scan, _| scan.skip_recording(depth.checked_sub(1)?)),
            b'[' => self.array(|scan| scan.skip_recording(depth.checked_sub(1)?)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                // A plain whole number (most are) without the general walk.
                if self.plain_count().is_none() {
                    self.number()?;
                }
                self.record(start, HoleKind::Number);
                Some(())
            }
            _ => None,
        }
    }

    /// An object: `member` reads each member's value (after its key).
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.space();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            self.space();
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

    /// An array: `element` reads each element.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.space();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            element(self)?;
            self.space();
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
}

/// Where the first quote, backslash or control byte of `rest` is (`None`: none is): eight
/// bytes at a time, each word checked for all three at once (Mycroft's test for a zero
/// byte, as serde_json skips a string's plain run), the last few bytes one at a time.
pub(crate) fn plain_run(rest: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(word) = rest.get(at..at + 8) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        let bytes = u64::from_le_bytes(eight);
        // `trailing_zeros` finds the lowest stop (bits above it are not looked at).
        let found = stop_bytes(bytes);
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    // The last few bytes, one at a time.
    while let Some(&b) = rest.get(at) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Whether `bytes` hold no quote, backslash or control byte: the inside of a JSON string with
/// no escape (its text is its bytes), and a text serde_json writes as it is between quotes.
/// Eight bytes a step, the last few filled up with a plain byte, as [`plain_run`] tests them.
pub fn plain(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    let mut last = [b'a'; 8];
    if let Some(tail) = last.get_mut(..words.remainder().len()) {
        tail.copy_from_slice(words.remainder());
    }
    let mut stops = stop_bytes(u64::from_le_bytes(last));
    for word in words.by_ref() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        stops |= stop_bytes(u64::from_le_bytes(eight));
    }
    stops == 0
}

/// The high bit of the lowest quote, backslash or control byte of `bytes` (and maybe of bytes
/// above it): 0 when it holds none.
#[inline]
fn stop_bytes(bytes: u64) -> u64 {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let control = bytes.wrapping_sub(ONES * 0x20) & !bytes;
    let quote = bytes ^ (ONES * u64::from(b'"'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = bytes ^ (ONES * u64::from(b'\\'));
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & HIGH
}

/// Members already read once: a repeated one declines (serde_json's derived readers refuse
/// it; a `Value` keeps the last).
#[derive(Default)]
pub struct Seen(u32);

impl Seen {
    /// Marks member `bit`; `None` when it was marked before.
    pub fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }

    /// `Some` when members `0..count` were all read.
    pub fn all(&self, count: u32) -> Option<()> {
        let mask = (1 << count) - 1;
        (self.0 & mask == mask).then_some(())
    }
}

/// Tests: the text of an object of `members`, each the index of its key in `keys`, of its
/// value in `values`, and whether its colon is spaced.
#[cfg(test)]
pub(crate) fn object_text(
    members: &[(usize, usize, bool)],
    keys: &[&str],
    values: &[&str],
) -> String {
    let members: Vec<String> = members
        .iter()
        .map(|&(key, value, spaced)| {
            let gap = if spaced { " : " } else { ":" };
            format!("\"{}\"{gap}{}", keys[key], values[value])
        })
        .collect();
    format!("{{{}}}", members.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::IgnoredAny;
    use serde_json::Value;

    fn skipped(text: &str) -> Option<()> {
        let mut scan = Scan::new(text);
        scan.skip(DEPTH)?;
        scan.end()
    }

    #[test]
    fn what_it_reads_a_whole_parse_reads_and_it_declines_the_rest() {
        for json in [
            r#"{"a":"h\u00e9 \"q\" \\ \/ \b\f\n\r\t 🦀","b":[1,-2,0.5,-0.25,true,false,null,{}],"c":{"d":[]}}"#,
            " { \"a\" : [ 1 , { \"b\" : null } ] } \n",
            r#""\u0000\u007f\uFFFF""#,
            "123456789012345678",
            "[]",
        ] {
            assert!(skipped(json).is_some(), "{json}");
            assert!(serde_json::from_str::<Value>(json).is_ok(), "{json}");
        }
        // Invalid JSON, and valid JSON it leaves to serde_json.
        for json in [
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u+123"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"[1,]"#,
            r#"{"a":1e5}"#,
            r#"{"a":"\ud83e\udd80"}"#,
            r#"{"a":"\udc00"}"#,
            "1234567890123456789",
            &format!("{}1{}", "[".repeat(70), "]".repeat(70)),
        ] {
            assert!(skipped(json).is_none(), "{json}");
        }
        assert!(serde_json::from_str::<IgnoredAny>(r#"{"a":1e5}"#).is_ok());
    }

    #[test]
    fn strings_are_decoded_as_serde_json_decodes_them() {
        for json in [r#""plain""#, r#""h\u00e9 \"q\"\n\u0001 🦀 \/""#, r#""""#] {
            let mut scan = Scan::new(json);
            let read = scan.string().unwrap();
            assert_eq!(read, serde_json::from_str::<String>(json).unwrap());
            assert_eq!(matches!(read, Cow::Borrowed(_)), !json.contains('\\'));
        }
    }

    /// The plain run's end as a byte at a time finds it.
    fn plain_run_bytewise(rest: &[u8]) -> Option<usize> {
        rest.iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
    }

    #[test]
    fn plain_runs_end_where_a_byte_at_a_time_ends_them() {
        // Every stop byte (and bytes next to them) at every place of a run longer than two
        // words, after plain ASCII and after non-ASCII.
        for stop in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            for fill in ["abcdefgh", "é🦀ü", " !#[]^`~\u{7f}"] {
                let base: Vec<u8> = fill.bytes().cycle().take(27).collect();
                assert_eq!(plain_run(&base), None);
                for at in 0..base.len() {
                    let mut bytes = base.clone();
                    bytes[at] = stop;
                    assert_eq!(plain_run(&bytes), Some(at), "{bytes:?}");
                    assert_eq!(plain_run(&bytes), plain_run_bytewise(&bytes));
                }
            }
        }
        for near in [0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff] {
            assert_eq!(plain_run(&[near; 19]), None, "{near:#x}");
        }
    }

    #[test]
    fn a_text_is_plain_when_a_byte_at_a_time_finds_no_stop_in_it() {
        // Every stop byte (and bytes next to them) at every place of texts of every length
        // up to three words, after plain ASCII and after non-ASCII.
        for stop in [
            b'"', b'\\', 0x00, 0x1f, b'\n', 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff,
        ] {
            for fill in ["abcdefgh", "é🦀ü", " !#[]^`~\u{7f}"] {
                for len in 0..25 {
                    let base: Vec<u8> = fill.bytes().cycle().take(len).collect();
                    assert!(plain(&base), "{base:?}");
                    for at in 0..len {
                        let mut bytes = base.clone();
                        bytes[at] = stop;
                        assert_eq!(plain(&bytes), plain_run_bytewise(&bytes).is_none());
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn plain_texts_match_a_byte_at_a_time(bytes in proptest::collection::vec(
            prop_oneof![
                any::<u8>(),
                proptest::sample::select(vec![b'"', b'\\', 0x1f, 0x20, b'a', 0xc3]),
            ],
            0..40,
        )) {
            prop_assert_eq!(plain(&bytes), plain_run_bytewise(&bytes).is_none());
        }

        #[test]
        fn plain_runs_match_a_byte_at_a_time(bytes in proptest::collection::vec(
            prop_oneof![
                any::<u8>(),
                proptest::sample::select(vec![b'"', b'\\', 0x1f, 0x20, b'a', 0xc3]),
            ],
            0..80,
        )) {
            prop_assert_eq!(plain_run(&bytes), plain_run_bytewise(&bytes));
        }

        #[test]
        fn strings_read_as_serde_json_reads_them(text in proptest::collection::vec(
            prop_oneof![
                any::<char>().prop_map(String::from),
                proptest::sample::select(vec![
                    "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\b", "\\u00e9", "\\u0000",
                    "\\ud83e\\udd80", "\\x", "\"", "\u{1}", "\u{1f}", "plain text run ",
                    "é🦀", "\\u12",
                ]).prop_map(String::from),
            ],
            0..40,
        )) {
            let json = format!("\"{}\"", text.concat());
            let mut scan = Scan::new(&json);
            let ours = scan.string().filter(|_| scan.end().is_some());
            let theirs = serde_json::from_str::<String>(&json);
            match ours {
                Some(read) => prop_assert_eq!(Ok(read.into_owned()), theirs.map_err(|e| e.to_string())),
                // Declined: not JSON, or a surrogate escape it leaves to serde_json.
                None => prop_assert!(theirs.is_err() || json.contains("\\ud")),
            }
        }
    }

    #[test]
    fn a_string_ends_only_at_its_closing_quote() {
        // A control byte or a backslash where the plain run stops is no end of the string,
        // even where what follows would close the value around it.
        for json in [
            "\"abc\u{1}",
            "\"abc\u{1f}\"",
            "\"abc\\",
            "\"abc\\\"",
            "\"a long run of plain text\n",
        ] {
            let mut scan = Scan::new(json);
            assert_eq!(scan.string(), None, "{json:?}");
            assert!(serde_json::from_str::<String>(json).is_err(), "{json:?}");
        }
        for json in [
            "{\"k\":\"a\u{1}}",
            "{\"k\":\"plain text of many words\u{1f}}",
            "[\"a\u{0}]",
            "{\"k\u{1}:1}",
        ] {
            let mut scan = Scan::new(json);
            let read = scan.skip(DEPTH).and_then(|()| scan.end());
            assert_eq!(read, None, "{json:?}");
            assert!(
                serde_json::from_str::<IgnoredAny>(json).is_err(),
                "{json:?}"
            );
        }
        assert_eq!(Scan::new("\"abc\"").string().as_deref(), Some("abc"));
    }

    #[test]
    fn counts_are_whole_numbers_and_other_numbers_are_passed_over() {
        let number = |text: &str| Scan::new(text).number();
        assert_eq!(number("0"), Some(Some(0)));
        assert_eq!(number("42"), Some(Some(42)));
        assert_eq!(number("-42"), Some(None));
        assert_eq!(number("4.5"), Some(None));
        assert_eq!(
            number("999999999999999999"),
            Some(Some(999_999_999_999_999_999))
        );
        assert_eq!(number("9999999999999999999"), None);
        assert_eq!(
            number("123456789012345678"),
            Some(Some(123_456_789_012_345_678))
        );
        assert_eq!(number("184467440737095516160"), None);
        assert_eq!(number("1e3"), None);
        assert_eq!(number("01"), None);
    }

    /// The loop of a scan that records nothing and the recording walk: each takes what the
    /// other takes, to the same byte, and declines what it declines.
    fn passed_alike(text: &str, depth: u8) -> Option<usize> {
        let (mut looped, mut walked) = (Scan::new(text), Scan::recording(text));
        let looped_read = looped.skip(depth).map(|()| looped.at);
        let walked_read = walked.skip(depth).map(|()| walked.at);
        assert_eq!(looped_read, walked_read, "{text:?} at depth {depth}");
        looped_read
    }

    #[test]
    fn the_loop_passes_over_what_the_walk_does_to_the_depth() {
        for levels in [0, 1, 2, 3, 63, 64, 65, 66] {
            for (open, close, member) in [("[", "]", "1"), ("{\"k\":", "}", "1")] {
                let nested = format!("{}{member}{}", open.repeat(levels), close.repeat(levels));
                let empty_inside = format!(
                    "{}{}{}",
                    open.repeat(levels),
                    if open == "[" { "[]" } else { "{}" },
                    close.repeat(levels)
                );
                for depth in [0, 1, 2, 63, DEPTH] {
                    passed_alike(&nested, depth);
                    passed_alike(&empty_inside, depth);
                }
            }
        }
        assert_eq!(
            passed_alike(r#" {"a" : [1, {"b":null}, "c\n"]} , x"#, DEPTH),
            Some(31)
        );
        assert_eq!(passed_alike(r#"{"a":[1,2}"#, DEPTH), None);
    }

    proptest! {
        // Enough cases that rare token runs (a key, its colon and a value) are met.
        #![proptest_config(ProptestConfig::with_cases(4096))]
        #[test]
        fn the_loop_and_the_walk_pass_over_any_text_alike(tokens in proptest::collection::vec(
            proptest::sample::select(vec![
                "{", "}", "[", "]", ",", ":", " ", "\"a\"", "\"\\u00e9\\n\"", "\"\\ud83e\\udd80\"",
                "\"\\x\"", "\"\u{1}\"", "1", "-0.5", "1e3", "01", "true", "nul", "null",
            ]),
            0..24,
        ), depth in 0u8..4) {
            passed_alike(&tokens.concat(), depth);
        }

        #[test]
        fn the_loop_passes_over_any_value_as_the_walk_does(value in any_value()) {
            let compact = serde_json::to_string(&value).unwrap();
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            passed_alike(&compact, DEPTH);
            passed_alike(&pretty, 2);
        }
    }

    /// JSON values of every kind, nested a few levels.
    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z\"\\\\\n\u{e9}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{0,3}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// A plain count is what `number` reads as a whole number, taken as far; anything
        /// else it leaves, untaken, to `number`.
        #[test]
        fn a_plain_count_is_read_as_number_reads_a_whole_number(
            text in "[ -]?0?[0-9]{0,20}(\\.[0-9]{0,2})?([eE]-?[0-9])?[,} x]?",
        ) {
            let (mut plain, mut general) = (Scan::new(&text), Scan::new(&text));
            match plain.plain_count() {
                Some(count) => {
                    prop_assert_eq!(general.number(), Some(Some(count)));
                    prop_assert_eq!(plain.at, general.at);
                }
                None => {
                    prop_assert_eq!(plain.at, 0);
                    let whole = general.number().flatten();
                    prop_assert!(whole.is_none() || text.starts_with(' '), "{}", text);
                }
            }
        }
    }
}
