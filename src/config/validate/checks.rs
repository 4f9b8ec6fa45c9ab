//! The value checks every section shares: counts of at least one, a spelling from a fixed table,
//! required names usable in URLs and error keys, names used once.

use std::collections::HashMap;

use crate::config::error::ErrorSink;

/// A name that can appear in an error key as-is.
pub(super) fn usable_in_key(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '.', '[', ']', ' '])
}

pub(super) fn at_least_one(
    value: Option<u64>,
    default: u64,
    key: &str,
    sink: &mut ErrorSink,
) -> u64 {
    match value {
        Some(0) => {
            sink.push(key, "must be at least 1");
            default
        }
        Some(value) => value,
        None => default,
    }
}

pub(super) fn at_least_one_u32(
    value: Option<u32>,
    default: u32,
    key: &str,
    sink: &mut ErrorSink,
) -> u32 {
    match value {
        Some(0) => {
            sink.push(key, "must be at least 1");
            default
        }
        Some(value) => value,
        None => default,
    }
}

/// Looks a string up in a fixed table of allowed spellings.
pub(super) fn one_of<T: Copy>(
    value: &str,
    allowed: &[(&str, T)],
    key: &str,
    sink: &mut ErrorSink,
) -> Option<T> {
    if let Some((_, parsed)) = allowed.iter().find(|(name, _)| *name == value) {
        return Some(*parsed);
    }
    let names = allowed
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    sink.push(key, format!("`{value}` is not one of {names}"));
    None
}

/// A required name (`name`, `id`) that also appears in URLs and `provider/model` strings.
pub(super) fn required_name(
    value: Option<String>,
    key: &str,
    sink: &mut ErrorSink,
) -> Option<String> {
    match value {
        None => {
            sink.push(key, "missing (required)");
            None
        }
        Some(name) if name.is_empty() => {
            sink.push(key, "must not be empty");
            None
        }
        Some(name) if name.contains('/') => {
            sink.push(key, format!("`{name}` must not contain `/`"));
            None
        }
        Some(name) => Some(name),
    }
}

/// Reports a name already seen; remembers the first place each name was used.
pub(super) fn check_unique(
    name: &str,
    key: &str,
    what: &str,
    seen: &mut HashMap<String, String>,
    sink: &mut ErrorSink,
) -> bool {
    if let Some(first) = seen.get(name) {
        sink.push(key, format!("duplicate {what} `{name}` (first at {first})"));
        false
    } else {
        seen.insert(name.to_owned(), key.to_owned());
        true
    }
}
