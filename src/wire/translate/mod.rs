//! Format translation between OpenAI's Chat Completions / Responses and Anthropic's Messages
//! (behaviour §14): requests on the way up, JSON answers, streams (event by event) and error
//! bodies on the way down. Pure: no I/O, no clock (the caller passes `created`); the node picks
//! a [`Direction`] when a target's format differs from the endpoint's and uses nothing here
//! otherwise, so same-format traffic keeps the byte-preserving splice.
//!
//! Layout:
//! - `direction` — which pair of formats, its label (`chat>messages`) and the client's shape.
//! - `params` — what cannot be carried (refused or dropped), effort ↔ budget, finish reasons.
//! - `content` — image parts and tool results, the pieces both request directions share.
//! - `request_chat`, `request_responses`, `request_messages` — client requests in the
//!   target's format.
//! - `answer_chat`, `answer_responses`, `answer_messages` — whole JSON answers in the client's
//!   format.
//! - `stream_chat`, `stream_responses`, `stream_messages` — upstream SSE events in the
//!   client's protocol, with bounded state (open blocks and tool-call ids, never the stream).
//! - `errors` — upstream error bodies in the client's error shape.
//! - `count_tokens` — Messages `count_tokens` for an OpenAI-format target, counted locally.
//! - `openai_user` — Anthropic's `metadata.user_id` as OpenAI's `user` (64 characters at most).
//! - `stream` — the one stream translator the relay drives; `sse_write` writes its events.
//! - `thinking_carry` — a thinking block carried in a reasoning item across turns.

mod answer_chat;
mod answer_messages;
mod answer_responses;
mod content;
mod count_tokens;
mod direction;
mod errors;
mod openai_user;
pub mod params;
mod request_chat;
mod request_messages;
mod request_responses;
mod sse_write;
mod stream;
mod stream_chat;
mod stream_messages;
mod stream_responses;
mod thinking_carry;

pub use answer_responses::TRANSLATED_RESPONSE_PREFIX;
pub use count_tokens::count_tokens_body;
pub use direction::Direction;
pub use errors::error_body;
pub use stream::StreamTranslator;
pub use thinking_carry::{ReasoningCounts, ReasoningKey};

use bytes::Bytes;
use serde_json::Value;

/// Why a request cannot be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A parameter with no equivalent on the target's format that changes what the answer
    /// means (400 `unsupported_parameter`, naming it).
    #[error("parameter `{parameter}` has no equivalent on this model's targets: {why}")]
    Unsupported { parameter: String, why: String },
    /// The body is not a request of the client's API.
    #[error("{0}")]
    Invalid(String),
}

impl TranslateError {
    pub(crate) fn unsupported(parameter: impl Into<String>, why: impl Into<String>) -> Self {
        TranslateError::Unsupported {
            parameter: parameter.into(),
            why: why.into(),
        }
    }
}

/// What the request translation needs besides the body.
#[derive(Debug, Clone, Copy)]
pub struct RequestSettings<'a> {
    /// The upstream model to ask for.
    pub model: &'a str,
    /// `translation.default_max_tokens`: Anthropic requires `max_tokens`.
    pub default_max_tokens: u32,
    /// Opens the reasoning items a Responses client carries (thinking blocks this target's
    /// connection made); `None`: every one is left out.
    pub reasoning: Option<ReasoningKey<'a>>,
}

/// A request in the target's format.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslatedRequest {
    pub body: Bytes,
    /// Tuning parameters left out (`x-quotaroute-dropped`), in the client's names.
    pub dropped: Vec<String>,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// A Chat Completions client's `stream_options.include_usage`: the usage chunk is sent to
    /// it only then.
    pub include_usage: bool,
    /// A Responses client's reasoning items: restored as thinking blocks, or left out.
    pub reasoning: ReasoningCounts,
}

/// `body` (the client's request in `direction`'s client format) in the target's format.
pub fn translate_request(
    direction: Direction,
    body: &[u8],
    settings: RequestSettings<'_>,
) -> Result<TranslatedRequest, TranslateError> {
    let request: Value = serde_json::from_slice(body)
        .map_err(|error| TranslateError::Invalid(format!("the body is not JSON: {error}")))?;
    let Value::Object(request) = request else {
        return Err(TranslateError::Invalid(
            "the body must be a JSON object".into(),
        ));
    };
    let mut dropped = Vec::new();
    let mut reasoning = ReasoningCounts::default();
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = request
        .get("stream_options")
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    let translated = match direction {
        Direction::ChatToMessages => request_chat::to_messages(request, settings, &mut dropped)?,
        Direction::ResponsesToMessages => {
            request_responses::to_messages(request, settings, &mut dropped, &mut reasoning)?
        }
        Direction::MessagesToChat => request_messages::to_chat(request, settings, &mut dropped)?,
    };
    let body = serde_json::to_vec(&translated)
        .map_err(|error| TranslateError::Invalid(error.to_string()))?;
    Ok(TranslatedRequest {
        body: Bytes::from(body),
        dropped,
        stream,
        include_usage,
        reasoning,
    })
}

/// A whole successful upstream answer (`body`, the target's format) in the client's format;
/// `created` is the Unix time the client's `created` fields say. Fails only for a body that is
/// not a JSON object (the upstream's fault, behaviour §3): any object is the model's answer and
/// is translated as far as it goes (missing choices or content, truncated tool arguments).
pub fn translate_answer(direction: Direction, body: &[u8], created: u64) -> Result<Bytes, String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|error| format!("answer is not JSON: {error}"))?;
    if !answer.is_object() {
        return Err("answer is not a JSON object".into());
    }
    let translated = match direction {
        Direction::ChatToMessages => answer_chat::from_messages(&answer, created),
        Direction::ResponsesToMessages => answer_responses::from_messages(&answer, created),
        Direction::MessagesToChat => answer_messages::from_chat(&answer),
    };
    serde_json::to_vec(&translated)
        .map(Bytes::from)
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests;
