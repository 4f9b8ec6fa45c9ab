//! Building the client's responses: the router's own errors (contract table, both body shapes,
//! `Retry-After`), upstream errors passed through with echoed keys masked, and the
//! `x-quotaroute-*` headers every routed response carries.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;

use crate::api_error::{mask_upstream_body, ApiError};
use crate::node::decimal_header;
use crate::node::header_rules;
use crate::node::live::LiveConfig;

/// Where a routed response went, for the `x-quotaroute-*` headers.
#[derive(Debug, Clone, Default)]
pub struct RouteHeaders {
    /// The target's connection and model, shared with it (set on every try).
    pub connection: Option<std::sync::Arc<str>>,
    pub model: Option<std::sync::Arc<str>>,
    pub attempts: u32,
    pub overhead_us: u64,
    /// Shared with the route request and its records.
    pub request_id: std::sync::Arc<str>,
    /// The translation the answering try went through (`x-quotaroute-translated`).
    pub translated: Option<&'static str>,
    /// Parameters it dropped, comma-separated (`x-quotaroute-dropped`).
    pub dropped: Option<String>,
    /// Tools left out of the request before routing because no target of the combo runs
    /// them (behaviour §14: web search); named first in `x-quotaroute-dropped`.
    pub left_out: Vec<String>,
}

const CONNECTION: HeaderName = HeaderName::from_static("x-quotaroute-connection");
const MODEL: HeaderName = HeaderName::from_static("x-quotaroute-model");
const ATTEMPTS: HeaderName = HeaderName::from_static("x-quotaroute-attempts");
const OVERHEAD_US: HeaderName = HeaderName::from_static("x-quotaroute-overhead-us");
const TRANSLATED: HeaderName = HeaderName::from_static("x-quotaroute-translated");
const DROPPED: HeaderName = HeaderName::from_static("x-quotaroute-dropped");
/// `x-request-id`, parsed once (a lookup by `&str` parses the name on every call).
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `x-should-retry`: what the official OpenAI and Anthropic SDKs read to retry or not.
const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");
const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
const UPSTREAM_REQUEST_ID: HeaderName = HeaderName::from_static("x-quotaroute-upstream-request-id");

impl RouteHeaders {
    /// How many headers [`apply_over_relayed`](Self::apply_over_relayed) may add, so a
    /// response's map is sized once instead of growing while it is filled.
    pub const MOST_ADDED: usize = 8;

    pub fn apply(&self, headers: &mut HeaderMap) {
        let mut put = |name: HeaderName, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        if let Some(connection) = &self.connection {
            put(CONNECTION, connection);
        }
        if let Some(model) = &self.model {
            put(MODEL, model);
        }
        put(REQUEST_ID, &self.request_id);
        if let Some(translated) = self.translated {
            headers.insert(TRANSLATED, HeaderValue::from_static(translated));
        }
        if let Some(dropped) = &self.dropped {
            if let Ok(value) = HeaderValue::from_str(dropped) {
                headers.insert(DROPPED, value);
            }
        }
        // Slices of a table of digits, not an allocation each.
        headers.insert(ATTEMPTS, decimal_header::decimal(u64::from(self.attempts)));
        headers.insert(OVERHEAD_US, decimal_header::decimal(self.overhead_us));
    }

    /// [`apply`](Self::apply) over headers already relayed from the upstream (and masked by
    /// `header_rules::copy_upstream`), keeping the upstream's own request id (OpenAI's
    /// `x-request-id`) as `x-quotaroute-upstream-request-id` when it differs from the router's.
    pub fn apply_over_relayed(&self, headers: &mut HeaderMap) {
        if let Some(id) = headers.get(REQUEST_ID) {
            if id.as_bytes() != self.request_id.as_bytes() {
                let id = id.clone();
                headers.insert(UPSTREAM_REQUEST_ID, id);
            }
        }
        self.apply(headers);
    }
}

/// A JSON response with the route headers.
pub fn json(status: StatusCode, body: impl Into<Body>, route: &RouteHeaders) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    route.apply(response.headers_mut());
    response
}

/// One of the router's own errors, in the endpoint's shape.
pub fn api_error(error: &ApiError, anthropic: bool, route: &RouteHeaders) -> Response {
    let mut response = json(error.status(), error.body(anthropic), route);
    retry_headers(error, response.headers_mut());
    response
}

/// `Retry-After` and, past `server.client_retry_max_ms`, `x-should-retry: false`.
fn retry_headers(error: &ApiError, headers: &mut HeaderMap) {
    if let Some(seconds) = error.retry_after_header() {
        if let Ok(value) = HeaderValue::from_str(&seconds) {
            headers.insert(RETRY_AFTER, value);
        }
    }
    if error.stop_retrying_until_s.is_some() {
        // Honoured by the official SDKs before their own rules (behaviour §7).
        headers.insert(SHOULD_RETRY, HeaderValue::from_static("false"));
    }
}

/// The router's own error answering for an upstream's (behaviour §7: a passed-through 429 the
/// client would sleep on, said in the router's words): the upstream's other headers (its
/// request id, its rate-limit readings) still reach the client, masked, but what the router's
/// answer says itself — body framing, `Retry-After`, whether to retry — is the router's.
pub fn api_error_for_upstream(
    error: &ApiError,
    anthropic: bool,
    upstream_headers: &HeaderMap,
    live: &LiveConfig,
    route: &RouteHeaders,
) -> Response {
    let upstream_secrets = live.upstream_secrets();
    let secrets: Vec<&str> = upstream_secrets.iter().map(|s| s.expose()).collect();
    let mut response = Response::new(Body::from(error.body(anthropic)));
    *response.status_mut() = error.status();
    let headers = response.headers_mut();
    headers.reserve(upstream_headers.len() + RouteHeaders::MOST_ADDED);
    header_rules::copy_upstream(upstream_headers, &secrets, headers);
    for own in [RETRY_AFTER, RETRY_AFTER_MS, SHOULD_RETRY] {
        headers.remove(own);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    route.apply_over_relayed(headers);
    retry_headers(error, headers);
    response
}

/// One of the router's own errors on a path that routes nothing (no `x-quotaroute-*`).
pub fn error_only(error: &ApiError, anthropic: bool) -> Response {
    let mut response = Response::new(Body::from(error.body(anthropic)));
    *response.status_mut() = error.status();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An upstream error passed through: its status (or `status_override`), its body with any
/// echoed key masked, its content type and `Retry-After`.
pub fn passthrough(
    status: StatusCode,
    upstream_headers: &HeaderMap,
    body: &Bytes,
    live: &LiveConfig,
    route: &RouteHeaders,
) -> Response {
    let upstream_secrets = live.upstream_secrets();
    let secrets: Vec<&str> = upstream_secrets.iter().map(|s| s.expose()).collect();
    let masked = mask_upstream_body(body, &secrets);
    let mut response = Response::new(Body::from(masked));
    *response.status_mut() = status;
    response
        .headers_mut()
        .reserve(upstream_headers.len() + RouteHeaders::MOST_ADDED);
    header_rules::copy_upstream(upstream_headers, &secrets, response.headers_mut());
    route.apply_over_relayed(response.headers_mut());
    response
}
