//! A `serde_json::Value` written as compact JSON straight into bytes: the bytes
//! `serde_json::to_vec` makes (members in the map's order, numbers as serde_json writes them,
//! strings escaped as it escapes them), without its `io::Write` layer and with strings copied
//! eight bytes a step (`sse_write::write_json_str`; a short one with nothing to escape, such as
//! a member's name, copied whole), whole numbers in decimal without serde's writer: a
//! translated request's body. Also an object and an array written member by member, for the
//! writers that write a request without a `Value` of it.

use bytes::{BufMut, BytesMut};
use serde_json::Value;

use super::sse_write::write_json_str;

/// Appends `value` as compact JSON.
pub fn write_value(out: &mut BytesMut, value: &Value) {
    match value {
        Value::Null => out.put_slice(b"null"),
        Value::Bool(true) => out.put_slice(b"true"),
        Value::Bool(false) => out.put_slice(b"false"),
        Value::Number(number) => match (number.as_u64(), number.as_i64()) {
            (Some(whole), _) => write_u64(out, whole),
            (None, Some(negative)) => {
                out.put_u8(b'-');
                write_u64(out, negative.unsigned_abs());
            }
            // A float serializes without error and `BytesMut`'s writer never fails.
            _ => {
                let _ = serde_json::to_writer(out.writer(), number);
            }
        },
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.put_u8(b'[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.put_u8(b',');
                }
                write_value(out, item);
            }
            out.put_u8(b']');
        }
        Value::Object(members) => {
            out.put_u8(b'{');
            for (at, (name, member)) in members.iter().enumerate() {
                if at > 0 {
                    out.put_u8(b',');
                }
                write_str(out, name);
                out.put_u8(b':');
                write_value(out, member);
            }
            out.put_u8(b'}');
        }
    }
}

/// A whole number in decimal, as serde_json writes it.
fn write_u64(out: &mut BytesMut, mut number: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    out.put_slice(&digits[at..]);
}

/// `text` as a JSON string: a short one with nothing to escape (a member's name, a role, a
/// type) copied as it is, checked byte by byte; any other by `write_json_str`.
pub fn write_str(out: &mut BytesMut, text: &str) {
    let plain = text.len() <= 16 && text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        out.reserve(text.len() + 2);
        out.put_u8(b'"');
        out.put_slice(text.as_bytes());
        out.put_u8(b'"');
    } else {
        write_json_str(out, text);
    }
}

/// A request written as bytes, and where its `model` string is in them (quotes included).
pub type RequestBytes = (BytesMut, std::ops::Range<usize>);

/// A JSON object written member by member into bytes, in the order its writer adds them: a
/// writer that stands in for a `serde_json::Map` adds them sorted by name, as the map writes
/// them (debug builds check it).
pub struct ObjectWriter<'o> {
    out: &'o mut BytesMut,
    empty: bool,
    #[cfg(debug_assertions)]
    last: Option<&'static str>,
}

impl<'o> ObjectWriter<'o> {
    /// Opens an object in `out`.
    pub fn open(out: &'o mut BytesMut) -> Self {
        out.put_u8(b'{');
        ObjectWriter {
            out,
            empty: true,
            #[cfg(debug_assertions)]
            last: None,
        }
    }

    /// Starts member `name`: its value is what is written next into the bytes returned.
    pub fn member(&mut self, name: &'static str) -> &mut BytesMut {
        #[cfg(debug_assertions)]
        {
            debug_assert!(
                self.last.is_none_or(|last| last < name),
                "{name} out of order"
            );
            self.last = Some(name);
        }
        // A member's name is the code's own, with nothing to escape: copied as it is, with its
        // quotes, colon and the comma before it in one reservation.
        debug_assert!(name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'));
        self.out.reserve(name.len() + 4);
        if !self.empty {
            self.out.put_u8(b',');
        }
        self.empty = false;
        self.out.put_u8(b'"');
        self.out.put_slice(name.as_bytes());
        self.out.put_slice(b"\":");
        self.out
    }

    pub fn str(&mut self, name: &'static str, text: &str) {
        write_str(self.member(name), text);
    }

    /// Member `name`: the string `text`; where it is in the bytes, quotes included.
    pub fn str_span(&mut self, name: &'static str, text: &str) -> std::ops::Range<usize> {
        let out = self.member(name);
        let start = out.len();
        write_str(out, text);
        start..out.len()
    }

    pub fn value(&mut self, name: &'static str, value: &Value) {
        write_value(self.member(name), value);
    }

    pub fn u64(&mut self, name: &'static str, number: u64) {
        write_u64(self.member(name), number);
    }

    /// Member `name`: an array of `values`.
    pub fn values(&mut self, name: &'static str, values: &[Value]) {
        let mut array = ArrayWriter::open(self.member(name));
        for value in values {
            write_value(array.item(), value);
        }
        array.close();
    }

    pub fn bool(&mut self, name: &'static str, yes: bool) {
        write_value(self.member(name), &Value::Bool(yes));
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.put_u8(b'}');
    }
}

/// A JSON array written item by item into bytes.
pub struct ArrayWriter<'o> {
    out: &'o mut BytesMut,
    empty: bool,
}

impl<'o> ArrayWriter<'o> {
    /// Opens an array in `out`.
    pub fn open(out: &'o mut BytesMut) -> Self {
        out.put_u8(b'[');
        ArrayWriter { out, empty: true }
    }

    /// Starts an item: it is what is written next into the bytes returned.
    pub fn item(&mut self) -> &mut BytesMut {
        if !self.empty {
            self.out.put_u8(b',');
        }
        self.empty = false;
        self.out
    }

    /// Closes the array.
    pub fn close(self) {
        self.out.put_u8(b']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_is_written_as_serde_json_writes_it() {
        let values = [
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!([0, 9, 10, 99, 100, -1, -10, i64::MIN, i64::MAX, u64::MAX, 1.0, -1.5, 1e-7,
                   "", "a", "\"", "\\", "\n", "\u{1f}", "\u{7f}", "é", "0123456789abcdef",
                   "0123456789abcdefg", "0123456789abcde\"", "0123456789abcdef\"", {"\"": "\\"}]),
            json!({"b": [1, -2, 2.5, 1e300, -0.0, 18_446_744_073_709_551_615u64, null, false],
                   "a": "é \"q\" \\ \n \t \u{1} \u{7f} 🦀 </script>",
                   "nested": {"z": [{"y": {}}, []], "\u{0}key\n": "v"},
                   "": ""}),
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Say hello in one short sentence."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
                "max_tokens": 64, "temperature": 0.7, "tools": [{"type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object",
                "properties": {"city": {"type": "string"}}}}}]}),
        ];
        for value in values {
            let mut out = BytesMut::new();
            write_value(&mut out, &value);
            assert_eq!(
                &out[..],
                serde_json::to_vec(&value).unwrap().as_slice(),
                "{value}"
            );
        }
    }
}
