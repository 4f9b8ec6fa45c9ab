//! A Messages answer as a Responses answer (stateless: `store: false`): thinking as a
//! `reasoning` item (the block, signature and all, carried in `encrypted_content`, which the
//! node encrypts for the answering connection: `thinking_carry`),
//! text as a `message` item, `tool_use` blocks as `function_call` items, usage with cached
//! tokens, `incomplete` when the answer hit `max_tokens`.

use serde_json::{json, Value};

use super::answer_chat::usage_counts;
use super::thinking_carry::carried;

/// Anthropic usage in Responses' terms (input includes cache reads and writes).
pub fn responses_usage(usage: &Value) -> Value {
    let (input, cached, output) = usage_counts(usage);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

/// What starts the id of a response served through translation: it is stored nowhere, so a
/// `previous_response_id` naming one is refused (behaviour §14), whichever account it reaches.
pub const TRANSLATED_RESPONSE_PREFIX: &str = "resp_qrt_";

/// The Responses id for a Messages id (`msg_x` → `resp_qrt_x`).
pub fn response_id(message_id: &str) -> String {
    format!(
        "{TRANSLATED_RESPONSE_PREFIX}{}",
        message_id.strip_prefix("msg_").unwrap_or(message_id)
    )
}

/// A reasoning item for a thinking or redacted thinking `block`, its text as the summary.
pub fn reasoning_item(id: &str, block: &Value) -> Value {
    let thinking = block.get("thinking").and_then(Value::as_str).unwrap_or("");
    json!({
        "id": id,
        "type": "reasoning",
        "summary": if thinking.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": thinking}]) },
        "encrypted_content": carried(block),
    })
}

/// A message item holding `text`.
pub fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// A function call item.
pub fn function_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({
        "id": id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    })
}

/// The response object around `output`.
pub fn response_object(
    id: &str,
    model: &Value,
    created: u64,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": null,
        "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "store": false,
        "usage": usage,
    })
}

/// Total: a Messages answer without `content` is an empty answer, never a fault of the account.
pub fn from_messages(answer: &Value, created: u64) -> Value {
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let message_id = answer.get("id").and_then(Value::as_str).unwrap_or("");
    let bare = message_id.strip_prefix("msg_").unwrap_or(message_id);
    let mut output = Vec::new();
    let mut text = String::new();
    for (index, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("thinking" | "redacted_thinking") => {
                output.push(reasoning_item(&format!("rs_{bare}_{index}"), block));
            }
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => output.push(function_call_item(
                &format!("fc_{bare}_{index}"),
                block.get("id").and_then(Value::as_str).unwrap_or(""),
                block.get("name").and_then(Value::as_str).unwrap_or(""),
                &block.get("input").cloned().unwrap_or(json!({})).to_string(),
                "completed",
            )),
            _ => {}
        }
    }
    if !text.is_empty() {
        // The text goes before the calls, as OpenAI orders a turn's items.
        let at = output
            .iter()
            .position(|item| item["type"] == "function_call")
            .unwrap_or(output.len());
        output.insert(at, message_item(&format!("msg_{bare}"), &text, "completed"));
    }
    let status = match answer.get("stop_reason").and_then(Value::as_str) {
        Some("max_tokens") => "incomplete",
        _ => "completed",
    };
    response_object(
        &response_id(message_id),
        answer.get("model").unwrap_or(&Value::Null),
        created,
        status,
        output,
        responses_usage(answer.get("usage").unwrap_or(&Value::Null)),
    )
}
