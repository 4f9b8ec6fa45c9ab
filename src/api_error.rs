//! The router's own errors at the HTTP edge (contract "Client API"): each kind knows its status,
//! `type` and `code`, and renders the OpenAI or Anthropic error body. Passed-through upstream
//! errors are masked by [`mask_upstream_body`] (re-exported from `proxy::upstream_mask`). It
//! must not decide WHEN an error happens (the proxy and the actors do) nor read the clock.

use http::StatusCode;
use quotaroute_journal::Skipped;
use serde::Serialize;

use crate::wire::body_rewrite::BodyError;
pub use crate::wire::upstream_mask::mask_upstream_body;

/// Every error the router itself answers with (one row of the contract's table each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiErrorKind {
    InvalidJson,
    MissingModel,
    InvalidApiKey,
    ModelNotFound,
    RequestTooLarge,
    AllTargetsLocked,
    UpstreamError,
    NoAvailableTarget,
    UpstreamTimeout,
    /// No such endpoint (or no stored response of that id).
    NotFound,
    /// The model's targets speak the other format than the endpoint.
    UnsupportedEndpoint,
    /// A client body in a `Content-Encoding` the router cannot read.
    UnsupportedContentEncoding,
    /// A client body that does not decode in its `Content-Encoding`.
    InvalidContentEncoding,
    /// A `model` over 256 bytes or holding control characters (contract "Hostile input").
    InvalidModel,
    /// A request body that stalled past `server.body_timeout_ms`.
    RequestTimeout,
    /// A path the node serves, with a method it does not.
    MethodNotAllowed,
    /// An admin request the node cannot read (a bad path or parameter).
    InvalidRequest,
    /// A non-streaming upstream body over the router's bound: a server error that fails over.
    UpstreamTooLarge,
    /// Every target stayed at its concurrency cap for the combo's `queue_ms`, or the queue is
    /// full (behaviour §11).
    PoolBusy,
    /// A client over one of its rate or token limits (behaviour §11).
    ClientRateLimited,
    /// A client whose spend reached its `budget_usd` for the period.
    BudgetExceeded,
    /// A client asking for a combo outside its `models`.
    ModelNotAllowed,
    /// A parameter with no equivalent on the serving target's format (behaviour §14).
    UnsupportedParameter,
    /// A client with a budget asking for a model that has no price.
    ModelNotPriced,
    /// A spare-class request and no quota that would otherwise be lost (behaviour §13).
    NoSpareQuota,
}

impl ApiErrorKind {
    pub const ALL: [ApiErrorKind; 25] = [
        ApiErrorKind::InvalidJson,
        ApiErrorKind::MissingModel,
        ApiErrorKind::InvalidApiKey,
        ApiErrorKind::ModelNotFound,
        ApiErrorKind::RequestTooLarge,
        ApiErrorKind::AllTargetsLocked,
        ApiErrorKind::UpstreamError,
        ApiErrorKind::NoAvailableTarget,
        ApiErrorKind::UpstreamTimeout,
        ApiErrorKind::NotFound,
        ApiErrorKind::UnsupportedEndpoint,
        ApiErrorKind::UnsupportedContentEncoding,
        ApiErrorKind::InvalidContentEncoding,
        ApiErrorKind::InvalidModel,
        ApiErrorKind::RequestTimeout,
        ApiErrorKind::MethodNotAllowed,
        ApiErrorKind::InvalidRequest,
        ApiErrorKind::UpstreamTooLarge,
        ApiErrorKind::PoolBusy,
        ApiErrorKind::ClientRateLimited,
        ApiErrorKind::BudgetExceeded,
        ApiErrorKind::ModelNotAllowed,
        ApiErrorKind::UnsupportedParameter,
        ApiErrorKind::ModelNotPriced,
        ApiErrorKind::NoSpareQuota,
    ];

