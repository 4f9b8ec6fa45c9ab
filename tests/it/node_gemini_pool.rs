//! A pool of Gemini keys through the node, over real HTTP with the mock speaking Google's
//! answers (behaviour §15) on Google's OpenAI-compatible endpoint: a key whose day's quota is
//! spent is not asked again until midnight in America/Los_Angeles — whatever its short
//! `retryDelay` says — while the others serve; a bad key (400 `API_KEY_INVALID`) is disabled
//! after one answer and its error never reaches the client. Policy time is the test's
//! (`ManualClock`).

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use quotaroute::actors::ManualClock;
use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::node_gemini_native::google_keys;
use crate::support::{connection, upstream_key, Harness, CLIENT_KEY};

const HOUR: u64 = 3_600_000;
/// 2026-12-05T18:00:00Z: 10:00 in Los Angeles (PST, UTC-8); its midnight is 14 hours away.
const TEN_AM_PACIFIC: u64 = 1_796_493_600_000;

/// Three keys on Google's OpenAI-compatible endpoint (`…/v1beta/openai`), combo `gemini`.
fn gemini_pool(text: String) -> String {
    google_keys(text, "openai", "MOCK/v1beta/openai")
}

async fn start(clock: &std::sync::Arc<ManualClock>) -> Harness {
    Harness::start_on_clock(
        |text| {
            let base = text
                .lines()
                .find_map(|line| {
                    line.strip_prefix("base_url = \"")
                        .map(|rest| rest.trim_end_matches("/v1\"").to_owned())
                })
                .unwrap();
            gemini_pool(text).replace("MOCK", &base)
        },
        clock.clone(),
    )
    .await
}

fn asked(harness: &Harness, id: &str) -> u64 {
    harness.mock.stats().for_key(&upstream_key(id))
}

/// One chat request on the pool: it must be served (200, a reply).
async fn served(harness: &Harness) {
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&json!({"model": "gemini", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("RESOURCE_EXHAUSTED") && !body.contains("API key not valid"));
    harness.settle().await;
}

#[tokio::test]
async fn a_key_spent_for_the_day_rests_until_midnight_pacific_while_the_others_serve() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    // gm-1's day is spent; Google still says "retry in 22s".
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: true,
            retry_delay_s: 22,
        })
        .for_key(upstream_key("gm-1"))]);
    for _ in 0..12 {
        served(&harness).await;
        if asked(&harness, "gm-1") > 0 {
            break;
        }
    }
    assert_eq!(asked(&harness, "gm-1"), 1, "{:?}", harness.mock.stats());
    let lockouts = harness.admin_get("/admin/lockouts").await;
    let lock = lockouts["lockouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|lock| lock["connection"] == "gm-1")
        .cloned()
        .unwrap_or_else(|| panic!("{lockouts}"));
    assert_eq!(lock["model"], "gemini-2.5-flash");
    assert_eq!(lock["reason"], "quota_exhausted", "{lock}");
    // Through the rest of the Pacific day, well past every retryDelay, gm-1 is never asked.
    for hour in [0, 1, 6, 13] {
        clock.set(TEN_AM_PACIFIC + hour * HOUR + 60_000);
        for _ in 0..4 {
            served(&harness).await;
        }
    }
    clock.set(TEN_AM_PACIFIC + 14 * HOUR - 1_000);
    for _ in 0..4 {
        served(&harness).await;
    }
    assert_eq!(asked(&harness, "gm-1"), 1, "{:?}", harness.mock.stats());
    // Midnight in Los Angeles: the new day's quota; gm-1 serves again.
    harness.mock.clear_rules();
    clock.set(TEN_AM_PACIFIC + 14 * HOUR + 1_000);
    for _ in 0..12 {
        served(&harness).await;
        if asked(&harness, "gm-1") > 1 {
            break;
        }
    }
    assert_eq!(asked(&harness, "gm-1"), 2, "{:?}", harness.mock.stats());
}

