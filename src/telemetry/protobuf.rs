//! The protobuf wire primitives the span encoder writes with: field keys as bytes, varints, a
//! length-delimited field whose length is written after its body, and [`AttributeKey`], an
//! attribute's name with its `KeyValue.key` field encoded once, at compile time, so a span's
//! attributes cost one copy each for their names.

pub use prost::encoding::encoded_len_varint as varint_len;

/// The first byte of field `tag` (below 16) of wire type `wire_type` (0 varint, 1 fixed64,
/// 2 length-delimited, 5 fixed32).
pub const fn field_key(tag: u8, wire_type: u8) -> u8 {
    assert!(tag < 16, "a field key past 15 takes two bytes");
    (tag << 3) | wire_type
}

pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LENGTH_DELIMITED: u8 = 2;
pub const FIXED32: u8 = 5;

/// The longest attribute name an [`AttributeKey`] holds (its length then fits one byte).
const MAX_NAME_BYTES: usize = 62;

/// The bytes of [`AttributeKey::pair_template`]: room for a `KeyValue`'s key and length, its
/// `key` field, and the longest `value` header and varint that follow it.
pub const PAIR_TEMPLATE_BYTES: usize = 2 + (2 + MAX_NAME_BYTES) + 3 + 10;

/// An attribute's name and, as written, its `KeyValue.key` field (key, length, name).
pub struct AttributeKey {
    pub name: &'static str,
    /// Two bytes of room, the `key` field, zeros: copied whole (a copy of known size is a few
    /// moves, not a `memcpy` call), then the room and what follows the key written in place.
    template: [u8; PAIR_TEMPLATE_BYTES],
    key_field_len: u8,
}

impl AttributeKey {
    pub const fn new(name: &'static str) -> Self {
        let bytes = name.as_bytes();
        assert!(bytes.len() <= MAX_NAME_BYTES, "attribute name too long");
        let mut template = [0u8; PAIR_TEMPLATE_BYTES];
        template[2] = field_key(1, LENGTH_DELIMITED);
        template[3] = bytes.len() as u8;
        let mut i = 0;
        while i < bytes.len() {
            template[i + 4] = bytes[i];
            i += 1;
        }
        AttributeKey {
            name,
            template,
            key_field_len: bytes.len() as u8 + 2,
        }
    }

    /// The bytes `KeyValue` field 1 (`key`) takes.
    pub fn key_field_len(&self) -> usize {
        usize::from(self.key_field_len)
    }

    /// `KeyValue` field 1 (`key`), ready to copy.
    pub fn key_field(&self) -> &[u8] {
        &self.template[2..2 + self.key_field_len()]
    }

    /// Two bytes of room (for the pair's field key and length), the `key` field at 2, then
    /// zeros to [`PAIR_TEMPLATE_BYTES`].
    pub fn pair_template(&self) -> &[u8; PAIR_TEMPLATE_BYTES] {
        &self.template
    }
}

impl std::fmt::Debug for AttributeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A base-128 varint, low group first.
#[inline]
pub fn put_varint(mut value: u64, buf: &mut Vec<u8>) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// `value` as a varint at the start of `out` (at least 10 bytes unless `value` is small).
#[inline]
pub fn write_varint(mut value: u64, out: &mut [u8]) {
    let mut at = 0;
    while value >= 0x80 {
        out[at] = (value as u8) | 0x80;
        value >>= 7;
        at += 1;
    }
    out[at] = value as u8;
}

/// Opens a length-delimited field whose length is not known yet: its key and room for a
/// two-byte length. Returns where the body starts, for [`end_message`].
#[inline]
pub fn begin_message(key: u8, buf: &mut Vec<u8>) -> usize {
    buf.extend_from_slice(&[key, 0, 0]);
    buf.len()
}

/// Closes the field [`begin_message`] opened at `body_start`: writes its length, moving the
/// body only when the length does not take exactly two bytes (under 128 or past 16,383).
#[inline]
pub fn end_message(body_start: usize, buf: &mut Vec<u8>) {
    let len = buf.len() - body_start;
    if (0x80..0x4000).contains(&len) {
        buf[body_start - 2] = (len as u8) | 0x80;
        buf[body_start - 1] = (len >> 7) as u8;
    } else {
        let mut length = Vec::with_capacity(10);
        put_varint(len as u64, &mut length);
        buf.splice(body_start - 2..body_start, length);
    }
}

/// The bytes a length-delimited field with a one-byte key and `len` bytes of body takes.
#[inline]
pub fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

#[inline]
pub fn put_header(key: u8, len: usize, buf: &mut Vec<u8>) {
    buf.push(key);
    put_varint(len as u64, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_gets_its_minimal_length_whatever_its_size() {
        for size in [0, 1, 127, 128, 300, 16_383, 16_384, 3_000_000] {
            let mut buf = vec![7];
            let start = begin_message(field_key(2, LENGTH_DELIMITED), &mut buf);
            buf.extend((0..size).map(|i| (i % 251) as u8));
            end_message(start, &mut buf);
            let mut expected = vec![7, 0x12];
            prost::encoding::encode_varint(size as u64, &mut expected);
            expected.extend((0..size).map(|i| (i % 251) as u8));
            assert_eq!(buf, expected, "{size}");
        }
    }

    #[test]
    fn an_attribute_key_is_its_key_value_key_field() {
        let key = AttributeKey::new("gen_ai.usage.cache_read.input_tokens");
        let mut expected = Vec::new();
        prost::encoding::string::encode(1, &key.name.to_owned(), &mut expected);
        assert_eq!(key.key_field(), expected.as_slice());
    }
}
