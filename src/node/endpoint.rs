//! The client API's routing endpoints and what each implies: its wire format (which targets may
//! serve it), how its streams are read, and its label in metrics.

use quotaroute_journal::ApiFormat as JournalFormat;

use crate::wire::stream_watch::StreamFormat;
use crate::wire::translate::{Api, Direction};

/// One routing endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
    /// `/v1/responses/compact` (Codex's compaction): routed like `/v1/responses`, never a
    /// stream; its answer's encrypted compaction item is sealed like reasoning items.
    ResponsesCompact,
    Messages,
    /// `/v1/messages/count_tokens`: routed like `/v1/messages`, no tokens counted.
    CountTokens,
    /// Google's `models/{model}:generateContent` (behaviour §15).
    GeminiGenerate,
    /// Google's `models/{model}:streamGenerateContent`: always SSE upstream; the client's
    /// framing (SSE with `alt=sse`, else one JSON array) is the handler's (`gemini_paths`).
    GeminiStream,
    /// Google's `models/{model}:countTokens`: no tokens counted.
    GeminiCountTokens,
    /// Google's `models/{model}:embedContent`.
    GeminiEmbed,
    /// Google's `models/{model}:batchEmbedContents`.
    GeminiBatchEmbed,
}

/// Google's methods on `models/{model}` (behaviour §15), by the name after the `:`.
pub const GEMINI_METHODS: [(&str, Endpoint); 5] = [
    ("generateContent", Endpoint::GeminiGenerate),
    ("streamGenerateContent", Endpoint::GeminiStream),
    ("countTokens", Endpoint::GeminiCountTokens),
    ("embedContent", Endpoint::GeminiEmbed),
    ("batchEmbedContents", Endpoint::GeminiBatchEmbed),
];

/// The client API's routing endpoints by path (each taken by POST): the route table registers
/// them from here, and the node's fast path (`node::direct`) looks a request up here.
pub const ROUTED: [(&str, Endpoint); 7] = [
    ("/v1/chat/completions", Endpoint::ChatCompletions),
    ("/v1/completions", Endpoint::Completions),
    ("/v1/embeddings", Endpoint::Embeddings),
    ("/v1/responses", Endpoint::Responses),
    ("/v1/responses/compact", Endpoint::ResponsesCompact),
    ("/v1/messages", Endpoint::Messages),
    ("/v1/messages/count_tokens", Endpoint::CountTokens),
];

impl Endpoint {
    /// The endpoint served at exactly `path`, if one is.
    pub fn at(path: &str) -> Option<Endpoint> {
        ROUTED
            .iter()
            .find(|(routed, _)| *routed == path)
            .map(|(_, endpoint)| *endpoint)
    }

    /// The Google method named `method` (`generateContent`, …).
    pub fn gemini(method: &str) -> Option<Endpoint> {
        GEMINI_METHODS
            .iter()
            .find(|(name, _)| *name == method)
            .map(|(_, endpoint)| *endpoint)
    }

