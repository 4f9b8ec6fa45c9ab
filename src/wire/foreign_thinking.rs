//! A Messages body's thinking blocks no Messages host can read (behaviour §14, §15): those a
//! Gemini account's translated answer handed a Messages client — a signature the router sealed
//! to a Gemini key (`qrg1…`) or thought text Google signed nowhere (an empty signature). When the
//! body goes as is to a Messages host (a combo mixing Anthropic and Gemini keys) they are left
//! out before sending, so the turn is not refused for an invalid signature; when that leaves the
//! tool loop's last assistant turn without its thinking, the turn goes without `thinking`
//! (Anthropic wants such a turn to open with a thinking block). A body without such blocks is
//! never parsed or touched.

use bytes::Bytes;
use memchr::memmem;
use serde_json::Value;

use crate::wire::item_seal::SIGNATURE_PREFIX;

/// Byte patterns one of these blocks' signatures must show: the seal's prefix or an empty one.
const MARKERS: [&[u8]; 3] = [b"\"qrg1", b"\"signature\":\"\"", b"\"signature\": \"\""];

/// `body` without the thinking blocks no Messages host can read, and how many were left out;
/// `None` when it holds none (or is not a JSON object with `messages`).
pub fn without_foreign_thinking(body: &[u8]) -> Option<(Bytes, u32)> {
    if memmem::find(body, b"\"thinking\"").is_none()
        || MARKERS
            .iter()
            .all(|marker| memmem::find(body, marker).is_none())
    {
        return None;
    }
    let mut request: Value = serde_json::from_slice(body).ok()?;
    let messages = request.get_mut("messages")?.as_array_mut()?;
    let last_assistant = messages
        .iter()
        .rposition(|message| message.get("role").and_then(Value::as_str) == Some("assistant"));
    let mut left_out = 0u32;
    let mut last_turn_lost_thinking = false;
    for (index, message) in messages.iter_mut().enumerate() {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = blocks.len();
        blocks.retain(|block| !unreadable(block));
        let removed = before - blocks.len();
        if removed > 0 {
            left_out = left_out.saturating_add(u32::try_from(removed).unwrap_or(u32::MAX));
            if Some(index) == last_assistant
                && blocks
                    .iter()
                    .any(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
            {
                last_turn_lost_thinking = true;
            }
        }
    }
    if left_out == 0 {
        return None;
    }
    if last_turn_lost_thinking {
        if let Some(object) = request.as_object_mut() {
            object.remove("thinking");
        }
    }
    let bytes = serde_json::to_vec(&request).ok()?;
    Some((Bytes::from(bytes), left_out))
}

/// A thinking block signed by a Gemini key's seal, or not signed at all.
fn unreadable(block: &Value) -> bool {
    if block.get("type").and_then(Value::as_str) != Some("thinking") {
        return false;
    }
    match block.get("signature").and_then(Value::as_str) {
        Some(signature) => signature.is_empty() || signature.starts_with(SIGNATURE_PREFIX),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn sealed_and_unsigned_thinking_is_left_out_and_a_tool_turn_goes_without_thinking() {
        let request = json!({
            "model": "m", "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": ""},
                    {"type": "thinking", "thinking": "", "signature": "qrg1AAAA"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "y"}]}]
        });
        let (out, left_out) = without_foreign_thinking(&body(&request)).unwrap();
        assert_eq!(left_out, 2);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["messages"][1]["content"].as_array().unwrap().len(), 1);
        assert!(out.get("thinking").is_none());
    }

    #[test]
    fn anthropic_signed_thinking_and_plain_turns_are_untouched() {
        let signed = json!({
            "model": "m", "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "EqQBCkYIBx"},
                    {"type": "text", "text": "hello"}]},
                {"role": "user", "content": "\"qrg1 in a user's text\""}]
        });
        assert_eq!(without_foreign_thinking(&body(&signed)), None);
        let plain = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(without_foreign_thinking(&body(&plain)), None);
        assert_eq!(
            without_foreign_thinking(b"not json \"thinking\" \"qrg1"),
            None
        );
    }

    #[test]
    fn an_earlier_turns_thinking_left_out_keeps_thinking_on() {
        let request = json!({
            "model": "m", "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": ""},
                    {"type": "text", "text": "hello"}]},
                {"role": "user", "content": "more"}]
        });
        let (out, left_out) = without_foreign_thinking(&body(&request)).unwrap();
        assert_eq!(left_out, 1);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["thinking"]["type"], "enabled");
    }
}
