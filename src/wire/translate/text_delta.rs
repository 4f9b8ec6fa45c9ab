//! The text pieces of an upstream stream (most of its events), read by borrowing from the
//! event's bytes instead of into a `serde_json::Value`. Each stream reader asks here first and
//! reads every other event — and any event these shapes decline — as a whole `Value`, as it
//! did: a shape here accepts only an event whose every other meaning is absent, so both ways
//! give the same hub events. Each shape walks the event once (`json_scan`), declining what
//! the scan leaves to serde_json; `reference` holds the same shapes as serde's derived
//! readers, for the tests. A stream reads its chunks through the template of the last one a
//! shape accepted (`chunk_template`): one that differs in values alone is compared, not walked.

use std::borrow::Cow;

use serde::Deserialize;

use super::chunk_template::{Filled, Learned, Texts};
use crate::wire::json_scan::{Scan, Seen, DEPTH};
use crate::wire::stream_format::StreamFormat;
use crate::wire::stream_watch::gemini_finished;

/// A shape's reading of a chunk of `format` through a stream's template ([`Learned`], which
/// then knows its content bytes), else by walking it (`scan`, which may become the template,
/// with `base`; no `base`: a chunk that does not, such as a stream's last).
fn learned<'a, B: Copy, R>(
    data: &'a str,
    learned: &mut Learned<B>,
    format: StreamFormat,
    filled: impl FnOnce(Filled<'a>, B) -> Option<R>,
    scan: impl FnOnce(&mut Scan<'a>) -> Option<(R, Option<B>)>,
) -> Option<R> {
    let mut read = Filled::default();
    if let Some(base) = learned.read(data, &mut read) {
        return filled(read, base);
    }
    let mut walk = learned.scan(data);
    let (result, base) = scan(&mut walk)?;
    if let Some(base) = base {
        learned.learn(data, walk, base, format);
    }
    Some(result)
}

/// `messages_text` through the stream's template.
pub fn messages_text_learned<'a>(data: &'a str, chunks: &mut Learned<()>) -> Option<Cow<'a, str>> {
    // Most chunks: the template's bytes around another text.
    if let Some(text) = chunks.read_text_alone(data) {
        return Some(text);
    }
    learned(
        data,
        chunks,
        StreamFormat::Anthropic,
        |read, ()| read.first,
        |scan| Some((messages_text_in(scan)?, Some(()))),
    )
}

/// `chat_content` through the stream's template.
pub fn chat_content_learned<'a>(data: &'a str, chunks: &mut Learned<()>) -> Option<Cow<'a, str>> {
    // Most chunks: the template's bytes around another text (read, and kept, as the walk
    // below reads a tuned template's text alone; an empty one is no text piece either way).
    if let Some(text) = chunks.read_text_alone(data) {
        return Some(text).filter(|content| !content.is_empty());
    }
    learned(
        data,
        chunks,
        StreamFormat::OpenAiChat,
        |read, ()| read.first.filter(|content| !content.is_empty()),
        |scan| Some((chat_content_in(scan)?, Some(()))),
    )
}

/// `responses_text` through the stream's template.
pub fn responses_text_learned<'a>(data: &'a str, chunks: &mut Learned<()>) -> Option<Cow<'a, str>> {
    learned(
        data,
        chunks,
        StreamFormat::OpenAiResponses,
        |read, ()| read.first,
        |scan| Some((responses_text_in(scan)?, Some(()))),
    )
}

/// What a Gemini text chunk's template read outside its holes: whether its usage was there
/// (an object: its counts are holes or absent), and under the snake_case name; and whether it
/// ends the answer as the relay tells it (`stream_watch::gemini_finished`, a search for a
/// `finishReason` string: a chunk that fills the template has the same members with values
/// of the same kinds, so the search says the same of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeminiBase {
    usage: bool,
    snake_usage: bool,
    closes: bool,
}

impl GeminiBase {
    /// Whether a chunk read through the template ends the answer, as the relay's search says.
    pub fn closes(&self) -> bool {
        self.closes
    }
}

/// `gemini_text` through the stream's template.
pub fn gemini_text_learned<'a>(
    data: &'a str,
    chunks: &mut Learned<GeminiBase>,
) -> Option<GeminiText<'a>> {
    learned(
        data,
        chunks,
        StreamFormat::Gemini,
        |read, base| {
            let [prompt, cached, candidates, thoughts] = read.counts;
            let texts = read.into_texts();
            // Each part's text is not empty (the walk declines the chunk otherwise).
            if texts.iter().any(|text| text.is_empty()) {
                return None;
            }
            Some(GeminiText {
                texts,
                // A chunk with a finish reason never becomes the template (below).
                finish: None,
                usage: base.usage.then_some(GeminiUsage {
                    prompt,
                    cached,
                    candidates,
                    thoughts,
                }),
                snake_usage: base.snake_usage,
            })
        },
        |scan| gemini_walk(scan, &mut GeminiStart::default()),
    )
}

