//! The one middleware over the router's own answers: every one has a JSON error body (contract
//! "Hostile input and bounds") — axum's own answers, a 405 with no body or a path or query it
//! cannot extract in plain text, are rewritten here into the contract's error shape
//! (Anthropic's on `/v1/messages`) — and a refusal on the client API is logged
//! (`rejection_log`). Handlers' own JSON answers and upstream answers pass untouched; a
//! success costs two reference-count clones.

use std::future::Future;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::header::{HeaderMap, HeaderName, AUTHORIZATION, CONTENT_TYPE};
use http::StatusCode;
use http_body_util::BodyExt;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::{client_gate, rejection_log, reply};

/// The Anthropic key header, parsed once.
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// Longest plain-text rejection kept as the message.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The middleware.
pub async fn router_answers(State(app): State<AppState>, request: Request, next: Next) -> Response {
    around(&app, request, |request| next.run(request)).await
}

/// The same rule around any handler `inner` (the routed endpoints' fast path, `node::direct`).
pub async fn around<Inner, Answer>(app: &AppState, request: Request, inner: Inner) -> Response
where
    Inner: FnOnce(Request) -> Answer,
    Answer: Future<Output = Response>,
{
    let method = request.method().clone();
    // A `Uri` (and a header value) clone shares its bytes: nothing is copied on the way.
    let uri = request.uri().clone();
    let client_request_id = request.headers().get(reply::REQUEST_ID).cloned();
    // The key, to name the client of a refusal (looked up only then). A header value clone
    // shares its bytes: nothing is allocated on a success.
    let authorization = request.headers().get(AUTHORIZATION).cloned();
    let x_api_key = request.headers().get(X_API_KEY).cloned();
    let response = inner(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let response = json_error(&method, &uri, response).await;
    let path = uri.path();
    let client_api = path == "/" || path.starts_with("/v1/") || path == "/v1";
    if client_api {
        let mut keys = HeaderMap::new();
        if let Some(value) = authorization {
            keys.insert(AUTHORIZATION, value);
        }
        if let Some(value) = x_api_key {
            keys.insert(X_API_KEY, value);
        }
        let live = app.live();
        let client =
            client_gate::authenticated_client(&live, &keys, path.starts_with("/v1/messages"))
                .and_then(|index| live.clients.tag(index))
                .map(|tag| tag.id.clone());
        return rejection_log::logged(
            &method,
            path,
            client_request_id.as_ref(),
            client.as_deref(),
            response,
        )
        .await;
    }
    response
}

/// `response` (an error) with a JSON body when axum wrote it in plain text or none.
async fn json_error(method: &http::Method, uri: &http::Uri, response: Response) -> Response {
    let anthropic = uri.path().starts_with("/v1/messages");
    let status = response.status();
    // A routed answer (an upstream error passed through) carries `x-quotaroute-attempts`.
    if !(status.is_client_error() || status.is_server_error())
        || response.headers().contains_key("x-quotaroute-attempts")
    {
        return response;
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let plain = match content_type.as_deref() {
        None => true,
        Some(value) => value.starts_with("text/plain"),
    };
    if !plain {
        return response;
    }
    let path = uri.path();
    let (parts, body) = response.into_parts();
    let text = match http_body_util::Limited::new(body, MAX_MESSAGE_BYTES)
        .collect()
        .await
    {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let error = match parts.status {
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
            ApiErrorKind::MethodNotAllowed,
            format!("{path} does not take {method}"),
        ),
        StatusCode::NOT_FOUND => ApiError::new(
            ApiErrorKind::NotFound,
            format!("no such endpoint: {method} {path}"),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(ApiErrorKind::RequestTooLarge, text),
        _ => ApiError::new(
            ApiErrorKind::InvalidRequest,
            if text.is_empty() {
                format!("cannot read {method} {path}")
            } else {
                text
            },
        ),
    };
    let mut rewritten = reply::error_only(&error, anthropic);
    if parts.status != error.status() && parts.status != StatusCode::UNPROCESSABLE_ENTITY {
        *rewritten.status_mut() = parts.status;
    }
    // Keep what else axum said (`Allow` on a 405).
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != http::header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}
