//! Each upstream API's whole answer read straight into the hub's form, without a
//! `serde_json::Value` of it: typed shapes of the members the `Value` readers (`*/read.rs`'s
//! `answer`) read, every other member skipped unread. A shape gives exactly the form the `Value`
//! reader gives, or declines (`None`) and the caller reads the answer as a `Value`: on any
//! member of another type than the shape models (a number where a string goes, an array where
//! an object goes, a duplicated member), and on what it leaves to the `Value` readers (web
//! searches, citations, grounding).
//!
//! A shape also reads every member `usage::response_summary` reads (`model`, `modelVersion`,
//! `usage`, `usageMetadata`), as strictly, so an answer it takes is read once: its summary
//! (the model and counts billing, the journal and telemetry take) is the one
//! `response_summary` gives, and one it declines goes that way as before.
//!
//! A Chat answer, and a Messages answer of text blocks, are read into the shape's structs by
//! one `json_scan` walk over their bytes first (`chat_scan`, `messages_scan`); serde's derived
//! reader reads what a scan declines.

mod chat_scan;
mod messages_scan;
mod summary_scan;

pub(super) use summary_scan::relayed_summary;

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::gemini::call_ids;
use super::gemini::read::{
    finish as gemini_finish, push_thinking as gemini_push_thinking, usage_of_counts,
};
use super::hub::form::{Answer, Finish, Part, ToolCall, Usage};
use super::text_delta::GeminiUsage;
use super::{chat, messages, Api};
use crate::wire::usage::{
    gemini_whole_counts, whole_usage_counts, ResponseSummary, TokenCounts, WholeUsage,
};

/// An upstream answer its shape took.
pub struct Typed<'a> {
    /// The answer in the hub's form.
    pub form: Answer,
    /// What `usage::response_summary` reads of it.
    pub summary: ResponseSummary<'a>,
    /// Every text and thinking part's text is known to hold nothing JSON escapes (a scan read
    /// it borrowed); `false` when not known.
    pub texts_plain: bool,
}

/// The upstream answer `body` (in `target`'s API) as its shape reads it, or `None` when the
/// shape declines it. `signatures` and `created` are what the Gemini reader takes.
pub fn answer(target: Api, body: &[u8], signatures: bool, created: u64) -> Option<Typed<'_>> {
    let ((form, summary), texts_plain) = match target {
        // A Chat answer by one scan of its bytes first; serde reads what the scan declines.
        Api::Chat => {
            let shape = match chat_scan::answer(body) {
                Some(scanned) => scanned,
                None => from_body::<Obj<ChatAnswer>>(body)?.0,
            };
            let plain = shape.texts_plain();
            (shape.into_form()?, plain)
        }
        Api::Responses => (
            from_body::<Obj<ResponsesAnswer>>(body)?.0.into_form()?,
            false,
        ),
        // A Messages answer of text blocks by one scan too; serde reads what it declines.
        Api::Messages => {
            let shape = match messages_scan::answer(body) {
                Some(scanned) => scanned,
                None => from_body::<Obj<MessagesAnswer>>(body)?.0,
            };
            let plain = shape.texts_plain;
            (shape.into_form()?, plain)
        }
        Api::Gemini => (
            from_body::<Obj<GeminiAnswer>>(body)?
                .0
                .into_form(signatures, created)?,
            false,
        ),
    };
    Some(Typed {
        form,
        summary,
        texts_plain,
    })
}

/// `body` read as `T` (`wire::json_body`), or `None`.
fn from_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Option<T> {
    crate::wire::json_body::from_body(body).ok()
}

/// A JSON object read as `T` (serde's derived structs also take an array of their fields in
/// order, which the `Value` readers read as no object at all).
pub(super) struct Obj<T>(pub(super) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        deserializer.deserialize_map(ObjVisitor(PhantomData))
    }
}

/// A string, borrowed from the body when it has no escapes.
pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// `text` as a `&str`, `""` when absent (the `Value` readers' `str_at`).
pub(super) fn str_of<'s>(text: &'s Option<Text<'_>>) -> &'s str {
    text.as_ref().map_or("", |text| &text.0)
}

