//! Trace and span ids and the W3C Trace Context `traceparent` header
//! (`00-<trace id>-<parent id>-<flags>`): parsed from a client, written for an upstream.

use http::HeaderValue;

/// The header's name (W3C Trace Context, lower case as HTTP/2 requires).
pub const TRACEPARENT: &str = "traceparent";

/// A 16-byte trace id, never all zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id, never all zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    pub fn random() -> Self {
        loop {
            let id = fastrand::u128(..).to_be_bytes();
            if id != [0; 16] {
                return TraceId(id);
            }
        }
    }
}

impl SpanId {
    pub fn random() -> Self {
        loop {
            let id = fastrand::u64(..).to_be_bytes();
            if id != [0; 8] {
                return SpanId(id);
            }
        }
    }
}

/// What a client's `traceparent` names: the trace, the client's span, whether it samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteParent {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
}

/// A `traceparent` value, or `None` when it is not one (then the request starts a new trace,
/// as the spec says a receiver must).
pub fn parse_traceparent(value: &HeaderValue) -> Option<RemoteParent> {
    let text = value.to_str().ok()?.trim();
    let mut parts = text.split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let span = parts.next()?;
    let flags = parts.next()?;
    let version = u8::from_str_radix(version, 16)
        .ok()
        .filter(|_| version.len() == 2)?;
    // Version 00 has exactly four parts; a later version may add more, never 0xff.
    if version == 0xff || (version == 0 && parts.next().is_some()) {
        return None;
    }
    let trace_id = TraceId(hex_bytes::<16>(trace)?);
    let span_id = SpanId(hex_bytes::<8>(span)?);
    let [flags] = hex_bytes::<1>(flags)?;
    if trace_id.0 == [0; 16] || span_id.0 == [0; 8] {
        return None;
    }
    Some(RemoteParent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
    })
}

/// The `traceparent` naming `span_id` of `trace_id`, sampled.
pub fn traceparent(trace_id: TraceId, span_id: SpanId) -> Option<HeaderValue> {
    // `00-` 32 hex `-` 16 hex `-01`, written in place.
    let mut text = *b"00-00000000000000000000000000000000-0000000000000000-01";
    write_hex(&mut text[3..35], &trace_id.0);
    write_hex(&mut text[36..52], &span_id.0);
    HeaderValue::from_bytes(&text).ok()
}

/// Each byte's two lower-case hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

fn write_hex(out: &mut [u8], bytes: &[u8]) {
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
    }
}

/// Lower-case hex of `bytes` (the only form the spec allows), as the tests read ids.
#[cfg(test)]
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *slot = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_round_trips() {
        let value =
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let parent = parse_traceparent(&value).unwrap();
        assert!(parent.sampled);
        assert_eq!(hex(&parent.trace_id.0), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&parent.span_id.0), "00f067aa0ba902b7");
        assert_eq!(
            traceparent(parent.trace_id, parent.span_id).unwrap(),
            value.to_str().unwrap()
        );
        let unsampled =
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(!parse_traceparent(&unsampled).unwrap().sampled);
    }

    #[test]
    fn malformed_traceparents_start_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(
                parse_traceparent(&HeaderValue::from_str(bad).unwrap()),
                None,
                "{bad}"
            );
        }
        // A later version may carry more fields.
        let future = HeaderValue::from_static(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more",
        );
        assert!(parse_traceparent(&future).is_some());
    }
}
