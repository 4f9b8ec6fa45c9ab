//! One target tried (behaviour §3, §4, §10, §14): sent with its connection's credential and,
//! while policy's same-target rules (`policy::same_target_retry`) answer how it ended, sent to
//! the same target again with the rule's change made — the credential refreshed after a 401
//! (one load shared by every request that got it), the encrypted items or the thinking blocks
//! left out after a 400 refusing them (the turn loses that hidden reasoning, not the
//! conversation), a Gemini request's `thoughtSignature`s left out after Google refused them,
//! another API of the host after a 404 saying the route does not exist. A retry is not a new attempt of the client's (nothing fails over) but it is
//! an upstream request: it spends `max_upstream_requests` (`Decision::retry_current`). A
//! refresh that fails after the 401 fails the try as `network` (the connection cools down and
//! is tried again later, when its source may work again); a credential that cannot be had at
//! all fails it the same way without sending anything.
//!
//! Owns the loop and the changes' I/O. Which refusal is retried, how and how often is policy's;
//! one request is `send`'s; other targets are the decision's plan's.

use std::time::Duration;

use bytes::Bytes;

use quotaroute_actors::policy::classify::AttemptFailure;
use quotaroute_actors::policy::same_target_retry::{Carried, Change, SameTargetRetries, WhenSpent};
use quotaroute_actors::{Decision, RoutedTarget};

use crate::credentials::credential::Credential;
use crate::credentials::error::CredentialError;
use crate::credentials::Trigger;
use crate::node::gemini_signatures;
use crate::wire::thought_signatures;

use super::api_unserved;
use super::send::send;
use super::shape::{unanswered, unanswered_openly, Attempted, TryContext};

/// Tries `decision`'s current target until it serves, fails, or no same-target rule (or no
/// upstream request of the budget) is left for how it ended.
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    decision: &mut Decision,
    target: &RoutedTarget,
    upstream_time: &mut Duration,
) -> Attempted {
    let Some(credential) = ctx.live.credentials.get(&target.connection) else {
        return unanswered_openly(AttemptFailure::NotSent, None, "target left the config");
    };
    // On the stack, like everything the loop keeps between requests: a retry allocates
    // nothing the first request did not.
    let mut retries = SameTargetRetries::default();
    // The credential a refresh gave for the next request; otherwise the current one is used.
    let mut refreshed = None;
    // The client's body without its `thoughtSignature`s, once a rule left them out.
    let mut without_signatures = None;
    loop {
        // A count bump when set, so the loop may set it again below.
        let body_now: Option<Bytes> = without_signatures.clone();
        let stripped;
        let ctx = match &body_now {
            Some(body) => {
                stripped = TryContext {
                    client_body: body,
                    method: ctx.method.clone(),
                    ..*ctx
                };
                &stripped
            }
            None => ctx,
        };
        let loaded = match refreshed.take() {
            Some(fresh) => fresh,
            None => match credential.usable().await {
                Ok(loaded) => loaded,
                Err(error) => return unavailable(target, &error),
            },
        };
        let tried = send(
            ctx,
            target,
            decision.attempt(),
            &loaded.secret,
            upstream_time,
        )
        .await;
        let carried = carried(ctx, target, credential, &tried);
        let Some(rule) = retries.after_try(&tried.result, carried) else {
            return tried;
        };
        match rule.change {
            Change::RefreshCredential => {
                match credential
                    .refresh(Trigger::Unauthorized, Some(loaded.generation))
                    .await
                {
                    Ok(fresh) if fresh.secret != loaded.secret => refreshed = Some(fresh),
                    // The source gives the very credential that got the 401: the 401 stands.
                    Ok(_) => return tried,
                    Err(error) => return refresh_failed(&error),
                }
            }
            Change::LeaveEncryptedItemsOut | Change::LeaveThinkingOut => {
                if let Some(encrypted) = ctx.encrypted {
                    encrypted.leave_all_out();
                }
            }
            Change::LeaveThoughtSignaturesOut => {
                match gemini_signatures::without_signatures(ctx.client_body) {
                    Some(body) => without_signatures = Some(body),
                    None => return tried,
                }
            }
            Change::ThroughAnotherApi => api_unserved::learn(ctx, target, &tried),
        }
        if !decision.retry_current() {
            return match rule.when_spent {
                WhenSpent::Stands => tried,
                // The change cured the refusal; only this request's budget is spent.
                WhenSpent::NotSent => unanswered_openly(
                    AttemptFailure::NotSent,
                    tried.result.status,
                    spent(rule.change),
                ),
            };
        }
        tracing::debug!(
            request_id = ctx.request_id,
            connection = &*target.connection,
            refused = rule.refusal.as_str(),
            change = rule.change.as_str(),
            "the same target again"
        );
    }
}

/// What the try that ended as `tried` carried that a refusal can be about.
fn carried(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    credential: &Credential,
    tried: &Attempted,
) -> Carried {
    let encrypted = ctx.encrypted;
    Carried {
        refreshable_credential: credential.refreshable(),
        // Translated, the items went up as thinking blocks (or not at all).
        encrypted_items: tried.translation.is_none()
            && encrypted.is_some_and(|turn| turn.sends_any_to(&target.connection)),
        thinking_signatures: encrypted.is_some()
            && tried
                .translation
                .as_ref()
                .is_some_and(|translation| translation.thinking_restored > 0),
        // Only looked for when Google refused something (a byte search of the body first):
        // the signatures this target got (sealed ones of other connections were left out).
        thought_signatures: tried.result.status == Some(400)
            && ctx.endpoint.is_gemini()
            && tried.translation.is_none()
            && gemini_signatures::carries_signatures(ctx.client_body)
            && thought_signatures::sends_any_to(
                ctx.client_body,
                &ctx.live.seal_key,
                &ctx.seal_client(),
                &target.connection,
            ),
        another_api: api_unserved::another_api(ctx, target, tried),
    }
}

/// A credential that cannot be had: the try fails without sending anything.
fn unavailable(target: &RoutedTarget, error: &CredentialError) -> Attempted {
    unanswered(
        AttemptFailure::NotSent,
        None,
        &format!("credential unavailable: {error}"),
        &format!(
            "the credential of connection `{}` could not be loaded: {}",
            target.connection,
            error.public()
        ),
    )
}

/// A refresh after a 401 that failed.
fn refresh_failed(error: &CredentialError) -> Attempted {
    unanswered(
        AttemptFailure::NotSent,
        Some(401),
        &format!("upstream answered 401 and the credential could not be refreshed: {error}"),
        &format!(
            "upstream answered 401 and the credential could not be refreshed: {}",
            error.public()
        ),
    )
}

/// Why a cured refusal ends the try: no upstream request is left for the retry.
fn spent(change: Change) -> &'static str {
    match change {
        Change::RefreshCredential => {
            "upstream answered 401 to a replaced credential and no upstream request is left to retry with the new one"
        }
        Change::LeaveEncryptedItemsOut | Change::LeaveThinkingOut => {
            "upstream refused the request's encrypted items and no upstream request is left to retry without them"
        }
        Change::LeaveThoughtSignaturesOut => {
            "upstream refused the request's thought signatures and no upstream request is left to retry without them"
        }
        Change::ThroughAnotherApi => {
            "the host does not serve this API and no upstream request is left to try another"
        }
    }
}