/// A member that may be `null`: `Some(None)` when it is, `None` when it is absent (with
/// `#[serde(default)]`).
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// The form's `model` of a `model` member read raw: `absent` when there is none, `null` as
/// `null`.
fn model_value(raw: Option<Option<&RawValue>>, absent: Value) -> Option<Value> {
    match raw {
        None => Some(absent),
        Some(None) => Some(Value::Null),
        Some(Some(raw)) => {
            let text = raw.get();
            // A string of no escape (a model's name) is its text between the quotes.
            match text
                .strip_prefix('"')
                .and_then(|text| text.strip_suffix('"'))
            {
                Some(name) if !name.contains('\\') => Some(Value::String(name.to_owned())),
                _ => serde_json::from_str(text).ok(),
            }
        }
    }
}

/// What `usage::response_summary` reads of an answer's members: `model` (else `modelVersion`)
/// as sent, and the counts of `usage` (else `usageMetadata`).
fn summary<'a>(
    model: Option<&'a RawValue>,
    model_version: Option<&'a RawValue>,
    usage: Option<&UsageMembers>,
    metadata: Option<&GeminiCounts>,
) -> ResponseSummary<'a> {
    ResponseSummary {
        counts: whole_usage_counts(usage.map(UsageMembers::whole))
            .or_else(|| metadata.and_then(GeminiCounts::counts)),
        model: model.or(model_version),
    }
}

/// A list of objects of no member the shape reads, only counted (annotations, citations: a
/// non-empty one declines).
type Skipped = Vec<serde::de::IgnoredAny>;

fn none_or_empty(list: &Option<Skipped>) -> bool {
    list.as_ref().is_none_or(Vec::is_empty)
}

// ---- Chat Completions ----

#[derive(Deserialize)]
struct ChatAnswer<'a> {
    id: Option<String>,
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<Option<&'a RawValue>>,
    #[serde(borrow)]
    choices: Option<Vec<Obj<ChatChoice<'a>>>>,
    usage: Option<Obj<UsageMembers>>,
    #[serde(rename = "modelVersion", borrow)]
    model_version: Option<&'a RawValue>,
    #[serde(rename = "usageMetadata")]
    usage_metadata: Option<Obj<GeminiCounts>>,
}

#[derive(Deserialize)]
struct ChatChoice<'a> {
    message: Option<Obj<ChatMessage>>,
    #[serde(borrow)]
    finish_reason: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct ChatMessage {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<Obj<ChatCall>>>,
    annotations: Option<Skipped>,
    /// Its content, refusal and reasoning held nothing JSON escapes: set by `chat_scan`, never
    /// by serde.
    #[serde(skip)]
    texts_plain: bool,
}

#[derive(Deserialize)]
struct ChatCall {
    id: Option<String>,
    function: Option<Obj<ChatFunction>>,
}

#[derive(Deserialize)]
struct ChatFunction {
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    arguments: Option<Value>,
}

/// A `usage` object of any of the three APIs that send one: the members each reader reads and
/// every one `usage::response_summary` reads.
#[derive(Deserialize)]
struct UsageMembers {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<Obj<Counts>>,
    completion_tokens_details: Option<Obj<Counts>>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<Obj<Counts>>,
    output_tokens_details: Option<Obj<Counts>>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl UsageMembers {
    fn whole(&self) -> WholeUsage {
        let cached = |details: &Option<Obj<Counts>>| details.as_ref().map(|d| d.0.cached_tokens);
        WholeUsage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_creation_input_tokens: self.cache_creation_input_tokens,
            cache_read_input_tokens: self.cache_read_input_tokens,
            prompt_tokens_details: cached(&self.prompt_tokens_details),
            input_tokens_details: cached(&self.input_tokens_details),
        }
    }
}

#[derive(Deserialize)]
struct Counts {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
}

fn cached(details: &Option<Obj<Counts>>) -> u64 {
    details
        .as_ref()
        .and_then(|d| d.0.cached_tokens)
        .unwrap_or(0)
}

fn reasoning(details: &Option<Obj<Counts>>) -> u64 {
    details
        .as_ref()
        .and_then(|d| d.0.reasoning_tokens)
        .unwrap_or(0)
}

