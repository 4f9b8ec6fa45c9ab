//! The first request to meet a spent pool (behaviour §7, issue #50): every account answers 429
//! for an hour — with `Retry-After`, with only its reset headers, or with both. The router's
//! answer after its tries is not the last upstream's 429 passed through (which says "per
//! minute" and which clients sleep on) but its own refusal, as it would refuse the next
//! request: `x-should-retry: false`, `Retry-After` to the earliest unblock, the time in words,
//! `usage_limit_reached` on OpenAI's shape, and the upstream's message in a field of its own —
//! on both APIs, translated or not. The real clients meeting it are `node_refusal_clients`'.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::{json, Value};

use crate::support::*;

/// How every account says it is out for an hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HourLong {
    /// `retry-after: 3600` only.
    RetryAfter,
    /// Only the provider's reset headers (`x-ratelimit-reset-*: 1h0m0s`,
    /// `anthropic-ratelimit-*-reset` an hour from now).
    ResetHeaders,
    /// Both.
    Both,
}

impl HourLong {
    pub const ALL: [HourLong; 3] = [HourLong::RetryAfter, HourLong::ResetHeaders, HourLong::Both];

    /// The mock's rules: every 429 of the OpenAI-format accounts (`gpt-4o-mini`) and the
    /// Anthropic-format ones (`claude-3-5-haiku`) in this form.
    pub fn rules(self) -> Vec<Rule> {
        let openai = ResetForm::OpenAiResetHeaders("1h0m0s".into());
        let anthropic = ResetForm::AnthropicResetRfc3339(3_600);
        let retry_after = ResetForm::RetryAfterSeconds(3_600);
        let (openai, anthropic) = match self {
            HourLong::RetryAfter => (retry_after.clone(), retry_after),
            HourLong::ResetHeaders => (openai, anthropic),
            HourLong::Both => (
                ResetForm::Several(vec![retry_after.clone(), openai]),
                ResetForm::Several(vec![retry_after, anthropic]),
            ),
        };
        vec![
            Rule::always(Fault::Status429 { reset: openai }).for_model("gpt-4o-mini"),
            Rule::always(Fault::Status429 { reset: anthropic }).for_model("claude-3-5-haiku"),
        ]
    }
}

/// A node whose every account answers 429 for an hour in `form`, nothing learned yet; `extra`
/// is appended to the standard config.
pub async fn spent_pool(form: HourLong, extra: &str) -> Harness {
    let harness = Harness::start_with(extra).await;
    harness.mock.set_rules(form.rules());
    harness
}

/// Checks one answer is the router's refusal for a pool out for an hour, in the client's
/// shape (`anthropic`), with the upstream's own message beside it when it answers for an
/// upstream's 429 (`what` names the case and says `first`).
async fn is_the_routers_refusal(response: reqwest::Response, anthropic: bool, what: &str) {
    assert_eq!(response.status(), 429, "{what}");
    assert_eq!(header(&response, "x-should-retry"), "false", "{what}");
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    assert!(
        (3_500..=3_600).contains(&retry_after),
        "{what}: {retry_after}"
    );
    assert_eq!(header(&response, "retry-after-ms"), "", "{what}");
    assert_eq!(header(&response, "content-type"), "application/json");
    let body: Value = response.json().await.unwrap();
    let error = &body["error"];
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("every account of this model is ") && message.ends_with("UTC, in 1 h"),
        "{what}: {body}"
    );
    assert_eq!(error["code"], "all_targets_locked", "{what}: {body}");
    let blocked = error["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 3, "{what}: {body}");
    assert!(blocked
        .iter()
        .all(|b| b["remaining_ms"].as_u64().unwrap() > 3_500_000));
    if anthropic {
        assert_eq!(body["type"], "error");
        assert_eq!(error["type"], "rate_limit_error", "{what}: {body}");
    } else {
        assert_eq!(
            error["type"], "usage_limit_reached",
            "{what}: Codex stops only on this: {body}"
        );
        let resets_in = error["resets_in_seconds"].as_u64().unwrap();
        assert!((3_500..=3_600).contains(&resets_in), "{what}: {body}");
        assert!(error["resets_at"].as_u64().is_some(), "{what}: {body}");
    }
    if what.ends_with("next") {
        // Refused before sending: no upstream said anything.
        assert!(error.get("upstream_message").is_none(), "{what}: {body}");
        return;
    }
    let upstream = error["upstream_message"].as_str().unwrap();
    assert!(
        upstream.contains("rate limit") || upstream.contains("Rate limit"),
        "{what}: the upstream's own words are kept: {body}"
    );
    assert!(!upstream.contains("sk-mock-"), "{what}: {body}");
}

#[tokio::test]
async fn the_first_request_to_meet_a_spent_pool_is_told_to_stop_and_until_when() {
    for form in HourLong::ALL {
        let harness = spent_pool(form, "").await;
        for (path, model, anthropic) in [
            ("/v1/chat/completions", "team", false),
            ("/v1/messages", "claude", true),
        ] {
            let body = if anthropic {
                json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
            } else {
                json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
            };
            let response = harness.post_json(path, body.clone()).await;
            assert_eq!(header(&response, "x-quotaroute-attempts"), "3");
            assert!(!header(&response, "x-quotaroute-connection").is_empty());
            is_the_routers_refusal(response, anthropic, &format!("{form:?} {path} first")).await;
            // The next request is refused by the router before sending, in the same words.
            let sent = harness.mock.stats().total;
            let response = harness.post_json(path, body).await;
            is_the_routers_refusal(response, anthropic, &format!("{form:?} {path} next")).await;
            assert_eq!(harness.mock.stats().total, sent, "nothing sent");
        }
    }
}

#[tokio::test]
async fn a_translated_request_meeting_a_spent_pool_is_told_the_same() {
    for form in HourLong::ALL {
        let harness = spent_pool(form, "").await;
        // Chat to the Anthropic accounts, Messages to the OpenAI ones.
        let response = harness
            .post_json(
                "/v1/chat/completions",
                json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "chat>messages"
        );
        is_the_routers_refusal(response, false, &format!("{form:?} chat>messages")).await;
        let response = harness
            .post_json(
                "/v1/messages",
                json!({"model": "team", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        is_the_routers_refusal(response, true, &format!("{form:?} messages>chat")).await;
    }
}

#[tokio::test]
async fn a_short_wait_keeps_the_upstreams_429() {
    // Every account out for 30 s: within `client_retry_max_ms`, so the client may sleep on it.
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::rate_limited(30)]);
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "x-should-retry"), "");
    assert_eq!(header(&response, "retry-after"), "30");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
}
