//! The rate-limit headers every mock response carries, in each provider's own dialect, and the
//! time formats they use (OpenAI durations like `6m0s`, RFC 3339, HTTP dates).
//!
//! Owns formatting only; the numbers come from `state`'s budgets and the fault's reset form.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use super::fault::ResetForm;
use super::plan_windows::PlanReading;
use super::state::RateSnapshot;

/// Which provider's conventions a response follows (picked by the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

pub(crate) fn insert(headers: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        headers.insert(name, value);
    }
}

/// OpenAI's reset duration text: `20ms`, `1s`, `1.5s`, `6m0s`, `1h2m3s`.
pub fn openai_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let hours = ms / 3_600_000;
    let minutes = ms / 60_000 % 60;
    let seconds_ms = ms % 60_000;
    let seconds = if seconds_ms.is_multiple_of(1000) {
        format!("{}s", seconds_ms / 1000)
    } else {
        let text = format!("{:.3}", seconds_ms as f64 / 1000.0);
        format!("{}s", text.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => seconds,
        (0, _) => format!("{minutes}m{seconds}"),
        _ => format!("{hours}h{minutes}m{seconds}"),
    }
}

fn from_now(ms: u64) -> SystemTime {
    SystemTime::now() + Duration::from_millis(ms)
}

pub fn rfc3339_from_now(ms: u64) -> String {
    humantime::format_rfc3339_seconds(from_now(ms)).to_string()
}

pub fn http_date_from_now(ms: u64) -> String {
    httpdate::fmt_http_date(from_now(ms))
}

/// The budget headers. `with_resets = false` leaves out every reset header, so a scripted 429
/// carries exactly the reset form it was given and nothing else.
pub fn budget_headers(
    headers: &mut HeaderMap,
    dialect: Dialect,
    rate: &RateSnapshot,
    with_resets: bool,
) {
    let budget = &rate.budget;
    if let Some(plan) = &rate.plan {
        plan_headers(headers, dialect, plan);
    }
    if !rate.count_headers {
        return;
    }
    match dialect {
        Dialect::OpenAi => {
            let reset = openai_duration(budget.reset_ms);
            insert(
                headers,
                "x-ratelimit-limit-requests",
                &budget.requests_limit.to_string(),
            );
            insert(
                headers,
                "x-ratelimit-limit-tokens",
                &budget.tokens_limit.to_string(),
            );
            insert(
                headers,
                "x-ratelimit-remaining-requests",
                &rate.requests_remaining.to_string(),
            );
            insert(
                headers,
                "x-ratelimit-remaining-tokens",
                &rate.tokens_remaining.to_string(),
            );
            if with_resets {
                insert(headers, "x-ratelimit-reset-requests", &reset);
                insert(headers, "x-ratelimit-reset-tokens", &reset);
            }
        }
        Dialect::Anthropic => {
            let reset = rfc3339_from_now(budget.reset_ms);
            let requests = (budget.requests_limit, rate.requests_remaining);
            let tokens = (budget.tokens_limit, rate.tokens_remaining);
            for (kind, (limit, remaining)) in [
                ("requests", requests),
                ("tokens", tokens),
                ("input-tokens", tokens),
                ("output-tokens", tokens),
            ] {
                let prefix = format!("anthropic-ratelimit-{kind}");
                insert(headers, &format!("{prefix}-limit"), &limit.to_string());
                insert(
                    headers,
                    &format!("{prefix}-remaining"),
                    &remaining.to_string(),
                );
                if with_resets {
                    insert(headers, &format!("{prefix}-reset"), &reset);
                }
            }
        }
    }
}

