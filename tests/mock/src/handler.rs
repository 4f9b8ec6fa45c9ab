//! One upstream request, start to finish: read the key and body, ask `state` for a fault, and
//! answer the way the real provider would (success, error, broken stream, reset), then hand the
//! answer to `delivery` for its `Content-Encoding`.
//!
//! Owns the answers; what a fault makes of a request is `verdict`'s.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::delivery;
use super::error_bodies;
use super::event_stream::event_stream;
use super::exchange::{Endpoint, StreamEnding, Turn};
use super::gemini::GeminiRoute;
use super::gemini_api;
use super::rate_headers::{budget_headers, insert, Dialect};
use super::state::{MockUpstream, RateSnapshot};
use super::stored::{self, StoredResponse};
use super::stored_api::{self, StoredRoute};
use super::verdict::{
    error_response, exhausted_budget, fault_verdict, method_not_allowed, with_forced,
    ResetConnection, SuccessShape, Verdict,
};
use super::{anthropic, encrypted, openai, thinking, tool_calls};

/// The key as clients send it: `Authorization: Bearer …` or `x-api-key`.
fn read_key(headers: &HeaderMap) -> String {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let api_key = headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok());
    bearer.or(api_key).unwrap_or_default().trim().to_owned()
}

pub(crate) async fn upstream(
    State(mock): State<MockUpstream>,
    method: Method,
    uri: Uri,
    request_headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mode = mock.compression();
    let response = answer(&mock, &method, &uri, &request_headers, &body).await;
    if response.extensions().get::<ResetConnection>().is_some() {
        return response;
    }
    let accept_encoding = request_headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|value| value.to_str().ok());
    delivery::deliver(response, mode, accept_encoding).await
}

async fn answer(
    mock: &MockUpstream,
    method: &Method,
    uri: &Uri,
    request_headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let mut headers = HeaderMap::new();
    if let Some(request_id) = request_headers.get("x-request-id") {
        headers.insert("x-request-id", request_id.clone());
    }
    if let Some(route) = GeminiRoute::from_path(uri.path()) {
        return gemini_api::answer(mock, method, route, uri, request_headers, body, headers).await;
    }
    let key = read_key(request_headers);
    let _in_progress = mock.enter(&key);
    mock.record_head(method, uri, request_headers);
    mock.record_body(uri.path(), body);
    key_headers(mock, &key, &mut headers);
    if let Some(route) = StoredRoute::from_path(uri.path()) {
        return stored_api::answer(mock, method, route, uri.query(), &key, headers).await;
    }
    let Some(endpoint) = Endpoint::from_path(uri.path()) else {
        let reply = error_bodies::for_status(Dialect::OpenAi, 404, "", "unknown");
        return error_response(reply, headers);
    };
    if !serves(mock, &key, endpoint) || mock.lacks_route(&key, uri.path()) {
        let reply = mock.missing_route_reply(&key, method.as_str(), uri.path());
        return error_response(reply, headers);
    }
    let dialect = endpoint.dialect();
    if *method != Method::POST {
        return method_not_allowed(dialect, headers);
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(body) else {
        let reply =
            error_bodies::bad_request(dialect, "We could not parse the JSON body of your request.");
        return error_response(reply, headers);
    };
    let Some(mut turn) = Turn::from_request(endpoint, &parsed, body.len()) else {
        let reply = error_bodies::bad_request(dialect, "you must provide a model parameter");
        return error_response(reply, headers);
    };
    if let Some(cap) = mock.reply_cap() {
        turn.chunks
            .truncate(usize::try_from(cap.max(1)).unwrap_or(usize::MAX));
    }
    turn.tool_call = tool_calls::requested(endpoint, &parsed);
    let Refusals {
        missing_previous,
        unreadable,
        refused_signature,
    } = refusals(mock, endpoint, &parsed, &key, &turn);
    // count_tokens and refused requests use no tokens.
    let tokens = if endpoint == Endpoint::CountTokens
        || missing_previous.is_some()
        || unreadable.is_some()
        || refused_signature.is_some()
    {
        0
    } else {
        turn.total_tokens()
    };
    let admission = mock.admit(&key, &turn.model, turn.streaming, tokens);
    turn.sequence = admission.sequence;
    seal_items(endpoint, &parsed, &key, &mut turn);
    if let Some(refused) = refused_key(
        mock,
        &key,
        dialect,
        &turn.model,
        &admission.rate,
        &mut headers,
    ) {
        return refused;
    }
    let plan_spent = admission
        .rate
        .plan
        .is_some_and(|plan| plan.spent_until_ms.is_some());
    let shape = match admission.fault {
        // A spent plan window refuses even a request a slow-answer fault would have served.
        _ if plan_spent => return exhausted_budget(dialect, &turn.model, &admission.rate, headers),
        None if admission.budget_exhausted => {
            return exhausted_budget(dialect, &turn.model, &admission.rate, headers)
        }
        None if missing_previous.is_some() => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let id = missing_previous.unwrap_or_default();
            return error_response(error_bodies::previous_response_not_found(&id), headers);
        }
        None if unreadable.is_some() => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let item = unreadable.unwrap_or_default();
            return error_response(error_bodies::invalid_encrypted_content(&item), headers);
        }
        None if refused_signature.is_some() => {
            budget_headers(&mut headers, dialect, &admission.rate, true);
            let message = refused_signature.unwrap_or_default();
            return error_response(error_bodies::bad_request(dialect, &message), headers);
        }
        fault => {
            let verdict = fault_verdict(
                fault,
                dialect,
                &key,
                &turn.model,
                turn.streaming,
                &admission.rate,
                &mut headers,
            )
            .await;
            match verdict {
                Verdict::Answer(response) => return response,
                Verdict::Succeed(shape) => shape,
            }
        }
    };
    remember(mock, endpoint, &key, &parsed, &mut turn, &shape);
    turn.usage_override = shape.usage.clone();
    success(
        &turn,
        &admission.rate,
        headers,
        shape,
        mock.events_sent_counter(),
    )
}