    pub fn status(self) -> StatusCode {
        match self {
            ApiErrorKind::InvalidJson
            | ApiErrorKind::MissingModel
            | ApiErrorKind::UnsupportedEndpoint
            | ApiErrorKind::UnsupportedParameter
            | ApiErrorKind::InvalidContentEncoding
            | ApiErrorKind::InvalidModel
            | ApiErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
            ApiErrorKind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiErrorKind::UpstreamTooLarge => StatusCode::BAD_GATEWAY,
            ApiErrorKind::NotFound => StatusCode::NOT_FOUND,
            ApiErrorKind::UnsupportedContentEncoding => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiErrorKind::InvalidApiKey => StatusCode::UNAUTHORIZED,
            ApiErrorKind::ModelNotFound => StatusCode::NOT_FOUND,
            ApiErrorKind::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorKind::AllTargetsLocked
            | ApiErrorKind::PoolBusy
            | ApiErrorKind::ClientRateLimited
            | ApiErrorKind::BudgetExceeded
            | ApiErrorKind::NoSpareQuota => StatusCode::TOO_MANY_REQUESTS,
            ApiErrorKind::ModelNotAllowed | ApiErrorKind::ModelNotPriced => StatusCode::FORBIDDEN,
            ApiErrorKind::UpstreamError => StatusCode::BAD_GATEWAY,
            ApiErrorKind::NoAvailableTarget => StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorKind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// `error.type` in the body.
    pub fn error_type(self) -> &'static str {
        match self {
            ApiErrorKind::InvalidJson
            | ApiErrorKind::MissingModel
            | ApiErrorKind::ModelNotFound
            | ApiErrorKind::RequestTooLarge
            | ApiErrorKind::NotFound
            | ApiErrorKind::UnsupportedEndpoint
            | ApiErrorKind::UnsupportedParameter
            | ApiErrorKind::UnsupportedContentEncoding
            | ApiErrorKind::InvalidContentEncoding
            | ApiErrorKind::InvalidModel
            | ApiErrorKind::RequestTimeout
            | ApiErrorKind::MethodNotAllowed
            | ApiErrorKind::InvalidRequest => "invalid_request_error",
            ApiErrorKind::InvalidApiKey => "authentication_error",
            ApiErrorKind::AllTargetsLocked
            | ApiErrorKind::PoolBusy
            | ApiErrorKind::ClientRateLimited
            | ApiErrorKind::BudgetExceeded
            | ApiErrorKind::NoSpareQuota => "rate_limit_error",
            ApiErrorKind::ModelNotAllowed | ApiErrorKind::ModelNotPriced => "permission_error",
            ApiErrorKind::UpstreamError
            | ApiErrorKind::UpstreamTimeout
            | ApiErrorKind::UpstreamTooLarge => "api_error",
            ApiErrorKind::NoAvailableTarget => "service_unavailable",
        }
    }

    /// `error.code` in the body.
    pub fn code(self) -> &'static str {
        match self {
            ApiErrorKind::InvalidJson => "invalid_json",
            ApiErrorKind::MissingModel => "missing_model",
            ApiErrorKind::InvalidApiKey => "invalid_api_key",
            ApiErrorKind::ModelNotFound => "model_not_found",
            ApiErrorKind::RequestTooLarge => "request_too_large",
            ApiErrorKind::AllTargetsLocked => "all_targets_locked",
            ApiErrorKind::UpstreamError => "upstream_error",
            ApiErrorKind::NoAvailableTarget => "no_available_target",
            ApiErrorKind::UpstreamTimeout => "upstream_timeout",
            ApiErrorKind::NotFound => "not_found",
            ApiErrorKind::UnsupportedEndpoint => "unsupported_endpoint",
            ApiErrorKind::UnsupportedContentEncoding => "unsupported_content_encoding",
            ApiErrorKind::InvalidContentEncoding => "invalid_content_encoding",
            ApiErrorKind::InvalidModel => "invalid_model",
            ApiErrorKind::RequestTimeout => "request_timeout",
            ApiErrorKind::MethodNotAllowed => "method_not_allowed",
            ApiErrorKind::InvalidRequest => "invalid_request",
            ApiErrorKind::UpstreamTooLarge => "upstream_too_large",
            ApiErrorKind::PoolBusy => "pool_busy",
            ApiErrorKind::ClientRateLimited => "client_rate_limited",
            ApiErrorKind::BudgetExceeded => "budget_exceeded",
            ApiErrorKind::ModelNotAllowed => "model_not_allowed",
            ApiErrorKind::UnsupportedParameter => "unsupported_parameter",
            ApiErrorKind::ModelNotPriced => "model_not_priced",
            ApiErrorKind::NoSpareQuota => "no_spare_quota",
        }
    }

