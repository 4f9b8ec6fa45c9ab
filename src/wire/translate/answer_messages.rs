//! A Chat Completions answer as a Messages answer: `reasoning_content` as a thinking block,
//! text, `tool_calls` as `tool_use` blocks, the stop reason, usage with cache reads.

use serde_json::{json, Value};

use super::params;

/// OpenAI usage in Anthropic's terms: `input_tokens` excludes cache reads.
pub fn anthropic_usage(usage: &Value) -> Value {
    let get = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    json!({
        "input_tokens": get("prompt_tokens").saturating_sub(cached),
        "output_tokens": get("completion_tokens"),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    })
}

/// Total: whatever the model answered (no choice at all, tool arguments `max_tokens` cut short)
/// is the client's answer, translated as far as it goes — never a fault of the account.
pub fn from_chat(answer: &Value) -> Value {
    let choice = answer
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .unwrap_or(&Value::Null);
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut content = Vec::new();
    if let Some(reasoning) = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        content.push(json!({"type": "thinking", "thinking": reasoning, "signature": ""}));
    }
    let text = message.get("content").and_then(Value::as_str).unwrap_or("");
    let refusal = message.get("refusal").and_then(Value::as_str).unwrap_or("");
    if !text.is_empty() || !refusal.is_empty() {
        content.push(json!({"type": "text", "text": format!("{text}{refusal}")}));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function").unwrap_or(&Value::Null);
        let arguments = function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        let input = tool_input(arguments);
        content.push(json!({
            "type": "tool_use",
            "id": call.get("id").cloned().unwrap_or(json!("")),
            "name": function.get("name").cloned().unwrap_or(json!("")),
            "input": input,
        }));
    }
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    json!({
        "id": message_id(answer.get("id").and_then(Value::as_str).unwrap_or("")),
        "type": "message",
        "role": "assistant",
        "model": answer.get("model").cloned().unwrap_or(json!("")),
        "content": content,
        "stop_reason": params::stop_reason(finish),
        "stop_sequence": null,
        "usage": anthropic_usage(answer.get("usage").unwrap_or(&Value::Null)),
    })
}

/// A `tool_use` input for a Chat Completions call's `arguments`: the JSON they hold, `{}` for
/// none, and the text as it is when it is not JSON (a call `max_tokens` cut short): the client
/// sees what the model wrote, with `stop_reason: max_tokens` beside it.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.into()))
}

/// A Messages id for a Chat Completions id (`chatcmpl-x` → `msg_x`).
pub fn message_id(chat_id: &str) -> String {
    format!(
        "msg_{}",
        chat_id.strip_prefix("chatcmpl-").unwrap_or(chat_id)
    )
}
