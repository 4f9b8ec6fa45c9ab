//! What each upstream SSE event means for the router (behaviour §3): preamble, first content,
//! usage, end, error or garbage, per protocol, plus the usage tally of a stream. It reads events
//! only; it must not decide failover or write to the client (the proxy does both).
//!
//! Events are decoded into small borrowed shapes (no `serde_json::Value` on the hot path); only
//! error events are parsed into a `Value` for the classifier.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;
use quotaroute_actors::policy::classify::{classify_stream_error, mask_secrets};
use quotaroute_journal::OutcomeClass;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::content_bytes::content_text_bytes;
use super::json_member::MemberFinder;
use super::openai_chunk::{self, Chunk};
use super::sse::SseEvent;
pub use super::stream_format::StreamFormat;
use super::usage::{
    gemini_usage_counts, usage_counts, GeminiUsageFields, TokenCounts, UsageFields,
};
use super::usage_count::CountFlaws;

/// What one event means for the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventMeaning {
    /// Before any content: a role-only chunk, `message_start` without usage,
    /// `content_block_start`, `ping`, `response.created`, `response.in_progress`, ….
    Preamble,
    /// The first of these commits the stream (behaviour §3).
    Content,
    /// OpenAI's last chunk with `usage` and empty `choices`: withheld from a client that did
    /// not ask for usage.
    UsageOnly { tokens_in: u64, tokens_out: u64 },
    /// Usage carried by an event the client must see: Anthropic `message_start` /
    /// `message_delta`, Responses `response.completed` / `response.incomplete` (which also end
    /// a Responses stream: there is no `[DONE]` there), an OpenAI chunk with a finish reason.
    /// Counts are cumulative: keep the largest of each (see [`StreamUsage::record`]).
    Usage { tokens_in: u64, tokens_out: u64 },
    /// `[DONE]`, `message_stop`.
    Done,
    /// An error event, classified by its error type; `message` is masked.
    Error {
        class: OutcomeClass,
        message: String,
    },
    /// Data that is not JSON: a 2xx stream the router cannot read is a `server_error`.
    Garbage,
    /// Anything else (`content_block_stop`, `*.done` events, comment-only blocks, …).
    Other,
}

/// The tokens a stream has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamUsage {
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Cache reads and writes among the input tokens (behaviour §10).
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    /// Counts that were negative, fractional or not numbers as sent (see `usage_count`).
    pub flaws: CountFlaws,
    /// The stream's closing usage arrived (an OpenAI usage chunk, Responses
    /// `response.completed` / `response.incomplete`, Anthropic `message_delta`): what a left
    /// stream is drained for (behaviour §11).
    pub final_seen: bool,
    /// Bytes of generated text relayed so far ([`count_content`](Self::count_content)): a left
    /// stream's output estimate when its usage never comes.
    pub content_bytes: u64,
}

impl StreamUsage {
    /// Adds the generated text `event` (of `format`) carries to
    /// [`content_bytes`](Self::content_bytes).
    pub fn count_content(&mut self, format: StreamFormat, event: &SseEvent) {
        self.count_content_bytes(content_text_bytes(format, event.data.as_bytes()));
    }

    /// Adds `bytes` of generated text an event carries, counted by its reader.
    pub fn count_content_bytes(&mut self, bytes: usize) {
        self.content_bytes = self.content_bytes.saturating_add(bytes as u64);
    }

    /// Takes in the usage an event carried. Streams report running totals (Anthropic sends
    /// input tokens in `message_start` and output tokens in `message_delta`), so each count
    /// keeps its largest value.
    pub fn record(&mut self, meaning: &EventMeaning) {
        if let EventMeaning::UsageOnly {
            tokens_in,
            tokens_out,
        }
        | EventMeaning::Usage {
            tokens_in,
            tokens_out,
        } = meaning
        {
            self.add(TokenCounts {
                tokens_in: *tokens_in,
                tokens_out: *tokens_out,
                ..TokenCounts::default()
            });
        }
    }

    /// [`classify_event`] and [`record`](Self::record) in one parse; it also counts usage
    /// that rides on a content chunk (some OpenAI-compatible hosts put it on the last one).
    pub fn observe(&mut self, format: StreamFormat, event: &SseEvent) -> EventMeaning {
        let (meaning, usage) = inspect(format, event);
        self.take_in(format, event, usage);
        meaning
    }

    /// What [`observe`](Self::observe) records of an event its stream's reader read
    /// (`inspected`: what `observe` reads of it, without parsing it again).
    pub fn observe_inspected(
        &mut self,
        format: StreamFormat,
        event: &SseEvent,
        inspected: Inspected,
    ) -> EventMeaning {
        self.take_in(format, event, inspected.usage);
        inspected.meaning
    }

