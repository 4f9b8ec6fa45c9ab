//! Whether an upstream 404 says the ROUTE does not exist (the host does not serve that API)
//! rather than that the MODEL does not (behaviour §4, §14). Real hosts' route-404s:
//! OpenAI's `Invalid URL (POST /v1/responses)`, vLLM's and other FastAPI servers'
//! `{"detail":"Not Found"}`, Ollama's and other Go servers' `404 page not found`, axum's and
//! others' empty body, a bare `Not Found`, an HTML error page, Anthropic's `not_found_error`
//! with the message `Not Found`. A body that names a model is never a missing route.

use serde_json::Value;

/// What the router calls a route-404 in its own records (the attempt's `error_code`), policy's.
pub use quotaroute_actors::policy::same_target_retry::ROUTE_NOT_FOUND;

/// Whether `body` (a 404's) says the route does not exist.
pub fn says_route_missing(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.to_ascii_lowercase().contains("model") {
        return false;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => json_says_route_missing(&value),
        Err(_) => plain_says_route_missing(text),
    }
}

fn json_says_route_missing(value: &Value) -> bool {
    let message = value
        .pointer("/error/message")
        .or_else(|| value.get("detail"))
        .or_else(|| value.get("message"))
        .or_else(|| value.get("error"))
        .and_then(Value::as_str);
    message.is_some_and(|message| {
        message.starts_with("Invalid URL (") || plain_says_route_missing(message)
    })
}

fn plain_says_route_missing(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.is_empty()
        || lower == "not found"
        || lower == "404 not found"
        || lower == "404 page not found"
        || lower.starts_with("cannot post /")
        || lower.starts_with("<!doctype html")
        || lower.starts_with("<html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s14_real_hosts_route_404s_are_missing_routes() {
        for body in [
            r#"{"error":{"message":"Invalid URL (POST /v1/responses)","type":"invalid_request_error","param":null,"code":null}}"#,
            r#"{"detail":"Not Found"}"#,
            "404 page not found\n",
            "",
            "Not Found",
            "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>nginx</body></html>",
            "<html>\r\n<head><title>404 Not Found</title></head></html>",
            r#"{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}"#,
            "Cannot POST /v1/responses/compact",
        ] {
            assert!(says_route_missing(body.as_bytes()), "{body}");
        }
    }

    #[test]
    fn s4_a_404_naming_the_model_is_not_a_missing_route() {
        for body in [
            r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}"#,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#,
            r#"{"error":"model \"llama9\" not found, try pulling it first"}"#,
            r#"{"detail":"The model `x` does not exist."}"#,
            r#"{"error":{"message":"No response found with id 'resp_1'.","type":"invalid_request_error"}}"#,
        ] {
            assert!(!says_route_missing(body.as_bytes()), "{body}");
        }
    }
}
