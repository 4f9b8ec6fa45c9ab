//! The node end to end on loopback against the mock upstream: routing, failover, lockouts,
//! the breaker, the error bodies and headers of the contract.

use crate::support;

use std::collections::BTreeMap;

use quotaroute::actors::ManualClock;
use quotaroute_mock::{Fault, RateBudget, Rule};
use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn s2_requests_spread_2_1_1_and_carry_route_headers() {
    let harness = Harness::start().await;
    let mut served: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..40 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-quotaroute-model"), "gpt-4o-mini");
        assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
        assert!(header(&response, "x-quotaroute-overhead-us")
            .parse::<u64>()
            .is_ok());
        let connection = header(&response, "x-quotaroute-connection");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["object"], "chat.completion");
        *served.entry(connection).or_default() += 1;
    }
    assert_eq!(served["oa-1"], 20);
    assert_eq!(served["oa-2"], 10);
    assert_eq!(served["oa-3"], 10);
    // The mock saw the connections' own keys, never the client's.
    let stats = harness.mock.stats();
    assert_eq!(stats.for_key(&upstream_key("oa-1")), 20);
    assert_eq!(stats.for_key(CLIENT_KEY), 0);
}

#[tokio::test]
async fn s4_a_429_locks_one_model_on_one_key_and_the_client_still_succeeds() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::rate_limited(120)
        .for_key(upstream_key("oa-1"))
        .for_model("gpt-4o-mini")]);
    for _ in 0..12 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200, "failover hides the 429");
        assert_ne!(header(&response, "x-quotaroute-connection"), "oa-1");
    }
    harness.settle().await;
    let lockouts = harness.admin_get("/admin/lockouts").await;
    let lockouts = lockouts["lockouts"].as_array().unwrap();
    assert_eq!(lockouts.len(), 1);
    assert_eq!(lockouts[0]["connection"], "oa-1");
    assert_eq!(lockouts[0]["model"], "gpt-4o-mini");
    assert_eq!(lockouts[0]["reason"], "rate_limited");
    let remaining = lockouts[0]["remaining_ms"].as_u64().unwrap();
    assert!(remaining > 110_000 && remaining <= 120_000, "{remaining}");
    // The same key still serves another model (implicit provider/model combo).
    let response = harness.chat("openai/gpt-4o").await;
    assert_eq!(response.status(), 200);
    // oa-1 got exactly one upstream request for the locked model.
    assert_eq!(
        harness
            .mock
            .stats()
            .for_key_model(&upstream_key("oa-1"), "gpt-4o-mini"),
        1
    );
}

#[tokio::test]
async fn s7_all_keys_locked_answers_429_with_retry_after_and_blocked_list() {
    let harness = Harness::start().await;
    harness
        .mock
        .set_rules(vec![Rule::rate_limited(30).for_model("gpt-4o-mini")]);
    let first = harness.chat("team").await;
    // Three keys tried, three 429s: the upstream 429 is passed through.
    assert_eq!(first.status(), 429);
    assert_eq!(header(&first, "x-quotaroute-attempts"), "3");
    harness.settle().await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 429);
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    assert!((28..=30).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(body["error"]["code"], "all_targets_locked");
    let blocked = body["error"]["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 3);
    assert!(blocked.iter().all(|b| b["reason"] == "rate_limited"));
    assert!(!body.to_string().contains("sk-mock"));
}

#[tokio::test]
async fn s5_a_503_storm_opens_the_breaker_and_a_probe_closes_it() {
    // Policy time is the test's: dedup windows, cooldowns and the reset pass when it says.
    let clock = ManualClock::new(1_800_000_000_000);
    let harness = Harness::start_on_clock(
        |text| text + "\n[defaults.breaker]\ndedup_ms = 1\nreset_ms = 300\n[defaults.cooldown]\nbase_ms = 1\nmax_ms = 1\n",
        clock.clone(),
    )
    .await;
    harness.mock.set_rules(vec![
        Rule::always(Fault::Status(503)).for_model("claude-3-5-haiku")
    ]);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let response = harness.message("claude").await;
        statuses.push(response.status().as_u16());
        harness.settle().await;
        clock.advance(3);
    }
    let state = harness.admin_get("/admin/state").await;
    let anthropic = provider(&state, "anthropic").clone();
    assert_eq!(anthropic["breaker"], "OPEN", "{statuses:?} {anthropic}");
    let openai = provider(&state, "openai").clone();
    assert_eq!(openai["breaker"], "CLOSED");
    // While open: 503 with breaker_open, no upstream request.
    let before = harness.mock.stats().total;
    let response = harness.message("claude").await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["code"], "no_available_target");
    assert_eq!(harness.mock.stats().total, before);
    // The upstream recovers; after the reset a probe closes the breaker.
    harness.mock.clear_rules();
    clock.advance(700);
    let response = harness.message("claude").await;
    assert_eq!(response.status(), 200);
    harness.settle().await;
    let state = harness.admin_get("/admin/state").await;
    let anthropic = provider(&state, "anthropic").clone();
    assert_eq!(anthropic["breaker"], "CLOSED");
}