    /// The usage an event of `format` carried (`None`: none), and whether it closes the answer.
    fn take_in(&mut self, format: StreamFormat, event: &SseEvent, usage: Option<TokenCounts>) {
        if let Some(usage) = usage {
            self.add(usage);
            // Anthropic's `message_start` carries the input only; its closing usage is
            // `message_delta`'s. Every Gemini chunk carries the counts so far; the closing
            // ones are those of the chunk with the `finishReason`.
            self.final_seen |= match format {
                StreamFormat::Anthropic => {
                    event.event.as_deref() == Some("message_delta")
                        || event.data.contains("\"message_delta\"")
                }
                StreamFormat::Gemini => gemini_finished(event.data.as_bytes()),
                _ => true,
            };
        }
    }

    /// What [`observe`](Self::observe) records of a Gemini chunk of text alone that the
    /// stream's reader read (`seen`), without parsing it again: its usage, and whether it
    /// closes the answer (searched here when the reader does not know). It is content.
    pub fn observe_gemini_text(&mut self, event: &SseEvent, seen: GeminiTextSeen) -> EventMeaning {
        if let Some(usage) = seen.usage {
            self.add(usage);
            self.final_seen |= seen
                .closes
                .unwrap_or_else(|| gemini_finished(event.data.as_bytes()));
        }
        EventMeaning::Content
    }

    fn add(&mut self, usage: TokenCounts) {
        self.tokens_in = self.tokens_in.max(usage.tokens_in);
        self.tokens_out = self.tokens_out.max(usage.tokens_out);
        self.tokens_cached = self.tokens_cached.max(usage.tokens_cached);
        self.tokens_cache_write = self.tokens_cache_write.max(usage.tokens_cache_write);
        self.flaws.merge(usage.flaws);
    }
}

/// What `event` means for the router in `format`.
pub fn classify_event(format: StreamFormat, event: &SseEvent) -> EventMeaning {
    inspect(format, event).0
}

/// The meaning, and any usage the event carried (even when the meaning is `Content`).
fn inspect(format: StreamFormat, event: &SseEvent) -> (EventMeaning, Option<TokenCounts>) {
    let data = event.data.trim();
    if data == "[DONE]" {
        return (EventMeaning::Done, None);
    }
    if event.event.as_deref() == Some("error") {
        return (error_meaning(data), None);
    }
    if data.is_empty() {
        return (EventMeaning::Other, None);
    }
    if !data.starts_with('{') {
        return (EventMeaning::Garbage, None);
    }
    match format {
        StreamFormat::OpenAiChat | StreamFormat::OpenAiCompletions => openai_chunk(data),
        StreamFormat::OpenAiResponses => responses_event(data, event.event.as_deref()),
        StreamFormat::Anthropic => anthropic_event(data, event.event.as_deref()),
        StreamFormat::Gemini => gemini_chunk(data),
    }
}

/// An error event's class (via the one classification table) and masked message.
fn error_meaning(data: &str) -> EventMeaning {
    let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    error_from_value(&value, data)
}

fn error_from_value(value: &Value, fallback: &str) -> EventMeaning {
    let message = value
        .get("error")
        .and_then(|error| error.get("message").or(Some(error)))
        .or_else(|| value.get("message"))
        .and_then(Value::as_str)
        .unwrap_or(fallback);
    EventMeaning::Error {
        class: classify_stream_error(value),
        message: mask_secrets(message),
    }
}

fn openai_chunk(data: &str) -> (EventMeaning, Option<TokenCounts>) {
    let (choices, usage) = match openai_chunk::read(data) {
        Chunk::Read { choices, usage } => (choices, usage),
        Chunk::Error => return (error_meaning(data), None),
        Chunk::Garbage => return (EventMeaning::Garbage, None),
    };
    let usage = usage_counts(usage);
    let meaning = match usage {
        _ if choices.has_content => EventMeaning::Content,
        Some(usage) if choices.count == 0 => EventMeaning::UsageOnly {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
        },
        Some(usage) => EventMeaning::Usage {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
        },
        None if choices.has_finish_reason => EventMeaning::Other,
        None => EventMeaning::Preamble,
    };
    (meaning, usage)
}

/// A Responses API or Anthropic event: a `type` and the members that may carry usage.
#[derive(Deserialize)]
struct TypedEvent<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    /// Anthropic `message_delta`.
    #[serde(default)]
    usage: Option<UsageFields>,
    /// Anthropic `message_start` (an object), Responses `error` (a string).
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    /// Responses `response.*` events.
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
}

/// The part of a `message` / `response` object we read.
#[derive(Deserialize)]
struct UsageHolder {
    #[serde(default)]
    usage: Option<UsageFields>,
}