/// The headers every answer to `key` carries: the key it was sent with and the ones a test
/// set for it.
fn key_headers(mock: &MockUpstream, key: &str, headers: &mut HeaderMap) {
    if let Ok(value) = HeaderValue::from_str(key) {
        headers.insert("x-mock-key", value);
    }
    for (name, value) in mock.response_headers(key) {
        insert(headers, &name, &value);
    }
}

/// Whether `key` is served `endpoint`'s API (a test may limit a key to some APIs).
fn serves(mock: &MockUpstream, key: &str, endpoint: Endpoint) -> bool {
    let api = match endpoint {
        Endpoint::ChatCompletions => Some("chat"),
        Endpoint::Responses | Endpoint::Compact => Some("responses"),
        Endpoint::Messages | Endpoint::CountTokens => Some("messages"),
        Endpoint::Completions | Endpoint::Embeddings => None,
    };
    api.is_none_or(|api| mock.serves_api(key, api))
}

/// What the provider would refuse in a request before serving it.
struct Refusals {
    /// A `previous_response_id` this key has no stored response for.
    missing_previous: Option<String>,
    /// An encrypted item this key did not make (behaviour §10 "Encrypted items").
    unreadable: Option<String>,
    /// A thinking block another account signed, as Anthropic refuses it.
    refused_signature: Option<String>,
}

fn refusals(
    mock: &MockUpstream,
    endpoint: Endpoint,
    parsed: &Value,
    key: &str,
    turn: &Turn,
) -> Refusals {
    Refusals {
        missing_previous: turn
            .previous_response_id
            .clone()
            .filter(|id| mock.stored_response(key, id).is_none()),
        unreadable: matches!(endpoint, Endpoint::Responses | Endpoint::Compact)
            .then(|| encrypted::unreadable_item(parsed, key))
            .flatten(),
        refused_signature: (endpoint == Endpoint::Messages)
            .then(|| thinking::refused_signature(parsed, key))
            .flatten(),
    }
}

