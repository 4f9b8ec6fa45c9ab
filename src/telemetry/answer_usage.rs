//! The response model and token counts of a whole upstream answer (OpenAI chat, completions,
//! embeddings, responses; Anthropic messages), for the spans. Read only when a span records
//! them; the counts that bill are `proxy::usage`'s, and these follow the same rule: input
//! tokens include cached ones (Anthropic's are added, OpenAI's already are).

use serde::Deserialize;

/// The longest response model name a span carries.
const MAX_MODEL_CHARS: usize = 128;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerUsage {
    pub model: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Answer {
    model: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    prompt_tokens_details: Option<Details>,
    input_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
}

/// What `body` says; empty when it is not such an answer.
pub fn answer_usage(body: &[u8]) -> AnswerUsage {
    let Ok(answer) = serde_json::from_slice::<Answer>(body) else {
        return AnswerUsage::default();
    };
    let model = answer
        .model
        .filter(|model| model.len() <= MAX_MODEL_CHARS && !model.chars().any(char::is_control));
    let Some(usage) = answer.usage else {
        return AnswerUsage {
            model,
            ..AnswerUsage::default()
        };
    };
    let anthropic_cache = usage
        .cache_read_input_tokens
        .unwrap_or(0)
        .saturating_add(usage.cache_creation_input_tokens.unwrap_or(0));
    let input_tokens = match (usage.prompt_tokens, usage.input_tokens) {
        (Some(prompt), _) => Some(prompt),
        (None, Some(input)) if usage.input_tokens_details.is_some() => Some(input),
        (None, Some(input)) => Some(input.saturating_add(anthropic_cache)),
        (None, None) => None,
    };
    let cache_read_input_tokens = usage.cache_read_input_tokens.or_else(|| {
        usage
            .prompt_tokens_details
            .or(usage.input_tokens_details)
            .and_then(|details| details.cached_tokens)
    });
    AnswerUsage {
        model,
        input_tokens,
        output_tokens: usage.completion_tokens.or(usage.output_tokens),
        cache_read_input_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
