//! A Gemini client's `generateContent` request read straight from its bytes into the hub's
//! form, without a `serde_json::Value` of the whole body: typed shapes of the members the
//! `Value` reader (`read::request`) reads, in their camel-case spelling. A shape gives exactly
//! the form and the dropped names the `Value` reader gives, or declines (`None`) and the caller
//! reads the body as a `Value`: on any member it does not model (snake-case spellings, thoughts
//! and their signatures, files, a cached content, output formats, members the `Value` reader
//! drops), a member of another type than it models (a `null` part member, a bare string as
//! the system instruction), a duplicated member, and what the `Value` reader refuses in
//! `contents` or `generationConfig`. Tools and the tool config are read by the `Value`
//! reader's own functions, from `Value`s of those members alone.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{Number, Value};

use super::call_ids::Pending;
use super::read::{effort, function_result, tool_config, tools, FunctionCall};
use super::scanned_request;
use crate::wire::translate::hub::form::{Image, Part, Request, Role};
use crate::wire::translate::params::drop_named;
use crate::wire::translate::typed_answer::{present, str_of, Obj, Text};
use crate::wire::translate::{typed_body, TranslateError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Body<'a> {
    // `model` and `labels` are read by no one (the path names the model), as in the `Value`
    // reader: taken and skipped.
    #[serde(default, rename = "model")]
    _model: Option<IgnoredAny>,
    #[serde(borrow)]
    contents: Vec<Obj<Content<'a>>>,
    #[serde(default, borrow)]
    system_instruction: Option<Obj<Content<'a>>>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    tool_config: Option<Value>,
    #[serde(default)]
    generation_config: Option<Obj<Config>>,
    #[serde(default)]
    safety_settings: Option<IgnoredAny>,
    #[serde(default, rename = "labels")]
    _labels: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Content<'a> {
    #[serde(default, borrow)]
    role: Option<Text<'a>>,
    #[serde(default, borrow)]
    parts: Option<Vec<Obj<ContentPart<'a>>>>,
}

/// A part: exactly one of its members is read (one present, not `null`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContentPart<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    text: Option<Text<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    inline_data: Option<Obj<Blob<'a>>>,
    #[serde(default, borrow, deserialize_with = "present")]
    function_call: Option<Obj<Call<'a>>>,
    #[serde(default, borrow, deserialize_with = "present")]
    function_response: Option<Obj<FunctionResponse<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Blob<'a> {
    #[serde(default, borrow)]
    mime_type: Option<Text<'a>>,
    #[serde(default, borrow)]
    data: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Call<'a> {
    #[serde(default, borrow)]
    name: Option<Text<'a>>,
    #[serde(default, borrow)]
    id: Option<Text<'a>>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionResponse<'a> {
    #[serde(default, borrow)]
    name: Option<Text<'a>>,
    #[serde(default, borrow)]
    id: Option<Text<'a>>,
    #[serde(default)]
    response: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default)]
    temperature: Option<Number>,
    #[serde(default)]
    top_p: Option<Number>,
    #[serde(default)]
    stop_sequences: Option<Vec<Value>>,
    #[serde(default)]
    candidate_count: Option<u64>,
    #[serde(default)]
    thinking_config: Option<Value>,
}

/// The Gemini request `body` in the hub's form (names it drops added to `dropped`), or `None`
/// when the shape declines it: a plain text request by one scan of its bytes
/// (`scanned_request`), any other by the typed shape. An `Err` is the `Value` reader's own
/// refusal of its tools.
pub fn request(body: &[u8], dropped: &mut Vec<String>) -> Option<Result<Request, TranslateError>> {
    if let Some(form) = scanned_request::request(body, dropped) {
        return Some(Ok(form));
    }
    shaped(body, dropped)
}

/// [`request`] by the typed shape alone.
pub fn shaped(body: &[u8], dropped: &mut Vec<String>) -> Option<Result<Request, TranslateError>> {
    let Obj(body) = typed_body::<Obj<Body<'_>>>(body)?;
    let mut form = Request::default();
    if let Some(Obj(system)) = &body.system_instruction {
        let text = system
            .parts
            .iter()
            .flatten()
            .filter_map(|Obj(part)| part.text.as_ref().map(|text| &*text.0))
            .collect::<Vec<_>>()
            .join("\n");
        if !text.is_empty() {
            form.system.push(text);
        }
    }
    let mut pending = Pending::default();
    for (turn, Obj(content)) in body.contents.iter().enumerate() {
        let role = match str_of(&content.role) {
            "model" => Role::Assistant,
            _ => Role::User,
        };
        if role == Role::Assistant {
            pending.new_turn();
        }
        let parts = parts_of(content, turn, role, &mut pending)?;
        form.push(role, parts);
    }
    if let Err(refused) = tools(body.tools.as_ref(), &mut form) {
        return Some(Err(refused));
    }
    tool_config(body.tool_config.as_ref(), &mut form);
    if let Some(Obj(config)) = &body.generation_config {
        if config.candidate_count.is_some_and(|n| n > 1) {
            return None;
        }
        form.max_tokens = config.max_output_tokens;
        form.stop = config.stop_sequences.clone().unwrap_or_default();
        form.temperature = config.temperature.clone().map(Value::Number);
        form.top_p = config.top_p.clone().map(Value::Number);
        if let Some(thinking) = &config.thinking_config {
            form.effort = effort(thinking);
        }
    }
    if body.safety_settings.is_some() {
        drop_named(dropped, "safetySettings");
    }
    Some(Ok(form))
}

/// A content's parts, as `read::parts_of` reads them; `None` for a part it would refuse.
fn parts_of(
    content: &Content<'_>,
    turn: usize,
    role: Role,
    pending: &mut Pending,
) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    let mut calls = 0;
    for Obj(part) in content.parts.iter().flatten() {
        match (
            &part.text,
            &part.inline_data,
            &part.function_call,
            &part.function_response,
        ) {
            (Some(text), None, None, None) => {
                if !text.0.is_empty() {
                    parts.push(Part::Text(text.0.to_string()));
                }
            }
            (None, Some(Obj(blob)), None, None) => {
                let media_type = str_of(&blob.mime_type);
                if !media_type.starts_with("image/") {
                    return None;
                }
                parts.push(Part::Image(Image::Base64 {
                    media_type: media_type.to_string(),
                    data: str_of(&blob.data).to_string(),
                }));
            }
            (None, None, Some(Obj(call)), None) => {
                let call = FunctionCall {
                    name: str_of(&call.name),
                    id: str_of(&call.id),
                    args: call.args.as_ref(),
                };
                if let Some(call) = call.read((turn, &mut calls), role, pending) {
                    parts.push(call);
                }
            }
            (None, None, None, Some(Obj(response))) => {
                let name = str_of(&response.name);
                let id = str_of(&response.id);
                parts.push(function_result(
                    name,
                    id,
                    response.response.as_ref(),
                    pending,
                ));
            }
            _ => return None,
        }
    }
    Some(parts)
}
