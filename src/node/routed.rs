//! The routing endpoints (`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
//! `/v1/responses`, `/v1/responses/compact`, `/v1/messages`): authenticate, read and parse the
//! body once, ask the router for a decision, then try targets in order (behaviour §3),
//! classifying each result (§4) and reporting it fire-and-forget, until one serves or the tries
//! run out (§7). A Responses request's encrypted items (§10) name where it goes first and what
//! each target gets; the answer's items leave sealed.

use std::borrow::Cow;
use std::time::{Duration, Instant as StdInstant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use quotaroute_actors::policy::request::{final_answer, FinalAnswer, Step, UnroutableKind};
use quotaroute_actors::{AffinityKey, Decision, RouteError, RouteRequest, RoutedTarget, Router};
use quotaroute_journal::{ApiFormat as JournalFormat, OutcomeClass, ResponseBound};
use tokio::time::Instant;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::attempt::{charge, Attempted, LastFailure, Payload, TryContext};
use crate::node::client_gate;
use crate::node::encrypted_retry;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::header_rules;
use crate::node::live::LiveConfig;
use crate::node::metrics;
use crate::node::reply::{self, RouteHeaders};
use crate::node::retry_advice;
use crate::node::stream_relay::{self, CommittedStream};
use crate::telemetry::RequestSpan;
use crate::wire::affinity_group::derive_group;
use crate::wire::body_rewrite::{parse_request_for, PromptScan};
use crate::wire::content_coding::{content_codings, decode_body, CodingError};
use crate::wire::encrypted_items::EncryptedItems;
use crate::wire::item_seal::{seal_all, Items};
use crate::wire::translate::TRANSLATED_RESPONSE_PREFIX;

/// Whether the request carries one of the client keys (`x-api-key` too on `/v1/messages`).
pub fn client_authorized(live: &LiveConfig, headers: &HeaderMap, allow_x_api_key: bool) -> bool {
    client_gate::authenticated_client(live, headers, allow_x_api_key).is_some()
}

fn client_request_id(headers: &HeaderMap) -> Option<String> {
    let id = headers.get(reply::REQUEST_ID)?.to_str().ok()?;
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    valid.then(|| id.to_string())
}

const JSON: &[u8] = b"application/json";
const PLUS_JSON: &[u8] = b"+json";

fn is_json_content_type(headers: &HeaderMap) -> bool {
    match headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        None => true,
        // Compared without case and without a lowered copy of the value.
        Some(value) => {
            let value = value.as_bytes();
            value
                .get(..JSON.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(JSON))
                || value
                    .windows(PLUS_JSON.len())
                    .any(|part| part.eq_ignore_ascii_case(PLUS_JSON))
        }
    }
}

/// The client's body, at most `limit` bytes, with no silence longer than `silence` between
/// its pieces (`server.body_timeout_ms`: a stalled body is 408, not a connection held forever).
pub async fn read_client_body(
    body: Body,
    limit: usize,
    silence: Duration,
) -> Result<Bytes, ApiError> {
    let mut body = Limited::new(body, limit);
    let mut pieces: Vec<Bytes> = Vec::new();
    loop {
        // A piece already read costs no timer; only a wait is bounded by `silence`.
        let next = match futures_util::FutureExt::now_or_never(body.frame()) {
            Some(frame) => Ok(frame),
            None => tokio::time::timeout(silence, body.frame()).await,
        };
        let frame = match next {
            Err(_) => {
                return Err(ApiError::new(
                    ApiErrorKind::RequestTimeout,
                    format!(
                        "the request body stalled for more than body_timeout_ms ({} ms)",
                        silence.as_millis()
                    ),
                ))
            }
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    pieces.push(data);
                }
            }
            Err(error) => {
                return Err(
                    if error
                        .downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        ApiError::new(
                            ApiErrorKind::RequestTooLarge,
                            format!("request body is larger than max_body_bytes ({limit} bytes)"),
                        )
                    } else {
                        ApiError::new(ApiErrorKind::InvalidJson, "could not read the request body")
                    },
                )
            }
        }
    }
    Ok(match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.swap_remove(0),
        _ => {
            let mut whole = bytes::BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            for piece in pieces {
                whole.extend_from_slice(&piece);
            }
            whole.freeze()
        }
    })
}