fn nested_usage(raw: Option<&RawValue>) -> Option<TokenCounts> {
    let holder: UsageHolder = serde_json::from_str(raw?.get()).ok()?;
    usage_counts(holder.usage)
}

fn usage_meaning(usage: Option<TokenCounts>, otherwise: EventMeaning) -> EventMeaning {
    match usage {
        Some(usage) => EventMeaning::Usage {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
        },
        None => otherwise,
    }
}

fn responses_event(data: &str, name: Option<&str>) -> (EventMeaning, Option<TokenCounts>) {
    let Ok(event) = serde_json::from_str::<TypedEvent<'_>>(data) else {
        return (EventMeaning::Garbage, None);
    };
    let kind = event.kind.as_deref().or(name).unwrap_or("");
    match kind {
        _ if kind.ends_with(".delta") => (EventMeaning::Content, None),
        "response.failed" => {
            let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let failed = value.get("response").unwrap_or(&Value::Null);
            (error_from_value(failed, "response failed"), None)
        }
        "error" => (error_meaning(data), None),
        _ => lifecycle_meaning(kind, || nested_usage(event.response)),
    }
}

/// The meaning of a Responses event of type `kind` that is no delta, error or failure, and
/// the usage it carries: `response_usage` (its `response.usage`) is read only for the events
/// that close the answer.
fn lifecycle_meaning(
    kind: &str,
    response_usage: impl FnOnce() -> Option<TokenCounts>,
) -> (EventMeaning, Option<TokenCounts>) {
    match kind {
        "response.completed" | "response.incomplete" => {
            let usage = response_usage();
            (usage_meaning(usage, EventMeaning::Other), usage)
        }
        "response.created" | "response.in_progress" | "response.queued" => {
            (EventMeaning::Preamble, None)
        }
        _ if kind.ends_with(".added") => (EventMeaning::Preamble, None),
        _ => (EventMeaning::Other, None),
    }
}

/// What `observe` reads of one event (its meaning and the usage it carries), read by the
/// stream's reader instead ([`responses_inspected`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    meaning: EventMeaning,
    usage: Option<TokenCounts>,
}

/// The members of a Responses event that `observe`'s typed read looks at, as a strict read of
/// the whole event found them: each the text of its value. That read found the event valid
/// JSON with none of these members (nor `message`, `response`) repeated and `response`, when
/// present, an object; the typed read refuses a repeat, and reads a `response` that is no
/// object as no usage.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ResponsesMembers<'a> {
    /// `type`.
    pub kind: Option<&'a str>,
    /// A top-level `usage` (Responses events have none).
    pub usage: Option<&'a str>,
    /// `response.usage`.
    pub response_usage: Option<&'a str>,
}

/// What [`StreamUsage::observe`] reads of a Responses event named `name` whose members a
/// strict read found (`members`, see [`ResponsesMembers`]): its meaning and usage, as
/// `responses_event` reads them. `None` where it leaves the reading to `observe`: an `error`
/// event or one whose `type` is an error, a delta (content, counted by the text path), a
/// top-level `usage`, a `type` that is not a string.
pub fn responses_inspected(
    name: Option<&str>,
    members: &ResponsesMembers<'_>,
) -> Option<Inspected> {
    if name == Some("error") || members.usage.is_some() {
        return None;
    }
    let kind: Option<Cow<'_, str>> = match members.kind {
        // A string without escapes is its bytes (the strict read checked them).
        Some(text) if text.len() >= 2 && text.starts_with('"') && !text.contains('\\') => {
            Some(Cow::Borrowed(&text[1..text.len() - 1]))
        }
        Some(text) => serde_json::from_str(text).ok()?,
        None => None,
    };
    let kind = kind.as_deref().or(name).unwrap_or("");
    if kind.ends_with(".delta") || matches!(kind, "response.failed" | "error") {
        return None;
    }
    let (meaning, usage) = lifecycle_meaning(kind, || {
        let text = members.response_usage?;
        serde_json::from_str::<Option<UsageFields>>(text)
            .ok()
            .and_then(usage_counts)
    });
    Some(Inspected { meaning, usage })
}

fn anthropic_event(data: &str, name: Option<&str>) -> (EventMeaning, Option<TokenCounts>) {
    let Ok(event) = serde_json::from_str::<TypedEvent<'_>>(data) else {
        return (EventMeaning::Garbage, None);
    };
    let kind = event.kind.as_deref().or(name).unwrap_or("");
    match kind {
        "content_block_delta" => (EventMeaning::Content, None),
        "message_start" => {
            let usage = nested_usage(event.message);
            (usage_meaning(usage, EventMeaning::Preamble), usage)
        }
        "message_delta" => {
            let usage = usage_counts(event.usage);
            (usage_meaning(usage, EventMeaning::Other), usage)
        }
        "content_block_start" | "ping" => (EventMeaning::Preamble, None),
        "message_stop" => (EventMeaning::Done, None),
        "error" => (error_meaning(data), None),
        _ => (EventMeaning::Other, None),
    }
}

