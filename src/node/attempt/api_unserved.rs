//! A try refused with a 404 that says the route does not exist (behaviour §14): the host does
//! not serve that API, the model is there. Whether another API of its provider can answer it
//! (`another_api`, what policy's `RouteNotServed` rule asks) and the learning itself: the
//! provider's `apis` narrowed for the router (journaled `api_unserved`, shown in `/admin/state`),
//! so the next try of the same target goes up, translated, through another API it serves. A
//! route-404 on a path that is no generation API (`/responses/compact`,
//! `/messages/count_tokens`) teaches nothing and goes back to the client as it is.
//!
//! Owns only that; the loop that retries is `try_target`'s, the rule is policy's.

use quotaroute_actors::policy::same_target_retry::ROUTE_NOT_FOUND;
use quotaroute_actors::RoutedTarget;
use quotaroute_journal::ApiUnserved;

use crate::node::served_apis::served_apis;
use crate::wire::translate::Api;

use super::shape::{Attempted, TryContext};

/// Whether `tried` ended with a route-404 for an API its provider is said to serve beside
/// at least one other (never narrowed to nothing).
pub(super) fn another_api(ctx: &TryContext<'_>, target: &RoutedTarget, tried: &Attempted) -> bool {
    missing_api(ctx, tried).is_some_and(|api| {
        let (Some(router), Some(provider)) =
            (ctx.app.router(), ctx.live.providers.get(&*target.provider))
        else {
            return false;
        };
        let served = served_apis(router, &target.provider, &provider.apis);
        served.contains(&api) && served.len() >= 2
    })
}

/// The router learns that `target`'s provider does not serve the API `tried` went up in.
pub(super) fn learn(ctx: &TryContext<'_>, target: &RoutedTarget, tried: &Attempted) {
    let (Some(api), Some(router), Some(provider)) = (
        missing_api(ctx, tried),
        ctx.app.router(),
        ctx.live.providers.get(&*target.provider),
    ) else {
        return;
    };
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
