//! The client's request body on its way upstream (contract "Client API"): one parse finds the
//! top-level `model`, `stream` and `stream_options.include_usage`, then [`rewrite`] splices the
//! upstream model (and, on OpenAI streams, `include_usage: true`) into the ORIGINAL bytes.
//! It must not re-serialise the body or change any other byte of it.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::wire::affinity_group::PromptSpans;
use crate::wire::request_scan::{top_members, ListPrefix, TopMembers};

/// Why a request body cannot be routed (rendered as 400 by the HTTP edge).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// serde_json's message, with line and column.
    #[error("request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("request body has no `model`")]
    MissingModel,
    #[error("request body must be a JSON object")]
    NotAnObject,
    #[error("`model` must be a string")]
    ModelNotString,
    /// Too long or holding control characters (contract "Hostile input and bounds").
    #[error("`model` {0}")]
    InvalidModel(String),
}

/// The longest `model` name the router accepts: every name it routes is journaled and echoed
/// in `x-quotaroute-model`, so a client string must not grow either without bound.
pub const MAX_MODEL_BYTES: usize = 256;

/// Why `model` is not a name the router routes, if it is not.
pub fn model_name_problem(model: &str) -> Option<String> {
    if model.len() > MAX_MODEL_BYTES {
        return Some(format!(
            "is {} bytes long; at most {MAX_MODEL_BYTES} are allowed",
            model.len()
        ));
    }
    model
        .chars()
        .any(char::is_control)
        .then(|| "holds control characters".to_string())
}

/// A byte range `[start, end)` inside the request body.
pub type Span = (usize, usize);

/// What the router needs to know about a request body, and where to splice it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The client's model name (unescaped), shared with the route request (the combo's name
    /// the router is asked for) rather than copied into it.
    pub model: Arc<str>,
    /// `"stream": true` at the top level.
    pub stream: bool,
    /// The client itself set `stream_options.include_usage: true`, so the usage-only chunk is
    /// theirs to see.
    pub include_usage_requested: bool,
    /// The `model` string value, quotes included.
    model_span: Span,
    /// Just past the body's opening `{`.
    object_open: usize,
    stream_options: StreamOptionsAt,
    /// Where the parts that may name its conversation are (behaviour §10).
    pub prompt: PromptSpans,
}

impl RequestInfo {
    /// A request whose model is named outside its body (Google's `models/{model}:…` paths,
    /// behaviour §15): nothing in the body is spliced; `prompt` is what may name its
    /// conversation ([`gemini_prompt_spans`]).
    pub fn named(model: String, stream: bool, prompt: PromptSpans) -> RequestInfo {
        RequestInfo {
            model: Arc::from(model),
            stream,
            include_usage_requested: false,
            model_span: (0, 0),
            object_open: 0,
            stream_options: StreamOptionsAt::Absent,
            prompt,
        }
    }

    /// Byte range of the `model` value in the body, quotes included.
    pub fn model_span(&self) -> Span {
        self.model_span
    }
}

/// Where `stream_options` sits in the body, so `include_usage` can be spliced in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StreamOptionsAt {
    Absent,
    /// Present but not an object (e.g. `null`): the whole value is replaced.
    NotAnObject(Span),
    Object {
        /// Just past the object's `{`.
        open: usize,
        /// `{}`: an inserted member needs no trailing comma.
        empty: bool,
        /// The `include_usage` value, when present.
        include_usage: Option<Span>,
    },
}

/// Deserialises a present field (even `null`) as `Some(raw)`, so `null` is told from absent.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// How much of what may name a conversation (behaviour §10) the one scan collects: only what
/// `affinity_group` would use, since finding a prefix means parsing each message's `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptScan {
    /// Affinity is off (or the request is already bound): no spans.
    Nothing,
    /// The body is shorter than `affinity.min_prompt_bytes`, so only an explicit hint can name
    /// its group: `prompt_cache_key` and `metadata.user_id`, no prefix.
    HintsOnly,
    /// Hints and the stable prefix (`tools`, `system`, messages through the first user one,
    /// `instructions`, the first `input` item).
    Everything,
}

