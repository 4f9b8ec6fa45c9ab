//! Translation between the generation APIs (behaviour §14): Chat Completions, Responses,
//! Messages and Gemini, any client API on any host API, through one internal form. Requests on the way
//! up, JSON answers, streams (event by event) and error bodies on the way down. Pure: no I/O,
//! no clock (the caller passes `created`); the node picks a [`Direction`] when a target does
//! not serve the client's API and uses nothing here otherwise, so same-API traffic keeps the
//! byte-preserving splice.
//!
//! Layout — the hub, and one reader and one writer per API:
//! - `hub` — the internal form (`hub::form`: request, answer, stream event, usage, finish,
//!   error) every API is read into and written from.
//! - `chat`, `responses`, `messages`, `gemini` — each API's `read` (a client's request, an upstream's
//!   answer and usage into the form), `write` (the form as an upstream request or a client's
//!   answer), `read_stream` (upstream SSE into the form's events) and `write_stream` (the
//!   form's events in the client's protocol, with bounded state). `gemini` also makes the
//!   call ids Gemini does not give, cleans schemas to its subset and frames its streams.
//! - `direction` — the APIs and which pair a request crosses (`chat>messages`).
//! - `openai_common` — what the two OpenAI APIs share on the way in (parts, tools, limits).
//! - `citations` — web search results and citations in each API's shape; `held_text` the
//!   open text block a streamed citation's span is told in.
//! - `params` — what cannot be carried (refused or dropped), effort ↔ budget.
//! - `search_left_out` — a Responses request without its web search tool, for a combo none
//!   of whose targets runs one.
//! - `errors` — upstream error bodies in the client's error shape.
//! - `count_tokens` — Messages `count_tokens` for a target that is not Anthropic's, and
//!   Gemini's `countTokens` for one that is not Gemini's, counted locally.
//! - `openai_user` — Anthropic's `metadata.user_id` as OpenAI's `user` (64 characters at most).
//! - `stream` — the one stream translator the relay drives (a reader and a writer);
//!   `sse_write` writes its events.
//! - `thinking_carry` — a thinking block carried in a reasoning item across turns.
//! - `parsed_request` — a client's request parsed once (a Gemini client's plain text request
//!   read at its intake, by the scan that checked it), and what the carry check wrote of it,
//!   for the attempt.
//! - `typed_answer` and `answer_write` — a whole answer read from the upstream's bytes and
//!   written as the client's without a `serde_json::Value` of it, for the forms they cover
//!   (the `Value` readers and writers otherwise, giving the same bytes).
//! - `*/typed_request` — a Chat Completions, Messages or Gemini client's request read from its
//!   bytes straight into the hub's form by a typed shape (the `Value` reader for what it
//!   declines), a Gemini client's plain text request first by one scan of its bytes
//!   (`gemini/scanned_request`); `*/request_bytes` — the form written straight as a Chat
//!   Completions, Responses or Messages host's request bytes (the `Value` writer for what it
//!   declines). Each gives what the `Value` path gives.
//! - `json_write` — a `Value` written as JSON bytes (a translated request's body), and the
//!   object and array writers the byte writers write with.
//! - `object` — a JSON object of members moved in (the request writers' objects of `Value`s).
//! - `text_delta`, `picked` — what stream readers read without a whole `Value`: text pieces
//!   by borrowing (`json_scan` walks their bytes), other events with only the members a
//!   reader reads.

mod answer_write;
mod chat;
mod chat_text_watch;
mod chunk_template;
mod citations;
mod count_tokens;
mod direction;
mod errors;
mod event_type;
mod gemini;
mod held_text;
pub mod hub;
mod json_write;
mod messages;
mod object;
mod openai_common;
mod openai_user;
pub mod params;
mod parsed_request;
mod picked;
mod responses;
pub mod search_left_out;
mod sse_write;
mod stream;
mod text_delta;
mod thinking_carry;
mod typed_answer;
mod whole_values;