/// The encrypted items and thinking signature the answer hands out, made with `key` (as the
/// provider would: an item or signature only this key reads back).
fn seal_items(endpoint: Endpoint, parsed: &Value, key: &str, turn: &mut Turn) {
    turn.encrypted_content = match endpoint {
        Endpoint::Responses if turn.compaction_trigger => {
            Some(encrypted::seal(key, &openai::compaction_id(turn.sequence)))
        }
        Endpoint::Responses if encrypted::asks_for_encrypted_reasoning(parsed) => {
            Some(encrypted::seal(key, &openai::reasoning_id(turn.sequence)))
        }
        Endpoint::Compact => Some(encrypted::seal(key, &openai::compaction_id(turn.sequence))),
        _ => None,
    };
    turn.thinking_signature = (endpoint == Endpoint::Messages && thinking::enabled(parsed))
        .then(|| thinking::signature(key, thinking::THINKING_TEXT));
}

/// The 401 for a request without a key, or with one the mock does not admit.
fn refused_key(
    mock: &MockUpstream,
    key: &str,
    dialect: Dialect,
    model: &str,
    rate: &RateSnapshot,
    headers: &mut HeaderMap,
) -> Option<Response> {
    if key.is_empty() {
        budget_headers(headers, dialect, rate, true);
        let reply = error_bodies::for_status(dialect, 401, "", model);
        return Some(error_response(reply, std::mem::take(headers)));
    }
    if !mock.key_admitted(key) {
        budget_headers(headers, dialect, rate, true);
        let reply = error_bodies::for_status(dialect, 401, key, model);
        return Some(error_response(reply, std::mem::take(headers)));
    }
    None
}

/// What the answer leaves behind: a stored Responses answer, and the key's prompt cache (the
/// turn's cached and written tokens).
fn remember(
    mock: &MockUpstream,
    endpoint: Endpoint,
    key: &str,
    parsed: &Value,
    turn: &mut Turn,
    shape: &SuccessShape,
) {
    if endpoint == Endpoint::Responses
        && turn.store
        && shape.ending == StreamEnding::Complete
        && !shape.abort
    {
        mock.store_response(
            openai::response_id(turn),
            StoredResponse {
                key: key.to_string(),
                model: turn.model.clone(),
                response: openai::response_object(turn, "completed", true),
                input_items: stored::input_items(parsed, turn.sequence),
            },
        );
    }
    if matches!(
        endpoint,
        Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::Responses
    ) {
        let cache = mock.prompt_cache(key, parsed);
        turn.cached_tokens = cache.read.min(turn.prompt_tokens);
        turn.cache_write_tokens = cache
            .written
            .min(turn.prompt_tokens.saturating_sub(turn.cached_tokens));
    }
}

/// A 200: JSON, or SSE shaped as `shape` says.
fn success(
    turn: &Turn,
    rate: &RateSnapshot,
    mut headers: HeaderMap,
    shape: SuccessShape,
    events_sent: Arc<AtomicU64>,
) -> Response {
    let dialect = turn.endpoint.dialect();
    budget_headers(&mut headers, dialect, rate, true);
    let call = turn
        .tool_call
        .as_ref()
        .filter(|_| shape.ending == StreamEnding::Complete);
    if !turn.streaming {
        let body = match (dialect, call) {
            (Dialect::OpenAi, None) => openai::json_body(turn),
            (Dialect::Anthropic, None) => anthropic::json_body(turn),
            (Dialect::OpenAi, Some(call)) => {
                tool_calls::json_body(turn, call, openai::usage_for(turn))
            }
            (Dialect::Anthropic, Some(call)) => {
                tool_calls::json_body(turn, call, anthropic::usage_for(turn))
            }
        };
        insert(
            &mut headers,
            header::CONTENT_TYPE.as_str(),
            "application/json",
        );
        let response = (StatusCode::OK, headers, body.to_string()).into_response();
        return with_forced(response, shape.forced);
    }
    let frames = match (dialect, call) {
        (Dialect::OpenAi, None) => openai::stream_frames(turn, shape.ending),
        (Dialect::Anthropic, None) => anthropic::stream_frames(turn, shape.ending),
        (Dialect::OpenAi, Some(call)) => {
            tool_calls::stream_frames(turn, call, openai::usage_for(turn))
        }
        (Dialect::Anthropic, Some(call)) => {
            tool_calls::stream_frames(turn, call, anthropic::usage_for(turn))
        }
    };
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        "text/event-stream",
    );
    insert(&mut headers, header::CACHE_CONTROL.as_str(), "no-cache");
    event_stream(frames, headers, shape, events_sent)
}
