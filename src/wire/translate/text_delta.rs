//! The text pieces of an upstream stream (most of its events), read by borrowing from the
//! event's bytes instead of into a `serde_json::Value`. Each stream reader asks here first and
//! reads every other event — and any event these shapes decline — as a whole `Value`, as it
//! did: a shape here accepts only an event whose every other meaning is absent, so both ways
//! give the same hub events.

use std::borrow::Cow;

use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;

/// Whether a member is there at all (`null` counts: a reader acts on a present `error`).
#[derive(Debug, Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer)?;
        Ok(Present(true))
    }
}

/// A Messages `content_block_delta` holding a `text_delta`: its text.
pub fn messages_text(data: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct MessagesEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        delta: Option<MessagesDelta<'a>>,
    }
    #[derive(Deserialize)]
    struct MessagesDelta<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        text: Option<Cow<'a, str>>,
    }
    let event: MessagesEvent<'_> = serde_json::from_str(data).ok()?;
    let delta = event.delta?;
    if event.kind != "content_block_delta" || delta.kind != "text_delta" {
        return None;
    }
    delta.text
}

/// A Chat Completions chunk whose only news is text: no `error`, no usage, and a first choice
/// whose delta holds a non-empty `content` and no reasoning, refusal, tool call or annotation,
/// with no finish reason. Its `content`.
pub fn chat_content(data: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct ChatChunk<'a> {
        #[serde(default)]
        error: Present,
        usage: Option<IgnoredAny>,
        #[serde(borrow)]
        choices: Vec<ChatChoice<'a>>,
    }
    #[derive(Deserialize)]
    struct ChatChoice<'a> {
        #[serde(borrow)]
        delta: Option<ChatDelta<'a>>,
        #[serde(borrow)]
        finish_reason: Option<Cow<'a, str>>,
    }
    #[derive(Deserialize)]
    struct ChatDelta<'a> {
        #[serde(borrow)]
        content: Option<Cow<'a, str>>,
        #[serde(default)]
        reasoning_content: Present,
        #[serde(default)]
        reasoning: Present,
        #[serde(default)]
        refusal: Present,
        #[serde(default)]
        tool_calls: Present,
        #[serde(default)]
        annotations: Present,
    }
    let chunk: ChatChunk<'_> = serde_json::from_str(data).ok()?;
    if chunk.error.0 || chunk.usage.is_some() {
        return None;
    }
    let choice = chunk.choices.into_iter().next()?;
    let delta = choice.delta?;
    let other_news = delta.reasoning_content.0
        || delta.reasoning.0
        || delta.refusal.0
        || delta.tool_calls.0
        || delta.annotations.0
        || choice.finish_reason.is_some();
    if other_news {
        return None;
    }
    delta.content.filter(|content| !content.is_empty())
}

/// A Responses `response.output_text.delta`: its `delta`.
pub fn responses_text(data: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct ResponsesEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        delta: Option<Cow<'a, str>>,
    }
    let event: ResponsesEvent<'_> = serde_json::from_str(data).ok()?;
    if event.kind != "response.output_text.delta" {
        return None;
    }
    event.delta
}

/// A Gemini chunk whose only news is text (and usage): no `error` or `promptFeedback`, and a
/// first candidate with no grounding and no finish reason whose parts each hold a non-empty
/// `text` and nothing else a reader acts on (thought, signature, call). Its texts, and its
/// `usageMetadata`'s counts. Members are read by their camelCase or snake_case names, as the
/// reader's `at` reads them.
pub struct GeminiText<'a> {
    pub texts: Vec<Cow<'a, str>>,
    pub usage: Option<GeminiUsage>,
}

/// A `usageMetadata` object's counts, read as `gemini::read::usage` reads them (camelCase
/// members, 0 when absent or `null`; any other kind of value declines the chunk).
#[derive(Debug, Default, Deserialize)]
pub struct GeminiUsage {
    #[serde(rename = "promptTokenCount")]
    pub prompt: Option<u64>,
    #[serde(rename = "cachedContentTokenCount")]
    pub cached: Option<u64>,
    #[serde(rename = "candidatesTokenCount")]
    pub candidates: Option<u64>,
    #[serde(rename = "thoughtsTokenCount")]
    pub thoughts: Option<u64>,
}

