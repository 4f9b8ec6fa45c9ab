//! The router's own error answers on the routing endpoints: a request that could not be
//! routed at all ([`route_error`]), and the answer when the tries ran out (behaviour §7,
//! decided by `policy::request::final_answer`; written here) — an upstream's 429 whose pool
//! is out for longer than `server.client_retry_max_ms` said in the router's words, as its own
//! refusal of the next request would say it.

use axum::response::Response;
use http::StatusCode;
use quotaroute_actors::policy::request::{final_answer, unroutable, FinalAnswer, UnroutableKind};
use quotaroute_actors::{Decision, RouteError};
use quotaroute_journal::{BlockReason, Skipped};

use crate::api_error::{mask_upstream_body, ApiError, ApiErrorKind};
use crate::node::attempt::LastFailure;
use crate::node::live::LiveConfig;
use crate::node::reply::{self, RouteHeaders};
use crate::node::retry_advice;

/// The client's answer when a request could not be routed at all.
pub(crate) fn route_error(error: RouteError, anthropic: bool) -> ApiError {
    match error {
        RouteError::UnknownModel(model) => ApiError::new(
            ApiErrorKind::ModelNotFound,
            format!("model `{model}` not found: no combo and no provider/model of that name"),
        ),
        RouteError::WrongFormat(model) => {
            let (endpoint_format, other) = if anthropic {
                ("Anthropic", "/v1/chat/completions or /v1/responses")
            } else {
                ("OpenAI", "/v1/messages")
            };
            ApiError::new(
                ApiErrorKind::UnsupportedEndpoint,
                format!(
                    "model `{model}` has no target of the {endpoint_format} format; its targets are served on {other}"
                ),
            )
        }
        // Names no connection (behaviour §11): which account holds a response is the router's.
        RouteError::NotOnConnection { model, .. } => ApiError::new(
            ApiErrorKind::NotFound,
            format!(
                "the previous response was not made through model `{model}`: continue it with the model that made it"
            ),
        ),
        RouteError::NoTarget(unroutable) => {
            // A spent or reserved window (behaviour §13) is named as such: the client learns
            // the pool is used up until a reset, not that it asked too fast.
            let spent = unroutable.blocked.iter().any(|skip| {
                matches!(
                    skip.reason,
                    BlockReason::QuotaExhausted | BlockReason::Reserved
                )
            });
            let (kind, message) = match unroutable.kind {
                UnroutableKind::AllLimited if spent => (
                    ApiErrorKind::AllTargetsLocked,
                    "every account of this model is spent or kept in reserve",
                ),
                UnroutableKind::AllLimited => (
                    ApiErrorKind::AllTargetsLocked,
                    "every account of this model is rate limited or cooling down",
                ),
                UnroutableKind::NoneAvailable => (
                    ApiErrorKind::NoAvailableTarget,
                    "no target of this model can serve now",
                ),
                UnroutableKind::NoSpareQuota => (
                    ApiErrorKind::NoSpareQuota,
                    "no account of this model is forecast to reset with quota unused: a spare request is served only from quota that would otherwise be lost",
                ),
            };
            ApiError::blocked(
                kind,
                message,
                unroutable.blocked,
                unroutable.retry_after_ms,
            )
        }
        RouteError::PoolBusy {
            waited_ms,
            retry_after_ms,
        } => ApiError::blocked(
            ApiErrorKind::PoolBusy,
            if waited_ms == 0 {
                "every target of this model is at its concurrency cap and the queue is full"
                    .to_string()
            } else {
                format!(
                    "every target of this model stayed at its concurrency cap for the {waited_ms} ms this request waited"
                )
            },
            Vec::new(),
            Some(retry_after_ms),
        ),
        RouteError::Unavailable(reason) => ApiError::new(
            ApiErrorKind::NoAvailableTarget,
            format!("router unavailable: {reason}"),
        ),
    }
}

