//! A Messages answer as a Chat Completions answer: text, thinking as `reasoning_content`,
//! `tool_use` blocks as `tool_calls`, the finish reason, usage with cached tokens.

use serde_json::{json, Value};

use super::params;

/// Anthropic usage in OpenAI's terms: `prompt_tokens` includes cache reads and writes (which
/// Anthropic's `input_tokens` excludes), `cached_tokens` = `cache_read_input_tokens`.
pub fn chat_usage(usage: &Value) -> Value {
    let (prompt, cached, output) = usage_counts(usage);
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached},
    })
}

/// (all input tokens, cache reads, output tokens) of an Anthropic usage object.
pub fn usage_counts(usage: &Value) -> (u64, u64, u64) {
    let get = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = get("cache_read_input_tokens");
    let prompt = get("input_tokens") + cached + get("cache_creation_input_tokens");
    (prompt, cached, get("output_tokens"))
}

/// Total: a Messages answer without `content` is an empty answer, never a fault of the account.
pub fn from_messages(answer: &Value, created: u64) -> Value {
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or(""))
            }
            Some("tool_use") => calls.push(json!({
                "id": block.get("id").cloned().unwrap_or(json!("")),
                "type": "function",
                "function": {
                    "name": block.get("name").cloned().unwrap_or(json!("")),
                    "arguments": block.get("input").cloned().unwrap_or(json!({})).to_string(),
                },
            })),
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
    let stop = answer.get("stop_reason").and_then(Value::as_str);
    json!({
        "id": chat_id(answer.get("id").and_then(Value::as_str).unwrap_or("")),
        "object": "chat.completion",
        "created": created,
        "model": answer.get("model").cloned().unwrap_or(json!("")),
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": params::finish_reason(stop),
        }],
        "usage": chat_usage(answer.get("usage").unwrap_or(&Value::Null)),
    })
}

/// A Chat Completions id for a Messages id (`msg_x` → `chatcmpl-msg_x`).
pub fn chat_id(message_id: &str) -> String {
    format!("chatcmpl-{message_id}")
}
