//! The wire protocol a stream (or a whole answer) is written in.

/// The wire protocol of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// `/v1/chat/completions`.
    OpenAiChat,
    /// `/v1/completions`.
    OpenAiCompletions,
    /// `/v1/responses`.
    OpenAiResponses,
    /// `/v1/messages`.
    Anthropic,
    /// Gemini's `:streamGenerateContent?alt=sse` (each event a whole `GenerateContentResponse`).
    Gemini,
}