/// A Gemini chunk (a whole `GenerateContentResponse`): its usage so far, its first
/// candidate's parts and finish reason, a blocked prompt, an error.
#[derive(Deserialize)]
struct GeminiChunk<'a> {
    #[serde(default, rename = "usageMetadata")]
    usage: Option<GeminiUsageFields>,
    #[serde(default, borrow)]
    candidates: Option<Vec<GeminiCandidate<'a>>>,
    #[serde(default, borrow, rename = "promptFeedback")]
    prompt_feedback: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct GeminiCandidate<'a> {
    #[serde(default, borrow)]
    content: Option<GeminiContent<'a>>,
    #[serde(default, borrow, rename = "finishReason")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(default, borrow)]
    parts: Vec<GeminiPart<'a>>,
}

/// A part: generated when it holds text (a thought too) or anything but text and a signature.
#[derive(Deserialize)]
struct GeminiPart<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "functionCall")]
    function_call: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "inlineData")]
    inline_data: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "executableCode")]
    executable_code: Option<&'a RawValue>,
}

impl GeminiPart<'_> {
    fn is_content(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.function_call.is_some()
            || self.inline_data.is_some()
            || self.executable_code.is_some()
    }
}

/// A Gemini chunk: content when a part holds any; else the end of the answer (a finish reason
/// or a blocked prompt) with its usage, else a preamble. Every chunk's usage is counted.
fn gemini_chunk(data: &str) -> (EventMeaning, Option<TokenCounts>) {
    let Ok(chunk) = serde_json::from_str::<GeminiChunk<'_>>(data) else {
        return (EventMeaning::Garbage, None);
    };
    if chunk.error.is_some() {
        return (error_meaning(data), None);
    }
    let usage = gemini_usage_counts(chunk.usage);
    let candidate = chunk.candidates.as_ref().and_then(|c| c.first());
    let content = candidate
        .and_then(|c| c.content.as_ref())
        .is_some_and(|c| c.parts.iter().any(GeminiPart::is_content));
    let finished =
        candidate.is_some_and(|c| c.finish_reason.is_some()) || chunk.prompt_feedback.is_some();
    let meaning = match usage {
        _ if content => EventMeaning::Content,
        _ if !finished => EventMeaning::Preamble,
        Some(usage) => EventMeaning::Usage {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
        },
        None => EventMeaning::Done,
    };
    (meaning, usage)
}

/// What a stream's reader read of a Gemini chunk of text alone for
/// [`StreamUsage::observe_gemini_text`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GeminiTextSeen {
    /// Its counts, read as `observe` reads a chunk's (`None`: it has none).
    pub usage: Option<TokenCounts>,
    /// Whether it ends the answer as [`gemini_finished`] tells it, when the reader knows
    /// without a search (a chunk read through its stream's template: the template's answer,
    /// since a chunk that fills it has the template's keys with values of the same kinds).
    pub closes: Option<bool>,
}

/// Whether a Gemini chunk ends the answer (a byte check: it names a `finishReason`).
pub fn gemini_finished(data: &[u8]) -> bool {
    static FINISH: LazyLock<MemberFinder> =
        LazyLock::new(|| MemberFinder::new(b"\"finishReason\""));
    FINISH.first_string(data).is_some()
}

/// A Responses stream's events about one output item (named by their SSE name, as Anthropic's
/// are): they carry neither usage, nor an error, nor the end, so after the first content they
/// are relayed without being parsed. Several repeat the item's whole text
/// (`response.output_text.done`, `response.content_part.done`, `response.output_item.done`),
/// which a parse would walk again for nothing.
const RESPONSES_ITEM_EVENTS: [&str; 12] = [
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.done",
    "response.function_call_arguments.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.done",
];

/// The byte patterns `matters_after_commit` looks for in OpenAI chunks, each searcher built
/// once (building one costs more than searching a chunk with it); members are found with any
/// JSON spacing around their colon.
struct ChunkNeedles {
    error: Finder<'static>,
    usage: MemberFinder,
    finish_reason: MemberFinder,
}

static CHUNK_NEEDLES: LazyLock<ChunkNeedles> = LazyLock::new(|| ChunkNeedles {
    error: Finder::new(b"\"error\""),
    usage: MemberFinder::new(b"\"usage\""),
    finish_reason: MemberFinder::new(b"\"finish_reason\""),
});

