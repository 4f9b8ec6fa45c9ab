//! Chat Completions into the hub's form: a client's request, an upstream's whole answer and
//! its usage.

use serde_json::{Map, Value};

use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{
    Answer, Effort, Finish, Part, Request, Role, ToolCall, ToolOutput, Usage, WebSearch,
};
use crate::wire::translate::hub::{array_at, count_at, str_at, text_at};
use crate::wire::translate::openai_common::{self, common, drop_unknown};
use crate::wire::translate::params;
use crate::wire::translate::TranslateError;

/// Keys read here or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 23] = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "user",
    "n",
    "logprobs",
    "top_logprobs",
    "audio",
    "modalities",
    "prediction",
    "store",
    "response_format",
    "web_search_options",
];

pub fn request(
    request: &Map<String, Value>,
    dropped: &mut Vec<String>,
) -> Result<Request, TranslateError> {
    params::refuse_openai_only(request)?;
    let mut form = Request::default();
    if let Some(format) = request.get("response_format") {
        let schema = format.get("json_schema").unwrap_or(&Value::Null);
        form.format = openai_common::output_format(format, schema, "response_format")?;
    }
    messages(request.get("messages"), &mut form)?;
    common(
        request,
        &["max_completion_tokens", "max_tokens"],
        &mut form,
        dropped,
    );
    form.tools = openai_common::tools(
        request
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
    )?;
    form.web_search = request
        .get("web_search_options")
        .filter(|options| options.is_object())
        .map(web_search_options);
    form.effort = request
        .get("reasoning_effort")
        .and_then(Value::as_str)
        .map(|level| Effort {
            level: level.to_string(),
            parameter: "reasoning_effort",
        });
    drop_unknown(request, &HANDLED, dropped);
    Ok(form)
}

/// A search model's `web_search_options` as the provider's web search: its user location
/// (`{"type":"approximate","approximate":{…}}`) in the flat shape the tools take.
fn web_search_options(options: &Value) -> WebSearch {
    let user_location = options.get("user_location").and_then(|location| {
        let mut flat = location.get("approximate")?.as_object()?.clone();
        flat.insert("type".into(), Value::String("approximate".into()));
        Some(Value::Object(flat))
    });
    WebSearch {
        parameter: "web_search_options".into(),
        user_location,
        ..WebSearch::default()
    }
}

/// The messages: system and developer ones as the system text, tool results as user parts.
fn messages(messages: Option<&Value>, form: &mut Request) -> Result<(), TranslateError> {
    let Some(Value::Array(messages)) = messages else {
        return Err(TranslateError::Invalid(
            "`messages` must be an array".into(),
        ));
    };
    for message in messages {
        push_message(
            MessageMembers {
                role: str_at(message, "role"),
                content: message.get("content"),
                refusal: message.get("refusal"),
                tool_calls: array_at(message, "tool_calls"),
                tool_call_id: str_at(message, "tool_call_id"),
            },
            form,
        )?;
    }
    Ok(())
}

/// The members of a message the reader reads.
pub(super) struct MessageMembers<'a> {
    pub role: &'a str,
    pub content: Option<&'a Value>,
    pub refusal: Option<&'a Value>,
    pub tool_calls: &'a [Value],
    pub tool_call_id: &'a str,
}

/// A message into the form: system and developer ones as the system text, tool results as
/// user parts.
pub(super) fn push_message(
    message: MessageMembers<'_>,
    form: &mut Request,
) -> Result<(), TranslateError> {
    let content = message.content.unwrap_or(&Value::Null);
    match message.role {
        "system" | "developer" => {
            let text = openai_common::text(content);
            if !text.is_empty() {
                form.system.push(text);
            }
        }
        "user" => form.push(Role::User, openai_common::parts(content)?),
        "assistant" => {
            let mut parts = openai_common::parts(content)?;
            if let Some(refusal) = message.refusal.and_then(Value::as_str) {
                parts.push(Part::Text(refusal.to_string()));
            }
            for call in message.tool_calls {
                parts.push(Part::ToolCall(tool_call(call)));
            }
            form.push(Role::Assistant, parts);
        }
        "tool" => {
            let content = match content {
                Value::Array(_) => ToolOutput::Parts(openai_common::parts(content)?),
                other => ToolOutput::Text(openai_common::text(other)),
            };
            let result = Part::ToolResult {
                call_id: message.tool_call_id.to_string(),
                content,
                is_error: false,
            };
            form.push(Role::User, vec![result]);
        }
        "function" => {
            return Err(TranslateError::unsupported(
                "functions",
                "the deprecated function role is not carried; use tools",
            ))
        }
        other => {
            return Err(TranslateError::Invalid(format!(
                "unknown message role `{other}`"
            )))
        }
    }
    Ok(())
}

/// A `tool_calls[i]` entry (its arguments a JSON string, or an object some clients send).
fn tool_call(call: &Value) -> ToolCall {
    let function = call.get("function").unwrap_or(&Value::Null);
    let arguments = match function.get("arguments") {
        Some(Value::String(text)) => text.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    ToolCall {
        id: str_at(call, "id").to_string(),
        name: str_at(function, "name").to_string(),
        arguments,
    }
}

/// OpenAI usage (`prompt_tokens` includes cached ones).
pub fn usage(usage: &Value) -> Usage {
    let details =
        |key: &str, inner: &str| usage.get(key).map_or(0, |details| count_at(details, inner));
    Usage {
        input: count_at(usage, "prompt_tokens"),
        cached: details("prompt_tokens_details", "cached_tokens"),
        cache_write: 0,
        output: count_at(usage, "completion_tokens"),
        reasoning: details("completion_tokens_details", "reasoning_tokens"),
    }
}

/// A `finish_reason`.
pub fn finish(reason: Option<&str>) -> Finish {
    match reason {
        Some("length") => Finish::Length,
        Some("tool_calls") | Some("function_call") => Finish::ToolCalls,
        Some("content_filter") => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

/// A whole answer: total — no choice at all is an empty answer, arguments cut short are
/// passed on as the text they are.
pub fn answer(answer: &Value) -> Answer {
    let choice = array_at(answer, "choices").first().unwrap_or(&Value::Null);
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut parts = Vec::new();
    if let Some(reasoning) =
        text_at(message, "reasoning_content").or_else(|| text_at(message, "reasoning"))
    {
        parts.push(Part::Thinking {
            text: reasoning.to_string(),
            signature: String::new(),
        });
    }
    let text = format!(
        "{}{}",
        str_at(message, "content"),
        str_at(message, "refusal")
    );
    let mut citations = Vec::new();
    if !text.is_empty() {
        citations = citations::read_chat_citations(message, parts.len());
        parts.push(Part::Text(text));
    }
    for call in array_at(message, "tool_calls") {
        parts.push(Part::ToolCall(tool_call(call)));
    }
    Answer {
        id: str_at(answer, "id").to_string(),
        model: answer.get("model").cloned().unwrap_or(Value::from("")),
        parts,
        finish: finish(choice.get("finish_reason").and_then(Value::as_str)),
        usage: usage(answer.get("usage").unwrap_or(&Value::Null)),
        searches: Vec::new(),
        citations,
    }
}
