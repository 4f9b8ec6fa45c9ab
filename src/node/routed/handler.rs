//! The handler of the routing endpoints (`/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings`, `/v1/responses`, `/v1/responses/compact`, `/v1/messages`): the request
//! taken in, the client admitted to its limits (behaviour §11), the router asked for a decision,
//! then the decision's targets tried. I/O only: every rule is the actors' policy.

use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use axum::extract::Request;
use axum::response::Response;
use http::header::HeaderValue;
use http::{Method, StatusCode};
use quotaroute_actors::{RouteError, Router};
use quotaroute_journal::ApiFormat as JournalFormat;
use tokio::time::Instant;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::clients::{ClientTicket, SharedCounts};
use crate::node::app::AppState;
use crate::node::attempt::TryContext;
use crate::node::client_gate;
use crate::node::endpoint::Endpoint;
use crate::node::known_key::KnownKey;
use crate::node::live::LiveConfig;
use crate::node::metrics;
use crate::node::reply::{self, RouteHeaders};
use crate::node::retry_advice;
use crate::telemetry::RequestSpan;
use crate::wire::translate::ParsedRequest;

use super::delivery::overhead_us;
use super::error_answers::route_error;
use super::intake::{self, client_request_id, upstream_path, Intake};
use super::kept_turn;
use super::route_request::{self, NotAsked, Refusal};
use super::search_pass;
use super::tries::serve_tries;

/// Handles one client request on a routing endpoint.
pub async fn handle(app: AppState, endpoint: Endpoint, request: Request) -> Response {
    handle_named(app, endpoint, request, None, None).await
}

/// Handles one client request on a routing endpoint, its key identified through the key its
/// connection presented last (`known`).
pub async fn handle_on(
    app: AppState,
    endpoint: Endpoint,
    request: Request,
    known: Arc<KnownKey>,
) -> Response {
    handle_named(app, endpoint, request, None, Some(known)).await
}

/// Handles one client request whose model is `named` by its path rather than its body
/// (Google's `models/{model}:{method}`, behaviour §15), or by its body when `None`; `known`:
/// the key the request's connection presented last, when the connection keeps one.
pub async fn handle_named(
    app: AppState,
    endpoint: Endpoint,
    request: Request,
    named: Option<String>,
    known: Option<Arc<KnownKey>>,
) -> Response {
    let started = StdInstant::now();
    let anthropic = endpoint.format() == JournalFormat::Anthropic;
    let (parts, body) = request.into_parts();
    let request_id = client_request_id(&parts.headers).unwrap_or_else(|| app.next_request_id());
    let mut route = RouteHeaders {
        request_id: Arc::clone(&request_id),
        ..RouteHeaders::default()
    };
    let live = app.inner.live.load_full();
    let by_path = named.map(|model| (model, endpoint == Endpoint::GeminiStream));
    let how = (anthropic, by_path, known.as_deref());
    let fail = |error: ApiError, route: &RouteHeaders| {
        metrics::request_finished(endpoint, error.status().as_u16());
        reply::api_error(&error, anthropic, route)
    };
    let Intake {
        router,
        client_index,
        body: client_body,
        info,
        read,
    } = match intake::take(&app, &live, &parts.headers, body, how).await {
        Ok(intake) => intake,
        Err(not_taken) => {
            let unread = not_taken.body_unread;
            return closing_if(unread, fail(not_taken.error, &route));
        }
    };
    // The client's limits, before anything goes upstream (behaviour §11).
    let ticket = match admit(&app, &live, &router, client_index, &info.model, &request_id) {
        Ok(ticket) => ticket,
        Err(error) => return fail(error, &route),
    };
    // telemetry: the request's server span (off: nothing allocated).
    let trace = RequestSpan::start(
        app.telemetry(),
        &parts.headers,
        endpoint.gen_ai_operation(),
        &info.model,
        started,
    );
    // Behaviour §14: a continuation of a kept response carries the kept conversation.
    let (mut client_body, info, kept) =
        match kept_turn::expand(&app, &live, endpoint, (client_body, info), &ticket.tag().id) {
            Ok(turn) => (turn.body, turn.info, turn.kept),
            Err(not_asked) => return not_asked_answer(not_asked, endpoint, anthropic, &route),
        };
    // Parsed once, when a translation first needs it (the carry check, the attempt).
    let parsed = ParsedRequest::read_or_new(read, &client_body);
    let asked = route_request::ask(
        &live,
        &router,
        endpoint,
        &request_id,
        (&parsed, &info, &parts.headers),
        &ticket,
    );
    let (mut route_request, mut encrypted, mut refusal) = match asked {
        Ok(asked) => asked,
        Err(not_asked) => return not_asked_answer(not_asked, endpoint, anthropic, &route),
    };
    kept_turn::follow_chain(&mut route_request, kept.chain.as_deref(), &live);
    let client_id = route_request.client.id.clone();
    let mut routed = router.route(route_request).await;
    if matches!(routed, Err(RouteError::WrongFormat(_))) {
        let again = search_pass::route_without_search(
            &live,
            &router,
            endpoint,
            &request_id,
            (&client_body, &info, &parts.headers),
            &ticket,
        );
        if let Some(again) = again.await {
            (routed, encrypted, refusal) = (again.routed, again.encrypted, again.refusal);
            client_body = again.body;
            route.left_out = again.left_out;
        }
    }
    let decision = match routed {
        Ok(decision) => {
            metrics::queue_wait(decision.queue_wait_ms(), false);
            trace.routed(&client_id, decision.affinity()); // telemetry
            app.inner.affinity.turn(&info.model, decision.affinity());
            decision
        }
        // Behaviour §14: no target can carry it (the others were left out for it).
        Err(RouteError::WrongFormat(_)) if refusal.is_some() => {
            return fail(none_can_carry(refusal, &mut route), &route);
        }
        Err(error) => {
            let error = not_routed(error, &router, &live, started, anthropic, &mut route);
            let response = fail(error, &route);
            // telemetry: the answer ends the request's span.
            return trace.answered(response, route.attempts, route.model.as_ref());
        }
    };

    let path_and_query = upstream_path(&parts.uri);
    let force_include_usage =
        info.stream && !anthropic && !info.include_usage_requested && !endpoint.is_responses();
    let context = TryContext {
        app: &app,
        live: &live,
        endpoint,
        method: Method::POST,
        combo: &info.model,
        info: Some(&info),
        client_body: &client_body,
        parsed: Some(&parsed),
        client_headers: &parts.headers,
        path_and_query: &path_and_query,
        request_id: &request_id,
        force_include_usage,
        count_usage: !endpoint.counts_tokens_only(),
        deadline: Instant::now() + live.request_timeout,
        trace: &trace, // telemetry
        client: Some(&ticket),
        encrypted: encrypted.as_ref(),
        kept_id: kept.id.as_deref(),
        continues: kept.continues.as_deref(),
        kept_chain: kept.chain.as_deref(),
    };
    let response = serve_tries(&context, decision, &mut route, started).await;
    trace.answered(response, route.attempts, route.model.as_ref()) // telemetry
}