/// What a Gemini stream's first chunk starts the answer with: its `responseId` and
/// `modelVersion` (`None`: absent or `null`), read by walking it (a template leaves them
/// open).
#[derive(Debug, Default)]
pub struct GeminiStart<'a> {
    pub id: Option<Cow<'a, str>>,
    pub model: Option<Cow<'a, str>>,
}

/// `gemini_text` of a stream's first chunk, walked (it may become the stream's template), and
/// what it starts the answer with.
pub fn gemini_first_text<'a>(
    data: &'a str,
    chunks: &mut Learned<GeminiBase>,
) -> Option<(GeminiText<'a>, GeminiStart<'a>)> {
    let mut start = GeminiStart::default();
    let mut walk = chunks.scan(data);
    let (read, base) = gemini_walk(&mut walk, &mut start)?;
    if let Some(base) = base {
        chunks.learn(data, walk, base, StreamFormat::Gemini);
    }
    Some((read, start))
}

/// `gemini_text_in`, and the base of the template its walk may become: none for the chunk that
/// finishes (the stream's last), whose reason is read here alone.
fn gemini_walk<'a>(
    scan: &mut Scan<'a>,
    start: &mut GeminiStart<'a>,
) -> Option<(GeminiText<'a>, Option<GeminiBase>)> {
    let read = gemini_text_in(scan, start)?;
    let base = read.finish.is_none().then(|| GeminiBase {
        usage: read.usage.is_some(),
        snake_usage: read.snake_usage,
        closes: scan
            .read_since(0)
            .is_some_and(|chunk| gemini_finished(chunk.as_bytes())),
    });
    Some((read, base))
}

/// A Messages `content_block_delta` holding a `text_delta`: its text.
#[cfg(test)]
pub fn messages_text(data: &str) -> Option<Cow<'_, str>> {
    messages_text_in(&mut Scan::new(data))
}

pub(super) fn messages_text_in<'a>(scan: &mut Scan<'a>) -> Option<Cow<'a, str>> {
    let mut seen = Seen::default();
    let mut text = None;
    scan.object(|scan, key| match &*key {
        "type" => {
            seen.first(0)?;
            (scan.string()? == "content_block_delta").then_some(())
        }
        "delta" => {
            seen.first(1)?;
            let mut inner = Seen::default();
            let mut text_delta = false;
            scan.object(|scan, key| match &*key {
                "type" => {
                    inner.first(0)?;
                    text_delta = scan.string()? == "text_delta";
                    text_delta.then_some(())
                }
                "text" => {
                    inner.first(1)?;
                    text = Some(scan.text()?);
                    Some(())
                }
                _ => scan.skip(DEPTH),
            })?;
            text_delta.then_some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    // Both `type` and `delta` are required.
    seen.all(2)?;
    text
}

/// A Chat Completions chunk whose only news is text: no `error`, no usage, and one choice
/// whose delta holds a non-empty `content` and no reasoning, refusal, tool call or annotation,
/// with no finish reason and no `text`. Its `content`. The relay takes such a chunk as content
/// with no usage, as `stream_watch` reads it, without reading it again.
#[cfg(test)]
pub fn chat_content(data: &str) -> Option<Cow<'_, str>> {
    chat_content_in(&mut Scan::new(data))
}

pub(super) fn chat_content_in<'a>(scan: &mut Scan<'a>) -> Option<Cow<'a, str>> {
    let mut seen = Seen::default();
    let mut content = None;
    scan.object(|scan, key| match &*key {
        "error" => None,
        "usage" => {
            seen.first(0)?;
            scan.null().then_some(())
        }
        "choices" => {
            seen.first(1)?;
            let mut choices = 0;
            scan.array(|scan| {
                choices += 1;
                (choices == 1).then_some(())?;
                let mut choice = Seen::default();
                scan.object(|scan, key| match &*key {
                    "delta" => {
                        choice.first(0)?;
                        content = chat_delta(scan)?;
                        Some(())
                    }
                    "finish_reason" => {
                        choice.first(1)?;
                        scan.null().then_some(())
                    }
                    // A completions choice's member: the relay's reading of a chunk
                    // (`openai_chunk`) reads it, so a chunk with one is not text alone.
                    "text" => None,
                    _ => scan.skip(DEPTH),
                })
            })?;
            (choices == 1).then_some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    content.filter(|content| !content.is_empty())
}

/// A Chat delta of `content` alone (and members a reader does not act on, such as `role`).
fn chat_delta<'a>(scan: &mut Scan<'a>) -> Option<Option<Cow<'a, str>>> {
    let mut seen = Seen::default();
    let mut content = None;
    scan.object(|scan, key| match &*key {
        "content" => {
            seen.first(0)?;
            content = Some(scan.text()?);
            Some(())
        }
        "reasoning_content" | "reasoning" | "refusal" | "tool_calls" | "annotations" => None,
        _ => scan.skip(DEPTH),
    })?;
    Some(content)
}

