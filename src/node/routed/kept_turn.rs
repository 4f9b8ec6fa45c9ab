//! A Responses request that continues a response the router kept (`[responses] store = true`,
//! behaviour §14): its body becomes the kept conversation and its own input, parsed again,
//! before anything is routed — so it routes, and translates, as any request. One naming
//! another client's (or an expired, or unknown) kept response is answered as OpenAI answers
//! an id it never stored.

use bytes::Bytes;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::endpoint::Endpoint;
use crate::node::kept_responses::{continue_kept, Continued};
use crate::node::live::LiveConfig;
use crate::wire::body_rewrite::{parse_request_for, PromptScan, RequestInfo};

use super::response_binding::previous_response_not_found;
use super::route_request::NotAsked;

/// A request's body and parse, and the kept response it continues (`None`: none).
pub(super) type Turn = (Bytes, RequestInfo, Option<String>);

/// `body` and its parse, expanded when it continues a kept response of `client`'s.
pub(super) fn expand(
    app: &AppState,
    live: &LiveConfig,
    endpoint: Endpoint,
    (body, info): (Bytes, RequestInfo),
    client: &str,
) -> Result<Turn, NotAsked> {
    let (Endpoint::Responses, Some(store), Some(router)) =
        (endpoint, app.response_store(), app.router())
    else {
        return Ok((body, info, None));
    };
    let continued =
        continue_kept(&store, &body, client, router.clock().now_ms()).map_err(|error| {
            tracing::warn!(%error, "the response store could not be read");
            NotAsked::Error(ApiError::new(
                ApiErrorKind::UpstreamError,
                "the response store could not be read",
            ))
        })?;
    match continued {
        Continued::AsItCame => Ok((body, info, None)),
        Continued::NotFound(id) => Err(NotAsked::NotFound(previous_response_not_found(&id))),
        Continued::Expanded { body: expanded, id } => {
            let scan = PromptScan::for_body(
                live.affinity.enabled,
                expanded.len(),
                live.affinity.min_prompt_bytes,
            );
            let info = parse_request_for(&expanded, scan)
                .map_err(|error| NotAsked::Error(ApiError::from(error)))?;
            Ok((expanded, info, Some(id)))
        }
    }
}