/// The answer when the tries ran out (behaviour §7, decided by [`final_answer`]): this only
/// writes it, passing the last upstream answer through when the rule says so. The router's own
/// message names the provider and the class; the detail (hosts, key commands) is the journal's
/// and the log's, never the client's.
pub(super) fn final_failure(
    last: Option<LastFailure>,
    provider: Option<&str>,
    anthropic: bool,
    live: &LiveConfig,
    route: &RouteHeaders,
    decision: &Decision,
    pool: Option<PoolNow>,
) -> Response {
    let answer = final_answer(last.as_ref().map(LastFailure::as_last_attempt));
    let error = match (answer, last) {
        (FinalAnswer::PassThrough(status), Some(LastFailure::Upstream { headers, body, .. })) => {
            if let Some(error) =
                pool.and_then(|pool| spent_pool_answer(status, &body, pool, anthropic, live))
            {
                return reply::api_error_for_upstream(&error, anthropic, &headers, live, route);
            }
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            return reply::passthrough(status, &headers, &body, live, route);
        }
        (FinalAnswer::UpstreamTimeout, _) => return upstream_timeout(anthropic, route),
        (FinalAnswer::UpstreamTooLarge, last) => ApiError::new(
            ApiErrorKind::UpstreamTooLarge,
            match last {
                Some(LastFailure::Failed { public, .. }) => public,
                _ => "the upstream's answer is too large".to_string(),
            },
        ),
        (FinalAnswer::ModelNotFound, _) => ApiError::new(
            ApiErrorKind::ModelNotFound,
            "the model is not available on any target",
        ),
        (FinalAnswer::NoTargetTried, _) => ApiError::blocked(
            ApiErrorKind::NoAvailableTarget,
            "no target could be tried",
            decision.skipped().to_vec(),
            None,
        ),
        (_, Some(LastFailure::Failed { class, public, .. })) => ApiError::new(
            ApiErrorKind::UpstreamError,
            format!(
                "upstream `{}` failed ({}): {public}",
                provider.unwrap_or("?"),
                class.as_str()
            ),
        ),
        (_, Some(LastFailure::Upstream { status, .. })) => ApiError::new(
            ApiErrorKind::UpstreamError,
            format!(
                "upstream answered {} on every target tried",
                status.as_u16()
            ),
        ),
        (_, None) => ApiError::new(ApiErrorKind::UpstreamError, "upstream failed"),
    };
    reply::api_error(&error, anthropic, route)
}

/// Every target a request could use, blocked right after its tries ended (read from the
/// router's state, `Router::all_blocked`), and the router's `now`.
pub(crate) struct PoolNow {
    pub blocked: Vec<Skipped>,
    pub now_ms: u64,
}

/// How much of an upstream's message the router's answer keeps.
const UPSTREAM_MESSAGE_MAX_CHARS: usize = 2_000;

/// An upstream's 429 whose pool is blocked for longer than `server.client_retry_max_ms`, in the
/// router's words (behaviour §7): the refusal the router would give the next request —
/// `all_targets_locked`, the blocks, `Retry-After` to the earliest unblock, `x-should-retry:
/// false`, the time in words, `usage_limit_reached` on OpenAI's shape — with the upstream's
/// own message (masked) in `error.upstream_message`. `None`: the upstream's answer stands
/// (another status, or a wait a client may sleep on).
fn spent_pool_answer(
    status: u16,
    body: &[u8],
    pool: PoolNow,
    anthropic: bool,
    live: &LiveConfig,
) -> Option<ApiError> {
    if status != StatusCode::TOO_MANY_REQUESTS.as_u16() {
        return None;
    }
    let mut error = route_error(RouteError::NoTarget(unroutable(pool.blocked, 0)), anthropic);
    retry_advice::advise(&mut error, pool.now_ms, live.client_retry_max_ms);
    error.stop_retrying_until_s?;
    let upstream_secrets = live.upstream_secrets();
    let secrets: Vec<&str> = upstream_secrets.iter().map(|s| s.expose()).collect();
    error.upstream_message = Some(upstream_message(&mask_upstream_body(body, &secrets)));
    Some(error)
}

/// An upstream error body's message (`error.message` in OpenAI's and Anthropic's shapes, a
/// top-level `message`, else the text itself), bounded.
fn upstream_message(body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .and_then(serde_json::Value::as_str)
    });
    let text = match message {
        Some(message) => message.to_owned(),
        None => String::from_utf8_lossy(body).trim().to_owned(),
    };
    text.chars().take(UPSTREAM_MESSAGE_MAX_CHARS).collect()
}

fn upstream_timeout(anthropic: bool, route: &RouteHeaders) -> Response {
    reply::api_error(
        &ApiError::new(
            ApiErrorKind::UpstreamTimeout,
            "the upstream did not answer in time",
        ),
        anthropic,
        route,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstreams_message_is_read_from_either_shape_or_kept_as_text() {
        let openai =
            br#"{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests"}}"#;
        assert_eq!(
            upstream_message(openai),
            "Rate limit reached for gpt-4o-mini"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"rate_limit_error","message":"50 requests per minute"}}"#;
        assert_eq!(upstream_message(anthropic), "50 requests per minute");
        assert_eq!(upstream_message(b"  slow down\n"), "slow down");
        let long = "x".repeat(5_000);
        assert_eq!(
            upstream_message(long.as_bytes()).len(),
            UPSTREAM_MESSAGE_MAX_CHARS
        );
    }
}