pub use chat_text_watch::ChatTextWatch;
pub use count_tokens::{count_tokens_body, gemini_count_tokens_body};
pub use direction::{Api, Direction};
pub use errors::error_body;
pub use gemini::framing::{Framer as GeminiFramer, Framing as GeminiFraming};
pub use gemini::write::{error as gemini_error, google_status};
pub use parsed_request::{translate_parsed_as, ParsedRequest};
pub use responses::echo::Echo;
pub use responses::write::TRANSLATED_RESPONSE_PREFIX;
pub use stream::{GeminiTextUsage, StreamTranslator};
pub use thinking_carry::{ReasoningCounts, ReasoningKey};

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::wire::usage::{response_summary, InvalidBody, ResponseSummary};
use hub::form::{Answer, Request};

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
    /// What a Responses client's answer repeats from its request.
    pub echo: std::sync::Arc<Echo>,
    /// The `anthropic-beta` the translated request needs (structured outputs).
    pub anthropic_beta: Option<&'static str>,
}

/// The `anthropic-beta` Anthropic's structured outputs (`output_format`) need.
pub const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";

/// `body` (the client's request in `direction`'s client API) in the target's API.
pub fn translate_request(
    direction: Direction,
    body: &[u8],
    settings: RequestSettings<'_>,
) -> Result<TranslatedRequest, TranslateError> {
    translate_request_as(direction, body, settings, None)
}

/// [`translate_request`] for a client whose path, not its body, says whether it streams
/// (Gemini's `:streamGenerateContent`): `stream` overrides the body's `stream`.
pub fn translate_request_as(
    direction: Direction,
    body: &[u8],
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<TranslatedRequest, TranslateError> {
    let object = OnceLock::new();
    let source = Source {
        body,
        object: &object,
        scanned: None,
        typed: true,
    };
    translate_source(direction, source, settings, stream)
}

/// The JSON object of a client's request, parsed at most once; the parse's error is the one
/// every translation of the body gives.
type ParsedObject = OnceLock<Result<Map<String, Value>, TranslateError>>;

/// What the scan of a Gemini client's plain text request (`gemini::scanned_request`) made of
/// the body at its intake (nothing, when it was not scanned: a translation scans it).
#[derive(Debug, Default)]
struct Scanned {
    /// The hub's form and the names its read dropped, until a translation takes them.
    read: Option<(Request, Vec<String>)>,
    /// The scan declined it: a translation reads it by the typed shape straight away.
    declined: bool,
}

type ScannedRead = std::sync::Mutex<Scanned>;

/// A client's request as a translation reads it: its bytes, read by a typed shape of the
/// client's API where one covers them, else as a JSON object parsed once.
#[derive(Clone, Copy)]
struct Source<'a> {
    body: &'a [u8],
    object: &'a ParsedObject,
    /// What the intake's scan read of a Gemini client's body (`None`: nothing).
    scanned: Option<&'a ScannedRead>,
    /// Whether a typed shape may read it and a byte writer write its translation (the tests
    /// compare with `false`: the `Value` readers and writers).
    typed: bool,
}

impl<'a> Source<'a> {
    /// The body's JSON object, parsed on the first call.
    fn object(self) -> Result<&'a Map<String, Value>, TranslateError> {
        self.object
            .get_or_init(|| parse_request(self.body))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// What the intake's scan made of the body, its form taken: the first translation takes
    /// it, any other reads the body again.
    fn scanned(self) -> Scanned {
        let Some(Ok(mut scanned)) = self.scanned.map(|slot| slot.lock()) else {
            return Scanned::default();
        };
        Scanned {
            read: scanned.read.take(),
            declined: scanned.declined,
        }
    }
}

