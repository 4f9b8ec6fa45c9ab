//! Behaviour §14, a second routing pass: no target of the combo runs web search (Codex sends
//! its `web_search` tool with every turn), so the request is asked again without it, and the
//! tool is named in `x-quotaroute-dropped` rather than every turn refused. Only when the first
//! pass found no target that can carry the request, so a combo with one that can keeps it.

use bytes::Bytes;
use http::header::HeaderMap;
use quotaroute_actors::{Decision, RouteError, Router};

use crate::clients::ClientTicket;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::wire::body_rewrite::RequestInfo;
use crate::wire::translate::{search_left_out, ParsedRequest};

use super::route_request::{self, Refusal};

/// The request routed again without its web search tools.
pub(super) struct WithoutSearch {
    pub routed: Result<Decision, RouteError>,
    pub encrypted: Option<EncryptedTurn>,
    pub refusal: Refusal,
    /// The client's body less the tools.
    pub body: Bytes,
    /// What was left out, for `x-quotaroute-dropped`.
    pub left_out: Vec<String>,
}

/// The second pass, when `routed` (the first) found no target that can carry a Responses
/// request and the request has web search tools to leave out.
pub(super) async fn route_without_search(
    live: &LiveConfig,
    router: &Router,
    endpoint: Endpoint,
    request_id: &std::sync::Arc<str>,
    (body, info, headers): (&Bytes, &RequestInfo, &HeaderMap),
    ticket: &ClientTicket,
) -> Option<WithoutSearch> {
    if !endpoint.is_responses() {
        return None;
    }
    let (body, left_out) = search_left_out::without_web_search(body)?;
    let parsed = ParsedRequest::new(body.clone());
    let (route_request, encrypted, refusal) = route_request::ask(
        live,
        router,
        endpoint,
        request_id,
        (&parsed, info, headers),
        ticket,
    )
    .ok()?;
    let routed = router.route(route_request).await;
    Some(WithoutSearch {
        routed,
        encrypted,
        refusal,
        body,
        left_out,
    })
}