#[tokio::test]
async fn contract_errors_for_bad_requests() {
    let harness = Harness::start().await;
    // No key.
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .json(&json!({"model": "team"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    // Malformed JSON.
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
    // Missing model.
    let response = harness
        .post_json("/v1/chat/completions", json!({"messages": []}))
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "missing_model");
    // Unknown model.
    let response = harness.chat("no-such-model").await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    // Oversize body.
    let huge = "x".repeat(11 * 1024 * 1024);
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "team", "pad": huge}),
        )
        .await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_too_large");
    // A client error from upstream is returned as is and does not fail over.
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Custom {
            status: 400,
            body: r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#.to_string(),
        })
        .times(1)]);
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 400);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
}

#[tokio::test]
async fn admin_api_access_rules_and_models_list() {
    let harness = Harness::start().await;
    let no_key = harness
        .client
        .get(harness.url("/admin/state"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.status(), 401);
    let client_key = harness
        .client
        .get(harness.url("/admin/state"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(client_key.status(), 403);
    let state = harness.admin_get("/admin/state").await;
    assert_eq!(state["connections"].as_array().unwrap().len(), 6);
    assert!(!state.to_string().contains("sk-mock"));
    let models: Value = harness
        .client
        .get(harness.url("/v1/models"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"team"));
    assert!(ids.contains(&"openai/gpt-4o-mini"));
    let health: Value = harness
        .client
        .get(harness.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ready");
    let metrics = harness.admin_text("/metrics").await;
    assert!(metrics.contains("quotaroute_breaker_state"));
}

#[tokio::test]
async fn streaming_relays_chunks_and_withholds_the_usage_chunk_nobody_asked_for() {
    let harness = Harness::start().await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "content-type").starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    assert!(text.contains("data: [DONE]"));
    assert!(text.contains("\"delta\""));
    assert!(
        !text.contains("\"usage\":{"),
        "usage chunk withheld: {text}"
    );
    // A stream that fails before content fails over cleanly: the client sees one stream.
    harness.mock.set_rules(vec![
        Rule::always(Fault::StreamFailBeforeContent).for_key(upstream_key("oa-1"))
    ]);
    for _ in 0..4 {
        let response = harness
            .post_json(
                "/v1/chat/completions",
                json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(text.contains("data: [DONE]"), "{text}");
        assert!(!text.contains("\"error\""), "{text}");
    }
}

/// The admin API's effects, not just its answers: a cleared lockout lets the key serve the
/// model again and a second clear is a 404; a pushed usage reading of a used-up window steers
/// traffic away; every change is journaled with `by: "admin"`.
#[tokio::test]
async fn admin_clears_a_lockout_and_pushed_usage_steers_traffic_all_journaled_by_admin() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::rate_limited(600)
        .for_key(upstream_key("oa-1"))
        .for_model("gpt-4o-mini")]);
    for _ in 0..8 {
        assert_eq!(harness.chat("team").await.status(), 200);
    }
    harness.settle().await;
    assert_eq!(
        harness.admin_get("/admin/lockouts").await["lockouts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    harness.mock.set_rules(vec![]);
    let delete = |path: &'static str| {
        harness
            .client
            .delete(harness.url(path))
            .bearer_auth(ADMIN_KEY)
            .send()
    };
    let cleared = delete("/admin/lockouts/oa-1/gpt-4o-mini").await.unwrap();
    assert_eq!(cleared.status(), 200);
    let again = delete("/admin/lockouts/oa-1/gpt-4o-mini").await.unwrap();
    assert_eq!(again.status(), 404, "nothing left to clear");
    assert!(harness.admin_get("/admin/lockouts").await["lockouts"]
        .as_array()
        .unwrap()
        .is_empty());
    let mut oa1_served = false;
    for _ in 0..8 {
        let response = harness.chat("team").await;
        oa1_served |= header(&response, "x-quotaroute-connection") == "oa-1";
    }
    assert!(oa1_served, "oa-1 serves gpt-4o-mini again after the clear");

    // oa-1's 5-hour window is used up (§6: saturated at used ≥ limit): with room elsewhere, it
    // is not chosen.
    let in_an_hour = humantime::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3_600),
    );
    let pushed = harness
        .client
        .post(harness.url("/admin/connections/oa-1/usage"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"window": "5h", "used_pct": 100, "resets_at": in_an_hour.to_string()}))
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), 200);
    harness.settle().await;
    for _ in 0..12 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        assert_ne!(header(&response, "x-quotaroute-connection"), "oa-1");
    }

    let events = harness.journal_events().await;
    let unlocked: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "model_unlocked")
        .collect();
    assert_eq!(unlocked.len(), 1, "{unlocked:?}");
    assert_eq!(unlocked[0]["by"], "admin", "{}", unlocked[0]);
    assert!(
        events.iter().any(|e| e["kind"] == "usage_observed"
            && e["connection"] == "oa-1"
            && e["window"] == "5h"),
        "the pushed reading is journaled"
    );
}

