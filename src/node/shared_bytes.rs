//! Small per-request byte strings — the `x-quotaroute-*` header values, an upstream request's
//! URI, credential and request id — written into a buffer each thread shares between them,
//! so each is a slice of one allocation instead of an allocation of its own. Owns only that
//! buffer; what a value may hold stays the `http` crate's rule (checked here as it checks).
//!
//! A slice keeps its buffer alive until it is dropped; every value here lives for one request
//! or one response, so a buffer is freed soon after the thread moves to the next one.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};
use http::header::HeaderValue;

/// One buffer: ~30 requests' values, so its allocation (and the one that shares it) is paid
/// once per ~30 requests.
const BUFFER_BYTES: usize = 8 * 1024;

/// A value longer than this gets an allocation of its own rather than ending a buffer early.
const LARGEST_SHARED: usize = 512;

thread_local! {
    /// The rest of this thread's current buffer.
    static BUFFER: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// `parts` one after the other, as one `Bytes`.
pub fn concat(parts: &[&[u8]]) -> Bytes {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    if len > LARGEST_SHARED {
        let mut own = BytesMut::with_capacity(len);
        for part in parts {
            own.extend_from_slice(part);
        }
        return own.freeze();
    }
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        // `capacity` is what is left after the slices split off before.
        if buffer.capacity() < len {
            *buffer = BytesMut::with_capacity(BUFFER_BYTES);
        }
        for part in parts {
            buffer.extend_from_slice(part);
        }
        buffer.split().freeze()
    })
}

/// `value` as a header value, as `HeaderValue::from_str` would take it (visible ASCII, space
/// and tab); `None` where it would refuse it.
pub fn header_value(value: &str) -> Option<HeaderValue> {
    if !value.bytes().all(is_visible_or_blank) {
        return None;
    }
    HeaderValue::from_maybe_shared(concat(&[value.as_bytes()])).ok()
}

/// `number` in decimal as a header value, as `HeaderValue::from(number)` writes it.
pub fn decimal(number: u64) -> HeaderValue {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = number;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    match HeaderValue::from_maybe_shared(concat(&[&digits[start..]])) {
        Ok(value) => value,
        // Digits are always a valid value; kept total rather than asserted.
        Err(_) => HeaderValue::from(number),
    }
}

/// What `HeaderValue::from_str` accepts: visible ASCII, space and tab.
fn is_visible_or_blank(byte: u8) -> bool {
    byte == b'\t' || (b' '..=b'~').contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_the_parts_in_order() {
        assert_eq!(&concat(&[b"Bearer ", b"sk-1"])[..], b"Bearer sk-1");
        assert_eq!(&concat(&[])[..], b"");
        assert_eq!(&concat(&[b"", b"a", b""])[..], b"a");
    }

    #[test]
    fn values_stay_whole_when_the_buffer_runs_out() {
        // Values of every length up to past one buffer's worth, all kept alive together so a
        // value written into a new buffer cannot overwrite one still held from the old.
        let values: Vec<(Vec<u8>, Bytes)> = (0..3 * BUFFER_BYTES / 100)
            .map(|i| {
                let text: Vec<u8> = (0..i % 200).map(|j| b'a' + ((i + j) % 26) as u8).collect();
                let shared = concat(&[&text[..text.len() / 2], &text[text.len() / 2..]]);
                (text, shared)
            })
            .collect();
        for (text, shared) in &values {
            assert_eq!(&shared[..], &text[..]);
        }
    }

    #[test]
    fn a_long_value_is_whole() {
        let long = vec![b'x'; 3 * BUFFER_BYTES];
        assert_eq!(&concat(&[&long, b"y"])[..long.len()], &long[..]);
        assert_eq!(concat(&[&long, b"y"]).len(), long.len() + 1);
    }

    #[test]
    fn header_values_are_taken_as_from_str_takes_them() {
        for byte in 0..=u8::MAX {
            let bytes = [b'a', byte, b'z'];
            // Bytes past ASCII are not one `char` each; a lone one is no `&str` at all.
            let Ok(text) = std::str::from_utf8(&bytes) else {
                continue;
            };
            let expected = HeaderValue::from_str(text).ok();
            assert_eq!(header_value(text), expected, "byte {byte}");
        }
        for text in ["", "é", "model-é", "gpt-4o", "a\u{7f}", "conn one\tTab"] {
            assert_eq!(
                header_value(text),
                HeaderValue::from_str(text).ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn decimals_are_written_as_from_u64_writes_them() {
        let mut numbers = vec![0, 1, 9, 10, 99, 100, 12_345, u64::MAX, u64::MAX / 10];
        numbers.extend((0..20).map(|power| 10u64.pow(power)));
        numbers.extend((1..20).map(|power| 10u64.pow(power) - 1));
        for number in numbers {
            assert_eq!(decimal(number), HeaderValue::from(number), "{number}");
        }
    }
}
