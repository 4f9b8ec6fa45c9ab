//! The response model and token counts of a whole upstream answer (OpenAI chat, completions,
//! embeddings, responses; Anthropic messages), for the spans: made from what the node's one
//! parse of the answer already read (`wire::usage::response_summary`), so tracing never parses
//! a body again. Input tokens include cached ones, as the billed counts do.

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::wire::usage::TokenCounts;

/// The longest response model name a span carries.
const MAX_MODEL_CHARS: usize = 128;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerUsage {
    pub model: Option<Arc<str>>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

impl AnswerUsage {
    /// The answer's `model` (when it is a short string without control characters) and its
    /// counts.
    pub fn of(model: Option<&RawValue>, counts: Option<&TokenCounts>) -> Self {
        let model = model
            .and_then(|raw| model_text(raw.get()))
            .filter(|model| model.len() <= MAX_MODEL_CHARS && !has_control(model))
            .map(Arc::from);
        AnswerUsage {
            model,
            input_tokens: counts.map(|counts| counts.tokens_in),
            output_tokens: counts.map(|counts| counts.tokens_out),
            cache_read_input_tokens: counts.map(|counts| counts.tokens_cached),
        }
    }
}

/// Whether `text` has a control character: printable ASCII (what models are) is told by its
/// bytes alone.
fn has_control(text: &str) -> bool {
    !text.bytes().all(|byte| (0x20..0x7f).contains(&byte)) && text.chars().any(char::is_control)
}

/// A JSON string's text: the raw text between the quotes when it has no escape (what models
/// are), else decoded.
fn model_text(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(std::borrow::Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw)
        .ok()
        .map(std::borrow::Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::usage::response_summary;

    fn answer_usage(body: &[u8]) -> AnswerUsage {
        let summary = response_summary(body).unwrap_or_default();
        AnswerUsage::of(summary.model, summary.counts.as_ref())
    }

    #[test]
    fn each_answer_shape_gives_its_model_and_tokens() {
        let chat = br#"{"model":"gpt-4o-mini-2024-07-18","usage":{"prompt_tokens":19,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":8}}}"#;
        assert_eq!(
            answer_usage(chat),
            AnswerUsage {
                model: Some("gpt-4o-mini-2024-07-18".into()),
                input_tokens: Some(19),
                output_tokens: Some(10),
                cache_read_input_tokens: Some(8),
            }
        );
        let responses = br#"{"model":"o3","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":4},"output_tokens":87}}"#;
        let usage = answer_usage(responses);
        assert_eq!(usage.input_tokens, Some(36));
        assert_eq!(usage.cache_read_input_tokens, Some(4));
        let messages = br#"{"model":"claude-x","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":5}}"#;
        let usage = answer_usage(messages);
        assert_eq!(usage.input_tokens, Some(1110));
        assert_eq!(usage.output_tokens, Some(5));
        assert_eq!(usage.cache_read_input_tokens, Some(1000));
        assert_eq!(answer_usage(b"not json"), AnswerUsage::default());
    }

    #[test]
    fn a_model_that_is_not_a_short_plain_string_is_left_out() {
        let number = br#"{"model":5,"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let usage = answer_usage(number);
        assert_eq!(usage.model, None);
        assert_eq!(usage.output_tokens, Some(2));
        let long = format!(r#"{{"model":"{}"}}"#, "m".repeat(200));
        assert_eq!(answer_usage(long.as_bytes()).model, None);
        assert_eq!(answer_usage(br#"{"model":"a\u0007b"}"#).model, None);
        // A C1 control, escaped or raw (JSON allows it unescaped).
        assert_eq!(answer_usage(br#"{"model":"a\u0085b"}"#).model, None);
        assert_eq!(
            answer_usage("{\"model\":\"a\u{85}b\"}".as_bytes()).model,
            None
        );
        assert_eq!(
            answer_usage("{\"model\":\"modèle\"}".as_bytes())
                .model
                .as_deref(),
            Some("modèle")
        );
        assert_eq!(
            answer_usage(br#"{"model":"gpt-\u0034o"}"#).model.as_deref(),
            Some("gpt-4o")
        );
    }
}
