//! OpenAI's encrypted items, as the mock makes and checks them: a reasoning item's
//! `encrypted_content` (when the request has `include: ["reasoning.encrypted_content"]`) and a
//! compaction item's (`POST …/responses/compact`) can be read only by the account (key) that
//! made them; any other key's request that carries one gets the real 400
//! `invalid_encrypted_content` (behaviour §10 "Encrypted items").
//!
//! Owns the content's form and the check; never decides the answer's other fields.

use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Real OpenAI encrypted content is a Fernet token: base64url that starts `gAAAAA`.
const FERNET_PREFIX: &str = "gAAAAA";

/// The organisation a key belongs to, as the mock tells them apart: a digest of the key (never
/// the key itself: it would be masked out of what the router relays).
pub(crate) fn organisation(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The encrypted content of item `item_id` made for `key`.
pub(crate) fn seal(key: &str, item_id: &str) -> String {
    let plain = format!("{}|{item_id}|mock encrypted reasoning", organisation(key));
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(plain.as_bytes());
    format!("{FERNET_PREFIX}{encoded}")
}

/// The organisation that made `content`, when the mock can read it at all.
fn maker(content: &str) -> Option<String> {
    let encoded = content.strip_prefix(FERNET_PREFIX)?;
    let plain = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()?;
    let plain = String::from_utf8(plain).ok()?;
    plain.split('|').next().map(str::to_owned)
}

/// The first item of the request's `input` whose `encrypted_content` `key` cannot read: its id
/// (or its type when it has none), as OpenAI names it in the 400.
pub(crate) fn unreadable_item(body: &Value, key: &str) -> Option<String> {
    let items = body.get("input")?.as_array()?;
    let ours = organisation(key);
    items.iter().find_map(|item| {
        let content = item.get("encrypted_content")?.as_str()?;
        if maker(content).as_deref() == Some(ours.as_str()) {
            return None;
        }
        Some(
            item.get("id")
                .and_then(Value::as_str)
                .or_else(|| item.get("type").and_then(Value::as_str))
                .unwrap_or("item")
                .to_owned(),
        )
    })
}

/// Whether the request asked for reasoning items to carry their encrypted content.
pub(crate) fn asks_for_encrypted_reasoning(body: &Value) -> bool {
    body.get("include")
        .and_then(Value::as_array)
        .is_some_and(|include| {
            include
                .iter()
                .any(|entry| entry.as_str() == Some("reasoning.encrypted_content"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_key_that_made_an_item_can_read_it() {
        let made = seal("sk-a", "rs_1");
        assert!(made.starts_with("gAAAAA"));
        assert!(!made.contains("sk-a"));
        let body = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": made},
        ]});
        assert_eq!(unreadable_item(&body, "sk-a"), None);
        assert_eq!(unreadable_item(&body, "sk-b").as_deref(), Some("rs_1"));
        let foreign =
            json!({"input": [{"type": "compaction", "encrypted_content": "gAAAAAnot-ours"}]});
        assert_eq!(
            unreadable_item(&foreign, "sk-a").as_deref(),
            Some("compaction")
        );
        assert_eq!(unreadable_item(&json!({"input": "text"}), "sk-a"), None);
    }

    #[test]
    fn include_names_encrypted_reasoning() {
        assert!(asks_for_encrypted_reasoning(
            &json!({"include": ["reasoning.encrypted_content"]})
        ));
        assert!(!asks_for_encrypted_reasoning(&json!({"include": []})));
        assert!(!asks_for_encrypted_reasoning(&json!({})));
    }
}