/// A Responses `response.output_text.delta`: its `delta`.
#[cfg(test)]
pub fn responses_text(data: &str) -> Option<Cow<'_, str>> {
    responses_text_in(&mut Scan::new(data))
}

pub(super) fn responses_text_in<'a>(scan: &mut Scan<'a>) -> Option<Cow<'a, str>> {
    let mut seen = Seen::default();
    let mut delta = None;
    scan.object(|scan, key| match &*key {
        "type" => {
            seen.first(0)?;
            (scan.string()? == "response.output_text.delta").then_some(())
        }
        "delta" => {
            seen.first(1)?;
            delta = Some(scan.text()?);
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    seen.all(2)?;
    delta
}

/// A Gemini chunk whose only news is text (and usage, and a finish reason): no `error` or
/// `promptFeedback`, and one candidate with no grounding whose parts each hold a non-empty `text`
/// and nothing else a reader or the relay acts on (thought, signature, call, inline data,
/// code). Its texts, and its
/// `usageMetadata`'s counts. Members are read by their camelCase or snake_case names, as the
/// reader's `at` reads them.
#[derive(Debug, PartialEq, Eq)]
pub struct GeminiText<'a> {
    pub texts: Texts<'a>,
    /// The candidate's `finishReason` (a string; the last chunk's), read after its texts.
    pub finish: Option<Cow<'a, str>>,
    pub usage: Option<GeminiUsage>,
    /// The usage came as `usage_metadata` (the snake_case name the relay's reading of a chunk
    /// does not know), or as `null` under that name.
    pub snake_usage: bool,
}

/// A `usageMetadata` object's counts, read as `gemini::read::usage` reads them (camelCase
/// members, 0 when absent or `null`; any other kind of value declines the chunk).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
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

#[cfg(test)]
pub fn gemini_text(data: &str) -> Option<GeminiText<'_>> {
    gemini_text_in(&mut Scan::new(data), &mut GeminiStart::default())
}

/// `start`: the chunk's id and model, as read (a string or `null`; any other value, or either
/// under its snake_case name, declines the chunk).
fn gemini_text_in<'a>(scan: &mut Scan<'a>, start: &mut GeminiStart<'a>) -> Option<GeminiText<'a>> {
    let mut seen = Seen::default();
    let mut candidate = None;
    let (mut camel, mut snake) = (None, None);
    scan.object(|scan, key| match &*key {
        "error" | "promptFeedback" | "prompt_feedback" => None,
        "candidates" => {
            seen.first(0)?;
            let mut candidates = 0;
            scan.array(|scan| {
                candidates += 1;
                (candidates == 1).then_some(())?;
                candidate = Some(gemini_candidate(scan)?);
                Some(())
            })?;
            (candidates == 1).then_some(())
        }
        "usageMetadata" => {
            seen.first(1)?;
            camel = Some(gemini_usage(scan)?);
            Some(())
        }
        "usage_metadata" => {
            seen.first(2)?;
            snake = Some(gemini_usage(scan)?);
            Some(())
        }
        "responseId" => {
            seen.first(3)?;
            start.id = string_or_null(scan)?;
            Some(())
        }
        "modelVersion" => {
            seen.first(4)?;
            start.model = string_or_null(scan)?;
            Some(())
        }
        "response_id" | "model_version" => None,
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    // Both names at once: one member sent twice, as the reader's `at` reads them.
    if camel.is_some() && snake.is_some() {
        return None;
    }
    let (texts, finish) = candidate?;
    Some(GeminiText {
        texts,
        finish,
        usage: camel.flatten().or(snake.flatten()),
        snake_usage: snake.is_some(),
    })
}

/// A string (left open in a template) or `null` (`None`); any other value declines.
fn string_or_null<'a>(scan: &mut Scan<'a>) -> Option<Option<Cow<'a, str>>> {
    if scan.null() {
        return Some(None);
    }
    Some(Some(scan.passed_string()?))
}

