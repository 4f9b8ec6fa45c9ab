//! An upstream error body in the client's error shape, with the upstream's status and message
//! (behaviour §14): read from any API's shape into the hub's [`ErrorForm`], written in the
//! client's. Classification (§4) has already read the upstream's own body.

use bytes::Bytes;
use serde_json::{json, Value};

use super::hub::form::ErrorForm;
use super::Direction;

/// Anthropic's error `type` for a status.
fn anthropic_type(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 | 503 => "overloaded_error",
        _ => "api_error",
    }
}

/// OpenAI's error `type` for a status.
fn openai_type(status: u16) -> &'static str {
    match status {
        400 | 404 | 413 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        _ => "server_error",
    }
}

/// The message, type and code of any API's shape (or the body itself when it is no JSON
/// error).
pub fn read(status: u16, body: &[u8]) -> ErrorForm {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = error
        .and_then(|e| e.get("message").and_then(Value::as_str).or(e.as_str()))
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(2048).collect());
    // Google's shape: its `status` name is the type, its `ErrorInfo.reason` the code (its
    // `code` is the HTTP status).
    let google = error.and_then(|e| e.get("status")).and_then(Value::as_str);
    let kind = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .or(google)
        .map(str::to_owned);
    let code = match google {
        Some(_) => error.and_then(google_reason).map(Value::String),
        None => error
            .and_then(|e| e.get("code"))
            .filter(|c| !c.is_null())
            .cloned(),
    };
    ErrorForm {
        status,
        message,
        kind,
        code,
    }
}

/// The `reason` of a Google error's `ErrorInfo` detail.
fn google_reason(error: &Value) -> Option<String> {
    error
        .get("details")?
        .as_array()?
        .iter()
        .find_map(|detail| detail.get("reason")?.as_str())
        .map(str::to_owned)
}

/// `body`, an upstream error of `direction`'s target API, as the client's error body.
pub fn error_body(direction: Direction, status: u16, body: &[u8]) -> Bytes {
    write(direction.client, &read(status, body))
}

/// `error` in `client`'s error shape.
pub fn write(client: super::Api, error: &ErrorForm) -> Bytes {
    let ErrorForm {
        status,
        message,
        kind,
        code,
    } = error.clone();
    if client == super::Api::Gemini {
        let reason = code
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(kind);
        let out = super::gemini::write::error(status, &message, reason.as_deref());
        return Bytes::from(out.to_string());
    }
    let out = if client.is_anthropic() {
        json!({
            "type": "error",
            "error": {"type": anthropic_type(status), "message": message},
        })
    } else {
        // The Anthropic type (`overloaded_error`, …) stays readable as the code.
        json!({
            "error": {
                "message": message,
                "type": openai_type(status),
                "param": null,
                "code": code.or_else(|| kind.map(Value::String)),
            }
        })
    };
    Bytes::from(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_take_the_clients_shape_with_the_upstreams_message() {
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let out: Value =
            serde_json::from_slice(&error_body(Direction::CHAT_TO_MESSAGES, 529, anthropic))
                .unwrap();
        assert_eq!(out["error"]["message"], "Overloaded");
        assert_eq!(out["error"]["type"], "server_error");
        assert_eq!(out["error"]["code"], "overloaded_error");

        let openai = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        let out: Value =
            serde_json::from_slice(&error_body(Direction::MESSAGES_TO_CHAT, 429, openai)).unwrap();
        assert_eq!(out["type"], "error");
        assert_eq!(out["error"]["type"], "rate_limit_error");
        assert_eq!(out["error"]["message"], "Rate limit reached");

        let out: Value = serde_json::from_slice(&error_body(
            Direction::MESSAGES_TO_CHAT,
            400,
            b"plain words",
        ))
        .unwrap();
        assert_eq!(out["error"]["type"], "invalid_request_error");
        assert_eq!(out["error"]["message"], "plain words");
    }
}
