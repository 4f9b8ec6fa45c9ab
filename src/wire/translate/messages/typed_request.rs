//! A Messages client's request read straight from its bytes into the hub's form, without a
//! `serde_json::Value` of the whole body: a typed shape of the top-level members the `Value`
//! reader (`read::request`) reads, each kept as a `Value` of that member alone (or skipped,
//! for `model`) and read by the `Value` reader's own function. It gives exactly the form the
//! `Value` reader gives, or declines (`None`) and the caller reads the body as a `Value`: on a
//! top-level member the `Value` reader drops, a message that is no object, a role that is no
//! string, a duplicated member.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::read::read_members;
use crate::wire::translate::hub::form::Request;
use crate::wire::translate::typed_answer::{present, str_of, Obj, Text};
use crate::wire::translate::{typed_body, TranslateError};

/// Each member as `Map::get` gives it: `Some(Value::Null)` for a `null`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    #[serde(default, rename = "model")]
    _model: Option<IgnoredAny>,
    #[serde(borrow)]
    messages: Vec<Obj<Message<'a>>>,
    #[serde(default, deserialize_with = "present")]
    system: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    max_tokens: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    stop_sequences: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    temperature: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    top_p: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    top_k: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    tools: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    tool_choice: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    thinking: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    output_format: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    stream: Option<Value>,
}

/// A message's members the `Value` reader reads; others are skipped, as it skips them.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    role: Option<Text<'a>>,
    #[serde(default, deserialize_with = "present")]
    content: Option<Value>,
}

/// The Messages request `body` in the hub's form (names it drops added to `dropped`), with
/// whether it asks for a stream; `None` when the shape declines it. An `Err` is the `Value`
/// reader's own refusal (of a block, a tool).
pub fn request(
    body: &[u8],
    dropped: &mut Vec<String>,
) -> Option<Result<(Request, bool), TranslateError>> {
    let Obj(body) = typed_body::<Obj<Body<'_>>>(body)?;
    let member = |name: &str| {
        match name {
            "system" => &body.system,
            "max_tokens" => &body.max_tokens,
            "stop_sequences" => &body.stop_sequences,
            "temperature" => &body.temperature,
            "top_p" => &body.top_p,
            "top_k" => &body.top_k,
            "tools" => &body.tools,
            "tool_choice" => &body.tool_choice,
            "thinking" => &body.thinking,
            "output_format" => &body.output_format,
            "metadata" => &body.metadata,
            "stream" => &body.stream,
            _ => &None,
        }
        .as_ref()
    };
    let messages = body
        .messages
        .iter()
        .map(|Obj(message)| (str_of(&message.role), message.content.as_ref()));
    Some(read_members(member, messages, dropped).map(|form| {
        let stream = form.stream;
        (form, stream)
    }))
}