/// A candidate of text parts alone: their texts, and its finish reason when it is a string
/// (`null` is none; read as a value the template compares, not a hole).
fn gemini_candidate<'a>(scan: &mut Scan<'a>) -> Option<(Texts<'a>, Option<Cow<'a, str>>)> {
    let mut seen = Seen::default();
    let mut texts = None;
    let mut finish = None;
    scan.object(|scan, key| match &*key {
        "groundingMetadata" | "grounding_metadata" | "finish_reason" => None,
        "finishReason" => {
            seen.first(1)?;
            if !scan.null() {
                finish = Some(scan.string()?);
            }
            Some(())
        }
        "content" => {
            seen.first(0)?;
            let mut content = Seen::default();
            let mut parts = Texts::default();
            scan.object(|scan, key| match &*key {
                "parts" => {
                    content.first(0)?;
                    scan.array(|scan| {
                        parts.push(gemini_part(scan)?);
                        Some(())
                    })
                }
                _ => scan.skip(DEPTH),
            })?;
            content.all(1)?;
            texts = Some(parts).filter(|parts| !parts.is_empty());
            texts.as_ref().map(drop)
        }
        _ => scan.skip(DEPTH),
    })?;
    Some((texts?, finish))
}

/// A part of text alone: its (non-empty) text.
fn gemini_part<'a>(scan: &mut Scan<'a>) -> Option<Cow<'a, str>> {
    let mut seen = Seen::default();
    let mut text = None;
    scan.object(|scan, key| match &*key {
        "thought" | "thoughtSignature" | "thought_signature" | "functionCall" | "function_call"
        | "inlineData" | "executableCode" => None,
        "text" => {
            seen.first(0)?;
            text = Some(scan.text()?);
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    text.filter(|text| !text.is_empty())
}

/// A `usageMetadata` member: `None` for `null`, else its counts (whole numbers or `null`).
fn gemini_usage(scan: &mut Scan<'_>) -> Option<Option<GeminiUsage>> {
    if scan.null() {
        return Some(None);
    }
    let mut seen = Seen::default();
    let mut usage = GeminiUsage::default();
    scan.object(|scan, key| {
        // Each count's bit is its slot in a template's `Filled::counts`.
        let (bit, count) = match &*key {
            "promptTokenCount" => (0u8, &mut usage.prompt),
            "cachedContentTokenCount" => (1, &mut usage.cached),
            "candidatesTokenCount" => (2, &mut usage.candidates),
            "thoughtsTokenCount" => (3, &mut usage.thoughts),
            _ => return scan.skip(DEPTH),
        };
        seen.first(u32::from(bit))?;
        *count = if scan.null() {
            None
        } else {
            Some(scan.count(bit)?)
        };
        Some(())
    })?;
    Some(Some(usage))
}

/// The shapes as serde's derived readers read them (what the scanning shapes above were
/// checked against): the tests compare the two.
#[cfg(test)]
pub(super) mod reference {
    use std::borrow::Cow;

    use serde::de::{Deserializer, IgnoredAny};
    use serde::Deserialize;

    use super::{GeminiText, GeminiUsage, Texts};

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

    /// A `usageMetadata` member as sent: whether it is there at all, and its counts.
    #[derive(Default)]
    struct UsageMember(bool, Option<GeminiUsage>);

    impl<'de> Deserialize<'de> for UsageMember {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            Ok(UsageMember(true, Option::deserialize(deserializer)?))
        }
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
            #[serde(default, rename = "usageMetadata")]
            usage_metadata: UsageMember,
            #[serde(default, rename = "usage_metadata")]
            usage_snake: UsageMember,
            #[serde(default, rename = "responseId", borrow)]
            _id: Option<Cow<'a, str>>,
            #[serde(default, rename = "modelVersion", borrow)]
            _model: Option<Cow<'a, str>>,
            #[serde(default, rename = "response_id")]
            id_snake: Present,
            #[serde(default, rename = "model_version")]
            model_snake: Present,
        }
        #[derive(Deserialize)]
        struct GeminiCandidate<'a> {
            #[serde(borrow)]
            content: Option<GeminiContent<'a>>,
            #[serde(default, rename = "groundingMetadata", alias = "grounding_metadata")]
            grounding_metadata: Present,
            #[serde(default, rename = "finishReason", borrow)]
            finish_reason: Option<Cow<'a, str>>,
            #[serde(default, rename = "finish_reason")]
            finish_reason_snake: Present,
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
            #[serde(default, rename = "inlineData")]
            inline_data: Present,
            #[serde(default, rename = "executableCode")]
            executable_code: Present,
        }
        let chunk: GeminiChunk<'_> = serde_json::from_str(data).ok()?;
        if chunk.error.0
            || chunk.prompt_feedback.0
            || chunk.id_snake.0
            || chunk.model_snake.0
            || chunk.candidates.len() != 1
        {
            return None;
        }
        // Both names at once: one member sent twice, as the reader's `at` reads them.
        if chunk.usage_metadata.0 && chunk.usage_snake.0 {
            return None;
        }
        let candidate = chunk.candidates.into_iter().next()?;
        if candidate.grounding_metadata.0 || candidate.finish_reason_snake.0 {
            return None;
        }
        let mut texts = Texts::default();
        for part in candidate.content?.parts {
            let other_news = part.thought.0
                || part.thought_signature.0
                || part.function_call.0
                || part.inline_data.0
                || part.executable_code.0;
            if other_news {
                return None;
            }
            texts.push(part.text.filter(|text| !text.is_empty())?);
        }
        (!texts.is_empty()).then_some(GeminiText {
            texts,
            finish: candidate.finish_reason,
            usage: chunk.usage_metadata.1.or(chunk.usage_snake.1),
            snake_usage: chunk.usage_snake.0,
        })
    }
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
        assert_eq!(read.texts.iter().collect::<Vec<_>>(), ["a", "b"]);
        let usage = read.usage.expect("usage");
        assert_eq!((usage.prompt, usage.candidates), (Some(3), None));
        let snake =
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usage_metadata":null}"#;
        let snake_texts = gemini_text(snake).expect("text").texts;
        assert_eq!(snake_texts.iter().collect::<Vec<_>>(), ["a"]);
        let last = r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}"#;
        assert_eq!(
            gemini_text(last).expect("text").finish.as_deref(),
            Some("STOP")
        );
        let unsaid = r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":null}]}"#;
        assert_eq!(gemini_text(unsaid).expect("text").finish, None);
        for declined in [
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finish_reason":"STOP"}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":3}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"A","finishReason":"B"}]}"#,
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

