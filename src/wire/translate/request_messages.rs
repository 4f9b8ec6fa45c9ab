//! A Messages request as a Chat Completions request (behaviour §14, "What is carried").

use serde_json::{json, Map, Value};

use super::content::image_url;
use super::params::{self, drop_named};
use super::{RequestSettings, TranslateError};

/// Keys read below or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 13] = [
    "model",
    "messages",
    "system",
    "max_tokens",
    "stop_sequences",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "stream",
    "top_k",
];

pub fn to_chat(
    request: Map<String, Value>,
    settings: RequestSettings<'_>,
    dropped: &mut Vec<String>,
) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    let mut messages = Vec::new();
    match request.get("system") {
        Some(Value::String(text)) if !text.is_empty() => {
            messages.push(json!({"role": "system", "content": text}));
        }
        Some(Value::Array(blocks)) => {
            let text = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n");
            if !text.is_empty() {
                messages.push(json!({"role": "system", "content": text}));
            }
        }
        _ => {}
    }
    let Some(Value::Array(input)) = request.get("messages") else {
        return Err(TranslateError::Invalid(
            "`messages` must be an array".into(),
        ));
    };
    for message in input {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        match message.get("content") {
            Some(Value::String(text)) => messages.push(json!({"role": role, "content": text})),
            Some(Value::Array(blocks)) if role == "assistant" => {
                messages.push(assistant_message(blocks)?);
            }
            Some(Value::Array(blocks)) => user_messages(blocks, &mut messages)?,
            _ => {
                return Err(TranslateError::Invalid(
                    "message content must be a string or an array of blocks".into(),
                ))
            }
        }
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.get("max_tokens").and_then(Value::as_u64) {
        out.insert("max_completion_tokens".into(), json!(max));
    }
    if let Some(stops) = request.get("stop_sequences").and_then(Value::as_array) {
        if !stops.is_empty() {
            out.insert("stop".into(), Value::Array(stops.clone()));
        }
    }
    for key in ["temperature", "top_p"] {
        if let Some(value) = request.get(key).filter(|v| v.is_number()) {
            out.insert(key.into(), value.clone());
        }
    }
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let mut functions = Vec::with_capacity(tools.len());
        for tool in tools {
            if let Some(kind) = tool.get("type").and_then(Value::as_str) {
                if kind != "custom" {
                    return Err(TranslateError::unsupported(
                        kind,
                        "Anthropic's server tools do not run on OpenAI-format targets",
                    ));
                }
            }
            let mut function = Map::new();
            function.insert(
                "name".into(),
                tool.get("name").cloned().unwrap_or(json!("")),
            );
            if let Some(description) = tool.get("description") {
                function.insert("description".into(), description.clone());
            }
            function.insert(
                "parameters".into(),
                tool.get("input_schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            );
            functions.push(json!({"type": "function", "function": function}));
        }
        if !functions.is_empty() {
            out.insert("tools".into(), Value::Array(functions));
        }
    }
    if let Some(choice) = request.get("tool_choice") {
        match choice.get("type").and_then(Value::as_str) {
            Some("any") => {
                out.insert("tool_choice".into(), json!("required"));
            }
            Some("none") => {
                out.insert("tool_choice".into(), json!("none"));
            }
            Some("tool") => {
                let name = choice.get("name").cloned().unwrap_or(json!(""));
                out.insert(
                    "tool_choice".into(),
                    json!({"type": "function", "function": {"name": name}}),
                );
            }
            _ => {
                out.insert("tool_choice".into(), json!("auto"));
            }
        }
        if choice
            .get("disable_parallel_tool_use")
            .and_then(Value::as_bool)
            == Some(true)
            && out.contains_key("tools")
        {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
        if !out.contains_key("tools") {
            out.remove("tool_choice");
        }
    }
    if let Some(thinking) = request.get("thinking") {
        if thinking.get("type").and_then(Value::as_str) == Some("enabled") {
            let budget = thinking
                .get("budget_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            out.insert(
                "reasoning_effort".into(),
                json!(params::effort_for_budget(budget)),
            );
        }
    }
    if let Some(user) = request
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
    {
        out.insert("user".into(), json!(super::openai_user::openai_user(user)));
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), json!(true));
        // Usage is always asked for: the router counts it; the client gets it in
        // `message_delta` as Anthropic sends it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if request.get("top_k").is_some_and(|v| !v.is_null()) {
        drop_named(dropped, "top_k");
    }
    for key in request.keys() {
        if !HANDLED.contains(&key.as_str()) {
            drop_named(dropped, key);
        }
    }
    Ok(Value::Object(out))
}

/// An assistant message's blocks: text joined, `tool_use` as `tool_calls`; thinking (whose
/// signature no OpenAI-format target can check) is left out.
fn assistant_message(blocks: &[Value]) -> Result<Value, TranslateError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let input = block.get("input").cloned().unwrap_or(json!({}));
                calls.push(json!({
                    "id": block.get("id").cloned().unwrap_or(json!("")),
                    "type": "function",
                    "function": {
                        "name": block.get("name").cloned().unwrap_or(json!("")),
                        "arguments": input.to_string(),
                    },
                }));
            }
            Some("thinking") | Some("redacted_thinking") => {}
            Some(other) => {
                return Err(TranslateError::unsupported(
                    other,
                    "this assistant block has no equivalent on OpenAI-format targets",
                ))
            }
            None => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok(message)
}

/// A user message's blocks: `tool_result` blocks as `tool` messages first (Chat Completions
/// wants them right after the assistant's calls), the rest as one user message of parts.
fn user_messages(blocks: &[Value], messages: &mut Vec<Value>) -> Result<(), TranslateError> {
    let mut parts = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(json!({
                "type": "text",
                "text": block.get("text").cloned().unwrap_or(json!("")),
            })),
            Some("image") => {
                let url = image_url(block).ok_or_else(|| {
                    TranslateError::Invalid("an image block has no readable source".into())
                })?;
                parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
            }
            Some("tool_result") => {
                let content = match block.get("content") {
                    Some(Value::String(text)) => json!(text),
                    Some(Value::Array(inner)) => {
                        let text: String = inner
                            .iter()
                            .filter_map(|b| b.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n");
                        json!(text)
                    }
                    _ => json!(""),
                };
                let content = if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                    json!(format!("Error: {}", content.as_str().unwrap_or("")))
                } else {
                    content
                };
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id").cloned().unwrap_or(json!("")),
                    "content": content,
                }));
            }
            Some(other) => {
                return Err(TranslateError::unsupported(
                    other,
                    "this content block has no equivalent on OpenAI-format targets",
                ))
            }
            None => {}
        }
    }
    if !parts.is_empty() {
        let all_text = parts.iter().all(|p| p["type"] == "text");
        let content = if all_text && parts.len() == 1 {
            parts[0]["text"].clone()
        } else {
            Value::Array(parts)
        };
        messages.push(json!({"role": "user", "content": content}));
    }
    Ok(())
}
