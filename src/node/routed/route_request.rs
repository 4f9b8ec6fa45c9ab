//! What a routed request asks the router (behaviour §10): its combo, format and client, and
//! where it must or would rather go — the connection storing the response it continues, the
//! maker of its encrypted items or of its Gemini `thoughtSignature`s (both hard), or its
//! conversation's affinity group — and its class (behaviour §13: a spare request holds no
//! group).

use std::sync::Arc;

use http::header::HeaderMap;
use quotaroute_actors::policy::affinity::{turn_affinity, TurnAffinity};
use quotaroute_actors::policy::clients::class::{request_class, RequestClass, CLASS_HEADER};
use quotaroute_actors::{AffinityKey, RouteRequest, Router};

use crate::api_error::{ApiError, ApiErrorKind};
use crate::clients::ClientTicket;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::wire::affinity_group::derive_group;
use crate::wire::body_rewrite::RequestInfo;
use crate::wire::encrypted_items::EncryptedItems;
use crate::wire::thought_signatures;
use crate::wire::translate::{Direction, ParsedRequest, TranslateError};

use super::response_binding::{previous_response, previous_response_not_found, Continues};

/// Why a request is answered before it is routed.
pub(super) enum NotAsked {
    /// The router's own error.
    Error(ApiError),
    /// Another client's stored response: answered (400, as this body) as the upstream answers
    /// an id it never stored, and nothing goes upstream (behaviour §11).
    NotFound(Vec<u8>),
}

/// Why some providers cannot carry a request, when they cannot (behaviour §14).
pub(super) type Refusal = Option<(Direction, TranslateError)>;

/// The request the router is asked, the request's encrypted items (behaviour §10), and why
/// some providers cannot carry it (behaviour §14: the 400 when none can).
pub(super) fn ask(
    live: &LiveConfig,
    router: &Router,
    endpoint: Endpoint,
    request_id: &Arc<str>,
    (body, info, headers): (&ParsedRequest, &RequestInfo, &HeaderMap),
    ticket: &ClientTicket,
) -> Result<(RouteRequest, Option<EncryptedTurn>, Refusal), NotAsked> {
    let carry = super::carry::check(live, router, endpoint, (&info.model, body));
    let body = body.body();
    let mut route_request = RouteRequest {
        request_id: Arc::clone(request_id),
        model: Arc::clone(&info.model),
        format: endpoint.format(),
        translatable: endpoint.translatable(),
        cannot_carry: carry.providers,
        only_connection: None,
        encrypted_maker: None,
        affinity: None,
        client: ticket.tag().clone(),
    };
    // Behaviour §13: a spare request, by the client's class or its header; a header the client
    // may not send is refused (never ignored: the sender meant to spend only spare quota).
    route_request.client.class = request_class(
        ticket.tag().class,
        ticket.allows_spare_header(),
        headers.get(CLASS_HEADER).map(|value| value.as_bytes()),
    )
    .map_err(|refused| {
        NotAsked::Error(ApiError::new(
            ApiErrorKind::InvalidRequest,
            refused.to_string(),
        ))
    })?;
    let spare = route_request.client.class == RequestClass::Spare;
    // Encrypted items (behaviour §10) name the connection that made them, in their seal.
    let encrypted = if endpoint.is_responses() {
        match previous_response(router, body, &ticket.tag().id) {
            Continues::Nothing => {}
            Continues::On(connection) => route_request.only_connection = Some(connection),
            Continues::NotFound(id) => {
                return Err(NotAsked::NotFound(previous_response_not_found(&id)))
            }
            Continues::Translated => {
                return Err(NotAsked::Error(ApiError::new(
                    ApiErrorKind::UnsupportedParameter,
                    "parameter `previous_response_id` names a response served through \
                     translation, which is not stored; send the whole input again",
                )));
            }
        }
        EncryptedItems::scan(body, &live.seal_key, &ticket.tag().id).map(EncryptedTurn::new)
    } else {
        None
    };
    // A Gemini turn's sealed `thoughtSignature`s name their maker like encrypted items
    // (behaviour §15).
    let client = &route_request.client.id;
    let signatures_maker = endpoint
        .is_gemini()
        .then(|| thought_signatures::maker(body, &live.seal_key, client))
        .flatten();
    // The strongest affinity that holds: `previous_response_id`'s connection, the maker of
    // the encrypted items or signatures, or the conversation's group.
    match turn_affinity(
        route_request.only_connection.as_deref(),
        encrypted
            .as_ref()
            .and_then(|turn| turn.items.maker())
            .or(signatures_maker.as_deref()),
        // A spare request never holds a conversation group (behaviour §13); hard affinities
        // (a stored response, encrypted items' or signatures' maker) still hold.
        live.affinity.enabled && !spare,
        || {
            derive_group(
                client,
                body,
                &info.prompt,
                headers,
                live.affinity.min_prompt_bytes,
            )
        },
    ) {
        TurnAffinity::EncryptedMaker(maker) => {
            route_request.encrypted_maker = Some(maker.to_owned());
        }
        TurnAffinity::Group(group) => {
            route_request.affinity = Some(AffinityKey {
                group: group.digest,
                client: client.clone(),
            });
        }
        TurnAffinity::StoredResponse(_) | TurnAffinity::None => {}
    }
    Ok((route_request, encrypted, carry.refusal))
}