#[cfg(test)]
mod against_reference {
    use super::*;

    /// Events of every shape: real ones (the mock's, OpenAI's, Google's, Anthropic's), and
    /// each changed: respaced, escaped, repeated members, members of other kinds, nesting.
    fn corpus() -> Vec<String> {
        let real = [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"choices":[{"delta":{"content":"This"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-mock-2","model":"gpt-4o-mini","object":"chat.completion.chunk","system_fingerprint":"fp_mock"}"#,
            r#"{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"c","model":"m","object":"chat.completion.chunk"}"#,
            r#"{"content_index":0,"delta":" is","item_id":"msg_mock_1","logprobs":[],"output_index":0,"sequence_number":3,"type":"response.output_text.delta"}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"This"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"mock-gemini-1","usageMetadata":{"candidatesTokenCount":1,"promptTokenCount":32,"promptTokensDetails":[{"modality":"TEXT","tokenCount":32}],"totalTokenCount":33}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3,"cachedContentTokenCount":1,"thoughtsTokenCount":null},"modelVersion":"g","responseId":"r"}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usage_metadata":{"promptTokenCount":3}}"#,
        ];
        let edits: [(&str, &str); 24] = [
            ("\"text\":\"", "\"text\" : \"h\\u00e9 \\\"q\\\" \\n 🦀 "),
            ("\"content\":\"", "\"content\":\"\\u0041\\/\\t"),
            ("\"delta\":\"", "\"delta\":\"\\ud83e\\udd80"),
            (
                "{",
                "{ \"x\": {\"deep\": [1, -2.5, true, false, null, \"s\"]}, ",
            ),
            ("{", "{\"error\":null,"),
            ("{", "{\"usage\":null,"),
            ("{", "{\"usage\":{\"prompt_tokens\":1},"),
            ("{", "{\"type\":\"x\","),
            ("\"index\":0", "\"index\":01"),
            ("\"index\":0", "\"index\":1e2"),
            ("\"index\":0", "\"index\":0.5"),
            ("\"index\":0", "\"index\":12345678901234567890"),
            ("null", "nul"),
            ("\"finish_reason\":null", "\"finish_reason\":\"stop\""),
            ("\"finish_reason\":null", "\"finish_reason\":3"),
            ("\"promptTokenCount\":32", "\"promptTokenCount\":32.0"),
            ("\"promptTokenCount\":32", "\"promptTokenCount\":-1"),
            ("\"promptTokenCount\":32", "\"promptTokenCount\":\"32\""),
            ("\"promptTokenCount\":32", "\"promptTokenCount\":null"),
            (
                "\"promptTokenCount\":32",
                "\"promptTokenCount\":32,\"promptTokenCount\":33",
            ),
            ("\"role\":\"model\"", "\"role\":\"model\",\"parts\":[]"),
            ("}]", "},{\"text\":\"more\"}]"),
            ("\"candidates\":[{", "\"candidates\":[{\"index\":1},{"),
            ("\"text\":\"", "\"thought\":false,\"text\":\""),
        ];
        let mut corpus: Vec<String> = real.iter().map(|e| e.to_string()).collect();
        for event in real {
            for (from, to) in edits {
                corpus.push(event.replacen(from, to, 1));
            }
            corpus.push(format!(" {event}\n"));
            corpus.push(format!("{event} x"));
            corpus.push(event.replace(':', " :\t"));
            corpus.push(event[..event.len() - 1].to_string());
            corpus.push(format!("[{event}]"));
        }
        corpus
    }

    #[test]
    fn each_shape_reads_what_serdes_derived_reader_reads_or_declines() {
        let mut read = 0;
        for event in corpus() {
            let pairs = [
                (messages_text(&event), reference::messages_text(&event)),
                (chat_content(&event), reference::chat_content(&event)),
                (responses_text(&event), reference::responses_text(&event)),
            ];
            for (scanned, derived) in pairs {
                if scanned.is_some() {
                    read += 1;
                    assert_eq!(scanned, derived, "{event}");
                }
            }
            let scanned = gemini_text(&event);
            if scanned.is_some() {
                read += 1;
                assert_eq!(scanned, reference::gemini_text(&event), "{event}");
            }
        }
        assert!(read > 40, "{read}");
    }

    #[test]
    fn the_real_shapes_are_read_by_the_scan() {
        for event in corpus().iter().take(7) {
            let read = messages_text(event).is_some()
                || chat_content(event).is_some()
                || responses_text(event).is_some()
                || gemini_text(event).is_some();
            let empty_role_chunk = event.contains("\"role\":\"assistant\"");
            assert_eq!(read, !empty_role_chunk, "{event}");
        }
    }
}

#[cfg(test)]
mod through_templates {
    use super::*;
    use crate::wire::content_bytes::content_text_bytes;
    use crate::wire::translate::chunk_template::Filled;
    use StreamFormat::{Anthropic, Gemini, OpenAiChat, OpenAiResponses};

    /// Real events of each shape (the mock's, OpenAI's, Anthropic's, Google's).
    const REAL: [&str; 6] = [
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"choices":[{"delta":{"content":"This"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-mock-2","model":"gpt-4o-mini","object":"chat.completion.chunk","system_fingerprint":"fp_mock","obfuscation":"x1"}"#,
        r#"{"content_index":0,"delta":" is","item_id":"msg_mock_1","logprobs":[],"output_index":0,"sequence_number":3,"type":"response.output_text.delta"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"This"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"mock-gemini-1","usageMetadata":{"candidatesTokenCount":1,"promptTokenCount":32,"promptTokensDetails":[{"modality":"TEXT","tokenCount":32}],"totalTokenCount":33}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3,"cachedContentTokenCount":1,"thoughtsTokenCount":null},"modelVersion":"g","responseId":"r"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usage_metadata":{"promptTokenCount":3}}"#,
    ];

    /// Values put in place of each value of an event (one at a time): of the same kind, of
    /// other kinds, escaped, non-ASCII, empty, numbers a scan declines.
    const VALUES: [&str; 17] = [
        r#""""#,
        r#""x""#,
        r#""h\u00e9 \"q\" \n 🦀 \/""#,
        r#""\ud83e\udd80""#,
        r#""a\\""#,
        r#""text_delta""#,
        "0",
        "7",
        "-1",
        "2.5",
        "1e3",
        "01",
        "123456789012345678901",
        "null",
        "true",
        "[]",
        "{}",
    ];

    /// Where each string, number and literal value of `event` is (after a member's colon).
    fn values(event: &str) -> Vec<(usize, usize)> {
        let bytes = event.as_bytes();
        let mut found = Vec::new();
        for at in 1..bytes.len() {
            if bytes[at] != b':' || bytes[at - 1] != b'"' {
                continue;
            }
            let start = at + 1;
            let end = match bytes[start] {
                b'"' => start + 1 + event[start + 1..].find('"').expect("closed") + 1,
                b'{' | b'[' => continue,
                _ => start + event[start..].find([',', '}', ']']).expect("ended"),
            };
            found.push((start, end));
        }
        found
    }

    /// `event` with each of its values changed to each of [`VALUES`].
    fn variants(event: &str) -> Vec<String> {
        let mut out = vec![event.to_string()];
        for (start, end) in values(event) {
            for value in VALUES {
                out.push(format!("{}{value}{}", &event[..start], &event[end..]));
            }
        }
        out
    }

    /// Reads `read` through the template of `learnt`, for each shape that accepts `learnt`:
    /// as its walk reads it, and the text bytes the template counts as `content_bytes` counts
    /// them. How many shapes read it through the template, and how many of those had its bytes
    /// counted there.
    fn read_pair(learnt: &str, read: &str) -> (usize, usize) {
        let counts = [
            shape_pair(
                learnt,
                read,
                messages_text_learned,
                messages_text,
                Anthropic,
            ),
            shape_pair(learnt, read, chat_content_learned, chat_content, OpenAiChat),
            shape_pair(
                learnt,
                read,
                responses_text_learned,
                responses_text,
                OpenAiResponses,
            ),
            shape_pair(learnt, read, gemini_text_learned, gemini_text, Gemini),
        ];
        counts
            .into_iter()
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }

    /// [`read_pair`] for one shape (`learned`, its reading through a template; `walk`, by
    /// walking; `format`, its protocol).
    fn shape_pair<'r, B: Copy, T: PartialEq + std::fmt::Debug>(
        learnt: &'r str,
        read: &'r str,
        learned: fn(&'r str, &mut Learned<B>) -> Option<T>,
        walk: fn(&'r str) -> Option<T>,
        format: StreamFormat,
    ) -> (usize, usize) {
        let mut chunks = Learned::default();
        if learned(learnt, &mut chunks).is_none() {
            return (0, 0);
        }
        let through = usize::from(chunks.fill(read, &mut Filled::default()).is_some());
        let got = learned(read, &mut chunks);
        assert_eq!(got, walk(read), "{learnt} then {read}");
        // What the template counted of `read`, when it did: as the relay's search counts it.
        let Some(bytes) = got.and(chunks.content_bytes()) else {
            return (through, 0);
        };
        let searched = content_text_bytes(format, read.as_bytes());
        assert_eq!(bytes, searched, "{format:?}: {learnt} then {read}");
        (through, 1)
    }

    /// Reads `read` through the template of `learnt` after `tuner` was the first chunk read
    /// through it (its stops tuned to `tuner`), for each shape whose template took `tuner`:
    /// as its walk reads it, its text bytes as `content_bytes` counts them. How many shapes
    /// read it through the tuned template.
    fn read_tuned(learnt: &str, tuner: &str, read: &str) -> usize {
        let tuned = [
            shape_tuned(
                learnt,
                tuner,
                read,
                messages_text_learned,
                messages_text,
                Anthropic,
            ),
            shape_tuned(
                learnt,
                tuner,
                read,
                chat_content_learned,
                chat_content,
                OpenAiChat,
            ),
            shape_tuned(
                learnt,
                tuner,
                read,
                responses_text_learned,
                responses_text,
                OpenAiResponses,
            ),
            shape_tuned(
                learnt,
                tuner,
                read,
                gemini_text_learned,
                gemini_text,
                Gemini,
            ),
        ];
        tuned.into_iter().sum()
    }

    /// [`read_tuned`] for one shape.
    fn shape_tuned<'r, B: Copy, T: PartialEq + std::fmt::Debug>(
        learnt: &'r str,
        tuner: &'r str,
        read: &'r str,
        learned: fn(&'r str, &mut Learned<B>) -> Option<T>,
        walk: fn(&'r str) -> Option<T>,
        format: StreamFormat,
    ) -> usize {
        let mut chunks = Learned::default();
        if learned(learnt, &mut chunks).is_none() {
            return 0;
        }
        let took_tuner = chunks.fill(tuner, &mut Filled::default()).is_some();
        assert_eq!(
            learned(tuner, &mut chunks),
            walk(tuner),
            "{learnt} then {tuner}"
        );
        if !took_tuner {
            return 0;
        }
        let through = usize::from(chunks.fill(read, &mut Filled::default()).is_some());
        let got = learned(read, &mut chunks);
        assert_eq!(got, walk(read), "{learnt}, tuned on {tuner}, then {read}");
        if let Some(bytes) = got.and(chunks.content_bytes()) {
            let searched = content_text_bytes(format, read.as_bytes());
            assert_eq!(
                bytes, searched,
                "{format:?}: {learnt}, {tuner}, then {read}"
            );
        }
        through
    }

    /// A template tuned on one chunk of a family (its changed values stops, its unchanged
    /// counts read as the template's) reads every chunk of the family as its walk does:
    /// counts that change after the tuning, values that stop changing.
    #[test]
    fn a_chunk_read_through_a_tuned_template_reads_as_its_walk_reads_it() {
        let mut through = 0;
        for real in REAL {
            let family = variants(real);
            for tuner in &family {
                for read in &family {
                    through += read_tuned(real, tuner, read);
                }
            }
        }
        assert!(through > 5000, "{through}");
    }

    /// [`read_pair`] of each pair of `real`'s variants (the first learnt, the second read).
    fn through_pairs(real: &str) -> (usize, usize) {
        let (mut through, mut counted) = (0, 0);
        let family = variants(real);
        for learnt in &family {
            for read in &family {
                let (read, bytes) = read_pair(learnt, read);
                through += read;
                counted += bytes;
            }
        }
        (through, counted)
    }

    #[test]
    fn a_chunk_read_through_a_template_reads_as_its_walk_reads_it() {
        let (mut through, mut counted) = (0, 0);
        for real in REAL {
            let (read, bytes) = through_pairs(real);
            through += read;
            counted += bytes;
        }
        // Most pairs of a family differ in values alone: read through the template, their
        // text bytes counted there.
        assert!(through > 5000, "{through}");
        assert!(counted > 4000, "{counted}");
    }

    /// A chunk that differs from the template in a byte just before a value (its key's
    /// colon or closing quote, a letter of its key) reads as its walk reads it.
    #[test]
    fn a_chunk_that_differs_next_to_a_value_reads_as_its_walk() {
        let mut compared = 0;
        for real in REAL {
            for (start, _) in values(real) {
                for (back, to) in [(1, "="), (1, " "), (2, "x"), (3, "q")] {
                    let at = start - back;
                    let read = format!("{}{to}{}", &real[..at], &real[at + 1..]);
                    read_pair(real, &read);
                    compared += 1;
                }
            }
        }
        assert!(compared > 50, "{compared}");
    }

    /// Chunks whose text `content_bytes` does not find where the shape reads it (a member of
    /// the same name before it, or its only string elsewhere), or finds none.
    #[test]
    fn a_template_counts_only_the_text_content_bytes_would_count() {
        let odd = [
            r#"{"x":{"text":"zz"},"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"x":{"text":7,"partial_json":"q"},"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"x":{"text":null},"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"x":[{"content":"no"}],"choices":[{"delta":{"content":"This"},"finish_reason":null}],"id":"c"}"#,
            r#"{"choices":[{"delta":{"content":"This"},"finish_reason":null,"text2":{"text":"t"}}],"id":"c"}"#,
            r#"{"x":{"delta":"d"},"type":"response.output_text.delta","delta":" is","sequence_number":3}"#,
            r#"{"a\"text":"e","type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"promptFeedbackX":{"text":"zz"},"candidates":[{"content":{"parts":[{"text":"a"}]}}]}"#,
        ];
        let mut through = 0;
        for real in odd {
            through += through_pairs(real).0;
        }
        assert!(through > 500, "{through}");
    }

    #[test]
    fn a_stream_that_changes_shape_learns_again_and_then_stops_learning() {
        let mut chunks = Learned::default();
        let a = r#"{"choices":[{"delta":{"content":"a"}}],"id":"1"}"#;
        let b = r#"{"choices":[{"delta":{"content":"b"}}],"id":"1","x":1}"#;
        assert_eq!(chat_content_learned(a, &mut chunks).as_deref(), Some("a"));
        assert!(chunks.fill(a, &mut Filled::default()).is_some());
        assert!(chunks.fill(b, &mut Filled::default()).is_none());
        // `b` is walked and becomes the template.
        assert_eq!(chat_content_learned(b, &mut chunks).as_deref(), Some("b"));
        assert!(chunks.fill(b, &mut Filled::default()).is_some());
        // A stream whose every chunk differs keeps being read, by walking once it stops
        // learning.
        for n in 0..40 {
            let chunk = format!(r#"{{"choices":[{{"delta":{{"content":"c"}}}}],"k{n}":1}}"#);
            assert_eq!(
                chat_content_learned(&chunk, &mut chunks).as_deref(),
                Some("c")
            );
        }
    }
}
