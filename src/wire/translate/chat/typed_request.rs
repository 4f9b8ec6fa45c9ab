//! A Chat Completions client's request read straight from its bytes into the hub's form,
//! without a `serde_json::Value` of the whole body: a typed shape of the members the `Value`
//! reader (`read::request`) reads. It gives exactly the form the `Value` reader gives, or
//! declines (`None`) and the caller reads the body as a `Value`: on any top-level member it
//! does not model (what the `Value` reader drops or refuses, `response_format`,
//! `web_search_options`), a message that is no object, a role that is no string, a duplicated
//! member. Each message's members are read by the `Value` reader's own function, from
//! `Value`s of those members alone (most contents are one string).

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::read::{push_message, MessageMembers};
use crate::wire::translate::hub::form::{Effort, Request};
use crate::wire::translate::openai_common;
use crate::wire::translate::typed_answer::{str_of, Obj, Text};
use crate::wire::translate::{typed_body, TranslateError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    // `model` is the node's (the attempt names the target's); `store` is not carried.
    #[serde(default, rename = "model")]
    _model: Option<IgnoredAny>,
    #[serde(default, rename = "store")]
    _store: Option<IgnoredAny>,
    #[serde(borrow)]
    messages: Vec<Obj<Message<'a>>>,
    #[serde(default)]
    stream: Option<Value>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    max_completion_tokens: Option<Value>,
    #[serde(default)]
    max_tokens: Option<Value>,
    #[serde(default)]
    stop: Option<Value>,
    #[serde(default)]
    temperature: Option<Value>,
    #[serde(default)]
    top_p: Option<Value>,
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    reasoning_effort: Option<Value>,
}

/// A message's members the `Value` reader reads; others are skipped, as it skips them.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    role: Option<Text<'a>>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Value>,
    #[serde(default)]
    tool_call_id: Option<Value>,
}

/// The Chat Completions request `body` in the hub's form, with whether it asks for a stream
/// and for the usage chunk (`stream_options.include_usage`); `None` when the shape declines
/// it. An `Err` is the `Value` reader's own refusal (of a message, a part, a tool).
pub fn request(body: &[u8]) -> Option<Result<(Request, bool, bool), TranslateError>> {
    let Obj(body) = typed_body::<Obj<Body<'_>>>(body)?;
    Some(read(body))
}

fn read(body: Body<'_>) -> Result<(Request, bool, bool), TranslateError> {
    let mut form = Request::default();
    for Obj(message) in &body.messages {
        push_message(
            MessageMembers {
                role: str_of(&message.role),
                content: message.content.as_ref(),
                refusal: message.refusal.as_ref(),
                tool_calls: array(&message.tool_calls),
                tool_call_id: message
                    .tool_call_id
                    .as_ref()
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            },
            &mut form,
        )?;
    }
    // What `openai_common::common` reads, each member as it reads it (`null` as absent).
    form.stop = match body.stop {
        Some(Value::String(stop)) => vec![Value::String(stop)],
        Some(Value::Array(stops)) => stops,
        _ => Vec::new(),
    };
    form.temperature = body.temperature.filter(Value::is_number);
    form.top_p = body.top_p.filter(Value::is_number);
    form.user = body
        .user
        .as_ref()
        .and_then(Value::as_str)
        .map(str::to_owned);
    let stream = body.stream.as_ref().and_then(Value::as_bool) == Some(true);
    form.stream = stream;
    form.parallel_tool_calls = body.parallel_tool_calls.as_ref().and_then(Value::as_bool);
    form.tool_choice = openai_common::tool_choice(body.tool_choice.as_ref());
    // The output limit: `max_completion_tokens` when a whole number, else `max_tokens`.
    form.max_tokens = [&body.max_completion_tokens, &body.max_tokens]
        .into_iter()
        .find_map(|limit| limit.as_ref().and_then(Value::as_u64));
    form.tools = openai_common::tools(array(&body.tools))?;
    form.effort = body
        .reasoning_effort
        .as_ref()
        .and_then(Value::as_str)
        .map(|level| Effort {
            level: level.to_string(),
            parameter: "reasoning_effort",
        });
    let include_usage = body
        .stream_options
        .as_ref()
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    Ok((form, stream, include_usage))
}

/// A member as an array (empty when absent or not one), as `hub::array_at` reads it.
fn array(value: &Option<Value>) -> &[Value] {
    value
        .as_ref()
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}
