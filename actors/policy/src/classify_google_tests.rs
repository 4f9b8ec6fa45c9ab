//! The classification table (behaviour §4) on Google's real answers (behaviour §15): the day's
//! quota until midnight Pacific whatever its `retryDelay`, the minute's for its `retryDelay`,
//! bad and suspended keys as the account's failure, the rest as before.

use http::HeaderMap;
use quotaroute_journal::{ApiFormat, OutcomeClass};
use serde_json::{json, Value};

use super::classify::{classify, rules, Classification, UpstreamReply};

/// 2026-12-05T18:00:00Z: 10:00 in Los Angeles (PST), 14 hours before its midnight.
const NOW: u64 = 1_796_493_600_000;
const HOUR: u64 = 3_600_000;

fn google(status: u16, body: &Value, format: ApiFormat) -> Classification {
    let headers = HeaderMap::new();
    let text = body.to_string();
    classify(
        &UpstreamReply {
            status: Some(status),
            headers: &headers,
            body: text.as_bytes(),
            transport: None,
            format,
        },
        NOW,
    )
}

fn quota_429(quota_id: &str, retry_delay: &str) -> Value {
    json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details. \
                    For more information on this error, head to: \
                    https://ai.google.dev/gemini-api/docs/rate-limits.\nPlease retry in 22.4s.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                "quotaValue": "250"}]},
            {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
                "description": "Learn more about Gemini API quotas",
                "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]}})
}

#[test]
fn the_day_quota_is_locked_until_midnight_pacific_not_for_its_retry_delay() {
    assert_eq!(
        crate::google_errors::ms_to_next_pacific_midnight(NOW),
        Some(14 * HOUR)
    );
    let body = quota_429("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "22s");
    // The same body from Google's own API and from its OpenAI-compatible endpoint (a list).
    for (body, format) in [
        (body.clone(), ApiFormat::Openai),
        (json!([body]), ApiFormat::Openai),
        (body, ApiFormat::Anthropic),
    ] {
        let seen = google(429, &body, format);
        assert_eq!(seen.class, OutcomeClass::QuotaExhausted, "{body}");
        assert_eq!(seen.reset_hint_ms, Some(14 * HOUR));
        assert_eq!(
            seen.error_code.as_deref(),
            Some("GenerateRequestsPerDayPerProjectPerModel-FreeTier")
        );
    }
}

#[test]
fn the_minute_quota_is_a_rate_limit_for_its_retry_delay() {
    let seen = google(
        429,
        &quota_429("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "7s"),
        ApiFormat::Openai,
    );
    assert_eq!(seen.class, OutcomeClass::RateLimited);
    assert_eq!(seen.reset_hint_ms, Some(7_000));
    // The same in the list Google's OpenAI-compatible endpoint sends.
    let listed = json!([quota_429(
        "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        "7s"
    )]);
    assert_eq!(
        google(429, &listed, ApiFormat::Openai).reset_hint_ms,
        Some(7_000)
    );
    let mut without_delay = quota_429("GenerateContentInputTokensPerModelPerMinute-FreeTier", "1s");
    without_delay["error"]["details"]
        .as_array_mut()
        .unwrap()
        .truncate(2);
    // No RetryInfo: the message's "Please retry in 22.4s.", else 60 s.
    let seen = google(429, &without_delay, ApiFormat::Openai);
    assert_eq!(seen.class, OutcomeClass::RateLimited);
    assert_eq!(seen.reset_hint_ms, Some(22_400));
    without_delay["error"]["message"] = json!("You exceeded your current quota.");
    let seen = google(429, &without_delay, ApiFormat::Openai);
    assert_eq!(seen.reset_hint_ms, Some(60_000));
}

#[test]
fn bad_expired_and_suspended_keys_disable_the_connection_and_fail_over() {
    let bad = json!({"error": {"code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}}]}});
    let expired = json!([{"error": {"code": 400, "message": "API key expired. Please renew the API key.",
        "status": "INVALID_ARGUMENT"}}]);
    let suspended = json!({"error": {"code": 403,
        "message": "Permission denied: Consumer 'api_key:AIzaSyDk3vQ0Example0Key0Text0123' has been suspended.",
        "status": "PERMISSION_DENIED",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "CONSUMER_SUSPENDED", "domain": "googleapis.com"}]}});
    for (status, body, want) in [
        (400, &bad, OutcomeClass::AuthFailed),
        (400, &expired, OutcomeClass::AuthFailed),
        (403, &suspended, OutcomeClass::Forbidden),
    ] {
        let seen = google(status, body, ApiFormat::Openai);
        assert_eq!(seen.class, want, "{body}");
        let rules = rules(seen.class);
        assert!(rules.disables_connection.is_some() && rules.fails_over);
        assert!(!seen.message.unwrap_or_default().contains("AIzaSy"));
    }
    assert_eq!(
        google(400, &bad, ApiFormat::Openai).error_code.as_deref(),
        Some("API_KEY_INVALID")
    );
}

#[test]
fn other_google_answers_keep_their_rows() {
    let invalid = json!({"error": {"code": 400, "message": "Request contains an invalid argument.",
        "status": "INVALID_ARGUMENT"}});
    assert_eq!(
        google(400, &invalid, ApiFormat::Openai).class,
        OutcomeClass::ClientError
    );
    let overloaded = json!({"error": {"code": 503,
        "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}});
    assert_eq!(
        google(503, &overloaded, ApiFormat::Openai).class,
        OutcomeClass::ServerError
    );
    let bare = json!({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED"}});
    // Neither detail: §3's rules, as before (the message names a quota).
    assert_eq!(
        google(429, &bare, ApiFormat::Openai).class,
        OutcomeClass::QuotaExhausted
    );
}

#[test]
fn google_errors_inside_a_stream_use_the_same_rows() {
    use super::classify::classify_stream_error;
    let day = quota_429("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "22s");
    assert_eq!(classify_stream_error(&day), OutcomeClass::QuotaExhausted);
    let minute = quota_429("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "7s");
    assert_eq!(classify_stream_error(&minute), OutcomeClass::RateLimited);
    let overloaded = json!({"error": {"code": 503, "status": "UNAVAILABLE",
        "message": "The model is overloaded. Please try again later."}});
    assert_eq!(
        classify_stream_error(&overloaded),
        OutcomeClass::ServerError
    );
}

#[test]
fn a_safety_block_is_an_answer() {
    let blocked = json!({"candidates": [{"content": {"parts": [], "role": "model"},
        "finishReason": "SAFETY", "index": 0,
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                           "blocked": true}]}],
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}});
    let prompt_blocked = json!({"promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}});
    for body in [blocked, prompt_blocked] {
        let seen = google(200, &body, ApiFormat::Gemini);
        assert_eq!(seen.class, OutcomeClass::Success);
        assert!(!rules(seen.class).fails_over);
    }
}
