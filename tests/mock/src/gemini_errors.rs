//! Google's own error bodies for the Gemini API (`google.rpc.Status`): `{"error": {"code",
//! "message", "status", "details": [...]}}` with the `ErrorInfo`, `QuotaFailure`, `RetryInfo`,
//! `Help` and `LocalizedMessage` details Google attaches, pretty-printed as Google sends them.
//!
//! Owns the bodies only; which one a request gets is `gemini_api`'s and `verdict`'s.

use serde_json::{json, Value};

use super::error_bodies::ErrorReply;
use super::fault::Fault;

/// Where Google points a quota error.
const RATE_LIMITS_URL: &str = "https://ai.google.dev/gemini-api/docs/rate-limits";
const SERVICE: &str = "generativelanguage.googleapis.com";
/// The free tier's requests-per-day and requests-per-minute limits the bodies name.
const FREE_TIER_PER_DAY: u64 = 250;
const FREE_TIER_PER_MINUTE: u64 = 10;

/// The `@type` of a `google.rpc` detail.
fn detail_type(name: &str) -> String {
    format!("type.googleapis.com/google.rpc.{name}")
}

/// Google's error body: `code`, `message`, `status` and `details` (left out when empty).
pub fn body(code: u16, status: &str, message: &str, details: Vec<Value>) -> ErrorReply {
    let mut error = json!({"code": code, "message": message, "status": status});
    if !details.is_empty() {
        error["details"] = Value::Array(details);
    }
    ErrorReply {
        status: code,
        content_type: "application/json; charset=UTF-8",
        body: serde_json::to_string_pretty(&json!({ "error": error })).unwrap_or_default(),
    }
}

/// The same body as Google's OpenAI-compatible endpoint sends it: a one-element list.
pub fn listed(reply: ErrorReply) -> ErrorReply {
    let value: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    ErrorReply {
        body: serde_json::to_string_pretty(&json!([value])).unwrap_or_default(),
        ..reply
    }
}

fn error_info(reason: &str, extra: Value) -> Value {
    let mut metadata = json!({"service": SERVICE});
    if let (Some(metadata), Value::Object(extra)) = (metadata.as_object_mut(), extra) {
        metadata.extend(extra);
    }
    json!({"@type": detail_type("ErrorInfo"), "reason": reason, "domain": "googleapis.com",
           "metadata": metadata})
}

/// 429 `RESOURCE_EXHAUSTED`: the free tier's request quota per day or per minute is spent for
/// `model`; `retryDelay` is `retry_delay_s` either way (Google's own delay says nothing about
/// the day's reset).
pub fn quota(per_day: bool, model: &str, retry_delay_s: u64) -> ErrorReply {
    let (quota_id, limit) = if per_day {
        (
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            FREE_TIER_PER_DAY,
        )
    } else {
        (
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            FREE_TIER_PER_MINUTE,
        )
    };
    let metric = format!("{SERVICE}/generate_content_free_tier_requests");
    let message = format!(
        "You exceeded your current quota, please check your plan and billing details. For more \
         information on this error, head to: {RATE_LIMITS_URL}. To monitor your current usage, \
         head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: {metric}, \
         limit: {limit}, model: {model}\nPlease retry in {retry_delay_s}.418s."
    );
    let details = vec![
        json!({"@type": detail_type("QuotaFailure"), "violations": [{
            "quotaMetric": metric,
            "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": model},
            "quotaValue": limit.to_string(),
        }]}),
        json!({"@type": detail_type("Help"), "links": [{
            "description": "Learn more about Gemini API quotas",
            "url": RATE_LIMITS_URL,
        }]}),
        json!({"@type": detail_type("RetryInfo"), "retryDelay": format!("{retry_delay_s}s")}),
    ];
    body(429, "RESOURCE_EXHAUSTED", &message, details)
}

/// 400 `INVALID_ARGUMENT` `API_KEY_INVALID`: how Google answers a wrong, deleted or expired key.
pub fn key_invalid() -> ErrorReply {
    let message = "API key not valid. Please pass a valid API key.";
    body(
        400,
        "INVALID_ARGUMENT",
        message,
        vec![
            error_info("API_KEY_INVALID", Value::Null),
            json!({"@type": detail_type("LocalizedMessage"), "locale": "en-US", "message": message}),
        ],
    )
}