/// Whether an event after the first content can mean anything but more content (usage, an
/// error, the end) — a byte check, so the relay parses only those and forwards the rest as is.
pub fn matters_after_commit(format: StreamFormat, event: &SseEvent) -> bool {
    let data = event.data.as_bytes();
    match format {
        StreamFormat::Anthropic => !matches!(
            event.event.as_deref(),
            Some("content_block_delta" | "ping" | "content_block_start" | "content_block_stop")
        ),
        // Every chunk carries the usage so far.
        StreamFormat::Gemini => true,
        StreamFormat::OpenAiResponses => !event
            .event
            .as_deref()
            .is_some_and(|name| name.ends_with(".delta") || RESPONSES_ITEM_EVENTS.contains(&name)),
        StreamFormat::OpenAiChat | StreamFormat::OpenAiCompletions => {
            let needles = &*CHUNK_NEEDLES;
            data == b"[DONE]"
                || needles.error.find(data).is_some()
                || needles.usage.has_non_null(data)
                || needles.finish_reason.first_string(data).is_some()
                || !data.starts_with(b"{")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: name.map(|name| name.to_owned().into()),
            data: data.to_owned(),
            raw: Bytes::new(),
        }
    }

    fn usage(tokens_in: u64, tokens_out: u64) -> EventMeaning {
        EventMeaning::Usage {
            tokens_in,
            tokens_out,
        }
    }

    fn check(format: StreamFormat, table: &[(Option<&str>, &str, EventMeaning)]) {
        for (name, data, expected) in table {
            assert_eq!(
                &classify_event(format, &event(*name, data)),
                expected,
                "{format:?} {name:?} {data}"
            );
        }
    }

    #[test]
    fn s3_openai_chat_chunks() {
        use EventMeaning::*;
        let table = [
            (
                None,
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                Preamble,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null}}]}"#,
                Preamble,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}"#,
                Preamble,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"refusal":"no"}}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"reasoning":"think"}}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                Other,
            ),
            (
                None,
                r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}}}"#,
                UsageOnly {
                    tokens_in: 12,
                    tokens_out: 7,
                },
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
                usage(3, 4),
            ),
            (
                None,
                r#"{"choices":[{"delta":{"content":"x"}}],"usage":null}"#,
                Content,
            ),
            (None, "[DONE]", Done),
            (None, "", Other),
            (None, "{not json", Garbage),
            (None, "[1,2]", Garbage),
        ];
        check(StreamFormat::OpenAiChat, &table);
    }

    #[test]
    fn s3_openai_completions_chunks() {
        use EventMeaning::*;
        let table = [
            (
                None,
                r#"{"object":"text_completion","choices":[{"text":"Hello","index":0,"logprobs":null,"finish_reason":null}]}"#,
                Content,
            ),
            (
                None,
                r#"{"choices":[{"text":"","index":0,"finish_reason":null}]}"#,
                Preamble,
            ),
            (
                None,
                r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}]}"#,
                Other,
            ),
            (
                None,
                r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":16}}"#,
                UsageOnly {
                    tokens_in: 5,
                    tokens_out: 16,
                },
            ),
            (None, "[DONE]", Done),
        ];
        check(StreamFormat::OpenAiCompletions, &table);
    }

    #[test]
    fn s3_openai_error_events_use_the_classification_table() {
        let cases = [
            (
                None,
                r#"{"error":{"message":"The server had an error","type":"server_error","code":null}}"#,
                OutcomeClass::ServerError,
            ),
            (
                None,
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
                OutcomeClass::RateLimited,
            ),
            (
                Some("error"),
                r#"{"error":{"message":"over","type":"overloaded_error"}}"#,
                OutcomeClass::ServerError,
            ),
        ];
        for (name, data, class) in cases {
            let meaning = classify_event(StreamFormat::OpenAiChat, &event(name, data));
            let EventMeaning::Error { class: got, .. } = meaning else {
                panic!("{data} gave {meaning:?}");
            };
            assert_eq!(got, class, "{data}");
        }
    }

    #[test]
    fn s3_error_messages_are_masked() {
        let data = r#"{"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijklmnop1234","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        let EventMeaning::Error { class, message } =
            classify_event(StreamFormat::OpenAiChat, &event(None, data))
        else {
            panic!("not an error");
        };
        assert_eq!(class, OutcomeClass::AuthFailed);
        assert!(!message.contains("abcdefghijklmnop"), "{message}");
        assert!(message.starts_with("Incorrect API key provided"));
    }

    #[test]
    fn s3_responses_api_events() {
        use EventMeaning::*;
        let table = [
            (
                Some("response.created"),
                r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","usage":null}}"#,
                Preamble,
            ),
            (
                Some("response.in_progress"),
                r#"{"type":"response.in_progress","response":{}}"#,
                Preamble,
            ),
            (
                Some("response.output_item.added"),
                r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}"#,
                Preamble,
            ),
            (
                Some("response.content_part.added"),
                r#"{"type":"response.content_part.added","part":{"type":"output_text","text":""}}"#,
                Preamble,
            ),
            (
                Some("response.output_text.delta"),
                r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#,
                Content,
            ),
            (
                Some("response.function_call_arguments.delta"),
                r#"{"type":"response.function_call_arguments.delta","delta":"{\""}"#,
                Content,
            ),
            (
                Some("response.reasoning_summary_text.delta"),
                r#"{"type":"response.reasoning_summary_text.delta","delta":"x"}"#,
                Content,
            ),
            (
                Some("response.output_text.done"),
                r#"{"type":"response.output_text.done","text":"Hi"}"#,
                Other,
            ),
            (
                Some("response.completed"),
                r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"total_tokens":123}}}"#,
                usage(36, 87),
            ),
            (
                Some("response.incomplete"),
                r#"{"type":"response.incomplete","response":{"usage":{"input_tokens":1,"output_tokens":2}}}"#,
                usage(1, 2),
            ),
            (
                None,
                r#"{"type":"response.output_text.delta","delta":"no event line"}"#,
                Content,
            ),
            (Some("response.output_text.delta"), "garbage", Garbage),
        ];
        check(StreamFormat::OpenAiResponses, &table);

        let failed = r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#;
        assert_eq!(
            classify_event(
                StreamFormat::OpenAiResponses,
                &event(Some("response.failed"), failed)
            ),
            EventMeaning::Error {
                class: OutcomeClass::ServerError,
                message: "boom".to_owned()
            }
        );
        let error =
            r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}"#;
        assert_eq!(
            classify_event(StreamFormat::OpenAiResponses, &event(Some("error"), error)),
            EventMeaning::Error {
                class: OutcomeClass::RateLimited,
                message: "slow down".to_owned()
            }
        );
    }

    #[test]
    fn s3_anthropic_events() {
        use EventMeaning::*;
        let table = [
            (
                Some("message_start"),
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}"#,
                usage(40, 1),
            ),
            (
                Some("message_start"),
                r#"{"type":"message_start","message":{"id":"msg_1"}}"#,
                Preamble,
            ),
            (
                Some("content_block_start"),
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                Preamble,
            ),
            (Some("ping"), r#"{"type": "ping"}"#, Preamble),
            (
                Some("content_block_delta"),
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
                Content,
            ),
            (
                Some("content_block_delta"),
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
                Content,
            ),
            (
                Some("content_block_stop"),
                r#"{"type":"content_block_stop","index":0}"#,
                Other,
            ),
            (
                Some("message_delta"),
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
                usage(0, 15),
            ),
            (Some("message_stop"), r#"{"type":"message_stop"}"#, Done),
            (Some("content_block_delta"), "{\"type\":", Garbage),
        ];
        check(StreamFormat::Anthropic, &table);

        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            classify_event(StreamFormat::Anthropic, &event(Some("error"), overloaded)),
            EventMeaning::Error {
                class: OutcomeClass::ServerError,
                message: "Overloaded".to_owned()
            }
        );
        let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
        let EventMeaning::Error { class, .. } =
            classify_event(StreamFormat::Anthropic, &event(Some("error"), limited))
        else {
            panic!("not an error");
        };
        assert_eq!(class, OutcomeClass::RateLimited);
    }

    #[test]
    fn s3_usage_tally_keeps_the_largest_running_totals() {
        let mut tally = StreamUsage::default();
        let stream = [
            (
                Some("message_start"),
                r#"{"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}"#,
            ),
            (
                Some("content_block_delta"),
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
            ),
            (
                Some("message_delta"),
                r#"{"type":"message_delta","usage":{"output_tokens":15}}"#,
            ),
        ];
        for (name, data) in stream {
            let meaning = classify_event(StreamFormat::Anthropic, &event(name, data));
            tally.record(&meaning);
        }
        assert_eq!(
            tally,
            StreamUsage {
                tokens_in: 25,
                tokens_out: 15,
                ..StreamUsage::default()
            }
        );
    }

    #[test]
    fn s3_observe_counts_usage_riding_on_a_content_chunk() {
        let mut tally = StreamUsage::default();
        let data = r#"{"choices":[{"delta":{"content":"end"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#;
        let meaning = tally.observe(StreamFormat::OpenAiChat, &event(None, data));
        assert_eq!(meaning, EventMeaning::Content);
        assert_eq!(
            tally,
            StreamUsage {
                tokens_in: 9,
                tokens_out: 3,
                final_seen: true,
                ..StreamUsage::default()
            }
        );
    }

    #[test]
    fn s10_cache_reads_and_writes_are_counted_streamed_and_not() {
        let mut tally = StreamUsage::default();
        let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":2000,"cache_creation_input_tokens":300,"output_tokens":1}}}"#;
        tally.observe(
            StreamFormat::Anthropic,
            &event(Some("message_start"), start),
        );
        assert_eq!(
            (
                tally.tokens_in,
                tally.tokens_cached,
                tally.tokens_cache_write
            ),
            (2305, 2000, 300)
        );
        let mut tally = StreamUsage::default();
        let last = r#"{"choices":[],"usage":{"prompt_tokens":1500,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":1280}}}"#;
        tally.observe(StreamFormat::OpenAiChat, &event(None, last));
        assert_eq!((tally.tokens_in, tally.tokens_cached), (1500, 1280));

        let whole = br#"{"usage":{"prompt_tokens":1500,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":1024}}}"#;
        let counts =
            crate::wire::usage::response_usage(quotaroute_journal::ApiFormat::Openai, whole)
                .unwrap()
                .unwrap();
        assert_eq!((counts.tokens_cached, counts.tokens_cache_write), (1024, 0));
        let responses = br#"{"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":30},"output_tokens":8}}"#;
        let counts =
            crate::wire::usage::response_usage(quotaroute_journal::ApiFormat::Openai, responses)
                .unwrap()
                .unwrap();
        assert_eq!(counts.tokens_cached, 30);
    }

    #[test]
    fn s15_gemini_chunks_and_their_running_usage() {
        use EventMeaning::*;
        let usage_of = |candidates: u64| {
            format!(
                r#""usageMetadata":{{"promptTokenCount":50,"cachedContentTokenCount":32,"candidatesTokenCount":{candidates},"thoughtsTokenCount":4}}"#
            )
        };
        let chunk = |parts: &str, finish: &str, candidates: u64| {
            format!(
                r#"{{"candidates":[{{"content":{{"role":"model","parts":{parts}}}{finish},"index":0}}],{},"modelVersion":"m"}}"#,
                usage_of(candidates)
            )
        };
        let thought = chunk(r#"[{"text":"hm","thought":true}]"#, "", 0);
        let text = chunk(r#"[{"text":"Hi"}]"#, "", 1);
        let call = chunk(
            r#"[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"S"}]"#,
            "",
            5,
        );
        let last_word = chunk(r#"[{"text":"!"}]"#, r#","finishReason":"STOP""#, 9);
        let finish_only = chunk(
            r#"[{"text":"","thoughtSignature":"S"}]"#,
            r#","finishReason":"STOP""#,
            9,
        );
        let safety = format!(
            r#"{{"candidates":[{{"finishReason":"SAFETY","index":0}}],{}}}"#,
            usage_of(0)
        );
        let table = [
            (None, thought.as_str(), Content),
            (None, text.as_str(), Content),
            (None, call.as_str(), Content),
            (None, last_word.as_str(), Content),
            (None, finish_only.as_str(), usage(50, 13)),
            (None, safety.as_str(), usage(50, 4)),
            (
                None,
                r#"{"candidates":[{"content":{"role":"model","parts":[]},"index":0}]}"#,
                Preamble,
            ),
            (None, r#"{"promptFeedback":{"blockReason":"OTHER"}}"#, Done),
            (None, "[{\"candidates\":[]}]", Garbage),
        ];
        check(StreamFormat::Gemini, &table);
        let error = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}"#;
        assert!(matches!(
            classify_event(StreamFormat::Gemini, &event(None, error)),
            Error { .. }
        ));
        // Every chunk's counts are the running totals; the closing ones come with the finish.
        let mut tally = StreamUsage::default();
        for data in [&thought, &text, &call] {
            tally.observe(StreamFormat::Gemini, &event(None, data));
        }
        assert_eq!(
            (tally.tokens_in, tally.tokens_out, tally.tokens_cached),
            (50, 9, 32)
        );
        assert!(
            !tally.final_seen,
            "a left stream is drained for its closing usage"
        );
        tally.observe(StreamFormat::Gemini, &event(None, &last_word));
        assert_eq!(tally.tokens_out, 13);
        assert!(tally.final_seen);
        // Text bytes of a left stream's estimate; every chunk matters after commit.
        assert_eq!(
            crate::wire::content_bytes::content_text_bytes(StreamFormat::Gemini, text.as_bytes()),
            2
        );
        assert!(matters_after_commit(
            StreamFormat::Gemini,
            &event(None, &text)
        ));
    }

    #[test]
    fn s3_after_commit_only_usage_errors_ends_and_garbage_are_parsed() {
        let chat = [
            (
                r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
                false,
            ),
            (
                r#"{"choices":[{"delta":{"content":"say \"error\""},"finish_reason":null}]}"#,
                false,
            ),
            (r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#, true),
            (
                r#"{"choices":[{"delta":{}, "finish_reason": "length"}]}"#,
                true,
            ),
            (
                r#"{"choices":[{"delta":{"content":"x"}}],"usage":null}"#,
                false,
            ),
            (
                r#"{"choices":[{"delta":{"content":"x"}}], "usage": null}"#,
                false,
            ),
            (
                "{\"choices\": [{\"delta\": {\"content\": \"x\"}}],\n  \"usage\" :\n  null}",
                false,
            ),
            (
                "{\"choices\": [{\"delta\": {}, \"finish_reason\" :\t\"stop\"}]}",
                true,
            ),
            (
                "{\n  \"choices\": [],\n  \"usage\": {\n    \"prompt_tokens\": 3\n  }\n}",
                true,
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#,
                true,
            ),
            (
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
                true,
            ),
            ("[DONE]", true),
            ("not json", true),
        ];
        for (data, matters) in chat {
            let event = event(None, data);
            assert_eq!(
                matters_after_commit(StreamFormat::OpenAiChat, &event),
                matters,
                "{data}"
            );
        }
        let named = [
            (StreamFormat::Anthropic, "content_block_delta", false),
            (StreamFormat::Anthropic, "message_delta", true),
            (
                StreamFormat::OpenAiResponses,
                "response.output_text.delta",
                false,
            ),
            (StreamFormat::OpenAiResponses, "response.completed", true),
        ];
        for (format, name, matters) in named {
            let event = event(Some(name), "{}");
            assert_eq!(matters_after_commit(format, &event), matters, "{name}");
        }
    }

    /// A Responses item event passed unparsed after commit is one the whole reading finds no
    /// usage, error or end in: real-shaped events of each name.
    #[test]
    fn s3_responses_item_events_passed_unread_mean_nothing_after_commit() {
        let text = r#""annotations":[],"text":"Hello \"world\" \u00e9","type":"output_text""#;
        let events = [
            ("response.output_item.added", r#"{"item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"},"output_index":1,"sequence_number":3,"type":"response.output_item.added"}"#.to_owned()),
            ("response.content_part.added", r#"{"content_index":0,"item_id":"msg_1","output_index":1,"part":{"annotations":[],"text":"","type":"output_text"},"sequence_number":4,"type":"response.content_part.added"}"#.to_owned()),
            ("response.output_text.done", r#"{"content_index":0,"item_id":"msg_1","logprobs":[],"output_index":1,"sequence_number":9,"text":"Hello \"world\" \u00e9","type":"response.output_text.done"}"#.to_owned()),
            ("response.content_part.done", format!(r#"{{"content_index":0,"item_id":"msg_1","output_index":1,"part":{{{text}}},"sequence_number":10,"type":"response.content_part.done"}}"#)),
            ("response.output_item.done", format!(r#"{{"item":{{"content":[{{{text}}}],"id":"msg_1","role":"assistant","status":"completed","type":"message"}},"output_index":1,"sequence_number":11,"type":"response.output_item.done"}}"#)),
            ("response.function_call_arguments.done", r#"{"arguments":"{\"city\":\"Paris\"}","item_id":"fc_1","output_index":2,"sequence_number":14,"type":"response.function_call_arguments.done"}"#.to_owned()),
            ("response.reasoning_summary_text.done", r#"{"item_id":"rs_1","output_index":0,"sequence_number":6,"summary_index":0,"text":"Thinking.","type":"response.reasoning_summary_text.done"}"#.to_owned()),
            ("response.output_text.annotation.added", r#"{"annotation":{"type":"url_citation","url":"https://example.com","title":"x","start_index":0,"end_index":5},"annotation_index":0,"content_index":0,"item_id":"msg_1","output_index":1,"sequence_number":8,"type":"response.output_text.annotation.added"}"#.to_owned()),
        ];
        for (name, data) in &events {
            let event = event(Some(name), data);
            assert!(
                !matters_after_commit(StreamFormat::OpenAiResponses, &event),
                "{name}"
            );
            let mut usage = StreamUsage::default();
            let meaning = usage.observe(StreamFormat::OpenAiResponses, &event);
            assert!(
                matches!(meaning, EventMeaning::Preamble | EventMeaning::Other),
                "{name}: {meaning:?}"
            );
            assert_eq!(usage, StreamUsage::default(), "{name}");
        }
        // The stream's own end and its failures are still read.
        for name in [
            "response.completed",
            "response.incomplete",
            "response.failed",
            "error",
        ] {
            assert!(
                matters_after_commit(StreamFormat::OpenAiResponses, &event(Some(name), "{}")),
                "{name}"
            );
        }
    }
}