impl PromptScan {
    /// What a body of `body_len` bytes needs scanned, with affinity `enabled` and groups by
    /// prefix only from `min_prompt_bytes` on (the same rule as `derive_group`).
    pub fn for_body(enabled: bool, body_len: usize, min_prompt_bytes: usize) -> Self {
        match (enabled, body_len >= min_prompt_bytes) {
            (false, _) => PromptScan::Nothing,
            (true, false) => PromptScan::HintsOnly,
            (true, true) => PromptScan::Everything,
        }
    }
}

/// The top-level members we read; everything else is skipped (but still syntax-checked).
/// A duplicate `model` is an error, so no second model can slip past the rewrite.
/// `M` is how `messages` is read: [`MessagesPrefix`] to find the prefix, else skipped.
#[derive(Deserialize)]
#[serde(bound(deserialize = "M: Deserialize<'de>"))]
struct TopLevel<'a, M> {
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    stream: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    stream_options: Option<&'a RawValue>,
    // What may name a conversation (behaviour §10), read by `affinity_group`.
    #[serde(default, borrow, deserialize_with = "present")]
    prompt_cache_key: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    metadata: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    tools: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    system: Option<&'a RawValue>,
    #[serde(default)]
    messages: Option<M>,
    #[serde(default, borrow, deserialize_with = "present")]
    instructions: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    input: Option<&'a RawValue>,
}

impl<'a, M: MessagesField<'a>> TopLevel<'a, M> {
    /// Each member's raw text, as the one scan (`request_scan`) gives them.
    fn members(self) -> TopMembers<'a> {
        let text = |raw: Option<&'a RawValue>| raw.map(RawValue::get);
        TopMembers {
            model: text(self.model),
            stream: text(self.stream),
            stream_options: text(self.stream_options),
            prompt_cache_key: text(self.prompt_cache_key),
            metadata: text(self.metadata),
            tools: text(self.tools),
            system: text(self.system),
            messages: self.messages.as_ref().and_then(MessagesField::prefix),
            instructions: text(self.instructions),
            input: text(self.input),
        }
    }
}

/// `messages` through its first `"role": "user"` element, read in the one scan of the body;
/// `None` for anything else (no user message, not a list), which is not an error here.
struct MessagesPrefix<'a>(Option<ListPrefix<'a>>);

impl<'de> Deserialize<'de> for MessagesPrefix<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(PrefixVisitor { until_user: true })
            .map(MessagesPrefix)
    }
}

/// What the top-level scan yields for `messages` to [`prompt_spans`].
trait MessagesField<'a> {
    fn prefix(&self) -> Option<ListPrefix<'a>>;
}

impl<'a> MessagesField<'a> for MessagesPrefix<'a> {
    fn prefix(&self) -> Option<ListPrefix<'a>> {
        self.0
    }
}

impl<'a> MessagesField<'a> for serde::de::IgnoredAny {
    fn prefix(&self) -> Option<ListPrefix<'a>> {
        None
    }
}

/// Walks a list keeping the first element and, with `until_user`, the first user message
/// (else the first element itself); any other JSON value is consumed and gives `None`.
struct PrefixVisitor {
    until_user: bool,
}

#[derive(Deserialize)]
struct RoleOnly<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    role: Option<&'a RawValue>,
}

impl<'de> serde::de::Visitor<'de> for PrefixVisitor {
    type Value = Option<ListPrefix<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut first = None;
        let mut found = None;
        while let Some(element) = seq.next_element::<&'de RawValue>()? {
            if first.is_none() {
                first = Some(element.get());
            }
            if found.is_none() {
                let is_user = !self.until_user
                    || serde_json::from_str::<RoleOnly<'_>>(element.get())
                        .is_ok_and(|m| m.role.is_some_and(|r| r.get() == "\"user\""));
                if is_user {
                    found = Some(element.get());
                    if !self.until_user {
                        // The rest only needs skipping.
                        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                        break;
                    }
                }
            }
        }
        Ok(first
            .zip(found)
            .map(|(first, last)| ListPrefix { first, last }))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

#[derive(Deserialize)]
struct MetadataUser<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    user_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StreamOptionsFields<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    include_usage: Option<&'a RawValue>,
}

fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// The members of a Gemini request that may name its conversation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiPrompt<'a> {
    #[serde(default, borrow)]
    tools: Option<&'a RawValue>,
    #[serde(default, borrow)]
    system_instruction: Option<&'a RawValue>,
    #[serde(default, borrow)]
    contents: Option<Vec<&'a RawValue>>,
}

/// The stable prefix of a Gemini request (behaviour §10 on Google's paths): `tools`,
/// `systemInstruction` and the first of `contents`, so a conversation's turns — which carry
/// their account's `thoughtSignature`s — keep to the account that served it. A body that is
/// not a Gemini request has none.
pub fn gemini_prompt_spans(body: &[u8]) -> PromptSpans {
    gemini_prompt_read(body).unwrap_or_default()
}

/// [`gemini_prompt_spans`], `None` when the body does not read as a Gemini request (not JSON,
/// not an object, or one of those members of another shape): read, it is a JSON object, so
/// whoever reads it needs no other check that it is one.
pub fn gemini_prompt_read(body: &[u8]) -> Option<PromptSpans> {
    // serde would read an array positionally as the struct: only objects go that way.
    if body.iter().find(|byte| !is_json_whitespace(**byte)) != Some(&b'{') {
        return None;
    }
    let prompt = serde_json::from_slice::<GeminiPrompt<'_>>(body).ok()?;
    let span = |raw: Option<&RawValue>| raw.and_then(|raw| span_in(body, raw.get()).ok());
    Some(PromptSpans {
        tools: span(prompt.tools),
        system: span(prompt.system_instruction),
        messages_prefix: span(prompt.contents.as_ref().and_then(|c| c.first().copied())),
        ..PromptSpans::default()
    })
}

/// Where `part` (a slice borrowed from `body` by serde_json) sits inside `body`.
fn span_in(body: &[u8], part: &str) -> Result<Span, BodyError> {
    let start = (part.as_ptr() as usize).checked_sub(body.as_ptr() as usize);
    match start {
        Some(start) if start + part.len() <= body.len() => Ok((start, start + part.len())),
        _ => Err(BodyError::InvalidJson(
            "internal: value does not borrow from the body".to_owned(),
        )),
    }
}

/// Reads the routing fields of a request body in one pass, with every affinity span.
pub fn parse_request(body: &[u8]) -> Result<RequestInfo, BodyError> {
    parse_request_for(body, PromptScan::Everything)
}

/// Reads the routing fields of a request body in one pass, with the affinity spans `scan` asks
/// for (the rest of [`RequestInfo::prompt`] stays `None`).
pub fn parse_request_for(body: &[u8], scan: PromptScan) -> Result<RequestInfo, BodyError> {
    parse_read(body, scan, Reader::TextWhenUtf8)
}

/// How the one pass reads the body.
#[derive(Clone, Copy)]
enum Reader {
    /// A body of UTF-8 (nearly every request) is checked once and read as a `str`, so
    /// serde_json does not check each key, string and raw value again; any other goes by
    /// bytes, so its error is the one it always was.
    TextWhenUtf8,
    /// Always by bytes: what the text read must agree with.
    #[cfg(test)]
    Bytes,
}

impl Reader {
    /// The top-level members (`messages`' prefix when `M` reads it): by one scan of a body
    /// it takes, else by serde.
    fn top_level<'a, M: Deserialize<'a> + MessagesField<'a>>(
        self,
        body: &'a [u8],
        with_prefix: bool,
    ) -> serde_json::Result<TopMembers<'a>> {
        match self {
            Reader::TextWhenUtf8 => match top_members(body, with_prefix) {
                Some(top) => Ok(top),
                None => crate::wire::json_body::from_body::<TopLevel<'a, M>>(body)
                    .map(TopLevel::members),
            },
            #[cfg(test)]
            Reader::Bytes => serde_json::from_slice::<TopLevel<'a, M>>(body).map(TopLevel::members),
        }
    }
}

fn parse_read(body: &[u8], scan: PromptScan, reader: Reader) -> Result<RequestInfo, BodyError> {
    match scan {
        PromptScan::Everything => parse_with::<MessagesPrefix<'_>>(body, scan, reader),
        PromptScan::HintsOnly | PromptScan::Nothing => {
            parse_with::<serde::de::IgnoredAny>(body, scan, reader)
        }
    }
}

