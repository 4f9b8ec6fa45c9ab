//! Google's Gemini `generateContent`: read into the hub's form (requests, answers, stream
//! chunks) and written from it (behaviour §15 "Translation"), with the tool-call ids Gemini
//! does not give (`call_ids`), its OpenAPI subset of JSON Schema (`schema`) and its two stream
//! framings (`framing`); Google Search grounding ↔ searches and citations (`grounding`).

pub mod call_ids;
pub mod framing;
pub mod grounding;
pub mod read;
pub mod read_stream;
pub mod scanned_request;
pub mod schema;
pub mod typed_request;
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
    // A name with no capital has no other spelling.
    if !camel.bytes().any(|b| b.is_ascii_uppercase()) {
        return object.get(camel);
    }
    // Most lookups are of members that are absent, in objects of a few members: one walk
    // compares each name with both spellings (the length or the first byte tells most apart),
    // nothing spelled or allocated; the camel spelling wins, else the first in snake case.
    let mut snake = None;
    for (name, value) in object {
        if name == camel {
            return Some(value);
        }
        if snake.is_none() && spells_in_snake(name.as_bytes(), camel.as_bytes()) {
            snake = Some(value);
        }
    }
    snake
}

/// Whether `name` is `camel` in snake case (`inline_data` for `inlineData`).
fn spells_in_snake(name: &[u8], camel: &[u8]) -> bool {
    let mut at = 0;
    for &b in camel {
        if b.is_ascii_uppercase() {
            if name.get(at) != Some(&b'_') {
                return false;
            }
            at += 1;
        }
        if name.get(at) != Some(&b.to_ascii_lowercase()) {
            return false;
        }
        at += 1;
    }
    at == name.len()
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
        let long_snake =
            json!({"a_very_long_member_name_of_more_than_sixty_four_bytes_in_snake_case": 5});
        assert_eq!(
            at(
                &long_snake,
                "aVeryLongMemberNameOfMoreThanSixtyFourBytesInSnakeCase"
            ),
            Some(&json!(5))
        );
    }

    #[test]
    fn the_camel_spelling_wins_and_near_spellings_are_not_taken() {
        let both = json!({"inline_data": 1, "inlineData": 2});
        assert_eq!(at(&both, "inlineData"), Some(&json!(2)));
        let near = json!({"inline_dat": 1, "inline_datas": 2, "inlinedata": 3, "Inline_data": 4, "inline__data": 5});
        assert_eq!(at(&near, "inlineData"), None);
        let capital_first = json!({"_inline": 1});
        assert_eq!(at(&capital_first, "Inline"), Some(&json!(1)));
    }

    /// `member` as it looked before its one walk: the camel spelling by lookup, then a walk.
    fn member_by_lookup<'a>(object: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
        if let Some(found) = object.get(camel) {
            return Some(found);
        }
        if !camel.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        object
            .iter()
            .find(|(name, _)| spells_in_snake(name.as_bytes(), camel.as_bytes()))
            .map(|(_, value)| value)
    }

    #[test]
    fn one_walk_finds_what_the_lookup_found() {
        let objects = [
            json!({}),
            json!({"contents": [], "systemInstruction": 1, "generationConfig": {}}),
            json!({"system_instruction": 1, "generation_config": 2, "tool_config": 3}),
            json!({"a_b": 1, "aB": 2, "zB": 3, "z_b": 4}),
            json!({"z_b": 4, "a_b": 1, "aB": 2, "é_b": 5, "éB": 6, "A_b": 7, "_a": 8}),
            json!({"maxOutputTokens": 64, "temperature": 0, "max_output_tokens": 1,
                   "thinking_config": {"thinking_budget": 1}, "topP": null}),
        ];
        let names = [
            "contents",
            "systemInstruction",
            "generationConfig",
            "toolConfig",
            "aB",
            "zB",
            "éB",
            "AB",
            "A",
            "maxOutputTokens",
            "temperature",
            "thinkingConfig",
            "topP",
            "thinking_config",
            "b",
            "",
        ];
        for object in &objects {
            let object = object.as_object().unwrap();
            for name in names {
                assert_eq!(
                    member(object, name),
                    member_by_lookup(object, name),
                    "{object:?} {name}"
                );
            }
        }
    }
}
