//! A Chat Completions request as a Messages request (behaviour §14, "What is carried").

use serde_json::{json, Map, Value};

use super::content::{
    anthropic_tool_choice, anthropic_tools, arguments_input, openai_blocks, openai_text,
    push_message,
};
use super::params::{self, drop_named};
use super::{RequestSettings, TranslateError};

/// Keys read below or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 22] = [
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
];

pub fn to_messages(
    request: Map<String, Value>,
    settings: RequestSettings<'_>,
    dropped: &mut Vec<String>,
) -> Result<Value, TranslateError> {
    params::refuse_openai_only(&request)?;
    if let Some(format) = request.get("response_format") {
        let kind = format.get("type").and_then(Value::as_str).unwrap_or("text");
        if kind != "text" {
            return Err(TranslateError::unsupported(
                "response_format",
                "structured output formats have no equivalent on Anthropic targets",
            ));
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    let (system, messages) = messages(request.get("messages"))?;
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    common_to_messages(&request, settings, &mut out, dropped)?;
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let tools = anthropic_tools(tools)?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = anthropic_tool_choice(
        request.get("tool_choice"),
        request.get("parallel_tool_calls"),
    ) {
        out.insert("tool_choice".into(), choice);
    }
    let effort = request.get("reasoning_effort").and_then(Value::as_str);
    thinking(effort, "reasoning_effort", &mut out, dropped);
    for key in request.keys() {
        if !HANDLED.contains(&key.as_str()) {
            drop_named(dropped, key);
        }
    }
    Ok(Value::Object(out))
}

/// What Chat Completions and Responses requests share on the way to Messages: `max_tokens`
/// (the default when none was sent), `stop`, `temperature`, `top_p`, `user`, `stream`.
pub fn common_to_messages(
    request: &Map<String, Value>,
    settings: RequestSettings<'_>,
    out: &mut Map<String, Value>,
    dropped: &mut Vec<String>,
) -> Result<(), TranslateError> {
    let max_tokens = ["max_completion_tokens", "max_tokens", "max_output_tokens"]
        .iter()
        .find_map(|key| request.get(*key).and_then(Value::as_u64))
        .unwrap_or(u64::from(settings.default_max_tokens));
    out.insert("max_tokens".into(), json!(max_tokens));
    match request.get("stop") {
        Some(Value::String(stop)) => {
            out.insert("stop_sequences".into(), json!([stop]));
        }
        Some(Value::Array(stops)) if !stops.is_empty() => {
            out.insert("stop_sequences".into(), Value::Array(stops.clone()));
        }
        _ => {}
    }
    if let Some(t) = request
        .get("temperature")
        .and_then(params::anthropic_temperature)
    {
        out.insert("temperature".into(), t);
    }
    if let Some(p) = request.get("top_p").filter(|p| p.is_number()) {
        out.insert("top_p".into(), p.clone());
    }
    if let Some(user) = request.get("user").and_then(Value::as_str) {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), json!(true));
    }
    for key in params::DROPPED_TUNING {
        if request.get(key).is_some_and(|v| !v.is_null()) {
            drop_named(dropped, key);
        }
    }
    Ok(())
}

/// `reasoning_effort` (the client's `name` for it) as `thinking` with its budget; Anthropic
/// then requires `max_tokens` above the budget and no `temperature` / `top_p` other than the
/// defaults (those are dropped). A tool loop whose last assistant turn does not start with its
/// thinking block (a Chat Completions client never sends one back; a Responses client's was
/// left out) cannot have thinking on — Anthropic refuses it — so the effort is dropped for
/// that turn and named.
pub fn thinking(
    effort: Option<&str>,
    name: &str,
    out: &mut Map<String, Value>,
    dropped: &mut Vec<String>,
) {
    let Some(budget) = effort.and_then(params::budget_for_effort) else {
        return;
    };
    if tool_turn_without_thinking(out.get("messages")) {
        drop_named(dropped, name);
        return;
    }
    out.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": budget}),
    );
    let max_tokens = out.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if max_tokens <= u64::from(budget) {
        out.insert("max_tokens".into(), json!(max_tokens + u64::from(budget)));
    }
    for key in ["temperature", "top_p"] {
        if out.remove(key).is_some() {
            drop_named(dropped, key);
        }
    }
}

/// Whether the last assistant message calls a tool without starting with a thinking block.
fn tool_turn_without_thinking(messages: Option<&Value>) -> bool {
    let last_assistant = messages
        .and_then(Value::as_array)
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "assistant"));
    let Some(Value::Array(blocks)) = last_assistant.and_then(|m| m.get("content")) else {
        return false;
    };
    let starts_thinking = blocks
        .first()
        .is_some_and(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
    !starts_thinking && blocks.iter().any(|b| b["type"] == "tool_use")
}

/// The messages: system and developer ones as `system` blocks, the rest alternating, tool
/// results (consecutive `tool` messages together) as one user message of `tool_result` blocks.
fn messages(messages: Option<&Value>) -> Result<(Vec<Value>, Vec<Value>), TranslateError> {
    let Some(Value::Array(messages)) = messages else {
        return Err(TranslateError::Invalid(
            "`messages` must be an array".into(),
        ));
    };
    let mut system = Vec::new();
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                let text = openai_text(content);
                if !text.is_empty() {
                    system.push(json!({"type": "text", "text": text}));
                }
            }
            "user" => push_message(&mut out, "user", openai_blocks(content)?),
            "assistant" => {
                let mut blocks = openai_blocks(content)?;
                if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
                    blocks.push(json!({"type": "text", "text": refusal}));
                }
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let function = call.get("function").unwrap_or(&Value::Null);
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.get("id").cloned().unwrap_or(json!("")),
                        "name": function.get("name").cloned().unwrap_or(json!("")),
                        "input": arguments_input(function.get("arguments"))?,
                    }));
                }
                push_message(&mut out, "assistant", blocks);
            }
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let result = match content {
                    Value::Array(_) => Value::Array(openai_blocks(content)?),
                    other => json!(openai_text(other)),
                };
                push_message(
                    &mut out,
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": result})],
                );
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
    }
    Ok((system, out))
}