/// Behaviour §7, when the tries run out after real upstream failures on every key: 401, 402 and
/// 403 → 502 `upstream_error`; 529 → 503; 500 passed through; always with the attempts header.
/// The next request finds every key disabled: 503 `no_available_target`, with no `Retry-After`
/// after an auth failure (it never ends by itself) and one at the billing retry after a 402.
#[tokio::test]
async fn s7_out_of_tries_maps_every_key_failing_to_the_contract_status() {
    // (upstream status, client status, error code, Retry-After on the next request)
    let cases: [(u16, u16, Option<&str>, Option<u64>); 5] = [
        (401, 502, Some("upstream_error"), None),
        (402, 502, Some("upstream_error"), Some(3_600)),
        (403, 502, Some("upstream_error"), None),
        (529, 503, None, None),
        (500, 500, None, None),
    ];
    for (fault, status, code, retry_after) in cases {
        let harness = Harness::start().await;
        harness.mock.set_rules(vec![
            Rule::always(Fault::Status(fault)).for_model("gpt-4o-mini")
        ]);
        let response = harness.chat("team").await;
        assert_eq!(response.status(), status, "upstream {fault}");
        assert_eq!(
            header(&response, "x-quotaroute-attempts"),
            "3",
            "upstream {fault}"
        );
        let body: Value = response.json().await.unwrap();
        if let Some(code) = code {
            assert_eq!(body["error"]["code"], code, "upstream {fault}: {body}");
            assert_eq!(
                body["error"]["type"], "api_error",
                "upstream {fault}: {body}"
            );
        }
        let text = body.to_string();
        assert!(
            !text.contains(&upstream_key("oa-1")[8..]),
            "no key in the body: {text}"
        );
        if fault < 500 {
            harness.settle().await;
            let next = harness.chat("team").await;
            assert_eq!(next.status(), 503, "every key disabled after {fault}");
            let header: Option<u64> = next
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse().unwrap());
            let body: Value = next.json().await.unwrap();
            match (header, retry_after) {
                (None, None) => {}
                // The billing retry (1 h) less the moments this test took.
                (Some(got), Some(want)) => assert!(got <= want && got + 10 >= want, "{got}"),
                other => panic!("after {fault}: Retry-After {other:?}: {body}"),
            }
            assert_eq!(body["error"]["code"], "no_available_target");
        }
    }
}

