//! The stored-response endpoints of OpenAI's Responses API — `GET`/`DELETE
//! /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`, `POST /v1/responses/{id}/cancel`
//! — sent to the connection that created the response (stored-response placement, contract "Client
//! API"). The response lives in that account: another account would answer 404 for it.
//!
//! Every path is governed (behaviour §11): the response belongs to the client that created it
//! (another client gets the same 404 as for an id that does not exist, and nothing goes
//! upstream), and the call passes the client's admission — its `models`, its limits and
//! budget — and the combo's fair queue and `max_concurrent` like any routed request.
//!
//! Owns finding the binding and routing to its one connection; the tries themselves are
//! `proxy`'s.

use std::time::Instant as StdInstant;

use axum::extract::Request;
use axum::response::Response;
use quotaroute_actors::{RouteError, RouteRequest};
use quotaroute_journal::ApiFormat as JournalFormat;
use tokio::time::Instant;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::attempt::TryContext;
use crate::node::client_gate;
use crate::node::endpoint::Endpoint;
use crate::node::metrics;
use crate::node::reply::{self, RouteHeaders};
use crate::node::routed::{admitted_router, read_guarded, route_error, serve_tries, upstream_path};
use crate::wire::translate::TRANSLATED_RESPONSE_PREFIX;
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;

/// Largest client body on these endpoints (`cancel` takes none worth the name).
const MAX_STORED_CALL_BODY_BYTES: usize = 64 * 1024;

/// The answer for a response the router kept (`[responses] store = true`), when the store is
/// open and the id is one the router makes; `None`: the upstream's stored responses.
fn kept(
    app: &AppState,
    parts: &http::request::Parts,
    response_id: &str,
    client_id: &str,
    route: &RouteHeaders,
) -> Option<Result<Response, ApiError>> {
    if !response_id.starts_with(TRANSLATED_RESPONSE_PREFIX) {
        return None;
    }
    let store = app.response_store()?;
    let served = crate::node::kept_responses::serve::serve(
        app,
        &store,
        (&parts.method, &parts.uri),
        response_id,
        client_id,
        route,
    );
    if let Ok(response) = &served {
        metrics::request_finished(Endpoint::Responses, response.status().as_u16());
    }
    Some(served)
}

/// One call on a stored response `response_id`.
pub async fn handle(app: AppState, response_id: String, request: Request) -> Response {
    let started = StdInstant::now();
    let (parts, body) = request.into_parts();
    let mut route = RouteHeaders {
        request_id: app.next_request_id(),
        ..RouteHeaders::default()
    };
    let fail = |error: ApiError, route: &RouteHeaders| {
        metrics::request_finished(Endpoint::Responses, error.status().as_u16());
        reply::api_error(&error, false, route)
    };
    let live = app.inner.live.load_full();
    let (router, client_index) = match admitted_router(&app, &live, &parts.headers, false) {
        Ok(admitted) => admitted,
        Err(error) => return fail(error, &route),
    };
    // Read before anything else is decided, by the one guarded reader: bounded size, no
    // stall past `body_timeout_ms`, known codings.
    let limit = MAX_STORED_CALL_BODY_BYTES.min(live.max_body_bytes);
    let client_body = match read_guarded(body, &parts.headers, limit, live.body_timeout).await {
        Ok(body) => body,
        Err(refused) => {
            let mut response = fail(refused.error, &route);
            if refused.body_unread {
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            return response;
        }
    };
    let client_id = live
        .clients
        .tag(client_index)
        .map(|tag| tag.id.clone())
        .unwrap_or_default();
    // A response the router kept (behaviour §14) is answered by the router alone.
    if let Some(served) = kept(&app, &parts, &response_id, &client_id, &route) {
        return served.unwrap_or_else(|error| fail(error, &route));
    }
    // Another client's response is answered exactly as one that does not exist.
    let Some(binding) = router
        .response_binding(&response_id)
        .filter(|binding| binding.belongs_to(&client_id))
    else {
        // A translated response was made here but kept nowhere (behaviour §14): say so.
        let why = if response_id.starts_with(TRANSLATED_RESPONSE_PREFIX) {
            format!(
                "response `{response_id}` was served through translation and is not stored (translated responses are stateless): send the whole input again"
            )
        } else {
            format!(
                "no stored response `{response_id}` is known to this router: it was not created through it, or more than 30 days ago"
            )
        };
        return fail(ApiError::new(ApiErrorKind::NotFound, why), &route);
    };
    // The client's limits, before anything goes upstream (behaviour §11).
    let shared = app.cluster().map(|cluster| {
        cluster.client_leases.clone() as std::sync::Arc<dyn crate::clients::SharedCounts>
    });
    let ticket = match client_gate::admit(
        &live,
        &router,
        client_index,
        &binding.combo,
        &route.request_id,
        shared.as_ref(),
    ) {
        Ok(ticket) => ticket,
        Err(error) => return fail(error, &route),
    };
    let route_to = |model: String| RouteRequest {
        request_id: route.request_id.clone(),
        model: model.into(),
        format: JournalFormat::Openai,
        translatable: false,
        cannot_carry: Vec::new(),
        only_connection: Some(binding.connection.clone()),
        encrypted_maker: None,
        affinity: None,
        // Reading or deleting a stored response spends no window's quota: a spare client's
        // (behaviour §13) is routed as a normal request, or it could never read its own.
        client: quotaroute_actors::ClientTag {
            class: quotaroute_actors::policy::clients::class::RequestClass::Normal,
            ..ticket.tag().clone()
        },
    };
    // The combo it was made through, or — when a reload removed that combo or the connection
    // from it — the connection's own `provider/model`.
    let decision = match router.route(route_to(binding.combo.clone())).await {
        Err(RouteError::UnknownModel(_) | RouteError::NotOnConnection { .. }) => {
            router
                .route(route_to(
                    ImplicitCombo::new(&binding.provider, &binding.model).name(),
                ))
                .await
        }
        other => other,
    };
    let decision = match decision {
        Ok(decision) => decision,
        Err(error) => return fail(route_error(error, false), &route),
    };
    let path_and_query = upstream_path(&parts.uri);
    let context = TryContext {
        app: &app,
        live: &live,
        endpoint: Endpoint::Responses,
        method: parts.method.clone(),
        combo: &binding.combo,
        info: None,
        client_body: &client_body,
        parsed: None,
        client_headers: &parts.headers,
        path_and_query: &path_and_query,
        request_id: &route.request_id.clone(),
        force_include_usage: false,
        count_usage: false,
        deadline: Instant::now() + live.request_timeout,
        trace: &crate::telemetry::RequestSpan::off(), // telemetry: stored calls are not traced
        client: Some(&ticket),
        encrypted: None,
        kept_id: None,
        continues: None,
        kept_chain: None,
    };
    serve_tries(&context, decision, &mut route, started).await
}