    /// 429 and 503 say which targets were blocked and why (behaviour §7).
    pub fn lists_blocked(self) -> bool {
        matches!(
            self,
            ApiErrorKind::AllTargetsLocked
                | ApiErrorKind::NoAvailableTarget
                | ApiErrorKind::PoolBusy
                | ApiErrorKind::ClientRateLimited
                | ApiErrorKind::BudgetExceeded
                | ApiErrorKind::NoSpareQuota
        )
    }
}

/// One error answer of the router.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ApiErrorKind,
    pub message: String,
    /// Until the earliest finite unblock (429/503); `None` omits `Retry-After`.
    pub retry_after_ms: Option<u64>,
    /// Each blocked target (429/503); never holds a secret.
    pub blocked: Vec<Skipped>,
    /// The wait is longer than `server.client_retry_max_ms`: the answer says
    /// `x-should-retry: false` (behaviour §7, `node::retry_advice`), and the OpenAI body says
    /// when it frees (Unix seconds) the way Codex reads it.
    pub stop_retrying_until_s: Option<u64>,
    /// An upstream's own message, kept beside the router's words when the router answers for
    /// an upstream's 429 (behaviour §7): `error.upstream_message`.
    pub upstream_message: Option<String>,
}

#[derive(Serialize)]
struct ErrorFields<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked: Option<&'a [Skipped]>,
    /// A refusal not to retry: when it frees (Unix seconds), and in how many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    resets_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resets_in_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_message: Option<&'a str>,
}

/// `error.type` of an OpenAI-shaped refusal not to retry: the type Codex stops on at once and
/// whose `resets_at` it shows ("Try again at 4:42 PM"); with `rate_limit_error` it reconnects
/// and sleeps on the `Retry-After`. `code` stays the contract's.
pub const NO_RETRY_OPENAI_TYPE: &str = "usage_limit_reached";

/// Anthropic's order: `type` first.
#[derive(Serialize)]
struct AnthropicErrorFields<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked: Option<&'a [Skipped]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_message: Option<&'a str>,
}

#[derive(Serialize)]
struct OpenAiBody<'a> {
    error: ErrorFields<'a>,
}

#[derive(Serialize)]
struct AnthropicBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: AnthropicErrorFields<'a>,
}