    /// Its method name on Google's paths, for a Gemini endpoint.
    pub fn gemini_method(self) -> Option<&'static str> {
        GEMINI_METHODS
            .iter()
            .find(|(_, endpoint)| *endpoint == self)
            .map(|(name, _)| *name)
    }

    /// One of Google's paths (behaviour §15): its errors in Google's shape.
    pub fn is_gemini(self) -> bool {
        self.gemini_method().is_some()
    }

    pub fn format(self) -> JournalFormat {
        match self {
            Endpoint::Messages | Endpoint::CountTokens => JournalFormat::Anthropic,
            _ if self.is_gemini() => JournalFormat::Gemini,
            _ => JournalFormat::Openai,
        }
    }

    /// An endpoint that counts tokens and generates nothing: no usage is charged.
    pub fn counts_tokens_only(self) -> bool {
        matches!(self, Endpoint::CountTokens | Endpoint::GeminiCountTokens)
    }

    /// The generation API a client speaks at this endpoint, if it is one (behaviour §14).
    pub fn api(self) -> Option<Api> {
        match self {
            Endpoint::ChatCompletions => Some(Api::Chat),
            Endpoint::Responses => Some(Api::Responses),
            Endpoint::Messages => Some(Api::Messages),
            Endpoint::GeminiGenerate | Endpoint::GeminiStream => Some(Api::Gemini),
            Endpoint::GeminiCountTokens | Endpoint::GeminiEmbed | Endpoint::GeminiBatchEmbed => {
                None
            }
            Endpoint::Completions
            | Endpoint::Embeddings
            | Endpoint::ResponsesCompact
            | Endpoint::CountTokens => None,
        }
    }

    /// The translation a target serving `apis` needs (behaviour §14): `None` when it serves
    /// this endpoint's API, or when nothing can carry this endpoint across (completions,
    /// embeddings, compaction; `count_tokens` for a target without Messages, and Google's
    /// `countTokens` for one without Gemini, are answered locally); otherwise to `chat` when the target serves it, else the first it serves of
    /// `responses`, `messages`.
    pub fn translation_to(self, apis: &[Api]) -> Option<Direction> {
        self.translations_to(apis).next()
    }

    /// Every translation a target serving `apis` could take, [`Self::translation_to`]'s first:
    /// a request the first cannot carry goes by the next that can (a web search tool, which
    /// Chat Completions hosts do not run, goes to the target's Responses API).
    pub fn translations_to(self, apis: &[Api]) -> impl Iterator<Item = Direction> + '_ {
        let client = self.api().filter(|client| !apis.contains(client));
        Api::ALL
            .into_iter()
            .filter(move |api| client.is_some() && apis.contains(api))
            .filter_map(move |target| Direction::between(client?, target))
    }

    /// Whether a request here streams, as its translation in `direction` is told: a Gemini
    /// client says so by its path (`:streamGenerateContent`), not its body; `None`: its body
    /// says. The carry check writes the request as the attempt will, so the attempt takes it.
    pub fn path_stream(self, direction: Direction) -> Option<bool> {
        (direction.client == Api::Gemini).then_some(self == Endpoint::GeminiStream)
    }

    /// Whether a target of the other format may serve it (behaviour §14's table; a compaction
    /// has no Messages counterpart).
    pub fn translatable(self) -> bool {
        !matches!(
            self,
            Endpoint::Completions
                | Endpoint::Embeddings
                | Endpoint::ResponsesCompact
                | Endpoint::GeminiEmbed
                | Endpoint::GeminiBatchEmbed
        )
    }

    pub fn stream_format(self) -> StreamFormat {
        match self {
            Endpoint::ChatCompletions | Endpoint::Embeddings => StreamFormat::OpenAiChat,
            Endpoint::Completions => StreamFormat::OpenAiCompletions,
            Endpoint::Responses | Endpoint::ResponsesCompact => StreamFormat::OpenAiResponses,
            Endpoint::Messages | Endpoint::CountTokens => StreamFormat::Anthropic,
            Endpoint::GeminiGenerate
            | Endpoint::GeminiStream
            | Endpoint::GeminiCountTokens
            | Endpoint::GeminiEmbed
            | Endpoint::GeminiBatchEmbed => StreamFormat::Gemini,
        }
    }

    /// Its `gen_ai.operation.name` (OpenTelemetry GenAI semantic conventions) in traces.
    pub fn gen_ai_operation(self) -> &'static str {
        match self {
            Endpoint::Completions => "text_completion",
            Endpoint::Embeddings | Endpoint::GeminiEmbed | Endpoint::GeminiBatchEmbed => {
                "embeddings"
            }
            Endpoint::CountTokens | Endpoint::GeminiCountTokens => "count_tokens",
            Endpoint::ResponsesCompact => "compact",
            Endpoint::ChatCompletions
            | Endpoint::Responses
            | Endpoint::Messages
            | Endpoint::GeminiGenerate
            | Endpoint::GeminiStream => "chat",
        }
    }

    /// The Responses API's own endpoints: their bodies may carry encrypted items (behaviour
    /// §10) and name a `previous_response_id`.
    pub fn is_responses(self) -> bool {
        matches!(self, Endpoint::Responses | Endpoint::ResponsesCompact)
    }

    pub fn label(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat_completions",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Responses => "responses",
            Endpoint::ResponsesCompact => "responses_compact",
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::GeminiGenerate => "gemini_generate_content",
            Endpoint::GeminiStream => "gemini_stream_generate_content",
            Endpoint::GeminiCountTokens => "gemini_count_tokens",
            Endpoint::GeminiEmbed => "gemini_embed_content",
            Endpoint::GeminiBatchEmbed => "gemini_batch_embed_contents",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_goes_as_is_or_to_chat_then_the_first_api_served() {
        let chat = Endpoint::ChatCompletions;
        assert_eq!(chat.translation_to(&[Api::Chat, Api::Responses]), None);
        assert_eq!(
            Endpoint::Responses.translation_to(&[Api::Messages, Api::Chat]),
            Some(Direction::RESPONSES_TO_CHAT)
        );
        assert_eq!(
            Endpoint::Messages.translation_to(&[Api::Responses]),
            Some(Direction::MESSAGES_TO_RESPONSES)
        );
        assert_eq!(
            chat.translation_to(&[Api::Messages]),
            Some(Direction::CHAT_TO_MESSAGES)
        );
        assert_eq!(
            Endpoint::Messages
                .translations_to(&[Api::Chat, Api::Responses])
                .collect::<Vec<_>>(),
            [
                Direction::MESSAGES_TO_CHAT,
                Direction::MESSAGES_TO_RESPONSES
            ]
        );
        assert_eq!(chat.translations_to(&[Api::Chat]).count(), 0);
        // Nothing carries embeddings or a compaction across.
        assert_eq!(Endpoint::Embeddings.translation_to(&[Api::Messages]), None);
        assert_eq!(
            Endpoint::ResponsesCompact.translation_to(&[Api::Chat]),
            None
        );
    }

    #[test]
    fn a_gemini_client_streams_by_its_path_and_any_other_by_its_body() {
        let to_responses = Direction::GEMINI_TO_RESPONSES;
        assert_eq!(Endpoint::GeminiStream.path_stream(to_responses), Some(true));
        assert_eq!(
            Endpoint::GeminiGenerate.path_stream(Direction::GEMINI_TO_CHAT),
            Some(false)
        );
        for direction in [Direction::CHAT_TO_RESPONSES, Direction::MESSAGES_TO_GEMINI] {
            assert_eq!(Endpoint::ChatCompletions.path_stream(direction), None);
        }
    }
}