impl<'a> ChatAnswer<'a> {
    /// Whether the texts `into_form` takes (its first choice's message's) are known plain.
    fn texts_plain(&self) -> bool {
        let first = self.choices.as_ref().and_then(|choices| choices.first());
        first
            .and_then(|choice| choice.0.message.as_ref())
            .is_some_and(|message| message.0.texts_plain)
    }

    fn into_form(self) -> Option<(Answer, ResponseSummary<'a>)> {
        let mut choices = self.choices.unwrap_or_default();
        let choice = if choices.is_empty() {
            None
        } else {
            Some(choices.swap_remove(0).0)
        };
        let finish = chat::read::finish(
            choice
                .as_ref()
                .and_then(|c| Some(&*c.finish_reason.as_ref()?.0)),
        );
        let message = choice.and_then(|c| c.message).map(|m| m.0);
        // Room for one part (nearly every answer is one text) without growing an empty list.
        let mut parts = Vec::with_capacity(1);
        if let Some(message) = message {
            if !none_or_empty(&message.annotations) {
                return None;
            }
            let thinking = message
                .reasoning_content
                .filter(|text| !text.is_empty())
                .or(message.reasoning.filter(|text| !text.is_empty()));
            if let Some(text) = thinking {
                parts.push(Part::Thinking {
                    text,
                    signature: String::new(),
                });
            }
            let mut text = message.content.unwrap_or_default();
            text.push_str(message.refusal.as_deref().unwrap_or(""));
            if !text.is_empty() {
                parts.push(Part::Text(text));
            }
            for call in message.tool_calls.unwrap_or_default() {
                let call = call.0;
                let function = call.function.map(|f| f.0);
                let (name, arguments) = match function {
                    Some(function) => (function.name, function.arguments),
                    None => (None, None),
                };
                let arguments = match arguments {
                    Some(Value::String(text)) => text,
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                };
                parts.push(Part::ToolCall(ToolCall {
                    id: call.id.unwrap_or_default(),
                    name: name.unwrap_or_default(),
                    arguments,
                }));
            }
        }
        let usage = self.usage.map(|u| u.0);
        let summary = summary(
            self.model.flatten(),
            self.model_version,
            usage.as_ref(),
            self.usage_metadata.as_ref().map(|m| &m.0),
        );
        let answer = Answer {
            id: self.id.unwrap_or_default(),
            model: model_value(self.model, Value::from(""))?,
            parts,
            finish,
            usage: usage.map_or_else(Usage::default, |u| Usage {
                input: u.prompt_tokens.unwrap_or(0),
                cached: cached(&u.prompt_tokens_details),
                cache_write: 0,
                output: u.completion_tokens.unwrap_or(0),
                reasoning: reasoning(&u.completion_tokens_details),
            }),
            searches: Vec::new(),
            citations: Vec::new(),
        };
        Some((answer, summary))
    }
}

// ---- Responses ----

#[derive(Deserialize)]
struct ResponsesAnswer<'a> {
    id: Option<String>,
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<Option<&'a RawValue>>,
    #[serde(borrow)]
    status: Option<Text<'a>>,
    #[serde(borrow)]
    incomplete_details: Option<Obj<Incomplete<'a>>>,
    #[serde(borrow)]
    output: Option<Vec<Obj<ResponsesItem<'a>>>>,
    usage: Option<Obj<UsageMembers>>,
    #[serde(rename = "modelVersion", borrow)]
    model_version: Option<&'a RawValue>,
    #[serde(rename = "usageMetadata")]
    usage_metadata: Option<Obj<GeminiCounts>>,
}

#[derive(Deserialize)]
struct Incomplete<'a> {
    #[serde(borrow)]
    reason: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct ResponsesItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Text<'a>>,
    #[serde(borrow)]
    summary: Option<Vec<Obj<ResponsesPart<'a>>>>,
    #[serde(borrow)]
    content: Option<Vec<Obj<ResponsesPart<'a>>>>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ResponsesPart<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Text<'a>>,
    #[serde(borrow)]
    text: Option<Text<'a>>,
    #[serde(borrow)]
    refusal: Option<Text<'a>>,
    annotations: Option<Skipped>,
}