/// [`translate_request_as`] of a request's source.
fn translate_source(
    direction: Direction,
    source: Source<'_>,
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<TranslatedRequest, TranslateError> {
    let written = write_request(direction, source, settings, stream)?;
    translated(direction, source, written)
}

/// The translated request of `source`, written as `written`.
fn translated(
    direction: Direction,
    source: Source<'_>,
    written: WrittenRequest,
) -> Result<TranslatedRequest, TranslateError> {
    let body = match written.translated {
        Written::Bytes { body, .. } => body,
        Written::Value(value) => {
            let mut body = bytes::BytesMut::with_capacity(512);
            json_write::write_value(&mut body, &value);
            body
        }
    };
    let echo = match direction.client {
        Api::Responses => Echo::of_request(source.object()?),
        _ => Echo::default(),
    };
    Ok(TranslatedRequest {
        body: body.freeze(),
        dropped: written.dropped,
        stream: written.stream,
        include_usage: written.include_usage,
        reasoning: written.reasoning,
        echo: std::sync::Arc::new(echo),
        anthropic_beta: written.anthropic_beta,
    })
}

/// Whether `direction`'s target API can carry `body` (behaviour §14): the translation up to
/// the target's request, without its bytes or what the answer needs. `Unsupported` is the
/// refusal; `Invalid` a body that is no request of the client's API. `stream`: as
/// [`translate_request_as`] takes it (the attempt that will take what the check wrote).
pub fn carries(
    direction: Direction,
    request: &ParsedRequest,
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<(), TranslateError> {
    let written = write_request(direction, request.source(), settings, stream)?;
    request.keep(direction, settings, written);
    Ok(())
}

fn parse_request(body: &[u8]) -> Result<Map<String, Value>, TranslateError> {
    // A body of valid UTF-8 is checked once, whole, and read as a `str` (serde_json then does
    // not check each string again); any other is read as bytes, for the same error as before.
    let request: Result<Value, _> = crate::wire::json_body::from_body(body);
    let request = request
        .map_err(|error| TranslateError::Invalid(format!("the body is not JSON: {error}")))?;
    let Value::Object(request) = request else {
        return Err(TranslateError::Invalid(
            "the body must be a JSON object".into(),
        ));
    };
    Ok(request)
}

/// A client's request body read by a typed shape `T`, only when it is UTF-8: the `Value`
/// parse fails on a body that is not, even in a member a shape skips unread.
fn typed_body<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
}

/// The target API's request, and what the translation learned on the way.
#[derive(Debug)]
struct WrittenRequest {
    translated: Written,
    dropped: Vec<String>,
    stream: bool,
    include_usage: bool,
    reasoning: ReasoningCounts,
    anthropic_beta: Option<&'static str>,
}

/// The client's request in the hub's form, with the body's `stream` and
/// `stream_options.include_usage`: by the client API's typed shape when it takes the body,
/// else by its `Value` reader.
fn read_request(
    direction: Direction,
    source: Source<'_>,
    key: Option<ReasoningKey<'_>>,
    dropped: &mut Vec<String>,
    reasoning: &mut ReasoningCounts,
) -> Result<(Request, bool, bool), TranslateError> {
    if source.typed {
        let typed = match direction.client {
            Api::Chat => chat::typed_request::request(source.body),
            Api::Messages => messages::typed_request::request(source.body, dropped)
                .map(|read| read.map(|(form, stream)| (form, stream, false))),
            // Gemini's body never streams (its path does); its shape declines any `stream`.
            Api::Gemini => {
                let read = match source.scanned() {
                    Scanned {
                        read: Some((form, names)),
                        ..
                    } => {
                        dropped.extend(names);
                        Some(Ok(form))
                    }
                    Scanned { declined: true, .. } => {
                        gemini::typed_request::shaped(source.body, dropped)
                    }
                    Scanned { .. } => gemini::typed_request::request(source.body, dropped),
                };
                read.map(|read| read.map(|form| (form, false, false)))
            }
            _ => None,
        };
        if let Some(read) = typed {
            return read;
        }
    }
    let request = source.object()?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = request
        .get("stream_options")
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    let form = match direction.client {
        Api::Chat => chat::read::request(request, dropped)?,
        Api::Responses => responses::read::request(request, key, dropped, reasoning)?,
        Api::Messages => messages::read::request(request, dropped)?,
        Api::Gemini => gemini::read::request(request, key, dropped, reasoning)?,
    };
    Ok((form, stream, include_usage))
}

/// The target API's request: bytes written straight from the form, or a JSON value (by the
/// writers the byte writers decline to).
#[derive(Debug)]
enum Written {
    /// `model`: where the `model` string is, quotes included.
    Bytes {
        body: bytes::BytesMut,
        model: std::ops::Range<usize>,
    },
    Value(Value),
}

impl Written {
    /// Names `model` as the request's model (every writer but Gemini's, whose model is in the
    /// path, names one).
    fn set_model(&mut self, model: &str) {
        match self {
            Written::Value(Value::Object(out)) => {
                out.insert("model".into(), Value::from(model));
            }
            Written::Value(_) => {}
            Written::Bytes { body, model: at } => {
                let (Some(head), Some(tail)) = (body.get(..at.start), body.get(at.end..)) else {
                    return;
                };
                // One buffer of the named request's size: the bytes before the model, the
                // model, the bytes after it.
                let mut named =
                    bytes::BytesMut::with_capacity(head.len() + model.len() + 2 + tail.len());
                named.extend_from_slice(head);
                json_write::write_str(&mut named, model);
                let end = named.len();
                named.extend_from_slice(tail);
                *body = named;
                *at = at.start..end;
            }
        }
    }
}

fn write_request(
    direction: Direction,
    source: Source<'_>,
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<WrittenRequest, TranslateError> {
    let mut dropped = Vec::new();
    let mut reasoning = ReasoningCounts::default();
    // Thinking goes back only to a target that checks its signature (Anthropic's, Gemini's),
    // and only to the connection that made it (the key opens no other's).
    let key = settings
        .reasoning
        .filter(|_| matches!(direction.target, Api::Messages | Api::Gemini));
    let (mut form, body_stream, include_usage) =
        read_request(direction, source, key, &mut dropped, &mut reasoning)?;
    let stream = stream.unwrap_or(body_stream);
    form.stream = stream;
    // A Messages client's thinking signatures: the Gemini ones this connection made, opened.
    if direction == Direction::MESSAGES_TO_GEMINI {
        thinking_carry::open_gemini_signatures(&mut form, key, &mut reasoning);
    }
    // The byte writers first; the `Value` writers for what they decline.
    let bytes = match direction.target {
        _ if !source.typed => None,
        Api::Chat => chat::request_bytes::request(&form, settings),
        Api::Responses => responses::request_bytes::request(&form, settings),
        Api::Messages => messages::request_bytes::request(&form, settings),
        Api::Gemini => None,
    };
    let translated = match bytes {
        Some((body, model)) => Written::Bytes { body, model },
        None => Written::Value(match direction.target {
            Api::Chat => chat::write::request(&form, settings)?,
            Api::Responses => responses::write::request(&form, settings)?,
            Api::Messages => messages::write::request(&form, settings, &mut dropped)?,
            // Only a Responses or Messages client's signatures came sealed to this connection
            // (opened above, or by the Responses reader).
            Api::Gemini => gemini::write::request(
                &form,
                matches!(direction.client, Api::Responses | Api::Messages),
                &mut dropped,
            )?,
        }),
    };
    let anthropic_beta = (direction.target == Api::Messages && form.format.is_some())
        .then_some(STRUCTURED_OUTPUTS_BETA);
    Ok(WrittenRequest {
        translated,
        dropped,
        stream,
        include_usage,
        reasoning,
        anthropic_beta,
    })
}

/// A whole successful upstream answer (`body`, the target's API) in the client's API;
/// `created` is the Unix time the client's `created` fields say. Fails only for a body that is
/// not a JSON object (the upstream's fault, behaviour §3): any object is the model's answer and
/// is translated as far as it goes (missing choices or content, truncated tool arguments).
pub fn translate_answer(
    direction: Direction,
    body: &[u8],
    created: u64,
    echo: &Echo,
) -> Result<Bytes, String> {
    match typed_translation(direction, body, created, echo) {
        Some((translated, _)) => Ok(translated),
        None => value_translation(direction, body, created, echo),
    }
}

/// What `usage::response_summary` reads of an answer relayed as it is (the same `Ok` and the
/// same error): by one scan of its bytes when the scan takes them (nearly every answer of a
/// Chat, Responses or Messages host), else by serde's reader.
pub fn answer_summary(body: &[u8]) -> Result<ResponseSummary<'_>, InvalidBody> {
    match typed_answer::relayed_summary(body) {
        Some(summary) => Ok(summary),
        None => response_summary(body),
    }
}

/// [`translate_answer`] of an answer its typed shape takes, with what
/// `usage::response_summary` reads of it (model and counts) from the same one read; `None`
/// when the shape declines it (then read for its summary, and by [`value_translation`]).
pub fn typed_translation<'a>(
    direction: Direction,
    body: &'a [u8],
    created: u64,
    echo: &Echo,
) -> Option<(Bytes, ResponseSummary<'a>)> {
    let typed = typed_answer::answer(
        direction.target,
        body,
        carries_signatures(direction),
        created,
    )?;
    let translated = answer_bytes(direction, typed.form, typed.texts_plain, created, echo).ok()?;
    Some((translated, typed.summary))
}

