//! Google's Gemini `generateContent`: read into the hub's form (requests, answers, stream
//! chunks) and written from it (behaviour §15 "Translation"), with the tool-call ids Gemini
//! does not give (`call_ids`), its OpenAPI subset of JSON Schema (`schema`) and its two stream
//! framings (`framing`); Google Search grounding ↔ searches and citations (`grounding`).

pub mod call_ids;
pub mod framing;
pub mod grounding;
pub mod read;
pub mod read_stream;
pub mod schema;
pub mod write;
pub mod write_stream;

use serde_json::{Map, Value};

/// `value[camel]`, or the same member in snake case (Google's REST API takes both:
/// `inlineData` / `inline_data`).
pub fn at<'a>(value: &'a Value, camel: &str) -> Option<&'a Value> {
    member(value.as_object()?, camel)
}

/// [`at`] in an object.
pub fn member<'a>(object: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
    if let Some(found) = object.get(camel) {
        return Some(found);
    }
    // A name with no capital has no other spelling; the others are spelled on the stack (every
    // member name Google's API has fits), most lookups being of members that are absent.
    if !camel.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut snake = [0u8; 64];
    let mut len = 0;
    for b in camel.bytes() {
        let spelled: &[u8] = if b.is_ascii_uppercase() {
            &[b'_', b.to_ascii_lowercase()]
        } else {
            std::slice::from_ref(&b)
        };
        let end = len + spelled.len();
        snake.get_mut(len..end)?.copy_from_slice(spelled);
        len = end;
    }
    // ASCII letters and `_` replaced ASCII letters: still UTF-8.
    let snake = std::str::from_utf8(snake.get(..len)?).ok()?;
    object.get(snake)
}

/// [`at`] as a string, `""` when absent.
pub fn str_of<'a>(value: &'a Value, camel: &str) -> &'a str {
    at(value, camel).and_then(Value::as_str).unwrap_or("")
}

/// [`at`] as an array (empty when absent or not one).
pub fn array_of<'a>(value: &'a Value, camel: &str) -> &'a [Value] {
    at(value, camel)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

#[cfg(test)]
mod member_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_member_is_found_by_either_spelling() {
        let value = json!({"inline_data": 1, "thoughtSignature": 2, "text": 3, "a_b_c": 4});
        assert_eq!(at(&value, "inlineData"), Some(&json!(1)));
        assert_eq!(at(&value, "thoughtSignature"), Some(&json!(2)));
        assert_eq!(at(&value, "text"), Some(&json!(3)));
        assert_eq!(at(&value, "aBC"), Some(&json!(4)));
        assert_eq!(at(&value, "functionCall"), None);
        assert_eq!(at(&value, "missing"), None);
        let long = "a".repeat(40) + "BCDEFGHIJKLMNOPQRSTUVWXYZ";
        assert_eq!(at(&value, &long), None);
    }
}
