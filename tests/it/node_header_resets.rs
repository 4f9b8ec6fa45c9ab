//! An upstream's rate-limit headers with an absurd or missing reset block an account no longer
//! than the window they are about (issue #49, behaviour §6): the same bound a peer's reading
//! gets (`policy::reading_end`). Real HTTP to the mock upstream, which sends the headers:
//! - `x-ratelimit-remaining-requests: 0` with reset `999999h` (41,666 days): a minute;
//! - a spent per-minute token window with no reset at all: a minute, not forever;
//! - Anthropic's unified `rejected` with reset `99999999999` (1.1 M days): five hours.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::{connection, header, upstream_key, Harness};

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;
/// Slack for the time between the answer and the check.
const SLACK_MS: u64 = 20_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// Sends `combo` requests until `id` served one (its headers read), at most 12.
async fn served_by(harness: &Harness, combo: &str, id: &str, anthropic: bool) {
    for _ in 0..12 {
        let response = if anthropic {
            harness.message(combo).await
        } else {
            harness.chat(combo).await
        };
        assert_eq!(response.status(), 200);
        if header(&response, "x-quotaroute-connection") == id {
            harness.settle().await;
            return;
        }
    }
    panic!("{id} served none of 12");
}

/// `id`'s bucket `window` from `/admin/state`: saturated, and ending within `length_ms`.
async fn spent_for_at_most(harness: &Harness, id: &str, window: &str, length_ms: u64) -> Value {
    let state = harness.admin_get("/admin/state").await;
    let view = connection(&state, id);
    let bucket = view["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["window"] == window)
        .unwrap_or_else(|| panic!("{id}: no {window} bucket: {view}"))
        .clone();
    assert_eq!(bucket["saturated"], true, "{bucket}");
    let ends = bucket["resets_at_ms"].as_u64();
    assert!(
        ends.is_some_and(|at| at <= now_ms() + length_ms + SLACK_MS),
        "{id}'s {window} blocks past its own length ({length_ms} ms) or for good: {bucket}"
    );
    bucket
}

#[tokio::test]
async fn absurd_or_missing_resets_in_headers_end_with_their_window() {
    let harness = Harness::start().await;
    // oa-1 answers with its per-minute windows spent: requests resetting in 999999 h, tokens
    // with no reset at all (and none of the mock's own count headers).
    let oa = upstream_key("oa-1");
    harness.mock.set_subscription_account(&oa);
    harness.mock.set_response_headers(
        &oa,
        pairs(&[
            ("x-ratelimit-limit-requests", "100"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "999999h"),
            ("x-ratelimit-limit-tokens", "10000"),
            ("x-ratelimit-remaining-tokens", "0"),
        ]),
    );
    // an-1's subscription refuses with its 5-hour window, "until" 99999999999 (Unix s).
    let an = upstream_key("an-1");
    harness.mock.set_subscription_account(&an);
    harness.mock.set_response_headers(
        &an,
        pairs(&[
            ("anthropic-ratelimit-unified-status", "rejected"),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "five_hour",
            ),
            ("anthropic-ratelimit-unified-reset", "99999999999"),
        ]),
    );
    served_by(&harness, "team", "oa-1", false).await;
    served_by(&harness, "claude", "an-1", true).await;

    spent_for_at_most(&harness, "oa-1", "requests:gpt-4o-mini", MINUTE_MS).await;
    spent_for_at_most(&harness, "oa-1", "tokens:gpt-4o-mini", MINUTE_MS).await;
    spent_for_at_most(&harness, "an-1", "5h", 5 * HOUR_MS).await;

    // What is journaled (and so what peers learn) carries the bounded end too.
    let readings: Vec<Value> = harness
        .journal_events()
        .await
        .into_iter()
        .filter(|e| e["kind"] == "usage_observed")
        .collect();
    assert!(readings.len() >= 3, "{readings:?}");
    for reading in &readings {
        let ends = reading["resets_at_ms"].as_u64();
        assert!(
            ends.is_some_and(|at| at <= now_ms() + 5 * HOUR_MS + SLACK_MS),
            "journaled without a bounded end: {reading}"
        );
    }

    // The saturated account is passed over meanwhile (§6).
    for _ in 0..6 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        assert_ne!(header(&response, "x-quotaroute-connection"), "oa-1");
    }
}
