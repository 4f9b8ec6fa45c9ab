//! The client API's routing endpoints and what each implies: its wire format (which targets may
//! serve it), how its streams are read, and its label in metrics.

use quotaroute_journal::ApiFormat as JournalFormat;

use crate::wire::stream_watch::StreamFormat;
use crate::wire::translate::Direction;

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

    /// The translation a target of `target` format needs (behaviour §14); `None` when it speaks
    /// this endpoint's format, or when nothing can carry this endpoint across (completions,
    /// embeddings; `count_tokens` for an OpenAI-format target is answered locally).
    pub fn translation_to(self, target: JournalFormat) -> Option<Direction> {
        if target == self.format() {
            return None;
        }
        match self {
            Endpoint::ChatCompletions => Some(Direction::ChatToMessages),
            Endpoint::Responses => Some(Direction::ResponsesToMessages),
            Endpoint::Messages => Some(Direction::MessagesToChat),
            Endpoint::Completions | Endpoint::Embeddings | Endpoint::CountTokens => None,
        }
    }

    /// Whether a target of the other format may serve it (behaviour §14's table).
    pub fn translatable(self) -> bool {
        !matches!(self, Endpoint::Completions | Endpoint::Embeddings)
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
