//! One span attribute (`KeyValue`) in OTLP protobuf ([`put_attribute`]); [`AttributeSink`],
//! what takes a span's attributes one by one; and [`AttributeBlock`], a run of attributes that
//! is the same on many spans (a provider's), listed once and encoded once.

use crate::telemetry::attributes::Value;
use crate::telemetry::protobuf::{
    field_key, field_len, put_header, varint_len, write_varint, AttributeKey, LENGTH_DELIMITED,
    VARINT,
};

/// `Span` field 9, `attributes`.
pub const SPAN_ATTRIBUTES: u8 = field_key(9, LENGTH_DELIMITED);
const KEY_VALUE_VALUE: u8 = field_key(2, LENGTH_DELIMITED);
const ANY_VALUE_STRING: u8 = field_key(1, LENGTH_DELIMITED);
const ANY_VALUE_INT: u8 = field_key(3, VARINT);

/// What takes a span's attributes, one by one ([`FinishedSpan::each_attribute`]); any
/// closure of a key and a value does.
///
/// [`FinishedSpan::each_attribute`]: crate::telemetry::finished::FinishedSpan::each_attribute
pub trait AttributeSink {
    fn put(&mut self, key: &'static AttributeKey, value: Value<'_>);

    /// Each attribute of `block`, in its order (an encoder copies the block's bytes instead).
    fn put_block(&mut self, block: &AttributeBlock) {
        for (key, value) in &block.pairs {
            self.put(key, value.borrowed());
        }
    }
}

impl<F: FnMut(&'static AttributeKey, Value<'_>)> AttributeSink for F {
    fn put(&mut self, key: &'static AttributeKey, value: Value<'_>) {
        self(key, value);
    }
}

/// Attributes that many spans carry alike, with their encoding as `Span` attributes.
#[derive(Debug)]
pub struct AttributeBlock {
    pairs: Vec<(&'static AttributeKey, OwnedValue)>,
    encoded: Box<[u8]>,
}

#[derive(Debug)]
enum OwnedValue {
    Text(Box<str>),
    Int(i64),
}

impl OwnedValue {
    fn borrowed(&self) -> Value<'_> {
        match self {
            OwnedValue::Text(text) => Value::Text(text),
            OwnedValue::Int(n) => Value::Int(*n),
        }
    }
}

impl AttributeBlock {
    /// The block of `pairs`, in that order.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'static AttributeKey, Value<'a>)>) -> Self {
        let mut encoded = Vec::new();
        let pairs: Vec<_> = pairs
            .into_iter()
            .map(|(key, value)| {
                put_attribute(SPAN_ATTRIBUTES, key, value, &mut encoded);
                let owned = match value {
                    Value::Text(text) => OwnedValue::Text(Box::from(text)),
                    Value::Int(n) => OwnedValue::Int(n),
                };
                (key, owned)
            })
            .collect();
        AttributeBlock {
            pairs,
            encoded: encoded.into_boxed_slice(),
        }
    }

    /// The block as `Span` attributes (field 9), each a `KeyValue`.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }
}

/// A `KeyValue` as field `field`: `{key, value: AnyValue{string_value | int_value}}`. The
/// key's template is copied whole and the lengths and value headers written into it. Inlined
/// at each attribute, where the key's length is a constant.
#[inline(always)]
pub fn put_attribute(field: u8, key: &AttributeKey, value: Value<'_>, buf: &mut Vec<u8>) {
    let at = buf.len();
    let key_len = key.key_field_len();
    let value_at = at + 2 + key_len;
    match value {
        // Every length one byte (what names, ids and models take).
        Value::Text(text) if key_len + 4 + text.len() < 0x80 => {
            let text_len = text.len();
            buf.extend_from_slice(key.pair_template());
            buf[at] = field;
            buf[at + 1] = (key_len + 4 + text_len) as u8;
            buf[value_at..value_at + 4].copy_from_slice(&[
                KEY_VALUE_VALUE,
                (2 + text_len) as u8,
                ANY_VALUE_STRING,
                text_len as u8,
            ]);
            buf.truncate(value_at + 4);
            buf.extend_from_slice(text.as_bytes());
        }
        Value::Text(text) => {
            let any_len = field_len(text.len());
            let pair_len = key_len + field_len(any_len);
            put_header(field, pair_len, buf);
            buf.extend_from_slice(key.key_field());
            put_header(KEY_VALUE_VALUE, any_len, buf);
            put_header(ANY_VALUE_STRING, text.len(), buf);
            buf.extend_from_slice(text.as_bytes());
        }
        Value::Int(n) => {
            // int64 is written as the two's complement varint: at most 10 bytes, so the
            // AnyValue and (with a key of at most 64 bytes) the pair take one length byte.
            let n = n as u64;
            let varint = varint_len(n);
            buf.extend_from_slice(key.pair_template());
            buf[at] = field;
            buf[at + 1] = (key_len + 3 + varint) as u8;
            buf[value_at..value_at + 3].copy_from_slice(&[
                KEY_VALUE_VALUE,
                (1 + varint) as u8,
                ANY_VALUE_INT,
            ]);
            write_varint(n, &mut buf[value_at + 3..]);
            buf.truncate(value_at + 3 + varint);
        }
    }
}

/// An attribute as the `opentelemetry-proto` struct, for the tests that compare with prost.
#[cfg(test)]
pub(crate) fn kv(key: &str, value: Value<'_>) -> opentelemetry_proto::tonic::common::v1::KeyValue {
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(match value {
                Value::Text(text) => any_value::Value::StringValue(text.to_owned()),
                Value::Int(n) => any_value::Value::IntValue(n),
            }),
        }),
        ..KeyValue::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::attributes as attr;

    #[test]
    fn an_attribute_of_any_size_is_the_key_value_prost_writes() {
        static LONGEST: AttributeKey =
            AttributeKey::new("an.attribute.name.of.sixty-two.bytes.which.is.the.most.allowed");
        let long = "t".repeat(200);
        for value in [
            Value::Int(-5),
            Value::Int(i64::MAX),
            Value::Int(0),
            Value::Text(""),
            Value::Text("a"),
            Value::Text(&long[..59]),
            Value::Text(&long[..60]),
            Value::Text(&long),
        ] {
            for key in [&LONGEST, &attr::ERROR_TYPE] {
                let mut ours = vec![1, 2, 3];
                put_attribute(SPAN_ATTRIBUTES, key, value, &mut ours);
                let mut theirs = vec![1, 2, 3];
                prost::encoding::message::encode(9, &kv(key.name, value), &mut theirs);
                assert_eq!(ours, theirs, "{key:?} {value:?}");
            }
        }
    }

    #[test]
    fn a_block_is_its_attributes_encoded_in_order_and_lists_them_in_that_order() {
        let block = AttributeBlock::new([
            (&attr::SERVER_ADDRESS, Value::Text("api.openai.com")),
            (&attr::SERVER_PORT, Value::Int(443)),
            (&attr::PROVIDER, Value::Text("openai")),
        ]);
        let mut one_by_one = Vec::new();
        let mut listed = Vec::new();
        let mut sink = |key: &'static AttributeKey, value: Value<'_>| {
            put_attribute(SPAN_ATTRIBUTES, key, value, &mut one_by_one);
            listed.push(format!("{}={value:?}", key.name));
        };
        sink.put_block(&block);
        assert_eq!(block.encoded(), &one_by_one[..]);
        assert_eq!(
            listed,
            [
                "server.address=Text(\"api.openai.com\")",
                "server.port=Int(443)",
                "quotaroute.provider=Text(\"openai\")"
            ]
        );
    }
}