pub fn gemini_text(data: &str) -> Option<GeminiText<'_>> {
    #[derive(Deserialize)]
    struct GeminiChunk<'a> {
        #[serde(default)]
        error: Present,
        #[serde(default, rename = "promptFeedback", alias = "prompt_feedback")]
        prompt_feedback: Present,
        #[serde(borrow)]
        candidates: Vec<GeminiCandidate<'a>>,
        #[serde(default, rename = "usageMetadata", alias = "usage_metadata")]
        usage_metadata: Option<GeminiUsage>,
    }
    #[derive(Deserialize)]
    struct GeminiCandidate<'a> {
        #[serde(borrow)]
        content: Option<GeminiContent<'a>>,
        #[serde(default, rename = "groundingMetadata", alias = "grounding_metadata")]
        grounding_metadata: Present,
        #[serde(default, rename = "finishReason", alias = "finish_reason")]
        finish_reason: Present,
    }
    #[derive(Deserialize)]
    struct GeminiContent<'a> {
        #[serde(borrow)]
        parts: Vec<GeminiPart<'a>>,
    }
    #[derive(Deserialize)]
    struct GeminiPart<'a> {
        #[serde(borrow)]
        text: Option<Cow<'a, str>>,
        #[serde(default)]
        thought: Present,
        #[serde(default, rename = "thoughtSignature", alias = "thought_signature")]
        thought_signature: Present,
        #[serde(default, rename = "functionCall", alias = "function_call")]
        function_call: Present,
    }
    let chunk: GeminiChunk<'_> = serde_json::from_str(data).ok()?;
    if chunk.error.0 || chunk.prompt_feedback.0 {
        return None;
    }
    let candidate = chunk.candidates.into_iter().next()?;
    if candidate.grounding_metadata.0 || candidate.finish_reason.0 {
        return None;
    }
    let mut texts = Vec::new();
    for part in candidate.content?.parts {
        if part.thought.0 || part.thought_signature.0 || part.function_call.0 {
            return None;
        }
        texts.push(part.text.filter(|text| !text.is_empty())?);
    }
    (!texts.is_empty()).then_some(GeminiText {
        texts,
        usage: chunk.usage_metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_text_delta_is_read_and_nothing_else_is() {
        let text = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"h\u00e9 \"q\""}}"#;
        assert_eq!(messages_text(text).as_deref(), Some("hé \"q\""));
        for declined in [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
            r#"{"type":"content_block_delta","type":"x","delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"ping"}"#,
            "not json",
        ] {
            assert_eq!(messages_text(declined), None, "{declined}");
        }
    }

    #[test]
    fn a_chat_chunk_of_text_alone_is_read_and_nothing_else_is() {
        let text = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}"#;
        assert_eq!(chat_content(text).as_deref(), Some("hi"));
        for declined in [
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"content":"hi","tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"hi","reasoning_content":null}}]}"#,
            r#"{"choices":[{"delta":{"content":"hi","annotations":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"hi","refusal":"no"}}]}"#,
            r#"{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":1}}"#,
            r#"{"choices":[{"delta":{"content":"hi"}}],"error":null}"#,
            r#"{"choices":[{"delta":{"content":""}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[{"delta":{"content":"hi"}}],"choices":[]}"#,
        ] {
            assert_eq!(chat_content(declined), None, "{declined}");
        }
    }

    #[test]
    fn a_responses_text_delta_is_read_and_nothing_else_is() {
        let text = r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"a\nb","sequence_number":4}"#;
        assert_eq!(responses_text(text).as_deref(), Some("a\nb"));
        for declined in [
            r#"{"type":"response.reasoning_summary_text.delta","delta":"x"}"#,
            r#"{"type":"response.output_text.delta"}"#,
            r#"{"type":"response.output_text.done","text":"x"}"#,
        ] {
            assert_eq!(responses_text(declined), None, "{declined}");
        }
    }

    #[test]
    fn a_gemini_chunk_of_text_alone_is_read_and_nothing_else_is() {
        let text = r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3},"modelVersion":"g","responseId":"r"}"#;
        let read = gemini_text(text).expect("text");
        assert_eq!(read.texts, ["a", "b"]);
        let usage = read.usage.expect("usage");
        assert_eq!((usage.prompt, usage.candidates), (Some(3), None));
        let snake =
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usage_metadata":null}"#;
        assert_eq!(gemini_text(snake).expect("text").texts, ["a"]);
        for declined in [
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thoughtSignature":"s"}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a","thought_signature":"s"}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":""}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"groundingMetadata":{}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"promptFeedback":{}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"error":{"code":500}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{},"usage_metadata":{}}"#,
            r#"{"candidates":[]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":1.5}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":7}"#,
        ] {
            assert!(gemini_text(declined).is_none(), "{declined}");
        }
    }
}
