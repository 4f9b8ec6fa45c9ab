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
    let mut snake = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    object.get(&snake)
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
