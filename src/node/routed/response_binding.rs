//! Stored-response placement (behaviour §10, §11): a Responses request that continues a
//! stored response (`previous_response_id`) goes to the connection that stores it, when it is
//! the client's own; a stored response the router hands out is bound to its connection
//! (journaled `response_bound`) before the client sees its id.

use quotaroute_actors::{RoutedTarget, Router};
use quotaroute_journal::ResponseBound;

use crate::node::attempt::TryContext;
use crate::wire::translate::TRANSLATED_RESPONSE_PREFIX;

/// What a Responses request's `previous_response_id` says about where it goes.
pub(super) enum Continues {
    /// None, or one this router did not create (the upstream decides).
    Nothing,
    /// The client's own stored response, on this connection.
    On(String),
    /// Another client's: answered as not found.
    NotFound(String),
    /// One served through translation: never stored (behaviour §14).
    Translated,
}

/// Where the response a Responses request continues (`previous_response_id`) lives, when this
/// router created it for `client`.
pub(super) fn previous_response(router: &Router, body: &[u8], client: &str) -> Continues {
    #[derive(serde::Deserialize)]
    struct Continuation {
        previous_response_id: Option<String>,
    }
    if memchr::memmem::find(body, b"\"previous_response_id\"").is_none() {
        return Continues::Nothing;
    }
    let Some(id) = serde_json::from_slice::<Continuation>(body)
        .ok()
        .and_then(|c| c.previous_response_id)
    else {
        return Continues::Nothing;
    };
    if id.starts_with(TRANSLATED_RESPONSE_PREFIX) {
        return Continues::Translated;
    }
    match router.response_binding(&id) {
        None => Continues::Nothing,
        Some(binding) if binding.belongs_to(client) => Continues::On(binding.connection),
        Some(_) => Continues::NotFound(id),
    }
}

/// OpenAI's own answer for a `previous_response_id` the account never stored (400
/// `previous_response_not_found`), word for word, so another client's id reads as one that
/// does not exist.
pub(super) fn previous_response_not_found(id: &str) -> Vec<u8> {
    serde_json::json!({"error": {
        "message": format!("Previous response with id '{id}' not found."),
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }})
    .to_string()
    .into_bytes()
}

/// The `id` of a stored response object (`{"id":"resp_…","object":"response",…}`).
pub(crate) fn stored_response_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Stored {
        id: Option<String>,
        object: Option<String>,
    }
    let stored: Stored = serde_json::from_slice(body).ok()?;
    (stored.object.as_deref() == Some("response"))
        .then_some(stored.id)
        .flatten()
}

/// The longest stored-response id the router journals: an upstream's string is bounded like a
/// client's (real ids are ~50 bytes).
const MAX_RESPONSE_ID_BYTES: usize = 256;

/// Journals that `response_id` lives on `target`'s connection, before the client sees it.
pub(crate) fn bind_response(ctx: &TryContext<'_>, target: &RoutedTarget, response_id: String) {
    if response_id.len() > MAX_RESPONSE_ID_BYTES || response_id.chars().any(char::is_control) {
        tracing::warn!(
            request_id = ctx.request_id,
            connection = &*target.connection,
            bytes = response_id.len(),
            "stored response id too long or not printable: not bound"
        );
        return;
    }
    if let Some(router) = ctx.app.router() {
        router.bind_response(ResponseBound {
            request_id: ctx.request_id.to_string(),
            response_id,
            combo: ctx.combo.to_string(),
            provider: target.provider.to_string(),
            connection: target.connection.to_string(),
            model: target.model.to_string(),
            client: ctx.client.map(|ticket| String::from(&*ticket.tag().id)),
        });
    }
}
