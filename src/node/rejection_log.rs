//! One `info` line for every client request the router itself refuses (unknown model or
//! endpoint, a bad key, the WebSocket probe's 426, a client over its limits, a bad body): the
//! request id, the status, the error code and the client, so an operator sees why a client
//! fails. Upstream answers (those with attempts) are not logged here; nothing else is touched.
//!
//! Only a refusal's body (small JSON the router wrote) is read, to name its code; successes
//! and streams pass through untouched.

use axum::body::Body;
use axum::response::Response;
use http::HeaderMap;

/// A refusal's body is read up to this much to find its code (the router's are far smaller).
const BODY_LIMIT: usize = 64 * 1024;

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The error code of an OpenAI-shaped (`error.code`) or Anthropic-shaped (`error.type`) body.
fn error_code(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return "-".to_owned();
    };
    let error = &value["error"];
    error["code"]
        .as_str()
        .or_else(|| error["type"].as_str())
        .unwrap_or("-")
        .to_owned()
}

/// Whether `response` is the router's own refusal: a 4xx that no upstream attempt produced.
fn is_refusal(response: &Response) -> bool {
    response.status().is_client_error()
        && header(response.headers(), "x-quotaroute-attempts").is_none_or(|a| a == "0")
}

/// Logs `response` when it is a refusal of the request (`method`, `path`, the client's own
/// `x-request-id` if it sent one, the client its key names — `-` for no valid key); returns it
/// unchanged. Called by the one middleware over the router's own answers (`plain_errors`), for
/// the client API's paths.
pub async fn logged(
    method: &http::Method,
    path: &str,
    client_request_id: Option<&http::HeaderValue>,
    client: Option<&str>,
    response: Response,
) -> Response {
    if !is_refusal(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .unwrap_or_default();
    let request_id = header(&parts.headers, "x-request-id")
        .or_else(|| client_request_id.and_then(|v| v.to_str().ok()))
        .unwrap_or("-")
        .to_owned();
    tracing::info!(
        request_id = %request_id,
        status = parts.status.as_u16(),
        code = %error_code(&bytes),
        client = client.unwrap_or("-"),
        method = %method,
        path = %path,
        "request refused"
    );
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_come_from_either_error_shape() {
        assert_eq!(
            error_code(br#"{"error":{"code":"model_not_found","type":"invalid_request_error"}}"#),
            "model_not_found"
        );
        assert_eq!(
            error_code(br#"{"type":"error","error":{"type":"authentication_error"}}"#),
            "authentication_error"
        );
        assert_eq!(error_code(b""), "-");
        assert_eq!(error_code(b"not json"), "-");
    }
}