/// Behaviour §6, source 2: the upstream's own rate-limit headers. oa-1 has 50 requests in its
/// window; once its headers say ≤ 2 % is left, traffic moves to oa-2 and oa-3 before the 429
/// ever comes, and the bucket shows saturated.
#[tokio::test]
async fn s6_rate_limit_headers_move_traffic_before_the_429() {
    let harness = Harness::start().await;
    harness.mock.set_budget(
        &upstream_key("oa-1"),
        RateBudget {
            requests_limit: 50,
            tokens_limit: 100_000_000,
            reset_ms: 600_000,
        },
    );
    for _ in 0..140 {
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "x-quotaroute-attempts"),
            "1",
            "never a 429 to fail over from"
        );
    }
    harness.settle().await;
    let oa1 = harness
        .mock
        .stats()
        .for_key_model(&upstream_key("oa-1"), "gpt-4o-mini");
    // 2:1:1 would give oa-1 70 of 140; it stops at 49 (1 left = 2 % of 50), or 50 when the
    // next decision was made before the 49th report (reports are fire-and-forget).
    assert!((49..=50).contains(&oa1), "oa-1 served {oa1}");
    let state = harness.admin_get("/admin/state").await;
    let buckets = connection(&state, "oa-1")["buckets"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        buckets
            .iter()
            .any(|b| b["window"] == "requests:gpt-4o-mini" && b["saturated"] == true),
        "{buckets:?}"
    );
    assert!(harness.admin_get("/admin/lockouts").await["lockouts"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// The client's `x-request-id` is kept: echoed to the client and the id of the journaled
/// request events; token usage is captured from JSON bodies and from streams.
#[tokio::test]
async fn request_ids_and_token_usage_reach_the_journal_for_json_and_streams() {
    let harness = Harness::start().await;
    for (id, stream) in [("client-req-json-1", false), ("client-req-stream-1", true)] {
        let response = harness
            .client
            .post(harness.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .header("x-request-id", id)
            .json(&json!({"model": "team", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-request-id"), id);
        let _ = response.bytes().await.unwrap();
    }
    harness.settle().await;
    let events = harness.journal_events().await;
    for id in ["client-req-json-1", "client-req-stream-1"] {
        let succeeded = events
            .iter()
            .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == id)
            .unwrap_or_else(|| panic!("no request_succeeded for {id}: {events:?}"));
        assert!(succeeded["tokens_in"].as_u64().unwrap() > 0, "{succeeded}");
        assert!(succeeded["tokens_out"].as_u64().unwrap() > 0, "{succeeded}");
        assert_eq!(succeeded["stream"], id.contains("stream"), "{succeeded}");
    }
}

/// Behaviour §7 with `hold_ms`: when every key of the combo is locked for less than `hold_ms`,
/// the request waits for the earliest unblock and is served, instead of a 429.
#[tokio::test]
async fn s7_hold_ms_waits_for_the_earliest_unblock_over_http() {
    let harness = Harness::start_editing(|text| {
        text.replace("name = \"team\"\n", "name = \"team\"\nhold_ms = 3000\n")
    })
    .await;
    harness.mock.set_rules(vec![Rule::rate_limited(1)
        .for_model("gpt-4o-mini")
        .times(3)]);
    // Every key answers 429 once: the first request runs out of targets.
    assert_eq!(harness.chat("team").await.status(), 429);
    harness.settle().await;
    let started = std::time::Instant::now();
    let response = harness.chat("team").await;
    let waited = started.elapsed();
    assert_eq!(response.status(), 200, "held, then served");
    assert!(
        waited >= std::time::Duration::from_millis(800),
        "answered after {waited:?}: it should have waited for the 1 s lock"
    );
}
