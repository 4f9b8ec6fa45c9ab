//! A try with the connection's current credential, and what a 401 does to a credential that
//! can be refreshed (issue 13): load it again once — one flight shared by every request that
//! got the 401 — and try the same target once more with the fresh one. That second request is
//! not a new attempt of the client's (nothing fails over) but it is an upstream request: it
//! spends `max_upstream_requests`. Only a 401 to a fresh credential goes on to the
//! classification (behaviour §4: disabled). A refresh that fails after the 401 fails the try
//! as `network` (the connection cools down and is tried again later, when its source may work
//! again), and so does a 401 whose retry the spent `max_upstream_requests` forbids; a
//! credential that cannot be had at all fails it the same way without sending anything.
//!
//! Owns only that; the try itself is `attempt`'s, the loads are `credentials`'.

use std::time::Duration;

use quotaroute_actors::policy::classify::AttemptFailure;
use quotaroute_actors::{Decision, RoutedTarget};
use quotaroute_journal::OutcomeClass;

use crate::credentials::Trigger;
use crate::node::attempt::{self, unanswered, unanswered_openly, Attempted, TryContext};

/// One try of `decision`'s current target, with at most one refresh-and-retry after a 401.
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    decision: &mut Decision,
    target: &RoutedTarget,
    upstream_time: &mut Duration,
) -> Attempted {
    let Some(credential) = ctx.live.credentials.get(&target.connection) else {
        return unanswered_openly(AttemptFailure::NotSent, None, "target left the config");
    };
    let sent = match credential.usable().await {
        Ok(loaded) => loaded,
        Err(error) => {
            return unanswered(
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
    };
    let tried =
        attempt::try_target(ctx, target, decision.attempt(), &sent.secret, upstream_time).await;
    if !credential.refreshable() || !unauthorized(&tried) {
        return tried;
    }
    let fresh = match credential
        .refresh(Trigger::Unauthorized, Some(sent.generation))
        .await
    {
        Ok(fresh) if fresh.secret != sent.secret => fresh,
        // The source gives the very credential that got the 401: the 401 stands.
        Ok(_) => return tried,
        Err(error) => {
            return unanswered(
                AttemptFailure::NotSent,
                Some(401),
                &format!(
                    "upstream answered 401 and the credential could not be refreshed: {error}"
                ),
                &format!(
                    "upstream answered 401 and the credential could not be refreshed: {}",
                    error.public()
                ),
            )
        }
    };
    if !decision.retry_current() {
        // The credential is fine now; only this request's budget is spent: no disable.
        return unanswered_openly(
            AttemptFailure::NotSent,
            Some(401),
            "upstream answered 401 to a replaced credential and no upstream request is left to retry with the new one",
        );
    }
    tracing::debug!(
        request_id = ctx.request_id,
        connection = &*target.connection,
        generation = fresh.generation,
        "401 to a replaced credential: the same target again with the fresh one"
    );
    attempt::try_target(
        ctx,
        target,
        decision.attempt(),
        &fresh.secret,
        upstream_time,
    )
    .await
}

fn unauthorized(tried: &Attempted) -> bool {
    tried.result.class == OutcomeClass::AuthFailed && tried.result.status == Some(401)
}
