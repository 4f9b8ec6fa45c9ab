//! An Anthropic thinking block carried across turns by a Responses or Gemini client (behaviour §14,
//! "Responses are stateless when translated"): the block (its text and signature, or a
//! redacted block's data) travels as a `reasoning` item's `encrypted_content`, and comes back
//! as the same block only on the connection that made it. The translation writes the block's
//! plain form; the node encrypts it for the answering connection before it leaves
//! (`wire::item_seal`: authenticated encryption, the connection as associated data), so the
//! client sees neither text nor signature there, and [`ReasoningKey`] opens only that
//! connection's blocks.
//!
//! A Gemini client gets the block in a part's `thoughtSignature` instead (`gemini::write`). A
//! Gemini account's signature goes to a Messages client in a thinking block's `signature`, in a
//! plain form the node seals (`item_seal`), and back only to that connection.
//!
//! Owns the plain carried form (`qrthink1.` + base64url of the block's JSON) and the opening.

use base64::Engine;
use serde_json::{json, Value};

use crate::wire::item_seal::{SealKey, CARRIED_PLAIN_PREFIX as PREFIX, SIGNATURE_PLAIN_PREFIX};
use crate::wire::translate::hub::form::{Part, Request};

/// A thinking or redacted thinking block as `encrypted_content`, in its plain form (the node
/// encrypts it before it leaves).
pub fn carried(block: &Value) -> String {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{PREFIX}{}", engine.encode(block.to_string()))
}

/// The thinking block a plain carried form holds (as the translation wrote it, before the node
/// encrypts it); `None` when it is not one (an OpenAI account's own encrypted reasoning, or
/// garbage).
#[cfg(test)]
pub fn block_of(content: &str) -> Option<Value> {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    block_from_json(&engine.decode(content.strip_prefix(PREFIX)?).ok()?)
}

/// The thinking block in `json` (a carried block's plaintext), its known fields only.
fn block_from_json(json: &[u8]) -> Option<Value> {
    let block: Value = serde_json::from_slice(json).ok()?;
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

/// A carried block (as [`ReasoningKey::open`] gives it) as the form's part.
pub fn block_part(block: &Value) -> Part {
    let text = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match block.get("type").and_then(Value::as_str) {
        Some("redacted_thinking") => Part::RedactedThinking { data: text("data") },
        _ => Part::Thinking {
            text: text("thinking"),
            signature: text("signature"),
        },
    }
}

/// A Gemini signature in the plain form a Messages client is handed (the node seals it);
/// empty stays empty.
pub fn marked_signature(signature: &str) -> String {
    match signature {
        "" => String::new(),
        _ => format!("{SIGNATURE_PLAIN_PREFIX}{signature}"),
    }
}

/// A Gemini answer's signatures in a Messages client's thinking blocks, in their plain form.
pub fn mark_gemini_signatures(parts: &mut [Part]) {
    for part in parts {
        if let Part::Thinking { signature, .. } = part {
            *signature = marked_signature(signature);
        }
    }
}

/// A Messages client's thinking signatures for a Gemini target (behaviour §15): each sealed
/// one this connection made opened to the account's own; any other (another connection's, a
/// seal that does not open, an Anthropic account's) emptied, so it is not sent.
pub fn open_gemini_signatures(
    form: &mut Request,
    key: Option<ReasoningKey<'_>>,
    counts: &mut ReasoningCounts,
) {
    for message in &mut form.messages {
        for part in &mut message.parts {
            let Part::Thinking { signature, .. } = part else {
                continue;
            };
            if signature.is_empty() {
                continue;
            }
            let opened = key.and_then(|key| {
                let opened = key.key.open_signature(key.client, signature)?;
                (opened.maker.as_deref() == Some(key.connection)).then_some(opened.original)
            });
            match opened {
                Some(original) => {
                    counts.restored += 1;
                    *signature = original;
                }
                None => {
                    counts.left_out += 1;
                    signature.clear();
                }
            }
        }
    }
}

/// Opens reasoning items for one target: the router's key, the client that sent them (a
/// block opens only for the client it was handed to) and the target's connection.
#[derive(Debug, Clone, Copy)]
pub struct ReasoningKey<'a> {
    pub key: &'a SealKey,
    pub client: &'a str,
    pub connection: &'a str,
}

impl ReasoningKey<'_> {
    /// The thinking block an encrypted `encrypted_content` carries, when it was encrypted for
    /// this connection and this client and opens; `None` otherwise (another connection's,
    /// another client's, altered, truncated, another key's, an HMAC seal or anything else) —
    /// the item is left out.
    pub fn open(&self, encrypted_content: &str) -> Option<Value> {
        let opened = self.key.open_carried(self.client, encrypted_content)?;
        if opened.connection != self.connection {
            return None;
        }
        block_from_json(&opened.plaintext)
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

/// The client the tests' carried blocks are handed to.
#[cfg(test)]
pub const TEST_CLIENT: &str = "team-a";

/// `content` (a translated answer's plain carried form) as the node hands it out to
/// [`TEST_CLIENT`] for `connection`.
#[cfg(test)]
pub fn encrypted(key: &SealKey, connection: &str, content: &str) -> String {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let plaintext = engine
        .decode(content.strip_prefix(PREFIX).unwrap())
        .unwrap();
    key.seal_carried(TEST_CLIENT, connection, &plaintext)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_goes_round_only_on_its_own_connection() {
        let key = SealKey::from_secret(b"node secret");
        let block = json!({"type": "thinking", "thinking": "let me see", "signature": "sig-A"});
        let sealed = encrypted(&key, "an-1", &carried(&block));
        let on = |connection| ReasoningKey {
            key: &key,
            client: TEST_CLIENT,
            connection,
        };
        assert_eq!(on("an-1").open(&sealed), Some(block.clone()));
        assert_eq!(on("an-2").open(&sealed), None);
        // Replayed by another client: it does not open.
        let replayed = ReasoningKey {
            client: "team-b",
            ..on("an-1")
        };
        assert_eq!(replayed.open(&sealed), None);
        // Encrypted: neither the text nor the signature shows, in clear or base64.
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for secret in ["let me see", "sig-A"] {
            assert!(!sealed.contains(secret), "{sealed}");
        }
        assert!(!sealed.contains(&carried(&block)[PREFIX.len()..][..16]));
        // Re-tagged with an-2's name: it does not open there, nor anywhere.
        let retagged = sealed.replacen(&engine.encode("an-1"), &engine.encode("an-2"), 1);
        assert_eq!(on("an-2").open(&retagged), None);
        assert_eq!(on("an-1").open(&retagged), None);
        // Another router's key, the bare carried form, the old HMAC seal of it, an OpenAI
        // item: never a block.
        let other = SealKey::from_secret(b"other secret");
        let foreign = ReasoningKey {
            key: &other,
            client: TEST_CLIENT,
            connection: "an-1",
        };
        assert_eq!(foreign.open(&sealed), None);
        assert_eq!(on("an-1").open(&carried(&block)), None);
        assert_eq!(
            on("an-1").open(&key.seal(TEST_CLIENT, "an-1", &carried(&block))),
            None
        );
        assert_eq!(
            on("an-1").open(&key.seal(TEST_CLIENT, "an-1", "gAAAAB")),
            None
        );
        assert_eq!(
            on("an-1").open(&encrypted(
                &key,
                "an-1",
                &carried(&json!({"type": "thinking"}))
            )),
            None
        );
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
