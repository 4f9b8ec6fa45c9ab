//! Refusals clients act on (behaviour §7, "Say it so clients act on it"): a 429 whose wait is
//! longer than `server.client_retry_max_ms` says `x-should-retry: false` — the header the
//! official OpenAI and Anthropic SDKs (Python and Node) honour before their own retry rules —
//! and its message names the time in words ("until 16:42 UTC, in 59 min"), so a person reading
//! what Codex or Claude Code printed knows when to come back. A short wait stays retryable.
//! The same advice is given whichever path refused: the router's own refusal, a client limit,
//! or an upstream's 429 the router answers for once its whole pool is out
//! (`routed::error_answers`). Pure: `now_ms` and the bound are arguments; it only edits the
//! answer it is handed.

use crate::api_error::{ApiError, ApiErrorKind};

/// The refusals that carry a wait the client could sleep on.
fn advises(kind: ApiErrorKind) -> bool {
    matches!(
        kind,
        ApiErrorKind::AllTargetsLocked
            | ApiErrorKind::ClientRateLimited
            | ApiErrorKind::BudgetExceeded
            | ApiErrorKind::PoolBusy
            | ApiErrorKind::NoSpareQuota
    )
}

/// Marks `error` not to be retried when its wait is beyond `max_ms`, and says the time in its
/// message. The budget's message names its reset already (see `client_gate`).
pub fn advise(error: &mut ApiError, now_ms: u64, max_ms: u64) {
    if !advises(error.kind) {
        return;
    }
    let Some(wait_ms) = error.retry_after_ms else {
        return;
    };
    if wait_ms <= max_ms {
        return;
    }
    error.stop_retrying_until_s = Some(now_ms.saturating_add(wait_ms).div_ceil(1000));
    if error.kind != ApiErrorKind::BudgetExceeded {
        error.message = format!("{} until {}", error.message, at_in_words(now_ms, wait_ms));
    }
}

/// "16:42 UTC, in 59 min"; a time on another day names the date ("2027-01-01 00:00 UTC, in
/// 28 days 3 h").
pub fn at_in_words(now_ms: u64, wait_ms: u64) -> String {
    let at_ms = now_ms.saturating_add(wait_ms);
    let day = |ms: u64| ms / 86_400_000;
    let at = i64::try_from(at_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    let when = match at {
        Some(at) if day(at_ms) == day(now_ms) => at.strftime("%H:%M UTC").to_string(),
        Some(at) => at.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        None => "a time too far to name".to_owned(),
    };
    format!("{when}, in {}", duration_in_words(wait_ms))
}

/// "59 min", "5 h 52 min", "28 days 3 h", "40 s".
pub fn duration_in_words(ms: u64) -> String {
    let minutes = ms.div_ceil(60_000);
    if ms < 60_000 {
        return format!("{} s", ms.div_ceil(1_000));
    }
    let (days, hours, minutes) = (minutes / 1_440, minutes / 60 % 24, minutes % 60);
    match (days, hours, minutes) {
        (0, 0, minutes) => format!("{minutes} min"),
        (0, hours, 0) => format!("{hours} h"),
        (0, hours, minutes) => format!("{hours} h {minutes} min"),
        (1, 0, _) => "1 day".to_owned(),
        (1, hours, _) => format!("1 day {hours} h"),
        (days, 0, _) => format!("{days} days"),
        (days, hours, _) => format!("{days} days {hours} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_166_000_000; // 2026-12-01T23:00:00Z

    #[test]
    fn times_and_waits_in_words() {
        assert_eq!(
            at_in_words(NOW - 7 * 3_600_000, 59 * 60_000),
            "16:59 UTC, in 59 min"
        );
        assert_eq!(at_in_words(NOW, 3_600_000), "2026-12-02 00:00 UTC, in 1 h");
        assert_eq!(duration_in_words(40_000), "40 s");
        assert_eq!(duration_in_words(5 * 3_600_000 + 52 * 60_000), "5 h 52 min");
        assert_eq!(duration_in_words(2_449_007_000), "28 days 8 h");
        assert_eq!(duration_in_words(86_400_000), "1 day");
    }

    #[test]
    fn only_a_long_wait_stops_the_client() {
        let refusal = |wait_ms| ApiError {
            retry_after_ms: Some(wait_ms),
            ..ApiError::new(
                ApiErrorKind::ClientRateLimited,
                "client `a` is over its tokens_per_day",
            )
        };
        let mut short = refusal(30_000);
        advise(&mut short, NOW, 60_000);
        assert_eq!(short.stop_retrying_until_s, None);
        assert_eq!(short.message, "client `a` is over its tokens_per_day");
        let mut long = refusal(3_600_000);
        advise(&mut long, NOW, 60_000);
        assert_eq!(long.stop_retrying_until_s, Some((NOW + 3_600_000) / 1000));
        let body: serde_json::Value = serde_json::from_slice(&long.body(false)).unwrap();
        assert_eq!(body["error"]["type"], "usage_limit_reached");
        assert_eq!(body["error"]["code"], "client_rate_limited");
        assert_eq!(body["error"]["resets_in_seconds"], 3_600);
        let body: serde_json::Value = serde_json::from_slice(&long.body(true)).unwrap();
        assert_eq!(
            body["error"]["type"], "rate_limit_error",
            "Anthropic's shape keeps its type"
        );
        assert_eq!(
            long.message,
            "client `a` is over its tokens_per_day until 2026-12-02 00:00 UTC, in 1 h"
        );
        // Not a refusal with a wait: untouched.
        let mut other = ApiError::new(ApiErrorKind::UpstreamError, "x");
        other.retry_after_ms = Some(3_600_000);
        advise(&mut other, NOW, 60_000);
        assert_eq!(other.stop_retrying_until_s, None);
    }
}
