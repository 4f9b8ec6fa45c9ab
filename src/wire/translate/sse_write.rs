//! Writing translated SSE events: the one encoder every stream direction shares.

use bytes::{BufMut, BytesMut};
use serde_json::Value;

/// Writes one SSE event (`event:` when named) with `data` as JSON.
pub fn write_data(out: &mut BytesMut, event: Option<&str>, data: &Value) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(b"data: ");
    write_json(out, data);
    out.extend_from_slice(b"\n\n");
}

/// Appends `value` as compact JSON, the bytes `value.to_string()` makes, serialized straight
/// into `out`: `Display` goes through `fmt::Write` piece by piece, ~3× the instructions per
/// translated stream event (bench/translate-pairs.sh, docs/measurements.md).
pub fn write_json(out: &mut BytesMut, value: &Value) {
    // A `Value` (string keys) serializes without error and `BytesMut`'s writer never fails.
    let _ = serde_json::to_writer(out.writer(), value);
}

/// [`write_json_str`] of a text known to hold nothing to escape when `is_plain` (no quote,
/// backslash or control byte, as `json_scan::plain` finds): then its bytes between quotes.
pub fn write_known_json_str(out: &mut BytesMut, text: &str, is_plain: bool) {
    if is_plain {
        out.extend_from_slice(b"\"");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\"");
    } else {
        write_json_str(out, text);
    }
}

/// Appends `text` as a JSON string (quoted and escaped as serde_json escapes it): a text delta's
/// piece written between bytes the stream's writer keeps, without a `Value` around it.
///
/// The bytes serde_json writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00xx` for the
/// other control characters, all else as it is), eight bytes a step: a run with nothing to
/// escape (nearly every text) is copied whole instead of looked up byte by byte.
pub fn write_json_str(out: &mut BytesMut, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.put_u8(b'"');
    // Bytes up to `copied` are written; those up to `at` need no escape.
    let (mut copied, mut at) = (0, 0);
    while at < bytes.len() {
        let rest = &bytes[at..];
        // The next eight bytes, read as one word; the last few filled up with spaces (never
        // escaped): a short piece (most text deltas) is checked in one step too.
        let (word, step) = match rest.first_chunk::<8>() {
            Some(eight) => (u64::from_le_bytes(*eight), 8),
            None => {
                let mut eight = [b' '; 8];
                eight[..rest.len()].copy_from_slice(rest);
                (u64::from_le_bytes(eight), rest.len())
            }
        };
        if !escapes_any(word) {
            at += step;
            continue;
        }
        let b = bytes[at];
        if let Some(escaped) = escape(b) {
            out.put_slice(&bytes[copied..at]);
            match escaped {
                Escape::Short(short) => out.put_slice(&[b'\\', short]),
                Escape::Unicode => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.put_slice(b"\\u00");
                    out.put_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
                }
            }
            copied = at + 1;
        }
        at += 1;
    }
    out.put_slice(&bytes[copied..]);
    out.put_u8(b'"');
}

/// How a byte is escaped in a JSON string.
enum Escape {
    /// `\` and this letter or sign.
    Short(u8),
    /// `\u00` and its two hex digits.
    Unicode,
}

/// How serde_json escapes `b`, `None` when it writes it as it is.
fn escape(b: u8) -> Option<Escape> {
    Some(match b {
        b'"' => Escape::Short(b'"'),
        b'\\' => Escape::Short(b'\\'),
        0x08 => Escape::Short(b'b'),
        0x0c => Escape::Short(b'f'),
        b'\n' => Escape::Short(b'n'),
        b'\r' => Escape::Short(b'r'),
        b'\t' => Escape::Short(b't'),
        0..0x20 => Escape::Unicode,
        _ => return None,
    })
}

/// Whether any of the eight bytes of `word` is escaped: below 0x20, `"` or `\` (the
/// has-less-than and has-zero-byte tests, exact for a whole word).
fn escapes_any(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = word ^ (ONES * u64::from(b'"'));
    let quote = quote.wrapping_sub(ONES) & !quote & HIGH;
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let backslash = backslash.wrapping_sub(ONES) & !backslash & HIGH;
    below_space | quote | backslash != 0
}

/// Appends `number` as JSON writes it (its decimal digits), without serde's writer around it.
pub fn write_json_u64(out: &mut BytesMut, number: u64) {
    // u64::MAX has 20 digits.
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = number;
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
        start -= 1;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

/// `value` as compact JSON bytes (what `value.to_string()` holds), without `Display`.
pub fn json_bytes(value: &Value) -> BytesMut {
    let mut out = BytesMut::new();
    write_json(&mut out, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_written_as_display_writes_it() {
        let value = json!({"b": [1, 2.5, null, true], "a": "é \"q\" \n \u{1}", "c": {}});
        assert_eq!(&json_bytes(&value)[..], value.to_string().as_bytes());
        let mut out = BytesMut::new();
        write_data(&mut out, Some("message_delta"), &value);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            format!("event: message_delta\ndata: {value}\n\n")
        );
    }

    #[test]
    fn a_string_and_a_count_are_written_as_their_values_are() {
        let long = "a longer text of many words, \"quoted\" and \\ back\tslashed, é 🦀\u{1f}\u{0}";
        let every_byte: String = (0u8..0x80).map(char::from).collect();
        for text in [
            "",
            "plain",
            "é \"q\" \\ \n \t \u{1} \u{7f} 🦀",
            "</script>",
            "é🦀\u{7f}/",
            "\u{1f}",
            "a\"",
            "\\",
            long,
            "exactly8",
            "sixteen bytes!!\n",
            "\u{8}\u{c}\r\"\"\\\\",
            &every_byte,
            &every_byte[1..],
            &every_byte[5..],
        ] {
            let mut out = BytesMut::new();
            write_json_str(&mut out, text);
            assert_eq!(&out[..], Value::from(text).to_string().as_bytes());
        }
        // A byte to escape (or one beside them) at every place of a short piece and of a
        // piece's last few bytes after whole words.
        for escaped in ['"', '\\', '\n', '\u{0}', '\u{1f}', ' ', '!', '\u{7f}', 'é'] {
            for len in 1..20 {
                for at in 0..len {
                    let text: String = (0..len)
                        .map(|i| if i == at { escaped } else { 'a' })
                        .collect();
                    let mut out = BytesMut::new();
                    write_json_str(&mut out, &text);
                    assert_eq!(&out[..], Value::from(text.as_str()).to_string().as_bytes());
                }
            }
        }
        for number in [0, 7, 10, 99, 100, 1_700_000_000, u64::MAX - 1, u64::MAX] {
            let mut out = BytesMut::new();
            write_json_u64(&mut out, number);
            assert_eq!(&out[..], Value::from(number).to_string().as_bytes());
        }
    }
}
