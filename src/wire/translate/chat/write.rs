//! The hub's form as Chat Completions: an upstream request and a client's whole answer.

use serde_json::{json, Map, Value};

use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{
    Answer, Finish, FormatKind, Part, Request, Role, ToolChoice, ToolOutput, Usage,
};
use crate::wire::translate::object::object;
use crate::wire::translate::{RequestSettings, TranslateError};

/// The request for a Chat Completions host. Thinking (whose signature no such host checks) is
/// left out.
pub fn request(form: &Request, settings: RequestSettings<'_>) -> Result<Value, TranslateError> {
    if let Some(search) = &form.web_search {
        return Err(TranslateError::unsupported(
            search.parameter.as_str(),
            "Chat Completions hosts run no web search tool",
        ));
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    let mut messages = Vec::with_capacity(form.messages.len() + 1);
    let system = form.system.join("\n");
    if !system.is_empty() {
        messages.push(object([
            ("role", "system".into()),
            ("content", system.into()),
        ]));
    }
    for message in &form.messages {
        match message.role {
            Role::Assistant => messages.push(assistant_message(&message.parts)),
            Role::User => user_messages(&message.parts, &mut messages),
        }
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max) = form.max_tokens {
        out.insert("max_completion_tokens".into(), json!(max));
    }
    if !form.stop.is_empty() {
        out.insert("stop".into(), Value::Array(form.stop.clone()));
    }
    if let Some(t) = &form.temperature {
        out.insert("temperature".into(), t.clone());
    }
    if let Some(p) = &form.top_p {
        out.insert("top_p".into(), p.clone());
    }
    if !form.tools.is_empty() {
        let tools = form
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("name".into(), json!(tool.name));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), description.clone());
                }
                function.insert("parameters".into(), tool.parameters.clone());
                object([
                    ("type", "function".into()),
                    ("function", Value::Object(function)),
                ])
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &form.tool_choice {
            out.insert("tool_choice".into(), tool_choice(choice));
        }
        if form.parallel_tool_calls == Some(false) {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if let Some(effort) = &form.effort {
        out.insert("reasoning_effort".into(), json!(effort.level));
    }
    if let Some(format) = &form.format {
        let format = match &format.kind {
            FormatKind::JsonObject => json!({"type": "json_object"}),
            FormatKind::JsonSchema {
                name,
                schema,
                strict,
            } => {
                let mut inner =
                    object([("name", name.as_str().into()), ("schema", schema.clone())]);
                if let Some(strict) = strict {
                    inner["strict"] = json!(strict);
                }
                object([("type", "json_schema".into()), ("json_schema", inner)])
            }
        };
        out.insert("response_format".into(), format);
    }
    if let Some(user) = &form.user {
        out.insert(
            "user".into(),
            json!(crate::wire::translate::openai_user::openai_user(user)),
        );
    }
    if form.stream {
        out.insert("stream".into(), json!(true));
        // Usage is always asked for: the router counts it; the client gets it as its own API
        // says (Chat Completions clients only when they asked).
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(out))
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// A tool call as a `tool_calls[i]` entry.
fn call_entry(call: &crate::wire::translate::hub::form::ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    })
}

/// An assistant turn: its text joined, its calls as `tool_calls`.
fn assistant_message(parts: &[Part]) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::Text(piece) => text.push_str(piece),
            Part::ToolCall(call) => calls.push(call_entry(call)),
            _ => {}
        }
    }
    let content = if text.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    let mut message = object([("role", "assistant".into()), ("content", content)]);
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    message
}

/// A user turn: tool results as `tool` messages first (Chat Completions wants them right after
/// the assistant's calls), the rest as one user message.
fn user_messages(parts: &[Part], messages: &mut Vec<Value>) {
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::Text(text) => content.push(object([
                ("type", "text".into()),
                ("text", text.as_str().into()),
            ])),
            Part::Image(image) => {
                content.push(json!({"type": "image_url", "image_url": {"url": image.url()}}))
            }
            Part::ToolResult {
                call_id,
                content: output,
                is_error,
            } => {
                messages.push(object([
                    ("role", "tool".into()),
                    ("tool_call_id", call_id.as_str().into()),
                    ("content", result_text(output, *is_error).into()),
                ]));
            }
            _ => {}
        }
    }
    if content.is_empty() {
        return;
    }
    let content = match content.as_mut_slice() {
        [only] if only["type"] == "text" => only["text"].take(),
        _ => Value::Array(content),
    };
    messages.push(object([("role", "user".into()), ("content", content)]));
}

/// A tool result's text as a `tool` message's content (an error's marked).
pub(super) fn result_text(output: &ToolOutput, is_error: bool) -> String {
    let text = output.text("\n");
    if is_error {
        format!("Error: {text}")
    } else {
        text
    }
}

/// A `finish_reason`.
pub fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
        Finish::ContentFilter => "content_filter",
    }
}

/// Usage in OpenAI's terms: `prompt_tokens` includes cache reads and writes.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    })
}

/// A Chat Completions id for an upstream id (`msg_x` → `chatcmpl-msg_x`).
pub fn chat_id(id: &str) -> String {
    if id.starts_with("chatcmpl-") {
        id.to_string()
    } else {
        format!("chatcmpl-{id}")
    }
}

/// A whole answer: text, thinking as `reasoning_content`, calls as `tool_calls`.
pub fn answer(answer: &Answer, created: u64) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for part in &answer.parts {
        match part {
            Part::Text(piece) => text.push_str(piece),
            Part::Thinking { text: piece, .. } => reasoning.push_str(piece),
            Part::ToolCall(call) => calls.push(call_entry(call)),
            _ => {}
        }
    }
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        "refusal": null,
    });
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let annotations = citations::chat_annotations(answer);
    if !annotations.is_empty() {
        message["annotations"] = Value::Array(annotations);
    }
    json!({
        "id": chat_id(&answer.id),
        "object": "chat.completion",
        "created": created,
        "model": answer.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(answer.finish),
        }],
        "usage": usage(&answer.usage),
    })
}