/// A plan's windows in its provider's headers (upstream-errors.md, "Subscription windows"):
/// Anthropic's unified utilization and reset per window with the status and the claim that
/// decides it; Codex's primary (5 hours) and secondary (weekly) used percent, minutes and reset.
fn plan_headers(headers: &mut HeaderMap, dialect: Dialect, plan: &PlanReading) {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64);
    let windows = [("5h", plan.five_hour), ("7d", plan.weekly)];
    match dialect {
        Dialect::Anthropic => {
            let status = if plan.spent_until_ms.is_some() {
                "rejected"
            } else {
                "allowed"
            };
            insert(headers, "anthropic-ratelimit-unified-status", status);
            for (name, window) in windows {
                let prefix = format!("anthropic-ratelimit-unified-{name}");
                insert(
                    headers,
                    &format!("{prefix}-utilization"),
                    &format!("{:.2}", window.utilization()),
                );
                insert(
                    headers,
                    &format!("{prefix}-reset"),
                    &window.resets_at_ms.div_ceil(1000).to_string(),
                );
            }
            let (claim, binding) = if plan.weekly.utilization() > plan.five_hour.utilization() {
                ("seven_day", plan.weekly)
            } else {
                ("five_hour", plan.five_hour)
            };
            insert(
                headers,
                "anthropic-ratelimit-unified-representative-claim",
                claim,
            );
            let reset = plan.spent_until_ms.unwrap_or(binding.resets_at_ms);
            insert(
                headers,
                "anthropic-ratelimit-unified-reset",
                &reset.div_ceil(1000).to_string(),
            );
        }
        Dialect::OpenAi => {
            for (position, (_, window)) in ["primary", "secondary"].iter().zip(windows) {
                let prefix = format!("x-codex-{position}");
                insert(
                    headers,
                    &format!("{prefix}-used-percent"),
                    &format!("{:.0}", window.utilization() * 100.0),
                );
                insert(
                    headers,
                    &format!("{prefix}-window-minutes"),
                    &(window.length_ms / 60_000).to_string(),
                );
                insert(
                    headers,
                    &format!("{prefix}-reset-after-seconds"),
                    &window
                        .resets_at_ms
                        .saturating_sub(now_ms)
                        .div_ceil(1000)
                        .to_string(),
                );
                insert(
                    headers,
                    &format!("{prefix}-reset-at"),
                    &window.resets_at_ms.div_ceil(1000).to_string(),
                );
            }
        }
    }
}

/// The headers a 429's reset form puts on the response (body forms add nothing here).
pub fn reset_headers(headers: &mut HeaderMap, form: &ResetForm) {
    match form {
        ResetForm::RetryAfterSeconds(seconds) => {
            insert(headers, "retry-after", &seconds.to_string());
        }
        ResetForm::RetryAfterHttpDate(seconds) => {
            insert(headers, "retry-after", &http_date_from_now(seconds * 1000));
        }
        ResetForm::RetryAfterMs(ms) => insert(headers, "retry-after-ms", &ms.to_string()),
        ResetForm::OpenAiResetHeaders(text) => {
            insert(headers, "x-ratelimit-remaining-requests", "0");
            insert(headers, "x-ratelimit-reset-requests", text);
            insert(headers, "x-ratelimit-reset-tokens", text);
        }
        ResetForm::AnthropicResetRfc3339(seconds) => {
            let reset = rfc3339_from_now(seconds * 1000);
            insert(headers, "anthropic-ratelimit-requests-remaining", "0");
            insert(headers, "anthropic-ratelimit-requests-reset", &reset);
            insert(headers, "anthropic-ratelimit-tokens-reset", &reset);
        }
        ResetForm::Several(forms) => {
            for form in forms {
                reset_headers(headers, form);
            }
        }
        ResetForm::BodyRetryDelay(_) | ResetForm::MessageTryAgainIn(_) | ResetForm::None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_durations_match_the_documented_shapes() {
        for (ms, text) in [
            (12, "12ms"),
            (1000, "1s"),
            (1500, "1.5s"),
            (360_000, "6m0s"),
            (3_723_000, "1h2m3s"),
            (90_000, "1m30s"),
        ] {
            assert_eq!(openai_duration(ms), text, "{ms}");
        }
    }

    #[test]
    fn dates_are_well_formed() {
        assert!(rfc3339_from_now(0).ends_with('Z'));
        assert!(http_date_from_now(0).ends_with("GMT"));
    }
}
