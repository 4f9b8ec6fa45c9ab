//! A request's encrypted items across its tries (behaviour §10 "Encrypted items"): each try
//! sends its target only the items that target can read (`EncryptedItems::body_for`), and a 400
//! `invalid_encrypted_content` that still happens (an item the router could not attribute, or a
//! key rotated since it was sealed) is retried once on the same target with every encrypted
//! item left out — the turn loses that hidden reasoning, not the conversation. That second
//! request is not a new attempt (nothing fails over) but it spends `max_upstream_requests`,
//! like the retry after a 401 to a refreshed credential. The same holds for thinking blocks a
//! translated Responses request carried back to an Anthropic-format account (behaviour §14):
//! a 400 refusing their signature is retried once on the same target without them.
//!
//! A Gemini request's refused `thoughtSignature`s are `gemini_signatures`' (the same rule).
//!
//! Owns only that; the try itself is `credential_retry`'s and `attempt`'s.

use std::time::Duration;

use quotaroute_actors::{Decision, RoutedTarget};
use quotaroute_journal::OutcomeClass;

use crate::node::attempt::{Attempted, TryContext};
use crate::node::credential_retry;
use crate::node::gemini_signatures;

/// The upstream's code for an encrypted item it cannot read.
const INVALID_ENCRYPTED_CONTENT: &str = "invalid_encrypted_content";

/// One try of `decision`'s current target and, when it is refused with 400
/// `invalid_encrypted_content` while it carried encrypted items (or, translated, with a 400
/// about a thinking signature while it carried thinking blocks), one more without them.
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    decision: &mut Decision,
    target: &RoutedTarget,
    upstream_time: &mut Duration,
) -> Attempted {
    let tried = credential_retry::try_target(ctx, decision, target, upstream_time).await;
    if ctx.endpoint.is_gemini() {
        return gemini_signatures::retry_refused(ctx, decision, target, upstream_time, tried).await;
    }
    let Some(encrypted) = ctx.encrypted else {
        return tried;
    };
    let refused = match &tried.translation {
        // Translated: the items went up as thinking blocks (or not at all).
        Some(translation) => translation.thinking_restored > 0 && refuses_signature(&tried),
        None => {
            let carried = !encrypted.leaves_all_out()
                && (encrypted.items.unreadable_by(&target.connection, false) as usize)
                    < encrypted.items.len();
            carried && refuses_encrypted_content(&tried)
        }
    };
    if !refused || !decision.retry_current() {
        return tried;
    }
    encrypted.leave_all_out();
    tracing::debug!(
        request_id = ctx.request_id,
        connection = &*target.connection,
        items = encrypted.items.len(),
        "400 refusing encrypted items or thinking signatures: the same target again without them"
    );
    credential_retry::try_target(ctx, decision, target, upstream_time).await
}

fn refuses_encrypted_content(tried: &Attempted) -> bool {
    tried.result.class == OutcomeClass::ClientError
        && tried.result.status == Some(400)
        && tried.result.error_code.as_deref() == Some(INVALID_ENCRYPTED_CONTENT)
}

/// Anthropic's 400 for a thinking block whose signature it cannot verify (`invalid_request_error`,
/// "…: Invalid `signature` in `thinking` block").
fn refuses_signature(tried: &Attempted) -> bool {
    tried.result.class == OutcomeClass::ClientError
        && tried.result.status == Some(400)
        && tried
            .result
            .message
            .as_deref()
            .is_some_and(|message| message.contains("signature"))
}