impl ApiError {
    pub fn new(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            retry_after_ms: None,
            blocked: Vec::new(),
            stop_retrying_until_s: None,
            upstream_message: None,
        }
    }

    /// A 429 / 503 for hard-blocked candidates, with their blocks and `Retry-After`.
    pub fn blocked(
        kind: ApiErrorKind,
        message: impl Into<String>,
        blocked: Vec<Skipped>,
        retry_after_ms: Option<u64>,
    ) -> Self {
        ApiError {
            retry_after_ms,
            blocked,
            ..ApiError::new(kind, message)
        }
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// The JSON body: `{"error":{"message","type","code"}}`, or on `/v1/messages`
    /// (`anthropic`) `{"type":"error","error":{"type","message","code"}}`; 429 and 503 add
    /// `error.blocked: [{connection, model, reason, remaining_ms}]`.
    pub fn body(&self, anthropic: bool) -> Vec<u8> {
        let blocked = self.kind.lists_blocked().then_some(self.blocked.as_slice());
        let written = if anthropic {
            serde_json::to_vec(&AnthropicBody {
                kind: "error",
                error: AnthropicErrorFields {
                    kind: self.kind.error_type(),
                    message: &self.message,
                    code: self.kind.code(),
                    blocked,
                    upstream_message: self.upstream_message.as_deref(),
                },
            })
        } else {
            serde_json::to_vec(&OpenAiBody {
                error: ErrorFields {
                    message: &self.message,
                    kind: match self.stop_retrying_until_s {
                        Some(_) => NO_RETRY_OPENAI_TYPE,
                        None => self.kind.error_type(),
                    },
                    code: self.kind.code(),
                    blocked,
                    resets_at: self.stop_retrying_until_s,
                    resets_in_seconds: self
                        .stop_retrying_until_s
                        .and(self.retry_after_ms)
                        .map(|ms| ms.div_ceil(1000)),
                    upstream_message: self.upstream_message.as_deref(),
                },
            })
        };
        // Plain strings and numbers always serialise; the fallback keeps this total.
        written.unwrap_or_else(|_| b"{\"error\":{\"message\":\"internal error\"}}".to_vec())
    }

    /// `Retry-After` in whole seconds, rounded up (behaviour §7).
    pub fn retry_after_header(&self) -> Option<String> {
        self.retry_after_ms
            .map(|remaining_ms| remaining_ms.div_ceil(1000).to_string())
    }
}

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> Self {
        let kind = match error {
            BodyError::InvalidJson(_) | BodyError::NotAnObject => ApiErrorKind::InvalidJson,
            BodyError::MissingModel | BodyError::ModelNotString => ApiErrorKind::MissingModel,
            BodyError::InvalidModel(_) => ApiErrorKind::InvalidModel,
        };
        ApiError::new(kind, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::BlockReason;
    use serde_json::{json, Value};

    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "the contract's table: one row per error kind"
    )]
    fn contract_every_row_of_the_client_error_table() {
        let table = [
            (
                ApiErrorKind::NotFound,
                404,
                "invalid_request_error",
                "not_found",
            ),
            (
                ApiErrorKind::UnsupportedEndpoint,
                400,
                "invalid_request_error",
                "unsupported_endpoint",
            ),
            (
                ApiErrorKind::UnsupportedContentEncoding,
                415,
                "invalid_request_error",
                "unsupported_content_encoding",
            ),
            (
                ApiErrorKind::InvalidContentEncoding,
                400,
                "invalid_request_error",
                "invalid_content_encoding",
            ),
            (
                ApiErrorKind::InvalidJson,
                400,
                "invalid_request_error",
                "invalid_json",
            ),
            (
                ApiErrorKind::InvalidModel,
                400,
                "invalid_request_error",
                "invalid_model",
            ),
            (
                ApiErrorKind::RequestTimeout,
                408,
                "invalid_request_error",
                "request_timeout",
            ),
            (
                ApiErrorKind::MethodNotAllowed,
                405,
                "invalid_request_error",
                "method_not_allowed",
            ),
            (
                ApiErrorKind::InvalidRequest,
                400,
                "invalid_request_error",
                "invalid_request",
            ),
            (
                ApiErrorKind::UpstreamTooLarge,
                502,
                "api_error",
                "upstream_too_large",
            ),
            (
                ApiErrorKind::MissingModel,
                400,
                "invalid_request_error",
                "missing_model",
            ),
            (
                ApiErrorKind::InvalidApiKey,
                401,
                "authentication_error",
                "invalid_api_key",
            ),
            (
                ApiErrorKind::ModelNotFound,
                404,
                "invalid_request_error",
                "model_not_found",
            ),
            (
                ApiErrorKind::RequestTooLarge,
                413,
                "invalid_request_error",
                "request_too_large",
            ),
            (
                ApiErrorKind::AllTargetsLocked,
                429,
                "rate_limit_error",
                "all_targets_locked",
            ),
            (
                ApiErrorKind::UpstreamError,
                502,
                "api_error",
                "upstream_error",
            ),
            (ApiErrorKind::PoolBusy, 429, "rate_limit_error", "pool_busy"),
            (
                ApiErrorKind::NoAvailableTarget,
                503,
                "service_unavailable",
                "no_available_target",
            ),
            (
                ApiErrorKind::UpstreamTimeout,
                504,
                "api_error",
                "upstream_timeout",
            ),
            (
                ApiErrorKind::ClientRateLimited,
                429,
                "rate_limit_error",
                "client_rate_limited",
            ),
            (
                ApiErrorKind::BudgetExceeded,
                429,
                "rate_limit_error",
                "budget_exceeded",
            ),
            (
                ApiErrorKind::ModelNotAllowed,
                403,
                "permission_error",
                "model_not_allowed",
            ),
            (
                ApiErrorKind::UnsupportedParameter,
                400,
                "invalid_request_error",
                "unsupported_parameter",
            ),
            (
                ApiErrorKind::ModelNotPriced,
                403,
                "permission_error",
                "model_not_priced",
            ),
            (
                ApiErrorKind::NoSpareQuota,
                429,
                "rate_limit_error",
                "no_spare_quota",
            ),
        ];
        assert_eq!(table.len(), ApiErrorKind::ALL.len());
        for (kind, status, error_type, code) in table {
            assert_eq!(kind.status().as_u16(), status, "{kind:?}");
            assert_eq!(kind.error_type(), error_type, "{kind:?}");
            assert_eq!(kind.code(), code, "{kind:?}");

            let error = ApiError::new(kind, "what happened");
            let mut fields = json!({"message": "what happened", "type": error_type, "code": code});
            if matches!(status, 429 | 503) {
                fields["blocked"] = json!([]);
            }
            let openai: Value = serde_json::from_slice(&error.body(false)).unwrap();
            assert_eq!(openai, json!({ "error": fields }), "{kind:?}");
            let anthropic: Value = serde_json::from_slice(&error.body(true)).unwrap();
            assert_eq!(
                anthropic,
                json!({"type": "error", "error": fields}),
                "{kind:?}"
            );
        }
    }

    fn blocked_targets() -> Vec<Skipped> {
        vec![
            Skipped {
                connection: "openai-1".to_owned(),
                model: "gpt-4o".to_owned(),
                reason: BlockReason::RateLimited,
                remaining_ms: Some(1_500),
            },
            Skipped {
                connection: "openai-2".to_owned(),
                model: "gpt-4o".to_owned(),
                reason: BlockReason::DisabledAuth,
                remaining_ms: None,
            },
        ]
    }

    #[test]
    fn s7_429_and_503_list_blocked_targets_in_both_shapes() {
        for kind in [
            ApiErrorKind::AllTargetsLocked,
            ApiErrorKind::NoAvailableTarget,
        ] {
            let error = ApiError::blocked(kind, "no target", blocked_targets(), Some(1_500));
            let expected = json!([
                {"connection": "openai-1", "model": "gpt-4o", "reason": "rate_limited", "remaining_ms": 1500},
                {"connection": "openai-2", "model": "gpt-4o", "reason": "disabled_auth", "remaining_ms": null},
            ]);
            let openai: Value = serde_json::from_slice(&error.body(false)).unwrap();
            assert_eq!(openai["error"]["blocked"], expected);
            let anthropic: Value = serde_json::from_slice(&error.body(true)).unwrap();
            assert_eq!(anthropic["type"], "error");
            assert_eq!(anthropic["error"]["blocked"], expected);
        }
        // An empty list is still a list on 429/503, and never appears elsewhere.
        let none = ApiError::blocked(ApiErrorKind::NoAvailableTarget, "x", vec![], None);
        let body: Value = serde_json::from_slice(&none.body(false)).unwrap();
        assert_eq!(body["error"]["blocked"], json!([]));
        let other = ApiError::blocked(ApiErrorKind::UpstreamError, "x", blocked_targets(), None);
        let body: Value = serde_json::from_slice(&other.body(false)).unwrap();
        assert!(body["error"].get("blocked").is_none());
    }

    #[test]
    fn s7_openai_body_keys_come_in_contract_order() {
        let body = ApiError::new(ApiErrorKind::ModelNotFound, "no such model").body(false);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}"#
        );
        let body = ApiError::new(ApiErrorKind::ModelNotFound, "m").body(true);
        assert!(body.starts_with(br#"{"type":"error","error":{"type":"invalid_request_error""#));
    }

    #[test]
    fn s7_retry_after_is_whole_seconds_rounded_up() {
        let table = [
            (None, None),
            (Some(0), Some("0")),
            (Some(1), Some("1")),
            (Some(1_000), Some("1")),
            (Some(1_001), Some("2")),
            (Some(59_999), Some("60")),
        ];
        for (remaining_ms, header) in table {
            let error =
                ApiError::blocked(ApiErrorKind::AllTargetsLocked, "x", vec![], remaining_ms);
            assert_eq!(
                error.retry_after_header().as_deref(),
                header,
                "{remaining_ms:?}"
            );
        }
    }

    #[test]
    fn contract_body_errors_map_to_400_codes() {
        let table = [
            (
                BodyError::InvalidJson("EOF at line 1 column 1".to_owned()),
                "invalid_json",
            ),
            (BodyError::NotAnObject, "invalid_json"),
            (BodyError::MissingModel, "missing_model"),
            (BodyError::ModelNotString, "missing_model"),
        ];
        for (body_error, code) in table {
            let error = ApiError::from(body_error.clone());
            assert_eq!(error.status(), StatusCode::BAD_REQUEST);
            assert_eq!(error.kind.code(), code);
            assert_eq!(error.message, body_error.to_string());
        }
    }
}
