//! `POST /v1/messages/count_tokens` for an OpenAI-format target, answered locally (behaviour
//! §14): the request's text — system, messages (text, tool calls' inputs, tool results),
//! tools — counted with OpenAI's `o200k_base` tokenizer, plus OpenAI's per-message framing
//! (3 tokens a message, 3 to prime the answer). An estimate of what the target would bill;
//! nothing is sent upstream.

use serde_json::Value;

use super::TranslateError;

/// Tokens OpenAI's chat format adds around each message, and once to prime the reply.
const PER_MESSAGE: u64 = 3;
const PRIMING: u64 = 3;

fn count(text: &str) -> u64 {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len() as u64
}

/// The text a content value holds: a string, or its blocks' text, inputs and results.
fn content_text(content: &Value, into: &mut String) {
    match content {
        Value::String(text) => into.push_str(text),
        Value::Array(blocks) => {
            for block in blocks {
                for key in ["text", "thinking", "name"] {
                    if let Some(text) = block.get(key).and_then(Value::as_str) {
                        into.push_str(text);
                    }
                }
                if let Some(input) = block.get("input") {
                    into.push_str(&input.to_string());
                }
                if let Some(inner) = block.get("content") {
                    content_text(inner, into);
                }
            }
        }
        _ => {}
    }
}

/// `{"input_tokens": N}` for a Messages `count_tokens` request body.
pub fn count_tokens_body(body: &[u8]) -> Result<Value, TranslateError> {
    let request: Value = serde_json::from_slice(body)
        .map_err(|error| TranslateError::Invalid(format!("the body is not JSON: {error}")))?;
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::Invalid("`messages` must be an array".into()))?;
    let mut total = PRIMING;
    let mut text = String::new();
    if let Some(system) = request.get("system") {
        content_text(system, &mut text);
        total += PER_MESSAGE;
    }
    for message in messages {
        total += PER_MESSAGE;
        content_text(message.get("content").unwrap_or(&Value::Null), &mut text);
    }
    if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
        text.push_str(&tools.to_string());
    }
    total += count(&text);
    Ok(serde_json::json!({ "input_tokens": total }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_with_a_real_tokenizer() {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "Hello, world!"}]});
        // "Hello, world!" is 4 o200k tokens: 3 + 3 framing.
        assert_eq!(
            count_tokens_body(body.to_string().as_bytes()).unwrap(),
            json!({"input_tokens": 10})
        );
        let longer = json!({"model": "m", "system": "You are terse.", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hello, world!"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "look", "input": {"at": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "a cat"}]}]});
        let counted = count_tokens_body(longer.to_string().as_bytes()).unwrap()["input_tokens"]
            .as_u64()
            .unwrap();
        assert!(counted > 20 && counted < 40, "{counted}");
        assert!(count_tokens_body(b"{}").is_err());
    }
}
