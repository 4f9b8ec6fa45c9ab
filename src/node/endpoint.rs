//! The client API's routing endpoints and what each implies: its wire format (which targets may
//! serve it), how its streams are read, and its label in metrics.

use quotaroute_journal::ApiFormat as JournalFormat;

use crate::wire::stream_watch::StreamFormat;

/// One routing endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
    Messages,
    /// `/v1/messages/count_tokens`: routed like `/v1/messages`, no tokens counted.
    CountTokens,
}

impl Endpoint {
    pub fn format(self) -> JournalFormat {
        match self {
            Endpoint::Messages | Endpoint::CountTokens => JournalFormat::Anthropic,
            _ => JournalFormat::Openai,
        }
    }

    pub fn stream_format(self) -> StreamFormat {
        match self {
            Endpoint::ChatCompletions | Endpoint::Embeddings => StreamFormat::OpenAiChat,
            Endpoint::Completions => StreamFormat::OpenAiCompletions,
            Endpoint::Responses => StreamFormat::OpenAiResponses,
            Endpoint::Messages | Endpoint::CountTokens => StreamFormat::Anthropic,
        }
    }

    /// Its `gen_ai.operation.name` (OpenTelemetry GenAI semantic conventions) in traces.
    pub fn gen_ai_operation(self) -> &'static str {
        match self {
            Endpoint::Completions => "text_completion",
            Endpoint::Embeddings => "embeddings",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::ChatCompletions | Endpoint::Responses | Endpoint::Messages => "chat",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat_completions",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Responses => "responses",
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
        }
    }
}
