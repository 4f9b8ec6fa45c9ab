//! The error bodies real upstreams send (upstream-errors.md), per status and dialect.
//!
//! Owns the shapes and messages only: which status to send is the fault's, the headers are
//! `rate_headers`'. Bodies echo the key the way OpenAI does (a masked prefix and suffix), so
//! the router's masking can be tested.

use serde_json::{json, Value};

use super::fault::ResetForm;
use super::rate_headers::Dialect;

/// An error response before headers are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

fn json_reply(status: u16, body: &Value) -> ErrorReply {
    ErrorReply {
        status,
        content_type: "application/json",
        body: body.to_string(),
    }
}

fn openai(status: u16, message: &str, error_type: &str, code: Option<&str>) -> ErrorReply {
    json_reply(
        status,
        &json!({"error": {"message": message, "type": error_type, "param": null, "code": code}}),
    )
}

fn anthropic(status: u16, error_type: &str, message: &str) -> ErrorReply {
    json_reply(
        status,
        &json!({"type": "error", "error": {"type": error_type, "message": message}}),
    )
}

fn html(status: u16, title: &str) -> ErrorReply {
    ErrorReply {
        status,
        content_type: "text/html",
        body: format!(
            "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
        ),
    }
}

/// How OpenAI echoes a wrong key: `sk-tes************wxyz`.
pub fn masked_key(key: &str) -> String {
    let characters: Vec<char> = key.chars().collect();
    if characters.len() <= 10 {
        return "*".repeat(characters.len());
    }
    let head: String = characters[..6].iter().collect();
    let tail: String = characters[characters.len() - 4..].iter().collect();
    format!("{head}{}{tail}", "*".repeat(characters.len() - 10))
}

/// `Status(n)`: the provider's own body for that status.
pub fn for_status(dialect: Dialect, status: u16, key: &str, model: &str) -> ErrorReply {
    match dialect {
        Dialect::OpenAi => openai_status(status, key, model),
        Dialect::Anthropic => anthropic_status(status, model),
    }
}

/// A path the host does not serve, as OpenAI answers it (a host that serves only some of the
/// generation APIs: a chat-only vLLM, ChatGPT's responses-only Codex backend).
pub fn unknown_route(method: &str, path: &str) -> ErrorReply {
    openai(
        404,
        &format!("Invalid URL ({method} {path})"),
        "invalid_request_error",
        None,
    )
}

