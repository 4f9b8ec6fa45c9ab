//! The one classification table (behaviour §4): an upstream result → its [`OutcomeClass`], and what
//! each class does to the breaker, the connection, the model lockout and failover ([`rules`]).
//!
//! Pure and total: never panics on any status, header or body, never reads a clock. It must not
//! hold state or compute durations (breaker, cooldown and lockout own those); it only reports the
//! upstream's own reset hint. Upstream text leaves this file only through [`mask_secrets`].

use crate::google_errors::{self, GoogleDetails, GoogleQuota};
use crate::reset_hint;
use http::HeaderMap;
use quotaroute_journal::{ApiFormat, DisableReason, LockReason, OutcomeClass};
use serde_json::Value;

/// Longest upstream message (in chars) we journal or log.
pub const MESSAGE_MAX_CHARS: usize = 300;
/// A 429 whose reset is at least this far away is a quota, not a rate limit (behaviour §4).
pub const QUOTA_RESET_MS: u64 = 3_600_000;
/// A Google per-minute quota without a `RetryInfo` is back after this (behaviour §15).
const GOOGLE_QUOTA_DEFAULT_RETRY_MS: u64 = 60_000;
/// What replaces a secret in upstream text.
const MASK: &str = "***";

/// Why an upstream request produced no (complete) HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportFailure {
    /// No headers (or no body) within the deadline.
    Timeout,
    /// Connection refused or unreachable.
    Connect,
    /// Connection reset or closed mid-way.
    Reset,
    Tls,
    Dns,
    Other,
}

/// Why an attempt produced no answer the classifier can read from a status and a body: the
/// typed inputs of [`failure_class`], so no caller picks a class by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptFailure {
    /// The connection failed or timed out (before the head, or while reading the body or a
    /// stream).
    Transport(TransportFailure),
    /// The upstream answered, but its body cannot be used.
    Body(BodyFailure),
    /// Nothing was sent: the target left the config, its URL did not build, or its credential
    /// could not be had (or refreshed after a 401, or retried within the budget).
    NotSent,
}

/// How an upstream body (whole or streamed) is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyFailure {
    /// Over the router's bound for a whole body.
    TooLarge,
    /// The router already holds as many upstream bytes as it may.
    BufferFull,
    /// A `Content-Encoding` the router cannot read, or data that does not decode in it.
    Undecodable,
    /// A 2xx whose body is not the JSON the endpoint answers with.
    NotJson,
    /// A stream was asked for and the answer is not an event stream.
    NotAnEventStream,
    /// The stream ended before any content (and without its end marker).
    EndedBeforeContent,
    /// An event that does not parse, or is larger than the parser's bound.
    UnreadableEvents,
}

/// The class of an attempt that failed without a readable answer (behaviour §3, §4): a timeout
/// is `timeout`; a broken or failed connection, and a try that could not be sent, `network`;
/// an unusable body, the upstream's fault, `server_error`.
pub fn failure_class(failure: AttemptFailure) -> OutcomeClass {
    match failure {
        AttemptFailure::Transport(TransportFailure::Timeout) => OutcomeClass::Timeout,
        AttemptFailure::Transport(_) | AttemptFailure::NotSent => OutcomeClass::Network,
        AttemptFailure::Body(_) => OutcomeClass::ServerError,
    }
}

/// Everything the classifier looks at for one upstream attempt.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamReply<'a> {
    /// `None` when no status line arrived.
    pub status: Option<u16>,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    /// Set when the transport failed; it wins over any status already received.
    pub transport: Option<TransportFailure>,
    pub format: ApiFormat,
}

/// What the classifier saw, ready for a `request_failed` event (message already masked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub class: OutcomeClass,
    pub status: Option<u16>,
    pub error_code: Option<String>,
    pub message: Option<String>,
    /// The upstream's own reset hint, ms from `now`: the full set of hints (behaviour §5) for
    /// `rate_limited` and `quota_exhausted`, only `Retry-After` / `retry-after-ms` for the other
    /// failures (per-window rate-limit headers ride on every response and say nothing about them).
    pub reset_hint_ms: Option<u64>,
}

/// What one class does: the columns of the table in behaviour §4, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassRules {
    /// Counts as a failure in the provider's breaker.
    pub trips_breaker: bool,
    /// Removes one failure from the breaker (and closes it from a probe).
    pub counts_as_breaker_success: bool,
    /// Puts the connection in cooldown.
    pub cools_connection: bool,
    /// Disables the whole connection, and why.
    pub disables_connection: Option<DisableReason>,
    /// Locks the (connection, model), and why.
    pub locks_model: Option<LockReason>,
    /// Try the next target; `false` returns the answer to the client as is.
    pub fails_over: bool,
    /// Counts against `max_attempts` (behaviour §3: timeout, server and network failures only).
    pub counts_as_attempt: bool,
}

impl ClassRules {
    /// Whether the report of an attempt of this class waits for its connection and breaker to
    /// apply it (behaviour §3, read-your-writes): exactly when the request may try again, so
    /// the next try — and the client's next request — route on state that knows it.
    pub fn report_waits(&self) -> bool {
        self.fails_over
    }
}