/// 403 `PERMISSION_DENIED` `CONSUMER_SUSPENDED`: the key's project is suspended (the message
/// echoes the key, as Google's does).
pub fn key_suspended(key: &str) -> ErrorReply {
    let consumer = format!("api_key:{key}");
    body(
        403,
        "PERMISSION_DENIED",
        &format!("Permission denied: Consumer '{consumer}' has been suspended."),
        vec![
            error_info(
                "CONSUMER_SUSPENDED",
                json!({"consumer": format!("projects/{}", project_number(key))}),
            ),
            json!({"@type": detail_type("LocalizedMessage"), "locale": "en-US",
                   "message": format!("Permission denied: Consumer '{consumer}' has been suspended.")}),
        ],
    )
}

/// 403 `PERMISSION_DENIED` for a request without any key.
pub fn no_key() -> ErrorReply {
    body(
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers (callers without established identity). \
         Please use API Key or other form of API consumer identity to call this API.",
        Vec::new(),
    )
}

/// A stable made-up project number for a key.
fn project_number(key: &str) -> u64 {
    key.bytes().fold(1_000_000_007u64, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(b))
    }) % 1_000_000_000_000
}

/// `Status(n)` on a Gemini path: Google's body for that status.
pub fn for_status(status: u16, model: &str) -> ErrorReply {
    match status {
        400 => body(
            400,
            "INVALID_ARGUMENT",
            "Request contains an invalid argument.",
            Vec::new(),
        ),
        401 => body(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, \
             login cookie or other valid authentication credential. See \
             https://developers.google.com/identity/sign-in/web/devconsole-project.",
            vec![error_info("ACCESS_TOKEN_EXPIRED", Value::Null)],
        ),
        403 => body(
            403,
            "PERMISSION_DENIED",
            "The caller does not have permission",
            Vec::new(),
        ),
        404 => body(
            404,
            "NOT_FOUND",
            &format!(
                "models/{model} is not found for API version v1beta, or is not supported for \
                 generateContent. Call ListModels to see the list of available models and their \
                 supported methods."
            ),
            Vec::new(),
        ),
        429 => body(
            429,
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
            Vec::new(),
        ),
        500 => body(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report in \
             https://developers.generativeai.google/guide/troubleshooting",
            Vec::new(),
        ),
        503 => body(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            Vec::new(),
        ),
        504 => body(
            504,
            "DEADLINE_EXCEEDED",
            "Deadline expired before operation could complete.",
            Vec::new(),
        ),
        other => body(other, "UNKNOWN", "Unknown error.", Vec::new()),
    }
}

/// The body a Gemini error fault gives (`None` for faults that are not Google errors).
pub fn for_fault(fault: &Fault, key: &str, model: &str) -> Option<ErrorReply> {
    match fault {
        Fault::GeminiQuota {
            per_day,
            retry_delay_s,
        } => Some(quota(*per_day, model, *retry_delay_s)),
        Fault::GeminiKeyInvalid => Some(key_invalid()),
        Fault::GeminiKeySuspended => Some(key_suspended(key)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(reply: &ErrorReply) -> Value {
        serde_json::from_str(&reply.body).unwrap()
    }

    #[test]
    fn the_day_quota_names_its_quota_id_model_and_a_short_retry_delay() {
        let reply = quota(true, "gemini-2.5-flash", 22);
        assert_eq!(reply.status, 429);
        let body = parsed(&reply);
        assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
        let details = body["error"]["details"].as_array().unwrap();
        let violation = &details[0]["violations"][0];
        assert_eq!(
            details[0]["@type"],
            "type.googleapis.com/google.rpc.QuotaFailure"
        );
        assert_eq!(
            violation["quotaId"],
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
        );
        assert_eq!(violation["quotaDimensions"]["model"], "gemini-2.5-flash");
        assert_eq!(details[1]["@type"], "type.googleapis.com/google.rpc.Help");
        assert_eq!(details[2]["retryDelay"], "22s");
        let minute = parsed(&quota(false, "m", 7));
        assert_eq!(
            minute["error"]["details"][0]["violations"][0]["quotaId"],
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
        );
    }

    #[test]
    fn bad_and_suspended_keys_carry_their_error_info_reason() {
        let bad = parsed(&key_invalid());
        assert_eq!(bad["error"]["code"], 400);
        assert_eq!(bad["error"]["details"][0]["reason"], "API_KEY_INVALID");
        let suspended = key_suspended("AIzaSyExample");
        assert_eq!(suspended.status, 403);
        let suspended = parsed(&suspended);
        assert_eq!(
            suspended["error"]["details"][0]["reason"],
            "CONSUMER_SUSPENDED"
        );
        assert!(suspended["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has been suspended"));
        let listed = parsed(&listed(key_invalid()));
        assert_eq!(listed[0]["error"]["status"], "INVALID_ARGUMENT");
    }
}