/// [`translate_answer`] of an answer its typed shape declined: read as a `Value`.
pub fn value_translation(
    direction: Direction,
    body: &[u8],
    created: u64,
    echo: &Echo,
) -> Result<Bytes, String> {
    let form = value_answer(direction, body, created)?;
    answer_bytes(direction, form, false, created, echo)
}

/// [`translate_answer`]'s reading of an answer its typed shape declined: as a `Value`.
fn value_answer(direction: Direction, body: &[u8], created: u64) -> Result<Answer, String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|error| format!("answer is not JSON: {error}"))?;
    if !answer.is_object() {
        return Err("answer is not a JSON object".into());
    }
    Ok(match direction.target {
        Api::Chat => chat::read::answer(&answer),
        Api::Responses => responses::read::answer(&answer),
        Api::Messages => messages::read::answer(&answer),
        // Gemini's signatures go only to a client that carries them sealed.
        Api::Gemini => gemini::read::answer(&answer, carries_signatures(direction), created),
    })
}

/// The hub's answer in the client's API, as bytes (`texts_plain` as
/// [`answer_write::answer`]'s).
fn answer_bytes(
    direction: Direction,
    mut form: Answer,
    texts_plain: bool,
    created: u64,
    echo: &Echo,
) -> Result<Bytes, String> {
    if direction.target == Api::Gemini && direction.client == Api::Messages {
        thinking_carry::mark_gemini_signatures(&mut form.parts);
    }
    match answer_write::answer(direction.client, &form, texts_plain, created, echo) {
        Some(bytes) => Ok(bytes),
        None => value_bytes(direction.client, &form, created, echo),
    }
}