/// The table of behaviour §4 as data.
pub fn rules(class: OutcomeClass) -> ClassRules {
    let quiet = ClassRules {
        trips_breaker: false,
        counts_as_breaker_success: false,
        cools_connection: false,
        disables_connection: None,
        locks_model: None,
        fails_over: true,
        counts_as_attempt: false,
    };
    let upstream_fault = ClassRules {
        trips_breaker: true,
        cools_connection: true,
        counts_as_attempt: true,
        ..quiet
    };
    match class {
        OutcomeClass::Success => ClassRules {
            counts_as_breaker_success: true,
            fails_over: false,
            ..quiet
        },
        OutcomeClass::ClientError => ClassRules {
            fails_over: false,
            ..quiet
        },
        OutcomeClass::ModelUnavailable => ClassRules {
            locks_model: Some(LockReason::NotFound),
            ..quiet
        },
        OutcomeClass::AuthFailed | OutcomeClass::Forbidden => ClassRules {
            disables_connection: Some(DisableReason::Auth),
            ..quiet
        },
        OutcomeClass::Billing => ClassRules {
            disables_connection: Some(DisableReason::Billing),
            ..quiet
        },
        OutcomeClass::QuotaExhausted => ClassRules {
            locks_model: Some(LockReason::QuotaExhausted),
            ..quiet
        },
        OutcomeClass::RateLimited => ClassRules {
            locks_model: Some(LockReason::RateLimited),
            ..quiet
        },
        OutcomeClass::Timeout | OutcomeClass::ServerError | OutcomeClass::Network => upstream_fault,
    }
}

/// The error an upstream described, from any of the body shapes in `upstream-errors.md`.
#[derive(Debug, Default)]
struct UpstreamError {
    /// `error.code` when a string (OpenAI).
    code: Option<String>,
    /// `error.type` (OpenAI, Anthropic).
    kind: Option<String>,
    /// `error.status` when a string (Google: `RESOURCE_EXHAUSTED`).
    status_text: Option<String>,
    /// `error.code` / `error.status` when a number (Google: `429`).
    numeric_code: Option<u64>,
    /// Raw, unmasked: used for matching only, masked before it leaves.
    message: Option<String>,
    /// Google's `google.rpc` details (`ErrorInfo`, `QuotaFailure`), behaviour §15.
    google: GoogleDetails,
}

