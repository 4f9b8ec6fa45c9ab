//! The last SSE event the router writes when a committed stream breaks (behaviour §3), in the
//! client's protocol. It only renders bytes; the caller masks upstream text before passing it.

use bytes::Bytes;
use serde::Serialize;

#[derive(Serialize)]
struct OpenAiError<'a> {
    error: OpenAiErrorFields<'a>,
}

#[derive(Serialize)]
struct OpenAiErrorFields<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    code: &'a str,
}

#[derive(Serialize)]
struct AnthropicError<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    error: AnthropicErrorFields<'a>,
}

#[derive(Serialize)]
struct AnthropicErrorFields<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
}

/// `data: {"error":{"message","type":"api_error","code"}}` and a blank line (OpenAI streams).
pub fn openai_stream_error(message: &str, code: &str) -> Bytes {
    let error = OpenAiErrorFields {
        message,
        kind: "api_error",
        code,
    };
    frame(None, &OpenAiError { error })
}

/// `event: error` with `data: {"type":"error","error":{"type","message"}}` (Anthropic streams).
pub fn anthropic_stream_error(message: &str, error_type: &str) -> Bytes {
    let error = AnthropicErrorFields {
        kind: error_type,
        message,
    };
    frame(
        Some("error"),
        &AnthropicError {
            kind: "error",
            error,
        },
    )
}

#[derive(Serialize)]
struct GoogleError<'a> {
    error: GoogleErrorFields<'a>,
}

#[derive(Serialize)]
struct GoogleErrorFields<'a> {
    code: u16,
    message: &'a str,
    status: &'a str,
}

/// `data: {"error":{"code","message","status"}}` (Gemini's `alt=sse` streams, behaviour §15).
pub fn gemini_stream_error(message: &str, code: u16, status: &str) -> Bytes {
    let error = GoogleErrorFields {
        code,
        message,
        status,
    };
    frame(None, &GoogleError { error })
}

fn frame(event: Option<&str>, body: &impl Serialize) -> Bytes {
    let mut out = Vec::with_capacity(128);
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // Compact JSON escapes every line break, so one `data:` line holds it all. Serialising
    // borrowed strings into a Vec cannot fail; on failure the event still parses as `{}`.
    if serde_json::to_writer(&mut out, body).is_err() {
        out.extend_from_slice(b"{}");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::sse::SseParser;
    use serde_json::Value;

    fn single_event(bytes: &Bytes) -> (Option<String>, Value) {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.feed(bytes, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0].raw, bytes);
        (
            out[0].event.as_deref().map(str::to_owned),
            serde_json::from_str(&out[0].data).unwrap(),
        )
    }

    #[test]
    fn s3_openai_stream_error_event_shape() {
        let bytes = openai_stream_error("upstream \"broke\"\nmid-stream", "upstream_error");
        assert!(bytes.starts_with(b"data: {\"error\":{\"message\":"));
        let (event, data) = single_event(&bytes);
        assert_eq!(event, None);
        assert_eq!(data["error"]["message"], "upstream \"broke\"\nmid-stream");
        assert_eq!(data["error"]["type"], "api_error");
        assert_eq!(data["error"]["code"], "upstream_error");
    }

    #[test]
    fn s3_anthropic_stream_error_event_shape() {
        let bytes = anthropic_stream_error("Overloaded", "overloaded_error");
        assert!(bytes.starts_with(b"event: error\ndata: {\"type\":\"error\",\"error\":{"));
        let (event, data) = single_event(&bytes);
        assert_eq!(event.as_deref(), Some("error"));
        assert_eq!(data["type"], "error");
        assert_eq!(data["error"]["type"], "overloaded_error");
        assert_eq!(data["error"]["message"], "Overloaded");
    }
}