/// The answer to a request answered before it is routed.
fn not_asked_answer(
    not_asked: NotAsked,
    endpoint: Endpoint,
    anthropic: bool,
    route: &RouteHeaders,
) -> Response {
    match not_asked {
        NotAsked::Error(error) => {
            metrics::request_finished(endpoint, error.status().as_u16());
            reply::api_error(&error, anthropic, route)
        }
        NotAsked::NotFound(body) => {
            metrics::request_finished(endpoint, StatusCode::BAD_REQUEST.as_u16());
            reply::json(StatusCode::BAD_REQUEST, body, route)
        }
    }
}

/// The answer to a request not taken in. Answered before the client's body was read whole,
/// the rest of that body would be read as the next request on this connection: it closes.
fn closing_if(body_unread: bool, mut response: Response) -> Response {
    if body_unread {
        response
            .headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The client admitted to its limits, the cluster's shared counts with them when there is one.
fn admit(
    app: &AppState,
    live: &LiveConfig,
    router: &Router,
    client_index: usize,
    model: &str,
    request_id: &str,
) -> Result<std::sync::Arc<ClientTicket>, ApiError> {
    let shared = app
        .cluster()
        .map(|cluster| cluster.client_leases.clone() as std::sync::Arc<dyn SharedCounts>);
    client_gate::admit(
        live,
        router,
        client_index,
        model,
        request_id,
        shared.as_ref(),
    )
}

/// Behaviour §14: no target can carry the request (the others were left out for it): 400
/// `unsupported_parameter`, saying why, with the pair it would have crossed.
fn none_can_carry(refusal: Refusal, route: &mut RouteHeaders) -> ApiError {
    let why = refusal.map(|(direction, refusal)| {
        route.translated = Some(direction.label());
        refusal.to_string()
    });
    ApiError::new(ApiErrorKind::UnsupportedParameter, why.unwrap_or_default())
}

/// The client's answer to a request the router did not route, with its advice on retrying.
fn not_routed(
    error: RouteError,
    router: &Router,
    live: &LiveConfig,
    started: StdInstant,
    anthropic: bool,
    route: &mut RouteHeaders,
) -> ApiError {
    if let RouteError::PoolBusy { waited_ms, .. } = error {
        // The wait for a permit is the router's own time (behaviour §11).
        metrics::queue_wait(waited_ms, true);
        route.overhead_us = overhead_us(started, Duration::ZERO);
    }
    let mut error = route_error(error, anthropic);
    // A long wait says so, so clients stop rather than sleep on it (behaviour §7).
    retry_advice::advise(
        &mut error,
        router.clock().now_ms(),
        live.client_retry_max_ms,
    );
    error
}
