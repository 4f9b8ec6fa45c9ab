//! A Gemini request carrying `thoughtSignature`s that the serving account refuses (400
//! "Corrupted thought signature.": another account made them, behaviour §15 — its maker was
//! locked or disabled, so the turn went elsewhere) is tried once more on the same target with
//! every signature left out: the turn loses that hidden reasoning, not the conversation. As in
//! `encrypted_retry`, that second request is not a new attempt (nothing fails over) but it
//! spends `max_upstream_requests`.

use std::time::Duration;

use bytes::Bytes;
use quotaroute_actors::{Decision, RoutedTarget};
use quotaroute_journal::OutcomeClass;
use serde_json::Value;

use crate::node::attempt::{Attempted, TryContext};
use crate::node::credential_retry;

/// The member an account's signature rides in, on any part.
const SIGNATURE: &str = "thoughtSignature";

/// `tried` (a Gemini try), or — when it was refused for a signature its body carried — one
/// more try on the same target without them.
pub(crate) async fn retry_refused(
    ctx: &TryContext<'_>,
    decision: &mut Decision,
    target: &RoutedTarget,
    upstream_time: &mut Duration,
    tried: Attempted,
) -> Attempted {
    if !refuses_signature(&tried) {
        return tried;
    }
    let Some(stripped) = without_signatures(ctx.client_body) else {
        return tried;
    };
    if !decision.retry_current() {
        return tried;
    }
    tracing::debug!(
        request_id = ctx.request_id,
        connection = &*target.connection,
        "400 refusing thought signatures: the same target again without them"
    );
    let again = TryContext {
        client_body: &stripped,
        method: ctx.method.clone(),
        ..*ctx
    };
    credential_retry::try_target(&again, decision, target, upstream_time).await
}

/// Google's 400 for a signature it cannot verify ("Corrupted thought signature.").
fn refuses_signature(tried: &Attempted) -> bool {
    tried.result.class == OutcomeClass::ClientError
        && tried.result.status == Some(400)
        && tried.result.message.as_deref().is_some_and(|message| {
            let message = message.to_ascii_lowercase();
            message.contains("thought signature") || message.contains("thought_signature")
        })
}

/// `body` without any `thoughtSignature` member; `None` when it has none (or is not JSON).
fn without_signatures(body: &[u8]) -> Option<Bytes> {
    if !body
        .windows(SIGNATURE.len())
        .any(|w| w == SIGNATURE.as_bytes())
    {
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