fn text_of(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

impl UpstreamError {
    /// Reads `{"error":{...}}`, `{"type":"error","error":{...}}`, `{"error":"text"}`,
    /// `{"message"|"detail": ...}` and `[{"error":{...}}]`; anything else yields no fields.
    fn from_value(value: &Value) -> Self {
        Self {
            google: GoogleDetails::from_body(value),
            ..Self::from_value_shape(value)
        }
    }

    fn from_value_shape(value: &Value) -> Self {
        let value = match value {
            Value::Array(items) => items.first().unwrap_or(&Value::Null),
            other => other,
        };
        let top_kind = text_of(value.get("type")).filter(|kind| kind != "error");
        match value.get("error") {
            Some(error @ Value::Object(_)) => {
                let number = |name: &str| error.get(name).and_then(Value::as_u64);
                UpstreamError {
                    code: text_of(error.get("code")),
                    kind: text_of(error.get("type")).or(top_kind),
                    status_text: text_of(error.get("status")),
                    numeric_code: number("code").or_else(|| number("status")),
                    message: text_of(error.get("message")),
                    google: GoogleDetails::default(),
                }
            }
            Some(Value::String(message)) => UpstreamError {
                kind: text_of(value.get("error_type")).or(top_kind),
                message: Some(message.clone()),
                ..UpstreamError::default()
            },
            _ => UpstreamError {
                code: text_of(value.get("code")),
                kind: top_kind,
                message: text_of(value.get("message")).or_else(|| text_of(value.get("detail"))),
                ..UpstreamError::default()
            },
        }
    }

    /// Its identifiers, most specific first.
    fn ids(&self) -> impl Iterator<Item = &str> {
        [&self.code, &self.kind, &self.status_text]
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    fn has_id(&self, wanted: &[&str]) -> bool {
        self.ids()
            .any(|id| wanted.iter().any(|w| id.eq_ignore_ascii_case(w)))
    }

    /// Identifiers and message, lowercased, for phrase matching.
    fn haystack(&self) -> String {
        let mut text = self.ids().collect::<Vec<_>>().join(" ");
        if let Some(message) = &self.message {
            text.push(' ');
            text.push_str(message);
        }
        text.to_lowercase()
    }

    fn mentions_any(&self, phrases: &[&str]) -> bool {
        let haystack = self.haystack();
        phrases.iter().any(|phrase| haystack.contains(phrase))
    }

    /// A 400 that is about the model itself (unknown, unsupported, retired), not the request.
    fn names_unknown_model(&self) -> bool {
        const MODEL_CODES: [&str; 6] = [
            "model_not_found",
            "model_not_supported",
            "unsupported_model",
            "invalid_model",
            "model_not_available",
            "model_deprecated",
        ];
        if self.has_id(&MODEL_CODES) {
            return true;
        }
        let haystack = self.haystack();
        // "This model's maximum context length is…" names the model but is the request's fault.
        if haystack.contains("context length") || haystack.contains("context_length") {
            return false;
        }
        const ALWAYS: [&str; 9] = [
            "model not found",
            "unknown model",
            "invalid model",
            "unsupported model",
            "no such model",
            "not a valid model",
            "model is not supported",
            "model not supported",
            "model is not available",
        ];
        const WITH_MODEL: [&str; 5] = [
            "does not exist",
            "decommissioned",
            "deprecated",
            "has been removed",
            "do not have access",
        ];
        ALWAYS.iter().any(|phrase| haystack.contains(phrase))
            || (haystack.contains("model") && WITH_MODEL.iter().any(|p| haystack.contains(p)))
    }

    /// The account is out of credit (OpenAI `insufficient_quota`; Anthropic's 400 "credit balance
    /// is too low"), as opposed to a per-model quota.
    fn is_out_of_credit(&self) -> bool {
        self.has_id(&["insufficient_quota", "billing_hard_limit_reached"])
            || self.mentions_any(&["credit balance is too low"])
    }

    /// `error_code` for the journal: the format's most specific identifier.
    fn error_code(&self, format: ApiFormat) -> Option<String> {
        if let Some(google) = self.google.error_code() {
            return Some(mask_secrets(&google));
        }
        let ordered = match format {
            ApiFormat::Openai => [&self.code, &self.kind, &self.status_text],
            ApiFormat::Anthropic => [&self.kind, &self.code, &self.status_text],
            // Google: `error.status` (`RESOURCE_EXHAUSTED`) is the identifier; `code` a number.
            ApiFormat::Gemini => [&self.status_text, &self.code, &self.kind],
        };
        ordered
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .or_else(|| self.numeric_code.map(|code| code.to_string()))
            .map(|code| mask_secrets(&code))
    }
}

/// The table of behaviour §4 for a received status. `full_reset_ms` is the upstream reset hint
/// (only consulted for 429).
fn class_for_status(
    status: u16,
    error: &UpstreamError,
    full_reset_ms: Option<u64>,
) -> OutcomeClass {
    match status {
        200..=299 => OutcomeClass::Success,
        // Google answers a bad or expired key with 400 and a blocked or suspended one with 403
        // (behaviour §15): the account's failure, never the client's.
        400 if error.google.bad_key()
            || error.mentions_any(&["api key not valid", "api key expired"]) =>
        {
            OutcomeClass::AuthFailed
        }
        403 if error.google.blocked_key() || error.mentions_any(&["has been suspended"]) => {
            OutcomeClass::Forbidden
        }
        // Google names the quota: a day's is spent until its reset, a minute's is a rate limit
        // (its message says "quota" either way).
        429 if matches!(error.google.quota, Some(GoogleQuota::PerDay { .. })) => {
            OutcomeClass::QuotaExhausted
        }
        429 if matches!(error.google.quota, Some(GoogleQuota::Shorter { .. })) => {
            OutcomeClass::RateLimited
        }
        400 if error.is_out_of_credit() => OutcomeClass::Billing,
        400 if error.names_unknown_model() => OutcomeClass::ModelUnavailable,
        400 | 413 | 422 => OutcomeClass::ClientError,
        401 => OutcomeClass::AuthFailed,
        402 => OutcomeClass::Billing,
        403 if error.mentions_any(&["quota", "usage", "limit", "model", "region"]) => {
            OutcomeClass::QuotaExhausted
        }
        403 => OutcomeClass::Forbidden,
        404 => OutcomeClass::ModelUnavailable,
        408 => OutcomeClass::Timeout,
        429 if error.is_out_of_credit() => OutcomeClass::Billing,
        429 if error.mentions_any(&["quota", "usage limit", "usage_limit"])
            || full_reset_ms.is_some_and(|ms| ms >= QUOTA_RESET_MS) =>
        {
            OutcomeClass::QuotaExhausted
        }
        429 => OutcomeClass::RateLimited,
        500..=599 => OutcomeClass::ServerError,
        // Any other 4xx is about the request itself: returned as is, like a 400.
        400..=499 => OutcomeClass::ClientError,
        // 1xx, 3xx and nonsense statuses: the upstream gave no usable answer.
        _ => OutcomeClass::ServerError,
    }
}

/// Classifies one upstream attempt (behaviour §4). The body is parsed only for error statuses.
pub fn classify(reply: &UpstreamReply<'_>, now_ms: u64) -> Classification {
    let bare = |class| Classification {
        class,
        status: reply.status,
        error_code: None,
        message: None,
        reset_hint_ms: None,
    };
    let status = match (reply.transport, reply.status) {
        (Some(transport), _) => return bare(failure_class(AttemptFailure::Transport(transport))),
        (None, None) => return bare(OutcomeClass::Network),
        (None, Some(200..=299)) => return bare(OutcomeClass::Success),
        (None, Some(status)) => status,
    };
    let raw_body = || {
        let text = String::from_utf8_lossy(reply.body);
        Some(text.trim().to_owned()).filter(|text| !text.is_empty())
    };
    let json: Option<Value> = serde_json::from_slice(reply.body).ok();
    let error = match &json {
        Some(value) => UpstreamError::from_value(value),
        // A proxy's plain-text or HTML page: its text is the message, matched like one.
        None => UpstreamError {
            message: raw_body(),
            ..UpstreamError::default()
        },
    };
    // Google's OpenAI-compatible endpoint and Vertex AI send the error object in a list.
    let hint_body = json.as_ref().map(|value| match value {
        Value::Array(items) => items.first().unwrap_or(value),
        other => other,
    });
    let full_reset_ms = || reset_hint::upstream_reset_ms(reply.headers, hint_body, now_ms);
    let class = class_for_status(
        status,
        &error,
        if status == 429 { full_reset_ms() } else { None },
    );
    let reset_hint_ms = match (class, &error.google.quota) {
        // Google's retryDelay on a day's quota is seconds; the quota is back at midnight Pacific.
        (OutcomeClass::QuotaExhausted, Some(GoogleQuota::PerDay { .. })) => {
            google_errors::ms_to_next_pacific_midnight(now_ms).or_else(full_reset_ms)
        }
        (OutcomeClass::RateLimited, Some(GoogleQuota::Shorter { .. })) => {
            full_reset_ms().or(Some(GOOGLE_QUOTA_DEFAULT_RETRY_MS))
        }
        _ => match class {
            OutcomeClass::RateLimited | OutcomeClass::QuotaExhausted => full_reset_ms(),
            OutcomeClass::Success | OutcomeClass::ClientError => None,
            _ => reset_hint::retry_after_headers_ms(reply.headers, now_ms),
        },
    };
    let message = error.message.clone().or_else(raw_body);
    Classification {
        class,
        status: reply.status,
        error_code: error.error_code(reply.format),
        message: message.map(|text| mask_secrets(&text)),
        reset_hint_ms,
    }
}

/// The status an in-stream error type stands for, so stream errors go through the same table.
fn status_for_error_ids(error: &UpstreamError) -> u16 {
    if let Some(code) = error.numeric_code.filter(|code| (100..=599).contains(code)) {
        return u16::try_from(code).unwrap_or(500);
    }
    for id in error.ids() {
        let status = match id.to_ascii_lowercase().as_str() {
            "insufficient_quota"
            | "rate_limit_error"
            | "rate_limit_exceeded"
            | "requests"
            | "tokens"
            | "resource_exhausted"
            | "too_many_requests" => 429,
            "overloaded_error" | "overloaded" | "unavailable" | "service_unavailable" => 529,
            "api_error"
            | "server_error"
            | "internal_error"
            | "internal"
            | "internal_server_error"
            | "deadline_exceeded" => 500,
            "timeout" | "timeout_error" | "request_timeout" => 408,
            "authentication_error" | "invalid_api_key" | "unauthenticated" => 401,
            "billing_error" | "payment_required" => 402,
            "permission_error" | "permission_denied" | "forbidden" => 403,
            "not_found_error" | "model_not_found" | "not_found" => 404,
            "request_too_large" => 413,
            "invalid_request_error"
            | "context_length_exceeded"
            | "invalid_argument"
            | "bad_request" => 400,
            _ => continue,
        };
        return status;
    }
    500
}

/// Classifies an error event inside an SSE stream (OpenAI `{"error":{type,code}}`, Anthropic
/// `{"type":"error","error":{"type":"overloaded_error"}}`) by mapping its type to the status it
/// stands for and using the same table. Unknown errors are the upstream's fault: `server_error`.
pub fn classify_stream_error(event_data: &Value) -> OutcomeClass {
    let error = UpstreamError::from_value(event_data);
    let status = status_for_error_ids(&error);
    // No headers and no `now` mid-stream: only a relative "try again in …" can say the reset is
    // far away.
    let reset_ms = error
        .message
        .as_deref()
        .and_then(reset_hint::message_wait_ms);
    class_for_status(status, &error, reset_ms)
}

/// Characters that make up a key-like token (the `*` joins OpenAI's partly starred echo).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*')
}

/// Prefixes of provider API keys (OpenAI, Anthropic, Groq, xAI, Google, Hugging Face, Replicate).
const KEY_PREFIXES: [&str; 7] = ["sk-", "sk_", "gsk_", "xai-", "AIza", "hf_", "r8_"];

/// Whether a run of token characters looks like a credential: a known key prefix, a starred
/// echo, or a long random token. "Random" means ≥ 20 chars with digits and letters and a long
/// unbroken alphanumeric stretch, so model names (`claude-3-5-sonnet-20241022`) and codes
/// (`context_length_exceeded`) stay readable.
fn looks_secret(token: &str) -> bool {
    if KEY_PREFIXES
        .iter()
        .any(|prefix| token.starts_with(prefix) && token.len() > prefix.len())
        || token.contains("****")
    {
        return true;
    }
    if token.len() < 20 {
        return false;
    }
    let has_digit = token.bytes().any(|b| b.is_ascii_digit());
    let has_lower = token.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = token.bytes().any(|b| b.is_ascii_uppercase());
    let longest_stretch = token
        .split(['-', '_', '*'])
        .map(str::len)
        .max()
        .unwrap_or(0);
    has_digit
        && ((has_lower || has_upper) && longest_stretch >= 16
            || has_lower && has_upper && longest_stretch >= 10)
}

/// Masks anything that looks like a credential (`sk-…`, `sk-ant-…`, `sk-proj-…`, starred key
/// echoes, long random tokens, whatever follows `Bearer`) and truncates to
/// [`MESSAGE_MAX_CHARS`] chars. Masking runs first so truncation cannot leave half a key.
pub fn mask_secrets(text: &str) -> String {
    let mut masked = String::with_capacity(text.len().min(4 * MESSAGE_MAX_CHARS));
    let mut rest = text;
    let mut mask_next_word = false;
    while let Some(first) = rest.chars().next() {
        if mask_next_word && !first.is_whitespace() {
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';'))
                .unwrap_or(rest.len());
            masked.push_str(MASK);
            rest = &rest[end..];
            mask_next_word = false;
        } else if is_token_char(first) {
            let end = rest.find(|c| !is_token_char(c)).unwrap_or(rest.len());
            let token = &rest[..end];
            masked.push_str(if looks_secret(token) { MASK } else { token });
            mask_next_word = token.eq_ignore_ascii_case("bearer")
                && rest[end..].starts_with(char::is_whitespace);
            rest = &rest[end..];
        } else {
            masked.push(first);
            rest = &rest[first.len_utf8()..];
        }
        // Stop early on huge bodies: nothing past the limit is kept anyway.
        if masked.len() > 8 * MESSAGE_MAX_CHARS {
            break;
        }
    }
    if masked.chars().count() > MESSAGE_MAX_CHARS {
        let mut truncated: String = masked.chars().take(MESSAGE_MAX_CHARS - 1).collect();
        truncated.push('…');
        truncated
    } else {
        masked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;
    use serde_json::json;

    const NOW: u64 = 1_717_243_200_000;

    fn reply_with(
        status: u16,
        headers: &[(&'static str, &str)],
        body: &str,
        format: ApiFormat,
    ) -> Classification {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        let reply = UpstreamReply {
            status: Some(status),
            headers: &map,
            body: body.as_bytes(),
            transport: None,
            format,
        };
        classify(&reply, NOW)
    }

    fn openai(status: u16, body: &str) -> Classification {
        reply_with(status, &[], body, ApiFormat::Openai)
    }

    fn anthropic(status: u16, body: &str) -> Classification {
        reply_with(status, &[], body, ApiFormat::Anthropic)
    }

    fn oai_error(kind: &str, code: &str, message: &str) -> String {
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            .to_string()
    }

    fn ant_error(kind: &str, message: &str) -> String {
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    }

    /// Asserts each (status, body) row lands in `want`, for both wire formats.
    fn assert_rows(want: OutcomeClass, rows: &[(u16, String)]) {
        for (status, body) in rows {
            assert_eq!(openai(*status, body).class, want, "openai {status} {body}");
            assert_eq!(
                anthropic(*status, body).class,
                want,
                "anthropic {status} {body}"
            );
        }
    }

    #[test]
    fn s4_2xx_is_success() {
        let rows: Vec<_> = [200, 201, 204, 299]
            .into_iter()
            .map(|status| {
                (
                    status,
                    "{\"error\":{\"code\":\"insufficient_quota\"}}".to_owned(),
                )
            })
            .collect();
        assert_rows(OutcomeClass::Success, &rows);
        let ok = openai(200, "not json at all");
        assert_eq!(
            (ok.error_code, ok.message, ok.reset_hint_ms),
            (None, None, None)
        );
    }

    #[test]
    fn s4_400_naming_the_model_is_model_unavailable() {
        assert_rows(
            OutcomeClass::ModelUnavailable,
            &[
                (400, oai_error("invalid_request_error", "model_not_found", "The model `gpt-9` does not exist or you do not have access to it.")),
                (400, oai_error("invalid_request_error", "", "The requested model 'x' does not exist.")),
                (400, ant_error("invalid_request_error", "Unknown model: claude-9")),
                (400, json!({"error": {"message": "gpt-x is not a valid model ID", "code": 400}}).to_string()),
                (400, oai_error("invalid_request_error", "model_decommissioned", "The model `llama2-70b` has been decommissioned and is no longer supported.")),
                (400, json!({"error": "Invalid model: foo"}).to_string()),
            ],
        );
        let found = openai(
            400,
            &oai_error("invalid_request_error", "model_not_found", "m"),
        );
        assert_eq!(found.error_code.as_deref(), Some("model_not_found"));
    }

    #[test]
    fn s4_other_400_413_422_are_client_errors() {
        assert_rows(
            OutcomeClass::ClientError,
            &[
                (400, oai_error("invalid_request_error", "context_length_exceeded", "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")),
                (400, oai_error("invalid_request_error", "invalid_value", "Invalid value for 'temperature'.")),
                (400, ant_error("invalid_request_error", "model: Field required")),
                (400, ant_error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")),
                (400, "<html>Bad Request</html>".to_owned()),
                (400, String::new()),
                (413, ant_error("request_too_large", "Request exceeds the maximum allowed number of bytes.")),
                (422, json!({"detail": [{"loc": ["body", "model"], "msg": "field required"}]}).to_string()),
                (405, String::new()),
                (409, String::new()),
            ],
        );
    }

    #[test]
    fn s4_401_is_auth_failed() {
        assert_rows(
            OutcomeClass::AuthFailed,
            &[
                (401, oai_error("invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-abc12***************************************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.")),
                (401, ant_error("authentication_error", "invalid x-api-key")),
                (401, String::new()),
            ],
        );
    }

    #[test]
    fn s4_401_message_never_echoes_the_key() {
        let key_tail = "Xy7Qm2Lp9Rt4Vb8N";
        let echoed =
            format!("sk-proj-Ab3dE************************************************{key_tail}");
        let body = oai_error(
            "invalid_request_error",
            "invalid_api_key",
            &format!("Incorrect API key provided: {echoed}. You can find your API key at https://platform.openai.com/account/api-keys."),
        );
        let seen = openai(401, &body);
        let message = seen.message.unwrap();
        assert!(!message.contains("sk-"), "{message}");
        assert!(!message.contains(key_tail), "{message}");
        assert!(
            message.starts_with("Incorrect API key provided: ***."),
            "{message}"
        );
        assert_eq!(seen.error_code.as_deref(), Some("invalid_api_key"));
    }

    #[test]
    fn s4_402_and_429_insufficient_quota_are_billing() {
        assert_rows(
            OutcomeClass::Billing,
            &[
                (402, String::new()),
                (402, json!({"error": {"message": "Insufficient Balance"}}).to_string()),
                (429, oai_error("insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.")),
                (400, ant_error("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")),
            ],
        );
    }

    #[test]
    fn s4_429_insufficient_quota_is_billing() {
        let body = oai_error(
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota.",
        );
        let seen = reply_with(429, &[("retry-after", "20")], &body, ApiFormat::Openai);
        assert_eq!(seen.class, OutcomeClass::Billing);
        assert_eq!(seen.error_code.as_deref(), Some("insufficient_quota"));
        assert_eq!(
            rules(seen.class).disables_connection,
            Some(DisableReason::Billing)
        );
        assert_eq!(rules(seen.class).locks_model, None);
    }

    #[test]
    fn s4_403_naming_quota_model_or_region_is_quota_exhausted() {
        assert_rows(
            OutcomeClass::QuotaExhausted,
            &[
                (
                    403,
                    ant_error("permission_error", "You have reached your usage quota."),
                ),
                (
                    403,
                    oai_error(
                        "invalid_request_error",
                        "",
                        "Project `proj_x` does not have access to model `gpt-4o`",
                    ),
                ),
                (
                    403,
                    oai_error(
                        "request_forbidden",
                        "unsupported_country_region_territory",
                        "Country, region, or territory not supported",
                    ),
                ),
                (
                    403,
                    json!({"error": {"message": "Monthly spend limit reached"}}).to_string(),
                ),
                (403, "daily usage exceeded".to_owned()),
            ],
        );
    }

    #[test]
    fn s4_other_403_is_forbidden() {
        assert_rows(
            OutcomeClass::Forbidden,
            &[
                (
                    403,
                    ant_error(
                        "permission_error",
                        "Your API key does not have permission to use the specified resource.",
                    ),
                ),
                (403, "<html>Access denied</html>".to_owned()),
                (403, String::new()),
            ],
        );
    }

    #[test]
    fn s4_404_is_model_unavailable() {
        assert_rows(
            OutcomeClass::ModelUnavailable,
            &[
                (404, ant_error("not_found_error", "model: claude-9")),
                (
                    404,
                    oai_error(
                        "invalid_request_error",
                        "model_not_found",
                        "The model `x` does not exist",
                    ),
                ),
                (404, "Not Found".to_owned()),
            ],
        );
        let seen = anthropic(404, &ant_error("not_found_error", "model: claude-9"));
        assert_eq!(seen.error_code.as_deref(), Some("not_found_error"));
        assert_eq!(seen.message.as_deref(), Some("model: claude-9"));
    }

    #[test]
    fn s4_429_is_rate_limited() {
        assert_rows(
            OutcomeClass::RateLimited,
            &[
                (429, oai_error("tokens", "rate_limit_exceeded", "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 1500. Please try again in 1.5s.")),
                (429, ant_error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")),
                (429, String::new()),
                (429, "Too Many Requests".to_owned()),
            ],
        );
        let seen = openai(
            429,
            &oai_error("tokens", "rate_limit_exceeded", "Please try again in 1.5s."),
        );
        assert_eq!(seen.reset_hint_ms, Some(1_500));
        assert_eq!(seen.error_code.as_deref(), Some("rate_limit_exceeded"));
    }

    #[test]
    fn s4_429_naming_quota_or_usage_limit_is_quota_exhausted() {
        assert_rows(
            OutcomeClass::QuotaExhausted,
            &[
                (429, ant_error("rate_limit_error", "Claude AI usage limit reached|1717246800")),
                (429, json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "You exceeded your current quota."}}).to_string()),
                (429, json!({"error": {"type": "usage_limit_reached", "message": "x"}}).to_string()),
            ],
        );
    }

    #[test]
    fn s4_429_with_reset_an_hour_away_is_quota_exhausted() {
        type Headers = &'static [(&'static str, &'static str)];
        let cases: &[(Headers, &str, OutcomeClass, Option<u64>)] = &[
            (
                &[("retry-after", "3600")],
                "",
                OutcomeClass::QuotaExhausted,
                Some(3_600_000),
            ),
            (
                &[("retry-after", "3599")],
                "",
                OutcomeClass::RateLimited,
                Some(3_599_000),
            ),
            (
                &[("x-ratelimit-reset-requests", "1h2m3s")],
                "",
                OutcomeClass::QuotaExhausted,
                Some(3_723_000),
            ),
            (
                &[("anthropic-ratelimit-unified-reset", "1717250400")],
                "",
                OutcomeClass::QuotaExhausted,
                Some(7_200_000),
            ),
            (
                &[],
                "{\"error\":{\"message\":\"Please try again in 2h13m.\"}}",
                OutcomeClass::QuotaExhausted,
                Some(7_980_000),
            ),
            (
                &[("retry-after", "soon")],
                "",
                OutcomeClass::RateLimited,
                None,
            ),
        ];
        for (headers, body, want, hint) in cases {
            let seen = reply_with(429, headers, body, ApiFormat::Openai);
            assert_eq!(
                (seen.class, seen.reset_hint_ms),
                (*want, *hint),
                "{headers:?} {body}"
            );
        }
    }

    #[test]
    fn s4_408_is_timeout() {
        assert_rows(OutcomeClass::Timeout, &[(408, String::new())]);
    }

    #[test]
    fn s4_5xx_and_529_are_server_errors() {
        assert_rows(
            OutcomeClass::ServerError,
            &[
                (500, oai_error("server_error", "", "The server had an error while processing your request.")),
                (502, "<html>502 Bad Gateway</html>".to_owned()),
                (503, json!({"error": {"message": "The engine is currently overloaded, please try again later."}}).to_string()),
                (504, String::new()),
                (529, ant_error("overloaded_error", "Overloaded")),
                (500, ant_error("api_error", "Internal server error")),
                (507, String::new()),
                (599, String::new()),
                (302, String::new()),
                (600, String::new()),
                (0, String::new()),
            ],
        );
    }

    #[test]
    fn s5_retry_after_on_server_errors_is_the_hint_but_window_resets_are_not() {
        let hinted = reply_with(
            503,
            &[("retry-after", "7"), ("x-ratelimit-reset-requests", "6m0s")],
            "",
            ApiFormat::Openai,
        );
        assert_eq!(
            (hinted.class, hinted.reset_hint_ms),
            (OutcomeClass::ServerError, Some(7_000))
        );
        let windows_only = reply_with(
            404,
            &[("x-ratelimit-reset-requests", "6m0s")],
            "",
            ApiFormat::Openai,
        );
        assert_eq!(windows_only.reset_hint_ms, None);
        let client = reply_with(400, &[("retry-after", "7")], "", ApiFormat::Openai);
        assert_eq!(client.reset_hint_ms, None);
    }

    #[test]
    fn s4_transport_timeout_is_timeout_and_other_transport_is_network() {
        let map = HeaderMap::new();
        let cases = [
            (Some(TransportFailure::Timeout), None, OutcomeClass::Timeout),
            (
                Some(TransportFailure::Timeout),
                Some(200),
                OutcomeClass::Timeout,
            ),
            (Some(TransportFailure::Connect), None, OutcomeClass::Network),
            (
                Some(TransportFailure::Reset),
                Some(200),
                OutcomeClass::Network,
            ),
            (Some(TransportFailure::Tls), None, OutcomeClass::Network),
            (Some(TransportFailure::Dns), None, OutcomeClass::Network),
            (Some(TransportFailure::Other), None, OutcomeClass::Network),
            (None, None, OutcomeClass::Network),
        ];
        for (transport, status, want) in cases {
            let reply = UpstreamReply {
                status,
                headers: &map,
                body: b"{\"error\":{\"message\":\"sk-ant-api03-secret\"}}",
                transport,
                format: ApiFormat::Anthropic,
            };
            let seen = classify(&reply, NOW);
            assert_eq!(seen.class, want, "{transport:?} {status:?}");
            assert_eq!((seen.status, seen.message), (status, None));
        }
    }

    #[test]
    fn s4_rules_table() {
        use OutcomeClass::*;
        // (class, trips, success, cools, disables, locks, fails_over, attempt)
        type Row = (
            OutcomeClass,
            bool,
            bool,
            bool,
            Option<DisableReason>,
            Option<LockReason>,
            bool,
            bool,
        );
        let table: [Row; 11] = [
            (Success, false, true, false, None, None, false, false),
            (
                ModelUnavailable,
                false,
                false,
                false,
                None,
                Some(LockReason::NotFound),
                true,
                false,
            ),
            (ClientError, false, false, false, None, None, false, false),
            (
                AuthFailed,
                false,
                false,
                false,
                Some(DisableReason::Auth),
                None,
                true,
                false,
            ),
            (
                Billing,
                false,
                false,
                false,
                Some(DisableReason::Billing),
                None,
                true,
                false,
            ),
            (
                QuotaExhausted,
                false,
                false,
                false,
                None,
                Some(LockReason::QuotaExhausted),
                true,
                false,
            ),
            (
                Forbidden,
                false,
                false,
                false,
                Some(DisableReason::Auth),
                None,
                true,
                false,
            ),
            (
                RateLimited,
                false,
                false,
                false,
                None,
                Some(LockReason::RateLimited),
                true,
                false,
            ),
            (Timeout, true, false, true, None, None, true, true),
            (ServerError, true, false, true, None, None, true, true),
            (Network, true, false, true, None, None, true, true),
        ];
        for (class, trips, success, cools, disables, locks, fails_over, attempt) in table {
            let want = ClassRules {
                trips_breaker: trips,
                counts_as_breaker_success: success,
                cools_connection: cools,
                disables_connection: disables,
                locks_model: locks,
                fails_over,
                counts_as_attempt: attempt,
            };
            assert_eq!(rules(class), want, "{class:?}");
        }
    }

    #[test]
    fn s3_stream_error_events_use_the_same_table() {
        let cases: Vec<(Value, OutcomeClass)> = vec![
            (
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                OutcomeClass::ServerError,
            ),
            (
                json!({"type": "error", "error": {"type": "api_error", "message": "x"}}),
                OutcomeClass::ServerError,
            ),
            (
                json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
                OutcomeClass::RateLimited,
            ),
            (
                json!({"type": "error", "error": {"type": "rate_limit_error", "message": "try again in 3h"}}),
                OutcomeClass::QuotaExhausted,
            ),
            (
                json!({"type": "error", "error": {"type": "authentication_error"}}),
                OutcomeClass::AuthFailed,
            ),
            (
                json!({"type": "error", "error": {"type": "permission_error", "message": "denied"}}),
                OutcomeClass::Forbidden,
            ),
            (
                json!({"type": "error", "error": {"type": "not_found_error"}}),
                OutcomeClass::ModelUnavailable,
            ),
            (
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
                OutcomeClass::ClientError,
            ),
            (
                json!({"type": "error", "error": {"type": "request_too_large"}}),
                OutcomeClass::ClientError,
            ),
            (
                json!({"type": "error", "error": {"type": "timeout_error"}}),
                OutcomeClass::Timeout,
            ),
            (
                json!({"error": {"message": "boom", "type": "server_error", "code": null}}),
                OutcomeClass::ServerError,
            ),
            (
                json!({"error": {"type": "tokens", "code": "rate_limit_exceeded"}}),
                OutcomeClass::RateLimited,
            ),
            (
                json!({"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}),
                OutcomeClass::Billing,
            ),
            (
                json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key"}}),
                OutcomeClass::AuthFailed,
            ),
            (
                json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded"}}),
                OutcomeClass::ClientError,
            ),
            (
                json!({"error": {"code": 503, "status": "UNAVAILABLE"}}),
                OutcomeClass::ServerError,
            ),
            (
                json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota"}}),
                OutcomeClass::QuotaExhausted,
            ),
            (
                json!({"error": {"type": "something_new"}}),
                OutcomeClass::ServerError,
            ),
            (json!({"error": "text only"}), OutcomeClass::ServerError),
            (json!(null), OutcomeClass::ServerError),
            (json!([]), OutcomeClass::ServerError),
        ];
        for (event, want) in cases {
            assert_eq!(classify_stream_error(&event), want, "{event}");
        }
    }

    #[test]
    fn s4_messages_are_masked_and_truncated() {
        let cases: &[(&str, &str)] = &[
            (
                "key sk-ant-api03-AbCdEf0123456789_xyz-QRST failed",
                "key *** failed",
            ),
            ("key sk-proj-abc is bad", "key *** is bad"),
            (
                "Authorization: Bearer abc.def.ghi was rejected",
                "Authorization: Bearer *** was rejected",
            ),
            ("token=\"Bearer  eyJhbGci\"", "token=\"Bearer  ***\""),
            (
                "AIzaSyD3x9Qk2LmN8pR4sT6vW0yZ1aB2cD3eF4g invalid",
                "*** invalid",
            ),
            (
                "request id 8f3a9c2b1d4e5f6a7b8c9d0e1f2a3b4c",
                "request id ***",
            ),
            (
                "The model `claude-3-5-sonnet-20241022` does not exist",
                "The model `claude-3-5-sonnet-20241022` does not exist",
            ),
            (
                "Qwen2.5-Coder-32B-Instruct: context_length_exceeded",
                "Qwen2.5-Coder-32B-Instruct: context_length_exceeded",
            ),
            (
                "invalid_request_error on gpt-4o-mini-2024-07-18",
                "invalid_request_error on gpt-4o-mini-2024-07-18",
            ),
            ("Überlastet — bitte später", "Überlastet — bitte später"),
            ("disk-based task-force", "disk-based task-force"),
        ];
        for (input, want) in cases {
            assert_eq!(mask_secrets(input), *want, "{input}");
        }
        let long = "é".repeat(1_000);
        let cut = mask_secrets(&long);
        assert_eq!(cut.chars().count(), MESSAGE_MAX_CHARS);
        assert!(cut.ends_with('…'));
        let exact = "a ".repeat(150);
        assert_eq!(mask_secrets(&exact), exact);
    }

    #[test]
    fn s4_non_json_error_bodies_become_masked_messages() {
        let seen = openai(502, "  upstream proxy: Bearer sk-live-123 failed  ");
        assert_eq!(
            seen.message.as_deref(),
            Some("upstream proxy: Bearer *** failed")
        );
        assert_eq!(seen.error_code, None);
        let binary = reply_with(500, &[], "\u{0}\u{1}", ApiFormat::Openai);
        assert_eq!(binary.class, OutcomeClass::ServerError);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn classify_never_panics(
            status in proptest::option::of(any::<u16>()),
            body in proptest::collection::vec(any::<u8>(), 0..200),
            header_values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..30), 6),
            timeout in any::<bool>(),
            now in any::<u64>(),
        ) {
            let names = [
                "retry-after", "retry-after-ms", "x-ratelimit-reset-requests",
                "x-ratelimit-remaining-requests", "anthropic-ratelimit-unified-reset", "x-ratelimit-reset",
            ];
            let mut map = HeaderMap::new();
            for (name, bytes) in names.iter().zip(&header_values) {
                if let Ok(value) = HeaderValue::from_bytes(bytes) {
                    map.insert(*name, value);
                }
            }
            let reply = UpstreamReply {
                status,
                headers: &map,
                body: &body,
                transport: timeout.then_some(TransportFailure::Timeout),
                format: ApiFormat::Openai,
            };
            let seen = classify(&reply, now);
            prop_assert!(seen.message.map_or(0, |m| m.chars().count()) <= MESSAGE_MAX_CHARS);
        }

        #[test]
        fn classify_never_panics_on_error_shaped_bodies(
            status in 100u16..700,
            kind in "[a-z_]{0,24}",
            message in "\\PC{0,120}",
            code in proptest::option::of(0u64..1000),
        ) {
            let body = json!({"type": "error", "error": {"type": kind, "message": message, "code": code}}).to_string();
            let map = HeaderMap::new();
            let reply = UpstreamReply {
                status: Some(status),
                headers: &map,
                body: body.as_bytes(),
                transport: None,
                format: ApiFormat::Anthropic,
            };
            let _ = classify(&reply, NOW);
            let _ = classify_stream_error(&serde_json::from_str(&body).unwrap());
        }

        #[test]
        fn masked_text_never_contains_a_key(
            prefix in "\\PC{0,40}",
            key in "sk-(ant-|proj-)?[A-Za-z0-9_\\-]{8,40}",
            suffix in "[ .,;]\\PC{0,40}",
        ) {
            let masked = mask_secrets(&format!("{prefix} {key}{suffix}"));
            prop_assert!(!masked.contains(&key));
            prop_assert!(masked.chars().count() <= MESSAGE_MAX_CHARS);
        }
    }
}
