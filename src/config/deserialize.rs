//! Turning TOML into the raw structs while collecting *every* problem, not just serde's first.
//!
//! Owns the retry loop: deserialize one section or array element; on an unknown key or a value
//! of the wrong type, record `key: reason`, remove that key and try again. So two typos in one
//! connection are two errors, and a wrong-typed key is not reported a second time as missing.
//! It never judges values (that is `validate`) and never lets a string value into a message.

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use super::error::ErrorSink;

/// The most keys one element can lose before we stop retrying (bounds the loop).
const MAX_REMOVALS_PER_ELEMENT: usize = 256;

/// Deserializes `value` as `T`; every error goes into `sink` under `key_prefix` + the inner path.
/// `None` only when the value itself has the wrong shape (e.g. a string where a table belongs).
pub(crate) fn deserialize_collecting<T: DeserializeOwned>(
    mut value: toml::Value,
    key_prefix: &str,
    sink: &mut ErrorSink,
) -> Option<T> {
    for _ in 0..MAX_REMOVALS_PER_ELEMENT {
        let error = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) => return Some(parsed),
            Err(error) => error,
        };
        let mut path: Vec<Segment> = error.path().iter().cloned().collect();
        let message = error.inner().message().to_owned();
        let reason = match unknown_field(&message) {
            Some((field, expected)) => {
                // The path may or may not already end at the unknown key: make it end there.
                if !matches!(path.last(), Some(Segment::Map { key }) if *key == field) {
                    path.push(Segment::Map { key: field });
                }
                format!("unknown key{expected}")
            }
            None => redact_values(&message),
        };
        // Remove the deepest table key on the path so the next try gets past this problem.
        while matches!(path.last(), Some(Segment::Seq { .. } | Segment::Unknown)) {
            path.pop();
        }
        sink.push(render_key(key_prefix, &path), reason);
        if path.is_empty() || !remove_at(&mut value, &path) {
            return None;
        }
    }
    None
}

/// `prefix` + `.key` / `[index]` segments, e.g. `connections[2]` + `limits.tokens_7d`.
pub(crate) fn render_key(prefix: &str, path: &[Segment]) -> String {
    let mut key = prefix.to_owned();
    for segment in path {
        match segment {
            Segment::Map { key: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Enum { variant } => {
                key.push('.');
                key.push_str(variant);
            }
            Segment::Unknown => key.push_str(".?"),
        }
    }
    key
}

/// Removes the table key that `path` ends at; `false` if the path does not lead to one.
fn remove_at(value: &mut toml::Value, path: &[Segment]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut current = value;
    for segment in parents {
        let next = match (segment, current) {
            (Segment::Map { key }, toml::Value::Table(table)) => table.get_mut(key),
            (Segment::Seq { index }, toml::Value::Array(array)) => array.get_mut(*index),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => return false,
        }
    }
    match (last, current) {
        (Segment::Map { key }, toml::Value::Table(table)) => table.remove(key).is_some(),
        _ => false,
    }
}

/// Splits serde's "unknown field `x`, expected one of `a`, `b`" into (`x`, "; expected one of
/// `a`, `b`").
fn unknown_field(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, after) = rest.split_once('`')?;
    let expected = after
        .strip_prefix(", ")
        .map(|expected| format!("; {expected}"))
        .unwrap_or_default();
    Some((field.to_owned(), expected))
}

/// Drops string values from serde messages (`invalid type: string "sk-…", expected u32`
/// → `invalid type: string, expected u32`): a misplaced key must not reach an error message.
pub(crate) fn redact_values(message: &str) -> String {
    let mut text = message.to_owned();
    while let Some(start) = text.find("string \"") {
        let value_start = start + "string \"".len();
        let Some(length) = text[value_start..].find("\", expected") else {
            text.replace_range(start.., "string");
            break;
        };
        text.replace_range(start + "string".len()..value_start + length + 1, "");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_string_values_from_serde_messages() {
        assert_eq!(
            redact_values("invalid type: string \"sk-secret\", expected u32"),
            "invalid type: string, expected u32"
        );
        assert_eq!(
            redact_values("invalid type: integer `5`, expected a string"),
            "invalid type: integer `5`, expected a string"
        );
        assert_eq!(
            redact_values("invalid value: string \"x"),
            "invalid value: string"
        );
    }

    #[test]
    fn unknown_field_message_is_split() {
        assert_eq!(
            unknown_field("unknown field `wieght`, expected one of `a`, `b`"),
            Some(("wieght".to_owned(), "; expected one of `a`, `b`".to_owned()))
        );
        assert_eq!(unknown_field("missing field `x`"), None);
    }
}
