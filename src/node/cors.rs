//! CORS for the client API (contract "CORS"): an `Origin` listed in
//! `server.cors_allow_origins` (or any, with `"*"`) gets a 204 preflight and
//! `Access-Control-Allow-Origin` on its responses; any other origin gets neither. Requests
//! without `Origin` (every non-browser client) pass untouched. The list is read from the live
//! config, so a reload changes it.

use std::future::Future;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use crate::node::app::AppState;

/// Response headers a browser script may read: the router's own and the upstream's usual ones.
const EXPOSED: &str = "x-request-id, x-quotaroute-connection, x-quotaroute-model, \
x-quotaroute-attempts, x-quotaroute-overhead-us, x-quotaroute-upstream-request-id, retry-after, \
openai-processing-ms, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, \
x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, \
x-ratelimit-reset-tokens, request-id";

const ALLOWED_METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// Asked for when a preflight names no headers: what the SDKs send from a browser.
const DEFAULT_ALLOWED_HEADERS: &str =
    "authorization, content-type, x-api-key, anthropic-version, anthropic-beta, x-request-id";

/// Whether `origin` may call the client API under `allowed`.
pub fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    allowed
        .iter()
        .any(|entry| entry == "*" || entry.eq_ignore_ascii_case(origin))
}

/// The middleware: answers preflights, marks allowed origins' responses.
pub async fn layer(State(app): State<AppState>, request: Request, next: Next) -> Response {
    around(&app, request, |request| next.run(request)).await
}

/// The same rule around any handler `inner` (the routed endpoints' fast path, `node::direct`).
pub async fn around<Inner, Answer>(app: &AppState, request: Request, inner: Inner) -> Response
where
    Inner: FnOnce(Request) -> Answer,
    Answer: Future<Output = Response>,
{
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return inner(request).await;
    };
    let allowed = origin
        .to_str()
        .is_ok_and(|origin| origin_allowed(&app.live().cors_allow_origins, origin));
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        return preflight_answer(allowed, &origin, request.headers());
    }
    let mut response = inner(request).await;
    if allowed {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED),
        );
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

fn preflight_answer(allowed: bool, origin: &HeaderValue, request: &HeaderMap) -> Response {
    let mut response = Response::new(Body::empty());
    if !allowed {
        // No CORS headers: the browser refuses the call, and says why in its console.
        *response.status_mut() = StatusCode::FORBIDDEN;
        return response;
    }
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOWED_METHODS),
    );
    let asked = request
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or(HeaderValue::from_static(DEFAULT_ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_exactly_or_by_star() {
        let list = vec!["https://app.example".to_string()];
        assert!(origin_allowed(&list, "https://app.example"));
        assert!(origin_allowed(&list, "HTTPS://APP.EXAMPLE"));
        assert!(!origin_allowed(&list, "https://app.example:8443"));
        assert!(!origin_allowed(&list, "https://evil.example"));
        assert!(!origin_allowed(&[], "https://app.example"));
        assert!(origin_allowed(&["*".to_string()], "http://localhost:3000"));
    }
}