fn parse_with<'a, M>(
    body: &'a [u8],
    scan: PromptScan,
    reader: Reader,
) -> Result<RequestInfo, BodyError>
where
    M: Deserialize<'a> + MessagesField<'a>,
{
    let invalid = |error: serde_json::Error| BodyError::InvalidJson(error.to_string());
    let first = body.iter().position(|&byte| !is_json_whitespace(byte));
    if first.map(|at| body[at]) != Some(b'{') {
        // Tell "valid JSON of the wrong kind" from "not JSON at all".
        serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(invalid)?;
        return Err(BodyError::NotAnObject);
    }
    let object_open = first.map_or(0, |at| at + 1);
    let with_prefix = scan == PromptScan::Everything;
    let top = reader.top_level::<M>(body, with_prefix).map_err(invalid)?;

    let raw_model = match top.model {
        Some(raw) if raw != "null" => raw,
        _ => return Err(BodyError::MissingModel),
    };
    if !raw_model.starts_with('"') {
        return Err(BodyError::ModelNotString);
    }
    // Read in place when it has no escape (one copy, the shared one), unescaped otherwise.
    let model: Arc<str> = match serde_json::from_str::<&str>(raw_model) {
        Ok(plain) => Arc::from(plain),
        Err(_) => Arc::from(serde_json::from_str::<String>(raw_model).map_err(invalid)?),
    };
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    if let Some(problem) = model_name_problem(&model) {
        return Err(BodyError::InvalidModel(problem));
    }
    let model_span = span_in(body, raw_model)?;
    let stream = top.stream.is_some_and(|raw| raw == "true");

    let (stream_options, include_usage_requested) = match top.stream_options {
        None => (StreamOptionsAt::Absent, false),
        Some(raw) if !raw.starts_with('{') => {
            (StreamOptionsAt::NotAnObject(span_in(body, raw)?), false)
        }
        Some(raw) => {
            let fields: StreamOptionsFields<'_> = serde_json::from_str(raw).map_err(invalid)?;
            let (open, _) = span_in(body, raw)?;
            let empty = raw[1..].bytes().find(|&byte| !is_json_whitespace(byte)) == Some(b'}');
            let include_usage = fields
                .include_usage
                .map(|value| span_in(body, value.get()))
                .transpose()?;
            let requested = fields.include_usage.is_some_and(|v| v.get() == "true");
            let at = StreamOptionsAt::Object {
                open: open + 1,
                empty,
                include_usage,
            };
            (at, requested)
        }
    };

    let prompt = match scan {
        PromptScan::Nothing => PromptSpans::default(),
        PromptScan::HintsOnly => hint_spans(body, &top)?,
        PromptScan::Everything => prompt_spans(body, &top)?,
    };
    Ok(RequestInfo {
        model,
        stream,
        include_usage_requested,
        model_span,
        object_open,
        stream_options,
        prompt,
    })
}

/// The explicit hints' spans (`prompt_cache_key`, `metadata.user_id`) the one scan found.
fn hint_spans(body: &[u8], top: &TopMembers<'_>) -> Result<PromptSpans, BodyError> {
    let span = |raw: Option<&str>| raw.map(|raw| span_in(body, raw)).transpose();
    let metadata_user_id = match top.metadata {
        Some(raw) if raw.starts_with('{') => serde_json::from_str::<MetadataUser<'_>>(raw)
            .ok()
            .and_then(|m| m.user_id)
            .map(RawValue::get)
            .filter(|id| id.starts_with('"')),
        _ => None,
    };
    Ok(PromptSpans {
        prompt_cache_key: span(top.prompt_cache_key.filter(|raw| raw.starts_with('"')))?,
        metadata_user_id: span(metadata_user_id)?,
        ..PromptSpans::default()
    })
}

