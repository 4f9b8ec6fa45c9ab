//! A Responses request that continues a response the router kept (`[responses] store = true`,
//! behaviour §14): its body becomes the kept conversation and its own input, parsed again,
//! before anything is routed — so it routes, and translates, as any request. One naming
//! another client's (or an expired, or unknown) kept response is answered as OpenAI answers
//! an id it never stored.

use bytes::Bytes;
use quotaroute_actors::{AffinityKey, RouteRequest};

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::endpoint::Endpoint;
use crate::node::kept_responses::{continue_kept, kept_id_for, Continued};
use crate::node::live::LiveConfig;
use crate::wire::affinity_group::kept_chain_group;
use crate::wire::body_rewrite::{parse_request_for, PromptScan, RequestInfo};

use super::response_binding::previous_response_not_found;
use super::route_request::NotAsked;

/// A request's body and parse, and what it has to do with kept responses.
pub(super) struct Turn {
    pub body: Bytes,
    pub info: RequestInfo,
    pub kept: Kept,
}

/// A request's kept responses: the one it continues, the id its answer is kept under, the
/// chain it joins.
pub(super) struct Kept {
    /// The kept response it continues.
    pub continues: Option<String>,
    /// The id its answer is kept under, when it is kept.
    pub id: Option<String>,
    /// The first response of the kept chain it joins: the one it continues, or the one its
    /// answer starts.
    pub chain: Option<String>,
}

impl Turn {
    /// `body` continuing `continued` (`(id, chain)`), its answer kept under `kept_id`.
    fn new(
        (body, info): (Bytes, RequestInfo),
        continued: Option<(String, String)>,
        kept_id: Option<String>,
    ) -> Turn {
        let (continues, chain) = continued.unzip();
        Turn {
            body,
            info,
            kept: Kept {
                continues,
                chain: chain.or_else(|| kept_id.clone()),
                id: kept_id,
            },
        }
    }
}

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
        return Ok(Turn::new((body, info), None, None));
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
        Continued::AsItCame => {
            let kept_id = kept_id_for(app, &body);
            Ok(Turn::new((body, info), None, kept_id))
        }
        Continued::NotFound(id) => Err(NotAsked::NotFound(previous_response_not_found(&id))),
        Continued::Expanded {
            body: expanded,
            id,
            chain,
        } => {
            let scan = PromptScan::for_body(
                live.affinity.enabled,
                expanded.len(),
                live.affinity.min_prompt_bytes,
            );
            let info = parse_request_for(&expanded, scan)
                .map_err(|error| NotAsked::Error(ApiError::from(error)))?;
            let kept_id = kept_id_for(app, &expanded);
            Ok(Turn::new((expanded, info), Some((id, chain)), kept_id))
        }
    }
}

/// A turn of a kept chain (`chain`: its first response) keeps to the connection the chain
/// is on where it can (behaviour §10): its conversation is the chain, a soft affinity group,
/// unless a hard one holds (the connection that made its encrypted items) or affinity is off.
pub(super) fn follow_chain(
    route_request: &mut RouteRequest,
    chain: Option<&str>,
    live: &LiveConfig,
) {
    let Some(root) = chain else {
        return;
    };
    if !live.affinity.enabled
        || route_request.only_connection.is_some()
        || route_request.encrypted_maker.is_some()
    {
        return;
    }
    let client = route_request.client.id.clone();
    route_request.affinity = Some(AffinityKey {
        group: kept_chain_group(&client, root).digest,
        client,
    });
}