impl<'a> ResponsesAnswer<'a> {
    fn into_form(self) -> Option<(Answer, ResponseSummary<'a>)> {
        let mut parts = Vec::new();
        let mut called = false;
        for item in self.output.unwrap_or_default() {
            let item = item.0;
            match str_of(&item.kind) {
                "reasoning" => {
                    let summary = item.summary.iter().flatten();
                    let content = item.content.iter().flatten();
                    let text = summary
                        .chain(content)
                        .map(|part| str_of(&part.0.text))
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    if !text.is_empty() {
                        parts.push(Part::Thinking {
                            text,
                            signature: String::new(),
                        });
                    }
                }
                "message" => {
                    let mut text = String::new();
                    for part in item.content.iter().flatten() {
                        let part = &part.0;
                        if !none_or_empty(&part.annotations) {
                            return None;
                        }
                        text.push_str(match str_of(&part.kind) {
                            "refusal" => str_of(&part.refusal),
                            _ => str_of(&part.text),
                        });
                    }
                    if !text.is_empty() {
                        parts.push(Part::Text(text));
                    }
                }
                "web_search_call" => return None,
                "function_call" => {
                    called = true;
                    parts.push(Part::ToolCall(ToolCall {
                        id: item.call_id.unwrap_or_default(),
                        name: item.name.unwrap_or_default(),
                        arguments: item.arguments.unwrap_or_default(),
                    }));
                }
                _ => {}
            }
        }
        let finish = if str_of(&self.status) == "incomplete" {
            let reason = self
                .incomplete_details
                .as_ref()
                .map_or("", |d| str_of(&d.0.reason));
            match reason {
                "content_filter" => Finish::ContentFilter,
                _ => Finish::Length,
            }
        } else if called {
            Finish::ToolCalls
        } else {
            Finish::Stop
        };
        let usage = self.usage.map(|u| u.0);
        let summary = summary(
            self.model.flatten(),
            self.model_version,
            usage.as_ref(),
            self.usage_metadata.as_ref().map(|m| &m.0),
        );
        let answer = Answer {
            id: self.id.unwrap_or_default(),
            model: model_value(self.model, Value::Null)?,
            parts,
            finish,
            usage: usage.map_or_else(Usage::default, |u| Usage {
                input: u.input_tokens.unwrap_or(0),
                cached: cached(&u.input_tokens_details),
                cache_write: 0,
                output: u.output_tokens.unwrap_or(0),
                reasoning: reasoning(&u.output_tokens_details),
            }),
            searches: Vec::new(),
            citations: Vec::new(),
        };
        Some((answer, summary))
    }
}

// ---- Messages ----

#[derive(Deserialize)]
struct MessagesAnswer<'a> {
    id: Option<String>,
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<Option<&'a RawValue>>,
    #[serde(borrow)]
    content: Option<Vec<Obj<MessagesBlock<'a>>>>,
    #[serde(borrow)]
    stop_reason: Option<Text<'a>>,
    usage: Option<Obj<UsageMembers>>,
    #[serde(rename = "modelVersion", borrow)]
    model_version: Option<&'a RawValue>,
    #[serde(rename = "usageMetadata")]
    usage_metadata: Option<Obj<GeminiCounts>>,
    /// Every block's text held nothing JSON escapes: set by `messages_scan`, never by serde.
    #[serde(skip)]
    texts_plain: bool,
}

#[derive(Deserialize)]
struct MessagesBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Text<'a>>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    data: Option<String>,
    id: Option<String>,
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    input: Option<Value>,
    citations: Option<Skipped>,
}

