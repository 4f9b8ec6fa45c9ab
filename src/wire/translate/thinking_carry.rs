//! An Anthropic thinking block carried across turns by a Responses client (behaviour §14,
//! "Responses are stateless when translated"): the block (its text and signature, or a
//! redacted block's data) travels as a `reasoning` item's `encrypted_content`, and comes back
//! as the same block only on the connection that made it. The node seals every
//! `encrypted_content` it hands a Responses client with the answering connection
//! (`wire::item_seal`), so here the block is only written and read; [`ReasoningKey`] opens
//! the seal and refuses any other connection's.
//!
//! Owns the carried form (`qrthink1.` + base64url of the block's JSON) and the opening.

use base64::Engine;
use serde_json::{json, Value};

use crate::wire::item_seal::SealKey;

/// What starts a carried thinking block (inside the router's seal).
const PREFIX: &str = "qrthink1.";

/// A thinking or redacted thinking block as `encrypted_content`.
pub fn carried(block: &Value) -> String {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{PREFIX}{}", engine.encode(block.to_string()))
}

/// The thinking block `encrypted_content` carries; `None` when it is not one (an OpenAI
/// account's own encrypted reasoning, or garbage).
pub fn block_of(content: &str) -> Option<Value> {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let bytes = engine.decode(content.strip_prefix(PREFIX)?).ok()?;
    let block: Value = serde_json::from_slice(&bytes).ok()?;
    let text = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_owned);
    match block.get("type").and_then(Value::as_str)? {
        "thinking" => Some(json!({
            "type": "thinking",
            "thinking": text("thinking")?,
            "signature": text("signature")?,
        })),
        "redacted_thinking" => Some(json!({"type": "redacted_thinking", "data": text("data")?})),
        _ => None,
    }
}

/// Opens reasoning items for one target: the router's key and the target's connection.
#[derive(Debug, Clone, Copy)]
pub struct ReasoningKey<'a> {
    pub key: &'a SealKey,
    pub connection: &'a str,
}

impl ReasoningKey<'_> {
    /// The thinking block a sealed `encrypted_content` carries, when this connection made it
    /// (its seal verifies and names it); `None` otherwise — the item is left out.
    pub fn open(&self, encrypted_content: &str) -> Option<Value> {
        let opened = self.key.open(encrypted_content)?;
        if opened.maker.as_deref() != Some(self.connection) {
            return None;
        }
        block_of(opened.original)
    }
}

/// What became of a request's reasoning items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasoningCounts {
    /// Restored as thinking blocks (this connection made them).
    pub restored: u32,
    /// Left out: another connection's, not the router's, or every one after a refused
    /// signature.
    pub left_out: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_goes_round_only_on_its_own_connection() {
        let key = SealKey::derive([b"admin".as_slice()]);
        let block = json!({"type": "thinking", "thinking": "let me see", "signature": "sig-A"});
        let sealed = key.seal("an-1", &carried(&block));
        let on = |connection| ReasoningKey {
            key: &key,
            connection,
        };
        assert_eq!(on("an-1").open(&sealed), Some(block));
        assert_eq!(on("an-2").open(&sealed), None);
        // Another router's key, the bare carried form, an OpenAI item: never a block.
        let other = SealKey::derive([b"other".as_slice()]);
        let foreign = ReasoningKey {
            key: &other,
            connection: "an-1",
        };
        assert_eq!(foreign.open(&sealed), None);
        assert_eq!(
            on("an-1").open(&carried(&json!({"type": "thinking"}))),
            None
        );
        assert_eq!(on("an-1").open(&key.seal("an-1", "gAAAAB")), None);
    }

    #[test]
    fn redacted_blocks_keep_their_data_and_nothing_else_passes() {
        let block = json!({"type": "redacted_thinking", "data": "EmwKAhgB"});
        assert_eq!(block_of(&carried(&block)), Some(block));
        let extra =
            json!({"type": "thinking", "thinking": "t", "signature": "s", "cache_control": {}});
        assert_eq!(
            block_of(&carried(&extra)),
            Some(json!({"type": "thinking", "thinking": "t", "signature": "s"}))
        );
        assert_eq!(
            block_of(&carried(&json!({"type": "text", "text": "x"}))),
            None
        );
        assert_eq!(block_of("qrthink1.!!"), None);
    }
}
