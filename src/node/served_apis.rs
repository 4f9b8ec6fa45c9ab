//! The generation APIs a provider's hosts serve now (behaviour §14): its configured `apis`
//! less those its hosts were found not to serve (a 404 saying the route does not exist,
//! learned by the router). Never narrowed to nothing: a host that answers route-404 for every
//! API it is said to serve is misconfigured, and its 404s then reach the client as they are.

use std::borrow::Cow;

use quotaroute_actors::Router;

use crate::wire::translate::Api;

/// `apis` (the provider `provider`'s configured ones) as its hosts serve them now.
pub fn served_apis<'a>(router: &Router, provider: &str, apis: &'a [Api]) -> Cow<'a, [Api]> {
    if !apis
        .iter()
        .any(|api| router.api_unserved(provider, api.name()))
    {
        return Cow::Borrowed(apis);
    }
    let served: Vec<Api> = apis
        .iter()
        .copied()
        .filter(|api| !router.api_unserved(provider, api.name()))
        .collect();
    if served.is_empty() {
        return Cow::Borrowed(apis);
    }
    Cow::Owned(served)
}