/// The router and the client (its index in `live.clients`) of a request with a valid key
/// (`x-api-key` too on Anthropic endpoints), once the journal is replayed.
pub(crate) fn admitted_router(
    app: &AppState,
    live: &LiveConfig,
    headers: &HeaderMap,
    allow_x_api_key: bool,
) -> Result<(Router, usize), ApiError> {
    let Some(client) = client_gate::authenticated_client(live, headers, allow_x_api_key) else {
        return Err(ApiError::new(
            ApiErrorKind::InvalidApiKey,
            "missing or invalid API key",
        ));
    };
    let router = app.router().cloned().ok_or_else(|| {
        ApiError::new(
            ApiErrorKind::NoAvailableTarget,
            "the router is starting: replaying its journal",
        )
    })?;
    Ok((router, client))
}

/// Handles one client request on a routing endpoint.
pub async fn handle(app: AppState, endpoint: Endpoint, request: Request) -> Response {
    let started = StdInstant::now();
    let anthropic = endpoint.format() == JournalFormat::Anthropic;
    let (parts, body) = request.into_parts();
    let request_id = client_request_id(&parts.headers).unwrap_or_else(|| app.next_request_id());
    let mut route = RouteHeaders {
        request_id: request_id.clone(),
        ..RouteHeaders::default()
    };
    let live = app.inner.live.load_full();
    let fail = |error: ApiError, route: &RouteHeaders| {
        metrics::request_finished(endpoint, error.status().as_u16());
        reply::api_error(&error, anthropic, route)
    };
    let fail_json = |status: StatusCode, body: Vec<u8>, route: &RouteHeaders| {
        metrics::request_finished(endpoint, status.as_u16());
        reply::json(status, body, route)
    };
    // An answer given before the client's body was read whole: the rest of that body would be
    // read as the next request on this connection, so the connection closes after the answer.
    let fail_unread = |error: ApiError, route: &RouteHeaders| {
        let mut response = fail(error, route);
        response
            .headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        response
    };
    let (router, client_index) = match admitted_router(&app, &live, &parts.headers, anthropic) {
        Ok(admitted) => admitted,
        Err(error) => return fail_unread(error, &route),
    };
    if !is_json_content_type(&parts.headers) {
        return fail_unread(
            ApiError::new(
                ApiErrorKind::InvalidJson,
                "the body must be JSON (Content-Type: application/json)",
            ),
            &route,
        );
    }
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > live.max_body_bytes as u64) {
        return fail_unread(
            ApiError::new(
                ApiErrorKind::RequestTooLarge,
                format!(
                    "request body is larger than max_body_bytes ({} bytes)",
                    live.max_body_bytes
                ),
            ),
            &route,
        );
    }
    let client_body = match read_client_body(body, live.max_body_bytes, live.body_timeout).await {
        Ok(body) => body,
        Err(error) => return fail_unread(error, &route),
    };
    let client_body =
        match decode_client_body(client_body, &parts.headers, live.max_body_bytes).await {
            Ok(body) => body,
            Err(error) => return fail(error, &route),
        };
    // Only the affinity spans `derive_group` below can use are collected (behaviour §10).
    let scan = PromptScan::for_body(
        live.affinity.enabled,
        client_body.len(),
        live.affinity.min_prompt_bytes,
    );
    let info = match parse_request_for(&client_body, scan) {
        Ok(info) => info,
        Err(error) => return fail(ApiError::from(error), &route),
    };
    // The client's limits, before anything goes upstream (behaviour §11).
    let shared = app.cluster().map(|cluster| {
        cluster.client_leases.clone() as std::sync::Arc<dyn crate::clients::SharedCounts>
    });
    let ticket = match client_gate::admit(
        &live,
        &router,
        client_index,
        &info.model,
        &request_id,
        shared.as_ref(),
    ) {
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
    let mut route_request = RouteRequest {
        request_id: request_id.clone(),
        model: info.model.clone(),
        format: endpoint.format(),
        translatable: endpoint.translatable(),
        only_connection: None,
        encrypted_maker: None,
        affinity: None,
        client: ticket.tag().clone(),
    };
    // Encrypted items (behaviour §10) name the connection that made them, in their seal.
    let encrypted = if endpoint.is_responses() {
        match previous_response(&router, &client_body, &ticket.tag().id) {
            Continues::Nothing => {}
            Continues::On(connection) => route_request.only_connection = Some(connection),
            // Another client's response: answered as the upstream answers an id it never
            // stored, and nothing goes upstream (behaviour §11).
            Continues::NotFound(id) => {
                return fail_json(
                    StatusCode::BAD_REQUEST,
                    previous_response_not_found(&id),
                    &route,
                )
            }
            Continues::Translated => {
                let error = ApiError::new(
                    ApiErrorKind::UnsupportedParameter,
                    "parameter `previous_response_id` names a response served by an account of \
                     the other format, which is not stored; send the whole input again",
                );
                return fail(error, &route);
            }
        }
        EncryptedItems::scan(&client_body, &live.seal_key).map(EncryptedTurn::new)
    } else {
        None
    };
    if route_request.only_connection.is_none() {
        route_request.encrypted_maker = encrypted
            .as_ref()
            .and_then(|turn| turn.items.maker())
            .map(str::to_owned);
    }
    // `previous_response_id` and encrypted items are hard affinities; otherwise the
    // conversation's group.
    if route_request.only_connection.is_none()
        && route_request.encrypted_maker.is_none()
        && live.affinity.enabled
    {
        let client = &route_request.client.id;
        route_request.affinity = derive_group(
            client,
            &client_body,
            &info.prompt,
            &parts.headers,
            live.affinity.min_prompt_bytes,
        )
        .map(|group| AffinityKey {
            group: group.digest,
            client: client.clone(),
        });
    }
    let client_id = route_request.client.id.clone();
    let decision = match router.route(route_request).await {
        Ok(decision) => {
            metrics::queue_wait(decision.queue_wait_ms(), false);
            trace.routed(&client_id, decision.affinity()); // telemetry
            decision
        }
        Err(error) => {
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
        client_headers: &parts.headers,
        path_and_query: &path_and_query,
        request_id: &request_id,
        force_include_usage,
        count_usage: endpoint != Endpoint::CountTokens,
        deadline: Instant::now() + live.request_timeout,
        trace: &trace, // telemetry
        client: Some(&ticket),
        encrypted: encrypted.as_ref(),
    };
    let response = serve_tries(&context, decision, &mut route, started).await;
    trace.answered(response, route.attempts, route.model.as_ref()) // telemetry
}

/// Tries the decision's targets in order until one serves or the tries run out (behaviour §3,
/// §7). After each try the decision's plan alone says what follows (`Decision::after_attempt`,
/// which also reports the try); this only does what the step says.
pub(crate) async fn serve_tries(
    ctx: &TryContext<'_>,
    mut decision: Decision,
    route: &mut RouteHeaders,
    started: StdInstant,
) -> Response {
    let mut upstream_time = Duration::ZERO;
    let mut last_failure: Option<LastFailure> = None;
    let mut last_provider: Option<std::sync::Arc<str>> = None;
    while let Some(target) = decision.current().cloned() {
        route.connection = Some(target.connection.clone());
        route.model = Some(target.model.clone());
        route.attempts = decision.attempt();
        let Attempted {
            result,
            payload,
            translation,
            bills_client,
        } = encrypted_retry::try_target(ctx, &mut decision, &target, &mut upstream_time).await;
        // The answering try's translation names itself (`x-quotaroute-translated`/`-dropped`).
        route.translated = translation.as_ref().map(|t| t.direction.label());
        route.dropped = translation
            .as_ref()
            .filter(|t| !t.dropped.is_empty())
            .map(|t| t.dropped.join(","));
        let class = result.class;
        let time_left = Instant::now() < ctx.deadline;
        let step = decision
            .after_attempt(result, payload.is_stream(), time_left, |result| {
                // The client pays for what it is given, once the plan gives it (behaviour §11).
                if bills_client {
                    charge::bill(ctx, &target, result);
                }
            })
            .await;
        match (step, payload) {
            (Step::Stream, Payload::Stream { stream, headers }) => {
                if let Some(translation) = &translation {
                    metrics::translated(translation.direction);
                }
                return stream_response(
                    ctx,
                    decision,
                    &target,
                    *stream,
                    headers,
                    route,
                    started,
                    upstream_time,
                );
            }
            (
                Step::Deliver,
                Payload::Answer {
                    status,
                    headers,
                    body,
                },
            ) => {
                route.overhead_us = overhead_us(started, upstream_time);
                metrics::request_finished(ctx.endpoint, status.as_u16());
                if let Some(translation) = &translation {
                    metrics::translated(translation.direction);
                }
                if class != OutcomeClass::Success {
                    // A client error is returned as the upstream sent it.
                    return reply::passthrough(status, &headers, &body, ctx.live, route);
                }
                return deliver(ctx, &target, status, headers, body, route);
            }
            (step, payload) => {
                last_failure = Some(payload.into_last_failure(class));
                last_provider = Some(target.provider.clone());
                if step != Step::Failover || !matches!(decision.failover().await, Ok(Some(_))) {
                    break;
                }
            }
        }
    }

    route.attempts = decision.attempt();
    route.overhead_us = overhead_us(started, upstream_time);
    let mut response = final_failure(
        last_failure,
        last_provider.as_deref(),
        ctx.anthropic(),
        ctx.live,
        route,
        &decision,
    );
    if response.status() == StatusCode::TOO_MANY_REQUESTS {
        advise_passed_through_429(ctx, route, &mut response).await;
    }
    metrics::request_finished(ctx.endpoint, response.status().as_u16());
    response
}

/// A 429 passed through from an upstream that sent no `Retry-After` gets the router's own,
/// from the lock it just learned on that (connection, model) (behaviour §7); beyond
/// `client_retry_max_ms` it also says `x-should-retry: false`. A rare answer: reading the
/// router's state for it costs nothing on the paths that serve.
async fn advise_passed_through_429(
    ctx: &TryContext<'_>,
    route: &RouteHeaders,
    response: &mut Response,
) {
    let headers = response.headers();
    if headers.contains_key(http::header::RETRY_AFTER) || headers.contains_key("retry-after-ms") {
        return;
    }
    let (Some(router), Some(connection), Some(model)) =
        (ctx.app.router(), &route.connection, &route.model)
    else {
        return;
    };
    let Ok(state) = router.state().await else {
        return;
    };
    let Some(remaining_ms) = state
        .lockouts()
        .into_iter()
        .filter(|lock| *lock.connection == **connection && *lock.model == **model)
        .map(|lock| lock.remaining_ms)
        .max()
        .filter(|ms| *ms > 0)
    else {
        return;
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&remaining_ms.div_ceil(1000).to_string()) {
        headers.insert(http::header::RETRY_AFTER, value);
    }
    if remaining_ms > ctx.live.client_retry_max_ms {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
    }
}

/// A committed stream's response: relayed event by event, reported when it ends.
#[allow(clippy::too_many_arguments)]
fn stream_response(
    ctx: &TryContext<'_>,
    decision: Decision,
    target: &RoutedTarget,
    stream: CommittedStream,
    upstream_headers: HeaderMap,
    route: &mut RouteHeaders,
    started: StdInstant,
    upstream_time: Duration,
) -> Response {
    route.overhead_us = overhead_us(started, upstream_time);
    if let Some(response_id) = stream.response_id.clone() {
        bind_response(ctx, target, response_id);
    }
    let input_tokens = ctx
        .live
        .attempt_metrics
        .get(&*target.connection)
        .map(|m| m.input_tokens.clone());
    // Counted only where usage is (not on count_tokens or a stored-response call's stream).
    let usage_sink = ctx.client.filter(|_| ctx.count_usage).and_then(|ticket| {
        Some(client_gate::StreamUsageSink {
            ticket: std::sync::Arc::clone(ticket),
            router: ctx.app.router()?.clone(),
            request_id: ctx.request_id.to_owned(),
            combo: ctx.combo.to_owned(),
            target: target.clone(),
        })
    });
    let charge = stream_relay::StreamCharge {
        request_bytes: ctx.client_body.len() as u64,
        usage_max_tokens: ctx.live.usage_max_tokens,
        connection: target.connection.to_string(),
        drain: ctx.live.drain,
    };
    let body = stream_relay::relay_body(
        stream,
        decision,
        ctx.deadline,
        input_tokens,
        usage_sink,
        charge,
    );
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    // Sized once: the relayed headers, the route's, a content type and cache control.
    headers.reserve(upstream_headers.len() + RouteHeaders::MOST_ADDED + 2);
    header_rules::copy_upstream(
        &upstream_headers,
        &ctx.live.echoes_of(&target.connection).exposed(),
        headers,
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    route.apply_over_relayed(headers);
    metrics::request_finished(ctx.endpoint, 200);
    metrics::overhead(route.overhead_us);
    response
}

/// A whole successful answer, as the upstream sent it (bodies re-framed, headers filtered).
fn deliver(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    route: &RouteHeaders,
) -> Response {
    metrics::overhead(route.overhead_us);
    let mut body = body;
    // A translated response is not stored anywhere (behaviour §14): nothing to bind.
    if ctx.endpoint.is_responses() && ctx.method == Method::POST && route.translated.is_none() {
        if let Some(response_id) = stored_response_id(&body) {
            bind_response(ctx, target, response_id);
        }
    }
    // Encrypted items leave sealed with the connection that made them (§10), a stored
    // response fetched again (`GET /v1/responses/{id}`) too; a translated answer's carried
    // thinking blocks are encrypted (§14).
    if ctx.endpoint.is_responses() {
        let items = match route.translated {
            Some(_) => Items::Translated,
            None => Items::Upstream,
        };
        if let Cow::Owned(sealed) = seal_all(&body, &ctx.live.seal_key, &target.connection, items) {
            body = Bytes::from(sealed);
        }
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let out = response.headers_mut();
    // Sized once: the relayed headers, the route's and a content type.
    out.reserve(headers.len() + RouteHeaders::MOST_ADDED + 1);
    header_rules::copy_upstream(
        &headers,
        &ctx.live.echoes_of(&target.connection).exposed(),
        out,
    );
    if !out.contains_key(CONTENT_TYPE) {
        out.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    route.apply_over_relayed(out);
    response
}

/// What a Responses request's `previous_response_id` says about where it goes.
enum Continues {
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
fn previous_response(router: &Router, body: &[u8], client: &str) -> Continues {
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
fn previous_response_not_found(id: &str) -> Vec<u8> {
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

/// The part of the client's `/v1/…` path (and query) that follows the provider's `base_url`.
pub(crate) fn upstream_path(uri: &http::Uri) -> String {
    uri.path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/")
        .strip_prefix("/v1")
        .unwrap_or("/")
        .to_string()
}

/// The client's answer when a request could not be routed at all.
pub(crate) fn route_error(error: RouteError, anthropic: bool) -> ApiError {
    match error {
        RouteError::UnknownModel(model) => ApiError::new(
            ApiErrorKind::ModelNotFound,
            format!("model `{model}` not found: no combo and no provider/model of that name"),
        ),
        RouteError::WrongFormat(model) => {
            let (endpoint_format, other) = if anthropic {
                ("Anthropic", "/v1/chat/completions or /v1/responses")
            } else {
                ("OpenAI", "/v1/messages")
            };
            ApiError::new(
                ApiErrorKind::UnsupportedEndpoint,
                format!(
                    "model `{model}` has no target of the {endpoint_format} format; its targets are served on {other}"
                ),
            )
        }
        // Names no connection (behaviour §11): which account holds a response is the router's.
        RouteError::NotOnConnection { model, .. } => ApiError::new(
            ApiErrorKind::NotFound,
            format!(
                "the previous response was not made through model `{model}`: continue it with the model that made it"
            ),
        ),
        RouteError::NoTarget(unroutable) => {
            let (kind, message) = match unroutable.kind {
                UnroutableKind::AllLimited => (
                    ApiErrorKind::AllTargetsLocked,
                    "every target of this model is rate limited or cooling down",
                ),
                UnroutableKind::NoneAvailable => (
                    ApiErrorKind::NoAvailableTarget,
                    "no target of this model can serve now",
                ),
            };
            ApiError::blocked(
                kind,
                message,
                unroutable.blocked,
                unroutable.retry_after_ms,
            )
        }
        RouteError::PoolBusy {
            waited_ms,
            retry_after_ms,
        } => ApiError::blocked(
            ApiErrorKind::PoolBusy,
            if waited_ms == 0 {
                "every target of this model is at its concurrency cap and the queue is full"
                    .to_string()
            } else {
                format!(
                    "every target of this model stayed at its concurrency cap for the {waited_ms} ms this request waited"
                )
            },
            Vec::new(),
            Some(retry_after_ms),
        ),
        RouteError::Unavailable(reason) => ApiError::new(
            ApiErrorKind::NoAvailableTarget,
            format!("router unavailable: {reason}"),
        ),
    }
}

/// The client's body with its `Content-Encoding` undone (415 when the router cannot read it).
async fn decode_client_body(
    body: Bytes,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let codings = content_codings(headers).map_err(|error| {
        ApiError::new(ApiErrorKind::UnsupportedContentEncoding, error.to_string())
    })?;
    if codings.is_empty() {
        return Ok(body);
    }
    decode_body(body, &codings, limit)
        .await
        .map_err(|error| match error {
            CodingError::TooLarge { limit } => ApiError::new(
                ApiErrorKind::RequestTooLarge,
                format!("request body decodes to more than max_body_bytes ({limit} bytes)"),
            ),
            other => ApiError::new(
                ApiErrorKind::InvalidContentEncoding,
                format!("request body: {other}"),
            ),
        })
}

fn overhead_us(started: StdInstant, upstream_time: Duration) -> u64 {
    started
        .elapsed()
        .saturating_sub(upstream_time)
        .as_micros()
        .min(u128::from(u64::MAX)) as u64
}

/// The answer when the tries ran out (behaviour §7, decided by [`final_answer`]): this only
/// writes it, passing the last upstream answer through when the rule says so. The router's own
/// message names the provider and the class; the detail (hosts, key commands) is the journal's
/// and the log's, never the client's.
fn final_failure(
    last: Option<LastFailure>,
    provider: Option<&str>,
    anthropic: bool,
    live: &LiveConfig,
    route: &RouteHeaders,
    decision: &Decision,
) -> Response {
    let answer = final_answer(last.as_ref().map(LastFailure::as_last_attempt));
    let error = match (answer, last) {
        (FinalAnswer::PassThrough(status), Some(LastFailure::Upstream { headers, body, .. })) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            return reply::passthrough(status, &headers, &body, live, route);
        }
        (FinalAnswer::UpstreamTimeout, _) => return upstream_timeout(anthropic, route),
        (FinalAnswer::UpstreamTooLarge, last) => ApiError::new(
            ApiErrorKind::UpstreamTooLarge,
            match last {
                Some(LastFailure::Failed { public, .. }) => public,
                _ => "the upstream's answer is too large".to_string(),
            },
        ),
        (FinalAnswer::ModelNotFound, _) => ApiError::new(
            ApiErrorKind::ModelNotFound,
            "the model is not available on any target",
        ),
        (FinalAnswer::NoTargetTried, _) => ApiError::blocked(
            ApiErrorKind::NoAvailableTarget,
            "no target could be tried",
            decision.skipped().to_vec(),
            None,
        ),
        (_, Some(LastFailure::Failed { class, public, .. })) => ApiError::new(
            ApiErrorKind::UpstreamError,
            format!(
                "upstream `{}` failed ({}): {public}",
                provider.unwrap_or("?"),
                class.as_str()
            ),
        ),
        (_, Some(LastFailure::Upstream { status, .. })) => ApiError::new(
            ApiErrorKind::UpstreamError,
            format!(
                "upstream answered {} on every target tried",
                status.as_u16()
            ),
        ),
        (_, None) => ApiError::new(ApiErrorKind::UpstreamError, "upstream failed"),
    };
    reply::api_error(&error, anthropic, route)
}

fn upstream_timeout(anthropic: bool, route: &RouteHeaders) -> Response {
    reply::api_error(
        &ApiError::new(
            ApiErrorKind::UpstreamTimeout,
            "the upstream did not answer in time",
        ),
        anthropic,
        route,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_content_type(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn json_content_types_are_told_apart_in_any_case() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json",
            "APPLICATION/VND.API+JSON",
        ] {
            assert!(is_json_content_type(&with_content_type(json)), "{json}");
        }
        for other in ["text/plain", "application/jso", "", "multipart/form-data"] {
            assert!(!is_json_content_type(&with_content_type(other)), "{other}");
        }
        assert!(is_json_content_type(&HeaderMap::new()), "no content type");
    }
}
