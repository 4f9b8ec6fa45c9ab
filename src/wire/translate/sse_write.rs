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

/// Appends `text` as a JSON string (quoted and escaped as serde_json escapes it): a text delta's
/// piece written between bytes the stream's writer keeps, without a `Value` around it.
pub fn write_json_str(out: &mut BytesMut, text: &str) {
    let bytes = text.as_bytes();
    // serde_json escapes a quote, a backslash and control bytes, nothing else: a string of
    // none (most) is its bytes between quotes.
    if bytes.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
        // A `str` serializes without error and `BytesMut`'s writer never fails.
        let _ = serde_json::to_writer(out.writer(), text);
        return;
    }
    out.reserve(bytes.len() + 2);
    out.extend_from_slice(b"\"");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\"");
}

/// Appends `number` as JSON writes it.
pub fn write_json_u64(out: &mut BytesMut, number: u64) {
    let _ = serde_json::to_writer(out.writer(), &number);
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
        for text in [
            "",
            "plain",
            "é \"q\" \\ \n \t \u{1} \u{7f} 🦀",
            "</script>",
            "é🦀\u{7f}/",
            "\u{1f}",
            "a\"",
            "\\",
        ] {
            let mut out = BytesMut::new();
            write_json_str(&mut out, text);
            assert_eq!(&out[..], Value::from(text).to_string().as_bytes());
        }
        let mut out = BytesMut::new();
        write_json_u64(&mut out, 18_446_744_073_709_551_615);
        assert_eq!(&out[..], b"18446744073709551615");
    }
}