impl<'a> MessagesAnswer<'a> {
    fn into_form(self) -> Option<(Answer, ResponseSummary<'a>)> {
        let content = self.content.unwrap_or_default();
        let mut parts = Vec::with_capacity(content.len());
        for block in content {
            let block = block.0;
            match str_of(&block.kind) {
                "text" => {
                    if !none_or_empty(&block.citations) {
                        return None;
                    }
                    parts.push(Part::Text(block.text.unwrap_or_default()));
                }
                "thinking" => parts.push(Part::Thinking {
                    text: block.thinking.unwrap_or_default(),
                    signature: block.signature.unwrap_or_default(),
                }),
                "redacted_thinking" => parts.push(Part::RedactedThinking {
                    data: block.data.unwrap_or_default(),
                }),
                "tool_use" => parts.push(Part::ToolCall(ToolCall {
                    id: block.id.unwrap_or_default(),
                    name: block.name.unwrap_or_default(),
                    arguments: match block.input {
                        Some(Value::String(text)) => text,
                        Some(input) => input.to_string(),
                        None => "{}".to_string(),
                    },
                })),
                // Web searches and their results: the `Value` reader's.
                "server_tool_use" | "web_search_tool_result" => return None,
                _ => {}
            }
        }
        let usage = self.usage.map(|u| u.0);
        let summary = summary(
            self.model.flatten(),
            self.model_version,
            usage.as_ref(),
            self.usage_metadata.as_ref().map(|m| &m.0),
        );
        let answer = Answer {
            id: self.id.unwrap_or_default(),
            model: model_value(self.model, Value::Null)?,
            parts,
            finish: messages::read::finish(self.stop_reason.as_ref().map(|r| &*r.0)),
            usage: usage.map_or_else(Usage::default, |u| {
                let cached = u.cache_read_input_tokens.unwrap_or(0);
                let cache_write = u.cache_creation_input_tokens.unwrap_or(0);
                Usage {
                    input: u.input_tokens.unwrap_or(0) + cached + cache_write,
                    cached,
                    cache_write,
                    output: u.output_tokens.unwrap_or(0),
                    reasoning: 0,
                }
            }),
            searches: Vec::new(),
            citations: Vec::new(),
        };
        Some((answer, summary))
    }
}

// ---- Gemini (either spelling of a member, as `gemini::at` reads them) ----

/// `modelVersion` and `usageMetadata` are read in each spelling apart (the summary reads only
/// the camel one; an answer with both spellings of one is declined); `model` and `usage` only
/// for the summary.
#[derive(Deserialize)]
struct GeminiAnswer<'a> {
    #[serde(rename = "responseId", alias = "response_id", borrow)]
    response_id: Option<Text<'a>>,
    #[serde(rename = "modelVersion", default, borrow, deserialize_with = "present")]
    model_version: Option<Option<&'a RawValue>>,
    #[serde(
        rename = "model_version",
        default,
        borrow,
        deserialize_with = "present"
    )]
    model_version_snake: Option<Option<&'a RawValue>>,
    #[serde(borrow)]
    candidates: Option<Vec<Obj<GeminiCandidate<'a>>>>,
    #[serde(rename = "promptFeedback", alias = "prompt_feedback", borrow)]
    prompt_feedback: Option<Obj<PromptFeedback<'a>>>,
    #[serde(rename = "usageMetadata", default, deserialize_with = "present")]
    usage_metadata: Option<Option<Obj<GeminiCounts>>>,
    #[serde(rename = "usage_metadata", default, deserialize_with = "present")]
    usage_metadata_snake: Option<Option<Obj<GeminiCounts>>>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    usage: Option<Obj<UsageMembers>>,
}

#[derive(Deserialize)]
struct PromptFeedback<'a> {
    #[serde(rename = "blockReason", alias = "block_reason", borrow)]
    block_reason: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct GeminiCandidate<'a> {
    #[serde(borrow)]
    content: Option<Obj<GeminiContent<'a>>>,
    #[serde(rename = "finishReason", alias = "finish_reason", borrow)]
    finish_reason: Option<Text<'a>>,
    #[serde(
        rename = "groundingMetadata",
        alias = "grounding_metadata",
        default,
        deserialize_with = "present"
    )]
    grounding: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(borrow)]
    parts: Option<Vec<Obj<GeminiPart<'a>>>>,
}

#[derive(Deserialize)]
struct GeminiPart<'a> {
    text: Option<String>,
    thought: Option<bool>,
    #[serde(rename = "thoughtSignature", alias = "thought_signature", borrow)]
    signature: Option<Text<'a>>,
    #[serde(
        rename = "functionCall",
        alias = "function_call",
        default,
        deserialize_with = "present"
    )]
    call: Option<Option<Obj<GeminiCall>>>,
}

#[derive(Deserialize)]
struct GeminiCall {
    id: Option<String>,
    name: Option<String>,
    args: Option<Value>,
}

