//! A JSON body read by serde: a body of valid UTF-8 (nearly every request and answer) is
//! checked once, whole, and read as a `str`, so serde_json does not check each key, string and
//! raw value again; any other is read as bytes, failing where it always failed.

use serde::Deserialize;

/// `body` read as `T`.
pub(crate) fn from_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    }
}