/// [`answer_bytes`] through the client API's `Value` writer.
fn value_bytes(client: Api, form: &Answer, created: u64, echo: &Echo) -> Result<Bytes, String> {
    let translated = match client {
        Api::Chat => chat::write::answer(form, created),
        Api::Responses => responses::write::answer(form, created, echo),
        Api::Messages => messages::write::answer(form),
        Api::Gemini => gemini::write::answer(form),
    };
    serde_json::to_vec(&translated)
        .map(Bytes::from)
        .map_err(|error| error.to_string())
}

/// Whether a client carries a Gemini account's thought signatures back, sealed by the node:
/// a Responses client in a reasoning item, a Messages client in a thinking block.
fn carries_signatures(direction: Direction) -> bool {
    direction.target == Api::Gemini && matches!(direction.client, Api::Responses | Api::Messages)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_citations;

#[cfg(test)]
mod tests_cross;

#[cfg(test)]
mod tests_gemini;

#[cfg(test)]
mod tests_gemini_stream;

#[cfg(test)]
mod tests_direct_streams;
#[cfg(test)]
mod tests_fast_reads;

#[cfg(test)]
mod tests_inspected;

#[cfg(test)]
mod tests_parsed_request;

#[cfg(test)]
mod tests_scanned_request;

#[cfg(test)]
mod tests_search_streams;

#[cfg(test)]
mod tests_typed_answer;

#[cfg(test)]
mod tests_typed_request;
