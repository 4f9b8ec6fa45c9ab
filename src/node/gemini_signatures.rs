//! A Gemini request's `thoughtSignature`s (behaviour §15): whether a body carries any, and the
//! body without them — the change policy's `ThoughtSignature` rule makes when the serving
//! account refuses them (400 "Corrupted thought signature.": another account made them, its
//! maker was locked or disabled, so the turn went elsewhere). The turn loses that hidden
//! reasoning, not the conversation; the retry is `attempt::try_target`'s loop.

use bytes::Bytes;
use serde_json::Value;

/// The member an account's signature rides in, on any part.
const SIGNATURE: &str = "thoughtSignature";

/// Whether a Gemini request's `body` carries any `thoughtSignature` (a byte search, no parse).
pub(crate) fn carries_signatures(body: &[u8]) -> bool {
    body.windows(SIGNATURE.len())
        .any(|w| w == SIGNATURE.as_bytes())
}

/// `body` without any `thoughtSignature` member; `None` when it has none (or is not JSON).
pub(crate) fn without_signatures(body: &[u8]) -> Option<Bytes> {
    if !carries_signatures(body) {
        return None;
    }
    let mut value: Value = serde_json::from_slice(body).ok()?;
    let removed = strip(&mut value);
    (removed > 0).then(|| serde_json::to_vec(&value).ok().map(Bytes::from))?
}

/// Removes every `thoughtSignature` member under `value`; how many.
fn strip(value: &mut Value) -> usize {
    match value {
        Value::Object(members) => {
            let here = usize::from(members.remove(SIGNATURE).is_some());
            here + members.values_mut().map(strip).sum::<usize>()
        }
        Value::Array(items) => items.iter_mut().map(strip).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_is_left_out_and_nothing_else() {
        let body = br#"{"contents":[{"role":"model","parts":[{"text":"t","thought":true,"thoughtSignature":"c2ln"},{"functionCall":{"name":"f","args":{}},"thoughtSignature":"c2lnMg=="}]}]}"#;
        let out: Value = serde_json::from_slice(&without_signatures(body).unwrap()).unwrap();
        assert_eq!(
            out,
            serde_json::json!({"contents":[{"role":"model","parts":[{"text":"t","thought":true},{"functionCall":{"name":"f","args":{}}}]}]})
        );
        assert_eq!(without_signatures(br#"{"contents":[]}"#), None);
    }
}
