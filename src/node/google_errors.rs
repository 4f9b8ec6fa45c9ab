//! The router's own errors in Google's shape on Google's paths (behaviour §15):
//! `{"error":{"code","message","status","details":[ErrorInfo, RetryInfo]}}`, the contract's
//! code as `ErrorInfo.reason` in domain `quotaroute`, a `RetryInfo` where a `Retry-After` is
//! given. An upstream's own Google error passes as it came.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::api_error::ApiError;

/// The longest error body re-shaped: the router's own are far shorter.
const MAX_ERROR_BYTES: usize = 256 * 1024;

/// Google's canonical status name for an HTTP status.
pub fn google_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        502 | 503 => "UNAVAILABLE",
        _ if status.is_client_error() => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}

/// One of the router's errors in Google's shape, with its `Retry-After` (as the route's
/// headers would carry it).
pub fn google_error(error: &ApiError) -> Response {
    let response = crate::node::reply::error_only(error, false);
    let (mut parts, _) = response.into_parts();
    if let Some(seconds) = error.retry_after_header() {
        if let Ok(value) = HeaderValue::from_str(&seconds) {
            parts.headers.insert(RETRY_AFTER, value);
        }
    }
    let body = reshaped(
        parts.status,
        parts.headers.get(RETRY_AFTER),
        &error.body(false),
    )
    .unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

/// `response` with the router's own error body (OpenAI's shape: a string `error.code`)
/// re-written in Google's; successes and Google's own errors (a numeric `code`) untouched.
pub async fn in_google_shape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_ERROR_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    match reshaped(status, parts.headers.get(RETRY_AFTER), &bytes) {
        Some(body) => {
            parts.headers.remove(CONTENT_LENGTH);
            parts
                .headers
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Response::from_parts(parts, Body::from(body))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// The router's error `body` in Google's shape, `None` when it is not one of the router's.
fn reshaped(status: StatusCode, retry_after: Option<&HeaderValue>, body: &[u8]) -> Option<Vec<u8>> {
    let value: Value = serde_json::from_slice(body).ok()?;
    // Anthropic's shape nests the same fields under `error` too.
    let error = value.get("error")?;
    let reason = error.get("code")?.as_str()?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let mut metadata = serde_json::Map::new();
    if let Some(kind) = error.get("type").and_then(Value::as_str) {
        metadata.insert("type".into(), Value::from(kind));
    }
    if let Some(resets_at) = error.get("resets_at").and_then(Value::as_u64) {
        metadata.insert("resets_at".into(), Value::from(resets_at.to_string()));
    }
    let mut details = vec![json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "quotaroute",
        "metadata": metadata,
    })];
    if let Some(seconds) = retry_after
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
    {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{seconds}s"),
        }));
    }
    let mut fields = json!({
        "code": status.as_u16(),
        "message": message,
        "status": google_status(status),
        "details": details,
    });
    // What the router lists of its blocked targets (429/503) stays readable.
    if let (Some(blocked), Some(object)) = (error.get("blocked"), fields.as_object_mut()) {
        object.insert("blocked".into(), blocked.clone());
    }
    serde_json::to_vec(&json!({ "error": fields })).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routers_error_reads_as_googles_with_error_info_and_retry_info() {
        let body = br#"{"error":{"message":"every target is locked","type":"rate_limit_error","code":"all_targets_locked","blocked":[]}}"#;
        let retry = HeaderValue::from_static("37");
        let out = reshaped(StatusCode::TOO_MANY_REQUESTS, Some(&retry), body).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["error"]["code"], 429);
        assert_eq!(out["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(out["error"]["message"], "every target is locked");
        let details = out["error"]["details"].as_array().unwrap();
        assert_eq!(
            details[0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(details[0]["reason"], "all_targets_locked");
        assert_eq!(details[0]["domain"], "quotaroute");
        assert_eq!(
            details[1]["@type"],
            "type.googleapis.com/google.rpc.RetryInfo"
        );
        assert_eq!(details[1]["retryDelay"], "37s");
    }

    #[test]
    fn googles_own_errors_are_left_as_they_came() {
        let google = br#"{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(reshaped(StatusCode::BAD_REQUEST, None, google), None);
        assert_eq!(reshaped(StatusCode::BAD_REQUEST, None, b"not json"), None);
    }
}
