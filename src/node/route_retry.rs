//! A try refused with a 404 that says the route does not exist (behaviour §14): the host does
//! not serve that API. The router learns it (the provider's `apis` narrowed, journaled as
//! `api_unserved`) and the same target is tried again through another API it serves — a
//! translation now — so the request is served and no (connection, model) is locked: the
//! model is there, the path was not. Like the retry after a refused thinking signature it is
//! not a new attempt but spends `max_upstream_requests`. A route-404 on a path that is no
//! generation API (`/responses/compact`, `/messages/count_tokens`) teaches nothing and goes
//! back to the client as it is, still without a lockout.
//!
//! Owns only that; the try itself is `encrypted_retry`'s and `attempt`'s.

use std::time::Duration;

use quotaroute_actors::{Decision, RoutedTarget};
use quotaroute_journal::ApiUnserved;

use crate::node::attempt::{Attempted, TryContext};
use crate::node::encrypted_retry;
use crate::node::served_apis::served_apis;
use crate::wire::missing_route::ROUTE_NOT_FOUND;
use crate::wire::translate::Api;

/// One try of `decision`'s current target and, while it is refused with a route-404 for an
/// API its provider is said to serve beside others, one more through another of them.
pub(crate) async fn try_target(
    ctx: &TryContext<'_>,
    decision: &mut Decision,
    target: &RoutedTarget,
    upstream_time: &mut Duration,
) -> Attempted {
    let mut tried = encrypted_retry::try_target(ctx, decision, target, upstream_time).await;
    // Each API is learned at most once, so this ends after as many tries as there are APIs.
    for _ in Api::ALL {
        let Some(api) = missing_api(ctx, &tried) else {
            break;
        };
        let (Some(router), Some(provider)) =
            (ctx.app.router(), ctx.live.providers.get(&*target.provider))
        else {
            break;
        };
        let served = served_apis(router, &target.provider, &provider.apis);
        // Only an API it is said to serve, and never its last one.
        if !served.contains(&api) || served.len() < 2 {
            break;
        }
        router.learn_api_unserved(ApiUnserved {
            request_id: ctx.request_id.to_owned(),
            provider: target.provider.to_string(),
            connection: target.connection.to_string(),
            api: api.name().to_owned(),
            path: format!("{}{}", base_path(&provider.base_url), api.path()),
        });
        tracing::warn!(
            request_id = ctx.request_id,
            provider = &*target.provider,
            connection = &*target.connection,
            api = api.name(),
            "the host answered 404 for the route: it does not serve this API; tried again through another"
        );
        if !decision.retry_current() {
            break;
        }
        tried = encrypted_retry::try_target(ctx, decision, target, upstream_time).await;
    }
    tried
}

/// The generation API a try went up in when its host answered that the route does not exist.
fn missing_api(ctx: &TryContext<'_>, tried: &Attempted) -> Option<Api> {
    let result = &tried.result;
    if result.status != Some(404) || result.error_code.as_deref() != Some(ROUTE_NOT_FOUND) {
        return None;
    }
    match &tried.translation {
        Some(translation) => Some(translation.direction.target),
        None => ctx.endpoint.api(),
    }
}

/// The path part of a `base_url` (`/v1` of `https://host/v1`), what a route-404 names.
fn base_path(base_url: &str) -> &str {
    let after_scheme = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    after_scheme.find('/').map_or("", |at| &after_scheme[at..])
}
