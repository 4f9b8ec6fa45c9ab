//! Gemini's answers as the router reads them (behaviour §15): what one `alt=sse` event means
//! (content, usage, error) and a whole answer's usage (its `usageMetadata`, whose shape is
//! `usage`'s). Reads only; the relay and the charge decide what to do with it.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::usage::{TokenCounts, UsageMetadata};

/// The members of a `GenerateContentResponse` the router reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow)]
    candidates: Option<Vec<Candidate<'a>>>,
    #[serde(default, borrow)]
    prompt_feedback: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    finish_reason: Option<&'a RawValue>,
}

/// The usage of a whole Gemini answer (`None`: it has none, or is not an object).
pub fn answer_usage(body: &[u8]) -> Option<TokenCounts> {
    let answer: Answer<'_> = serde_json::from_slice(body).ok()?;
    answer
        .usage_metadata
        .as_ref()
        .and_then(UsageMetadata::counts)
}

/// What one `alt=sse` event's data says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeminiEvent {
    /// Not a JSON object.
    Garbage,
    /// `{"error": …}`: the classifier reads the value.
    Error(Value),
    /// A candidate with content, a finish reason, or a prompt blocked for safety (an answer:
    /// it commits the stream).
    Content {
        usage: Option<TokenCounts>,
        finished: bool,
    },
    /// Usage alone.
    Usage(TokenCounts),
    /// Nothing the router reads.
    Other,
}

/// Reads one stream event's data.
pub fn stream_event(data: &str) -> GeminiEvent {
    let Ok(answer) = serde_json::from_str::<Answer<'_>>(data) else {
        return GeminiEvent::Garbage;
    };
    if answer.error.is_some() {
        return GeminiEvent::Error(serde_json::from_str(data).unwrap_or(Value::Null));
    }
    let usage = answer
        .usage_metadata
        .as_ref()
        .and_then(UsageMetadata::counts);
    let candidates = answer.candidates.unwrap_or_default();
    let finished = candidates
        .iter()
        .any(|candidate| candidate.finish_reason.is_some_and(|r| r.get() != "null"));
    let has_content = candidates.iter().any(|candidate| {
        candidate
            .content
            .is_some_and(|c| c.get().contains("\"parts\""))
    });
    if has_content || finished || answer.prompt_feedback.is_some() {
        return GeminiEvent::Content { usage, finished };
    }
    match usage {
        Some(usage) => GeminiEvent::Usage(usage),
        None => GeminiEvent::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_metadata_counts_thoughts_as_output_and_cached_inside_the_input() {
        let body = br#"{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP"}],
            "usageMetadata":{"promptTokenCount":120,"cachedContentTokenCount":100,"candidatesTokenCount":7,"thoughtsTokenCount":30,"totalTokenCount":157}}"#;
        let counts = answer_usage(body).unwrap();
        assert_eq!(
            (counts.tokens_in, counts.tokens_out, counts.tokens_cached),
            (120, 37, 100)
        );
        assert_eq!(answer_usage(br#"{"candidates":[]}"#), None);
        assert_eq!(answer_usage(b"[1]"), None);
    }

    #[test]
    fn stream_events_tell_content_usage_and_errors_apart() {
        let text = r#"{"candidates":[{"content":{"parts":[{"text":"He"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":5}}"#;
        assert!(matches!(
            stream_event(text),
            GeminiEvent::Content {
                finished: false,
                usage: Some(_)
            }
        ));
        let last = r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":9}}"#;
        assert!(matches!(
            stream_event(last),
            GeminiEvent::Content { finished: true, .. }
        ));
        let blocked = r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#;
        assert!(matches!(stream_event(blocked), GeminiEvent::Content { .. }));
        let error =
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#;
        assert!(matches!(stream_event(error), GeminiEvent::Error(_)));
        assert_eq!(stream_event("not json"), GeminiEvent::Garbage);
        assert_eq!(stream_event("{}"), GeminiEvent::Other);
    }
}