/// The counts `gemini::read::usage` reads (camelCase only, as it reads them).
#[derive(Deserialize)]
struct GeminiCounts {
    #[serde(rename = "promptTokenCount")]
    prompt: Option<u64>,
    #[serde(rename = "cachedContentTokenCount")]
    cached: Option<u64>,
    #[serde(rename = "candidatesTokenCount")]
    candidates: Option<u64>,
    #[serde(rename = "thoughtsTokenCount")]
    thoughts: Option<u64>,
}

impl GeminiCounts {
    /// What `usage::response_summary` reads of the same `usageMetadata`.
    fn counts(&self) -> Option<TokenCounts> {
        gemini_whole_counts(self.prompt, self.candidates, self.thoughts, self.cached)
    }
}

impl<'a> GeminiAnswer<'a> {
    fn into_form(self, signatures: bool, created: u64) -> Option<(Answer, ResponseSummary<'a>)> {
        // Both spellings of one member: the `Value` reader's (it takes the camel one).
        if (self.model_version.is_some() && self.model_version_snake.is_some())
            || (self.usage_metadata.is_some() && self.usage_metadata_snake.is_some())
        {
            return None;
        }
        let summary = summary(
            self.model,
            self.model_version.flatten(),
            self.usage.as_ref().map(|u| &u.0),
            self.usage_metadata
                .as_ref()
                .and_then(|m| m.as_ref())
                .map(|m| &m.0),
        );
        let model = model_value(self.model_version.or(self.model_version_snake), Value::Null)?;
        let response_id = str_of(&self.response_id);
        let mut candidates = self.candidates.unwrap_or_default();
        let candidate = if candidates.is_empty() {
            None
        } else {
            Some(candidates.swap_remove(0).0)
        };
        let mut parts = Vec::new();
        let mut calls = 0;
        let (finish_reason, content) = match candidate {
            // Grounding (searches and citations): the `Value` reader's.
            Some(candidate) if candidate.grounding.is_some() => return None,
            Some(candidate) => (candidate.finish_reason, candidate.content.map(|c| c.0)),
            None => (None, None),
        };
        for part in content.and_then(|c| c.parts).unwrap_or_default() {
            let mut part = part.0;
            let signature = str_of(&part.signature);
            let thought = part.thought == Some(true);
            // Taken only from a thought part, which is then left.
            let text = || part.text.take().unwrap_or_default();
            if gemini_push_thinking(&mut parts, thought, text, signature, signatures) {
                continue;
            }
            match part.call {
                // A `functionCall: null` is a call of no name to the `Value` reader.
                Some(None) => return None,
                Some(Some(call)) => {
                    let call = call.0;
                    let id = match call.id {
                        Some(given) if !given.is_empty() => given,
                        _ => call_ids::answer_call(response_id, created, calls),
                    };
                    calls += 1;
                    parts.push(Part::ToolCall(ToolCall {
                        id,
                        name: call.name.unwrap_or_default(),
                        arguments: call
                            .args
                            .map_or_else(|| "{}".to_string(), |args| args.to_string()),
                    }));
                }
                None => {
                    if let Some(text) = part.text.filter(|text| !text.is_empty()) {
                        parts.push(Part::Text(text));
                    }
                }
            }
        }
        let blocked = self
            .prompt_feedback
            .as_ref()
            .is_some_and(|f| !str_of(&f.0.block_reason).is_empty());
        let finish = if blocked {
            Finish::ContentFilter
        } else {
            gemini_finish(str_of(&finish_reason), calls > 0)
        };
        let usage = self
            .usage_metadata
            .or(self.usage_metadata_snake)
            .flatten()
            .map(|u| u.0);
        let answer = Answer {
            id: response_id.to_string(),
            model,
            finish,
            usage: usage.map_or_else(
                || usage_of_counts(GeminiUsage::default()),
                |u| {
                    usage_of_counts(GeminiUsage {
                        prompt: Some(u.prompt.unwrap_or(0)),
                        cached: Some(u.cached.unwrap_or(0)),
                        candidates: Some(u.candidates.unwrap_or(0)),
                        thoughts: Some(u.thoughts.unwrap_or(0)),
                    })
                },
            ),
            searches: Vec::new(),
            citations: Vec::new(),
            parts,
        };
        Some((answer, summary))
    }
}