fn openai_status(status: u16, key: &str, model: &str) -> ErrorReply {
    let not_found = format!("The model `{model}` does not exist or you do not have access to it.");
    match status {
        400 | 404 => openai(status, &not_found, "invalid_request_error", Some("model_not_found")),
        401 if key.is_empty() => openai(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error",
            None,
        ),
        401 => openai(
            401,
            &format!(
                "Incorrect API key provided: {}. You can find your API key at https://platform.openai.com/account/api-keys.",
                masked_key(key)
            ),
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        402 => openai(
            402,
            "Your account is not active, please check your billing details on our website.",
            "billing_error",
            Some("billing_not_active"),
        ),
        403 => openai(
            403,
            "You have insufficient permissions for this operation. Missing scopes: api.responses.write. Check that you have the correct role in your organization.",
            "invalid_request_error",
            None,
        ),
        413 => openai(413, "Request too large.", "invalid_request_error", Some("request_too_large")),
        500 => openai(
            500,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        502 => html(502, "502 Bad Gateway"),
        503 => openai(
            503,
            "The engine is currently overloaded, please try again later.",
            "server_error",
            None,
        ),
        504 => html(504, "504 Gateway Time-out"),
        529 => openai(529, "Overloaded", "server_error", Some("overloaded")),
        other => openai(other, &format!("Mock upstream status {other}."), "api_error", None),
    }
}

fn anthropic_status(status: u16, model: &str) -> ErrorReply {
    match status {
        400 => anthropic(400, "invalid_request_error", &format!("model: {model} does not exist")),
        401 => anthropic(401, "authentication_error", "invalid x-api-key"),
        402 => anthropic(
            402,
            "billing_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
        ),
        403 => anthropic(
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        404 => anthropic(404, "not_found_error", &format!("model: {model}")),
        413 => anthropic(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
        500 | 502 | 503 => anthropic(status, "api_error", "Internal server error"),
        504 => anthropic(504, "timeout_error", "Request timed out"),
        529 => anthropic(529, "overloaded_error", "Overloaded"),
        other => anthropic(other, "api_error", &format!("Mock upstream status {other}.")),
    }
}

/// A rate-limit 429 whose body carries the reset when the form is a body form.
pub fn rate_limited(dialect: Dialect, model: &str, form: &ResetForm) -> ErrorReply {
    let try_again = match form {
        ResetForm::MessageTryAgainIn(text) => format!("Please try again in {text}."),
        _ => "Visit https://platform.openai.com/account/rate-limits to learn more.".to_owned(),
    };
    let mut body = match dialect {
        Dialect::OpenAi => json!({"error": {
            "message": format!("Rate limit reached for {model} in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. {try_again}"),
            "type": "requests",
            "param": null,
            "code": "rate_limit_exceeded",
        }}),
        Dialect::Anthropic => json!({"type": "error", "error": {
            "type": "rate_limit_error",
            "message": match form {
                ResetForm::MessageTryAgainIn(_) => format!("This request would exceed the rate limit for your organization. {try_again}"),
                _ => "This request would exceed the rate limit for your organization of 50 requests per minute.".to_owned(),
            },
        }}),
    };
    if let ResetForm::BodyRetryDelay(seconds) = form {
        body["error"]["details"] = json!([{
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{seconds}s"),
        }]);
    }
    json_reply(429, &body)
}

/// OpenAI's account-out-of-credit 429 (in the Anthropic envelope on `/v1/messages`).
pub fn insufficient_quota(dialect: Dialect) -> ErrorReply {
    let message = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.";
    match dialect {
        Dialect::OpenAi => openai(
            429,
            message,
            "insufficient_quota",
            Some("insufficient_quota"),
        ),
        Dialect::Anthropic => json_reply(
            429,
            &json!({"type": "error", "error": {"type": "rate_limit_error", "code": "insufficient_quota", "message": message}}),
        ),
    }
}

/// The body of the error event a stream ends with (`data:` payload).
pub fn stream_error_payload(dialect: Dialect) -> Value {
    match dialect {
        Dialect::OpenAi => json!({"error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error", "param": null, "code": null,
        }}),
        Dialect::Anthropic => {
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        }
    }
}

/// A 400 for requests the mock cannot read (no JSON, no model).
pub fn bad_request(dialect: Dialect, message: &str) -> ErrorReply {
    match dialect {
        Dialect::OpenAi => openai(400, message, "invalid_request_error", None),
        Dialect::Anthropic => anthropic(400, "invalid_request_error", message),
    }
}

/// OpenAI's 404 for a stored response that does not exist (or belongs to another key).
pub fn response_not_found(id: &str) -> ErrorReply {
    openai(
        404,
        &format!("Response with id '{id}' not found."),
        "invalid_request_error",
        None,
    )
}

/// OpenAI's 400 for a `previous_response_id` the key has not stored.
pub fn previous_response_not_found(id: &str) -> ErrorReply {
    json_reply(
        400,
        &json!({"error": {
            "message": format!("Previous response with id '{id}' not found."),
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }}),
    )
}

/// ChatGPT's 429 when a plan's window is spent (what Codex reads: the type, and when it resets).
pub fn usage_limit_reached(resets_at_s: u64, resets_in_seconds: u64) -> ErrorReply {
    json_reply(
        429,
        &json!({"error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": resets_at_s,
            "resets_in_seconds": resets_in_seconds,
        }}),
    )
}

/// OpenAI's 400 for an encrypted item (reasoning, compaction) another organisation made.
pub fn invalid_encrypted_content(item: &str) -> ErrorReply {
    json_reply(
        400,
        &json!({"error": {
            "message": format!("The encrypted content for item {item} could not be verified. Reason: Encrypted content organization_id did not match the target organization."),
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_encrypted_content",
        }}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_key_keeps_only_the_ends() {
        assert_eq!(
            masked_key("sk-test-1234567890wxyz"),
            "sk-tes************wxyz"
        );
        assert_eq!(masked_key("short"), "*****");
    }

    #[test]
    fn openai_401_echoes_the_masked_key() {
        let reply = for_status(Dialect::OpenAi, 401, "sk-test-1234567890wxyz", "m");
        assert!(reply.body.contains("sk-tes************wxyz"));
        assert!(!reply.body.contains("1234567890"));
    }

    #[test]
    fn body_retry_delay_is_a_google_retry_info() {
        let reply = rate_limited(Dialect::OpenAi, "m", &ResetForm::BodyRetryDelay(30));
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(body["error"]["details"][0]["retryDelay"], "30s");
    }
}