/// The spans `affinity_group` hashes, from the parts the one scan found: the hints and the
/// stable prefix.
fn prompt_spans(body: &[u8], top: &TopMembers<'_>) -> Result<PromptSpans, BodyError> {
    let span = |raw: Option<&str>| raw.map(|raw| span_in(body, raw)).transpose();
    let messages_prefix = match top.messages {
        Some(prefix) => Some((
            span_in(body, prefix.first)?.0,
            span_in(body, prefix.last)?.1,
        )),
        None => None,
    };
    let first_input = match top.input {
        Some(raw) if raw.starts_with('[') => {
            let mut de = serde_json::Deserializer::from_str(raw);
            serde::Deserializer::deserialize_any(&mut de, PrefixVisitor { until_user: false })
                .ok()
                .flatten()
                .map(|prefix| span_in(body, prefix.first))
                .transpose()?
        }
        Some(raw) if raw.starts_with('"') => Some(span_in(body, raw)?),
        _ => None,
    };
    Ok(PromptSpans {
        tools: span(top.tools)?,
        system: span(top.system)?,
        messages_prefix,
        instructions: span(top.instructions)?,
        first_input,
        ..hint_spans(body, top)?
    })
}

/// What goes into one splice.
enum Replacement {
    /// The upstream model, JSON-escaped and quoted.
    Model,
    Text(&'static str),
}

/// The body for the upstream: the same bytes, with only the top-level `model` value replaced
/// and — when `force_include_usage` (an OpenAI stream whose client did not ask for usage) —
/// `stream_options.include_usage` set to `true` by the smallest splice that does it.
pub fn rewrite(
    body: &[u8],
    info: &RequestInfo,
    upstream_model: &str,
    force_include_usage: bool,
) -> Bytes {
    Bytes::from(upstream_bytes(
        body,
        info,
        upstream_model,
        force_include_usage,
    ))
}

/// [`rewrite`]'s bytes, in a vector exactly as long as them when the model needs no escaping.
fn upstream_bytes(
    body: &[u8],
    info: &RequestInfo,
    upstream_model: &str,
    force_include_usage: bool,
) -> Vec<u8> {
    let model = Some((info.model_span, Replacement::Model));
    let usage = (force_include_usage && !info.include_usage_requested).then_some(
        match info.stream_options {
            StreamOptionsAt::Absent => (
                (info.object_open, info.object_open),
                Replacement::Text("\"stream_options\":{\"include_usage\":true},"),
            ),
            StreamOptionsAt::NotAnObject(span) => {
                (span, Replacement::Text("{\"include_usage\":true}"))
            }
            StreamOptionsAt::Object {
                include_usage: Some(span),
                ..
            } => (span, Replacement::Text("true")),
            StreamOptionsAt::Object {
                open, empty: true, ..
            } => ((open, open), Replacement::Text("\"include_usage\":true")),
            StreamOptionsAt::Object {
                open, empty: false, ..
            } => ((open, open), Replacement::Text("\"include_usage\":true,")),
        },
    );
    // At most two splices, in body order (`None` sorts first and is skipped).
    let mut splices = [model, usage];
    splices.sort_by_key(|splice| splice.as_ref().map(|((start, _), _)| *start));

    // Sized to the exact length when the model needs no escaping (a `Bytes` of a full vector
    // takes it over without an allocation of its own), else with room for any escape.
    let model_len = if upstream_model.bytes().all(needs_no_escape) {
        upstream_model.len() + 2
    } else {
        upstream_model.len() * 6 + 2
    };
    let capacity = splices
        .iter()
        .flatten()
        .fold(body.len(), |len, ((start, end), replacement)| {
            let written = match replacement {
                Replacement::Model => model_len,
                Replacement::Text(text) => text.len(),
            };
            len + written - (end - start)
        });
    let mut out = Vec::with_capacity(capacity);
    let mut copied_to = 0;
    for ((start, end), replacement) in splices.iter().flatten() {
        out.extend_from_slice(&body[copied_to..*start]);
        match replacement {
            Replacement::Model => write_json_string(&mut out, upstream_model),
            Replacement::Text(text) => out.extend_from_slice(text.as_bytes()),
        }
        copied_to = *end;
    }
    out.extend_from_slice(&body[copied_to..]);
    out
}

/// Whether serde_json writes `byte` of a string as it is (it escapes only the quote, the
/// backslash and control characters).
fn needs_no_escape(byte: u8) -> bool {
    byte >= 0x20 && byte != b'"' && byte != b'\\'
}

/// Appends `text` as a quoted JSON string.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a `&str` into a Vec cannot fail; the fallback only keeps this total.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn a_request_read_as_text_is_read_as_when_read_by_bytes() {
        let bodies: [&[u8]; 16] = [
            br#"{"model":"mock-gpt","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello."}],"max_tokens":64,"temperature":0}"#,
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"prompt_cache_key":"k","metadata":{"user_id":"u"}}"#,
            br#" {"model":"m-\u00e9\n","input":[{"role":"user","content":"caf\u00e9"}],"instructions":"i","tools":[]} "#,
            "{\"model\":\"m\",\"system\":\"café 🦀\",\"messages\":[{\"role\":\"user\",\"content\":\"é\"}]}".as_bytes(),
            br#"{"model":"m","stream_options":[1]}"#,
            br#"{"model":"m","stream_options":{}}"#,
            // Errors: not JSON, not an object, a repeated member, a lone surrogate, a control
            // character in a string, a trailing byte, no model.
            br#"{"model":"m","messages":[}"#,
            br#"[{"model":"m"}]"#,
            br#"{"model":"m","model":"n"}"#,
            br#"{"model":"\ud800"}"#,
            b"{\"model\":\"m\x01\"}",
            br#"{"model":"m"} x"#,
            br#"{"messages":[]}"#,
            // Not UTF-8: in a string the read skips, in the model, in a key.
            b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
            b"{\"model\":\"\xc3\"}",
            b"{\"mo\xffdel\":\"m\"}",
        ];
        for body in bodies {
            for scan in [
                PromptScan::Everything,
                PromptScan::HintsOnly,
                PromptScan::Nothing,
            ] {
                let text = parse_read(body, scan, Reader::TextWhenUtf8);
                let bytes = parse_read(body, scan, Reader::Bytes);
                assert_eq!(text, bytes, "{}", String::from_utf8_lossy(body));
            }
        }
    }

    /// Values a member may hold, as clients and hostile clients spell them.
    const VALUES: &[&str] = &[
        "\"m\"", "\"m\\u00e9\"", "\"\\ud800\"", "null", "true", "1", "1e3", "{}",
        "{\"include_usage\":true}", "{\"include_usage\":1,\"x\":[]}", "{\"user_id\":\"u\"}",
        "[]", "[1,[2,[3]]]", "{\"role\":\"user\"}",
        "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"hi\"},{\"x\":1}]",
        "[{\"role\":\"user\",\"role\":\"user\"},{\"role\" : \"user\"}]",
        "[[\"user\"],{\"role\":\"user\"}]", "[\"user\",{\"r\\u006fle\":\"user\"}]",
        "[{\"role\":\"us\\u0065r\"},{\"role\":null}]",
    ];
    const KEYS: &[&str] = &[
        "model",
        "stream",
        "stream_options",
        "prompt_cache_key",
        "metadata",
        "tools",
        "system",
        "messages",
        "instructions",
        "input",
        "x",
        "m\\u006fdel",
    ];

    proptest::proptest! {
        // Enough cases that each rare pairing (a key with one odd value) is met.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Any object of these members reads the same by the one scan (with serde for what
        /// it declines) as by serde alone.
        #[test]
        fn any_request_reads_as_serde_alone_reads_it(
            members in proptest::collection::vec(
                (0..KEYS.len(), 0..VALUES.len(), proptest::bool::ANY), 0..7),
        ) {
            let body = crate::wire::json_scan::object_text(&members, KEYS, VALUES);
            for scan in [PromptScan::Everything, PromptScan::HintsOnly, PromptScan::Nothing] {
                let text = parse_read(body.as_bytes(), scan, Reader::TextWhenUtf8);
                let bytes = parse_read(body.as_bytes(), scan, Reader::Bytes);
                proptest::prop_assert_eq!(text, bytes, "{}", body);
            }
        }
    }

    fn rewritten(body: &str, model: &str, force: bool) -> String {
        let info = parse_request(body.as_bytes()).unwrap();
        String::from_utf8(rewrite(body.as_bytes(), &info, model, force).to_vec()).unwrap()
    }

    #[test]
    fn a_gemini_requests_prefix_is_its_tools_system_instruction_and_first_turn() {
        let body = br#"{"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[]}],"systemInstruction":{"parts":[{"text":"s"}]},"tools":[]}"#;
        let spans = gemini_prompt_spans(body);
        let part = |span: Option<Span>| span.map(|(start, end)| &body[start..end]);
        assert_eq!(
            part(spans.messages_prefix),
            Some(&br#"{"role":"user","parts":[{"text":"a"}]}"#[..])
        );
        assert_eq!(
            part(spans.system),
            Some(&br#"{"parts":[{"text":"s"}]}"#[..])
        );
        assert_eq!(part(spans.tools), Some(&b"[]"[..]));
        assert_eq!(gemini_prompt_spans(b"[1]"), PromptSpans::default());
    }

    #[test]
    fn contract_reads_model_stream_and_include_usage() {
        let body = br#"{"model":"fast","stream":true,"stream_options":{"include_usage":true}}"#;
        let info = parse_request(body).unwrap();
        assert_eq!(&*info.model, "fast");
        assert!(info.stream);
        assert!(info.include_usage_requested);
        assert_eq!(
            &body[info.model_span().0..info.model_span().1],
            br#""fast""#
        );

        let info = parse_request(br#"{"model":"m","stream":false}"#).unwrap();
        assert!(!info.stream && !info.include_usage_requested);
        let info = parse_request(br#"{"model":"m"}"#).unwrap();
        assert!(!info.stream);
    }

    #[test]
    fn contract_body_errors_are_classified() {
        let invalid = BodyError::InvalidJson(String::new());
        let table: [(&[u8], &BodyError); 13] = [
            (b"", &invalid),
            (b"{", &invalid),
            (b"{\"model\":\"a\",}", &invalid),
            (b"{\"model\":\"a\"} x", &invalid),
            (b"{\"model\":\"a\",\"model\":\"b\"}", &invalid),
            (b"[1,2]", &BodyError::NotAnObject),
            (b" \"model\" ", &BodyError::NotAnObject),
            (b"{}", &BodyError::MissingModel),
            (b"{\"model\":null}", &BodyError::MissingModel),
            (b"{\"model\":\"\"}", &BodyError::MissingModel),
            (b"{\"model\":42}", &BodyError::ModelNotString),
            (b"{\"model\":{\"name\":\"x\"}}", &BodyError::ModelNotString),
            (
                b"{\"model\":\"a\\nb\"}",
                &BodyError::InvalidModel(String::new()),
            ),
        ];
        for (body, expected) in table {
            let error = parse_request(body).unwrap_err();
            assert_eq!(
                std::mem::discriminant(&error),
                std::mem::discriminant(expected),
                "{:?} gave {error:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn contract_invalid_json_message_names_line_and_column() {
        let BodyError::InvalidJson(message) = parse_request(b"{\n \"model\": }").unwrap_err()
        else {
            panic!("expected InvalidJson");
        };
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains("column"), "{message}");
    }

    #[test]
    fn contract_rewrite_changes_only_the_model_bytes() {
        let body = "{ \"messages\" : [ {\"role\":\"user\",\"content\":\"h\\u00e9llo \\\"q\\\"\"} ],\n\t\"model\" :  \"fast\" , \"temperature\":0.50,\"x\":1e3 }";
        let out = rewritten(body, "gpt-4o", false);
        assert_eq!(out, body.replace("\"fast\"", "\"gpt-4o\""));
    }

    #[test]
    fn contract_nested_model_keys_are_not_touched() {
        let body = r#"{"messages":[{"role":"user","content":"x","model":"inner"}],"metadata":{"model":"meta"},"model":"outer"}"#;
        let out = rewritten(body, "new", false);
        assert_eq!(
            out,
            r#"{"messages":[{"role":"user","content":"x","model":"inner"}],"metadata":{"model":"meta"},"model":"new"}"#
        );
    }

    #[test]
    fn contract_model_with_quotes_and_unicode_is_escaped_and_unescaped() {
        let body = r#"{"model":"caf\u00e9 \"x\"\\y"}"#;
        let info = parse_request(body.as_bytes()).unwrap();
        assert_eq!(&*info.model, "café \"x\"\\y");
        let out = rewritten(body, "m\"o\\d\u{e9}l\n", false);
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["model"], "m\"o\\d\u{e9}l\n");
        // A control character is for upstream models only: a client may not send one.
        assert!(matches!(
            parse_request(out.as_bytes()),
            Err(BodyError::InvalidModel(_))
        ));
    }

    #[test]
    fn contract_force_include_usage_inserts_stream_options_after_the_brace() {
        let body = "  {\"model\":\"a\",\"stream\":true}";
        let out = rewritten(body, "b", true);
        assert_eq!(
            out,
            "  {\"stream_options\":{\"include_usage\":true},\"model\":\"b\",\"stream\":true}"
        );
        let info = parse_request(out.as_bytes()).unwrap();
        assert!(info.include_usage_requested && info.stream);
    }

    #[test]
    fn contract_force_include_usage_patches_existing_stream_options() {
        let table = [
            (
                r#"{"model":"a","stream_options":{"x":1}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true,"x":1}}"#,
            ),
            (
                r#"{"model":"a","stream_options":{ }}"#,
                r#"{"model":"b","stream_options":{"include_usage":true }}"#,
            ),
            (
                r#"{"stream_options": {"include_usage": false, "y":2},"model":"a"}"#,
                r#"{"stream_options": {"include_usage": true, "y":2},"model":"b"}"#,
            ),
            (
                r#"{"model":"a","stream_options":{"include_usage":null}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
            (
                r#"{"model":"a","stream_options":null}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
            (
                r#"{"model":"a","stream_options":{"include_usage":true}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
        ];
        for (body, expected) in table {
            let out = rewritten(body, "b", true);
            assert_eq!(out, expected, "from {body}");
            let info = parse_request(out.as_bytes()).unwrap();
            assert!(info.include_usage_requested, "{out}");
        }
    }

    #[test]
    fn contract_include_usage_is_left_alone_without_force() {
        let body = r#"{"model":"a","stream":true,"stream_options":{"include_usage":false}}"#;
        assert_eq!(rewritten(body, "b", false), body.replace("\"a\"", "\"b\""));
    }

    #[test]
    fn contract_rewritten_body_round_trips_to_the_same_value() {
        let original = json!({
            "model": "combo",
            "messages": [{"role": "user", "content": "é \u{1F600} \"quoted\"", "model": "n"}],
            "stream": true,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        });
        let body = serde_json::to_vec_pretty(&original).unwrap();
        let info = parse_request(&body).unwrap();
        let out = rewrite(&body, &info, "gpt-4o-mini", true);
        let mut expected = original.clone();
        expected["model"] = json!("gpt-4o-mini");
        expected["stream_options"] = json!({"include_usage": true});
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), expected);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn contract_any_model_names_round_trip_and_nothing_else_changes(
            client_model in "\\PC{1,16}",
            upstream_model in "\\PC{0,16}",
            content in "\\PC{0,24}",
            pretty in proptest::prelude::any::<bool>(),
            force in proptest::prelude::any::<bool>(),
        ) {
            let original = json!({
                "messages": [{"role": "user", "content": content, "model": client_model}],
                "model": client_model,
                "stream": true,
            });
            let body = if pretty {
                serde_json::to_vec_pretty(&original).unwrap()
            } else {
                serde_json::to_vec(&original).unwrap()
            };
            let info = parse_request(&body).unwrap();
            proptest::prop_assert_eq!(&*info.model, client_model.as_str());
            let out = rewrite(&body, &info, &upstream_model, force);
            // Sized once: exactly, for a model written as it is (so the `Bytes` takes the
            // vector over without an allocation of its own).
            let vector = upstream_bytes(&body, &info, &upstream_model, force);
            proptest::prop_assert_eq!(&vector[..], &out[..]);
            let plain = !upstream_model.contains(|c: char| c < ' ' || c == '"' || c == '\\');
            if plain {
                proptest::prop_assert_eq!(vector.capacity(), vector.len());
            }
            let mut expected = original.clone();
            expected["model"] = json!(upstream_model);
            if force {
                expected["stream_options"] = json!({"include_usage": true});
            }
            let parsed: Value = serde_json::from_slice(&out).unwrap();
            proptest::prop_assert_eq!(parsed, expected);
            let (start, end) = info.model_span();
            proptest::prop_assert_eq!(&out[..start.min(info.object_open)], &body[..start.min(info.object_open)]);
            proptest::prop_assert!(out.ends_with(&body[end..]));
        }
    }
}
