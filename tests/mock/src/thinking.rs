//! Anthropic's extended thinking, as the mock makes and checks it: a Messages request with
//! `thinking: {"type": "enabled"}` is answered with a thinking block before its text (JSON, or
//! `thinking_delta` and `signature_delta` events), signed for the account (key) that answered;
//! a request that hands back a thinking block whose signature another account made (or that
//! does not match its text) gets Anthropic's 400 `invalid_request_error` naming the block, as
//! the real API refuses it.
//!
//! Owns the signature's form and the check; the answer's shapes are `anthropic`'s.

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::encrypted::organisation;

/// What the mock thinks, every time.
pub const THINKING_TEXT: &str = "The user wants a reply; a short one will do.";

/// The signature of `thinking` made by `key`'s account.
pub fn signature(key: &str, thinking: &str) -> String {
    let digest = Sha256::digest(thinking.as_bytes());
    let tag: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let plain = format!("{}|{tag}", organisation(key));
    base64::engine::general_purpose::STANDARD.encode(plain.as_bytes())
}

/// The thinking block an answer opens with, signed `signature`.
pub fn block(signature: &str) -> Value {
    json!({"type": "thinking", "thinking": THINKING_TEXT, "signature": signature})
}

/// The stream events of that block at content index 0 (name, data): its start, the text in
/// two pieces, the signature, its stop.
pub fn stream_events(signature: &str) -> Vec<(&'static str, Value)> {
    let (first, second) = THINKING_TEXT.split_at(THINKING_TEXT.len() / 2);
    let delta = |delta: Value| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        )
    };
    vec![
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        delta(json!({"type": "thinking_delta", "thinking": first})),
        delta(json!({"type": "thinking_delta", "thinking": second})),
        delta(json!({"type": "signature_delta", "signature": signature})),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ]
}

/// Whether the request turns thinking on.
pub fn enabled(body: &Value) -> bool {
    body.get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled")
}

/// Anthropic's message for the first thinking block of the request's `messages` whose
/// signature `key`'s account did not make for its text; `None` when every one verifies.
pub fn refused_signature(body: &Value, key: &str) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    for (m, message) in messages.iter().enumerate() {
        let Some(blocks) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (b, block) in blocks.iter().enumerate() {
            if block.get("type").and_then(Value::as_str) != Some("thinking") {
                continue;
            }
            let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
            let signed = block.get("signature").and_then(Value::as_str);
            if signed != Some(signature(key, text).as_str()) {
                return Some(format!(
                    "messages.{m}.content.{b}: Invalid `signature` in `thinking` block"
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_signing_account_verifies_its_thinking() {
        let signed = signature("sk-a", THINKING_TEXT);
        assert!(!signed.contains("sk-a"));
        let body = |signature: &str, text: &str| {
            json!({"messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": text, "signature": signature},
                    {"type": "text", "text": "hello"}]},
                {"role": "user", "content": "more"}]})
        };
        assert_eq!(
            refused_signature(&body(&signed, THINKING_TEXT), "sk-a"),
            None
        );
        assert_eq!(
            refused_signature(&body(&signed, THINKING_TEXT), "sk-b").as_deref(),
            Some("messages.1.content.0: Invalid `signature` in `thinking` block")
        );
        // The text changed under its signature.
        assert!(refused_signature(&body(&signed, "edited"), "sk-a").is_some());
        assert!(enabled(
            &json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        ));
        assert!(!enabled(&json!({"thinking": {"type": "disabled"}})));
    }
}