#[tokio::test]
async fn a_minute_quota_is_back_after_its_retry_delay() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 30,
        })
        .for_key(upstream_key("gm-1"))
        .times(1)]);
    for _ in 0..12 {
        served(&harness).await;
        if asked(&harness, "gm-1") > 0 {
            break;
        }
    }
    let lockouts = harness.admin_get("/admin/lockouts").await;
    assert!(
        lockouts["lockouts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|lock| lock["connection"] == "gm-1" && lock["reason"] == "rate_limited"),
        "{lockouts}"
    );
    // 31 s later the minute's quota is back and gm-1 serves.
    clock.set(TEN_AM_PACIFIC + 31_000);
    for _ in 0..12 {
        served(&harness).await;
        if asked(&harness, "gm-1") > 1 {
            break;
        }
    }
    let state = harness.admin_get("/admin/state").await;
    let lockouts = harness.admin_get("/admin/lockouts").await;
    assert_eq!(
        asked(&harness, "gm-1"),
        2,
        "{:?} {lockouts} {}",
        harness.mock.stats(),
        connection(&state, "gm-1")
    );
}

#[tokio::test]
async fn a_bad_key_is_disabled_after_one_answer_and_never_reaches_the_client() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    harness.mock.set_rules(vec![
        Rule::always(Fault::GeminiKeyInvalid).for_key(upstream_key("gm-2")),
        Rule::always(Fault::GeminiKeySuspended).for_key(upstream_key("gm-3")),
    ]);
    for _ in 0..16 {
        served(&harness).await;
    }
    assert_eq!(asked(&harness, "gm-2"), 1, "{:?}", harness.mock.stats());
    assert_eq!(asked(&harness, "gm-3"), 1, "{:?}", harness.mock.stats());
    let state = harness.admin_get("/admin/state").await;
    for id in ["gm-2", "gm-3"] {
        let disabled: &Value = &connection(&state, id)["disabled"];
        assert_eq!(disabled["reason"], "auth", "{id}: {disabled}");
    }
    assert!(connection(&state, "gm-1")["disabled"].is_null());
    // The suspended key's echo is masked wherever the router keeps the message.
    let journal = crate::support::admin_journal_all(&harness.client, &harness.base).await;
    assert!(
        journal.contains("CONSUMER_SUSPENDED"),
        "the journal names the reason"
    );
    assert!(!journal.contains(&upstream_key("gm-3")));
}

/// A client used to Google's habit of a key in the query string (`?key=`): that key never
/// leaves the router — not upstream (path, query, headers), not in the journal, the admin
/// state or lockouts, nor the metrics.
#[tokio::test]
async fn a_key_in_the_query_string_is_never_sent_upstream_or_kept() {
    const SECRET: &str = "AIzaSyQueryStringSecret0123456789abc";
    let harness = Harness::start().await;
    let response = harness
        .client
        .post(harness.url(&format!("/v1/chat/completions?key={SECRET}&trace=1")))
        .bearer_auth(CLIENT_KEY)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(!body.contains(SECRET));
    harness.settle().await;
    let heads = harness.mock.recent_heads();
    assert!(!heads.is_empty());
    for head in &heads {
        assert!(!head.contains(SECRET), "sent upstream: {head}");
    }
    // Other query parameters still go as they came.
    assert!(
        heads
            .iter()
            .any(|head| head.starts_with("POST /v1/chat/completions?trace=1\n")),
        "{heads:?}"
    );
    let journal = crate::support::admin_journal_all(&harness.client, &harness.base).await;
    assert!(!journal.contains(SECRET), "journaled");
    for path in [
        "/admin/state",
        "/admin/lockouts",
        "/admin/clients",
        "/admin/affinity",
    ] {
        assert!(!harness.admin_text(path).await.contains(SECRET), "{path}");
    }
    let metrics = harness
        .client
        .get(harness.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!metrics.contains(SECRET), "metrics");
}
