//! The hub every translation goes through (behaviour §14): its types (`form`) and the small
//! readers of JSON every API's translators share.

pub mod form;

use serde_json::Value;

/// `value[key]` as a string, `""` when absent.
pub fn str_at<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `value[key]` as a non-empty string.
pub fn text_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `value[key]` as an unsigned count, 0 when absent.
pub fn count_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `value[key]` as an array (empty when absent or not one).
pub fn array_at<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}
