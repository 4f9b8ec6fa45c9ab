//! Money holds (behaviour §11, issue #34): a stream the client leaves before its usage is still
//! charged (read on for its usage, or estimated), so a small budget stops the client after the
//! first crossing and token limits count what it used; hostile usage values are clamped before
//! they are priced; a budgeted client cannot use a model without a price; an admin can reset a
//! client's spend, and the reset survives a restart.

use std::time::Duration;

use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::support::*;

const KEY_A: &str = "sk-qr-money-team-a-secret";

/// One client `team-a` with `limits`; `gpt-4o-mini` and `claude-3-5-haiku` priced high so that
/// one stream costs cents. `extra_server`: keys added to `[server]`.
fn money_config(limits: &str, extra_server: &str) -> impl FnOnce(String) -> String {
    let limits = limits.to_owned();
    let extra_server = extra_server.to_owned();
    move |text: String| {
        text.replace(
            "shutdown_grace_ms = 2000\n",
            &format!("shutdown_grace_ms = 2000\n{extra_server}\n"),
        ) + &format!(
            r#"
[[clients]]
id = "team-a"
key = "{KEY_A}"
{limits}

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0

[[prices]]
model = "claude-3-5-haiku"
input = 150.0
output = 600.0
"#
        )
    }
}

/// Starts a stream of `max_tokens` chunks as team-a, reads ~90 % of its content, then leaves
/// (drops the response, closing the connection) before the usage came. The status, and the
/// error body of a refusal.
async fn stream_and_leave(harness: &Harness, anthropic: bool, max_tokens: u64) -> (u16, Value) {
    // The mock's reply cycles through six words, one of them " mock".
    let want = (max_tokens / 6 * 9 / 10).max(1) as usize;
    stream_and_leave_after(harness, anthropic, max_tokens, want).await
}

/// [`stream_and_leave`], leaving once the content holds `mocks` times the word " mock" (one
/// in six of the mock's words).
async fn stream_and_leave_after(
    harness: &Harness,
    anthropic: bool,
    max_tokens: u64,
    mocks: usize,
) -> (u16, Value) {
    // A client of its own: leaving closes the socket rather than returning it to a pool.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let (path, body) = if anthropic {
        (
            "/v1/messages",
            json!({"model": "claude", "max_tokens": max_tokens, "stream": true,
                   "messages": [{"role": "user", "content": "tell me a long story please"}]}),
        )
    } else {
        (
            "/v1/chat/completions",
            json!({"model": "team", "max_tokens": max_tokens, "stream": true,
                   "messages": [{"role": "user", "content": "tell me a long story please"}]}),
        )
    };
    let mut response = client
        .post(harness.url(path))
        .bearer_auth(KEY_A)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        let body: Value = response.json().await.unwrap();
        return (status, body);
    }
    let mut seen = String::new();
    while seen.matches("mock").count() < mocks {
        match tokio::time::timeout(Duration::from_secs(5), response.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("the stream ended before content: {other:?} {seen}"),
        }
    }
    assert!(
        !seen.contains("\"completion_tokens\"") && !seen.contains("message_delta"),
        "the client saw the usage before it left: {seen}"
    );
    drop(response);
    drop(client);
    (200, Value::Null)
}

fn team_a(clients: &Value) -> &Value {
    clients["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|client| client["id"] == "team-a")
        .unwrap()
}

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// Waits until the journal holds `count` events of `kind` (drains end in the background).
async fn wait_for_events(harness: &Harness, kind: &str, count: usize) -> Vec<Value> {
    wait_until(harness, |events| events_of(events, kind).len() >= count).await
}

/// Waits until the journal holds `count` charges to clients (see `client_charges`).
async fn wait_for_charges(harness: &Harness, count: usize) -> Vec<Value> {
    let events = wait_until(harness, |events| client_charges(events).len() >= count).await;
    client_charges(&events)
}

/// The journal once `enough` says so, or after 15 s.
async fn wait_until(harness: &Harness, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        harness.settle().await;
        let events = harness.journal_events().await;
        if enough(&events) || tokio::time::Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The probe: 20 streams left at ~95 % against a $0.05/day budget. Before, each was charged
/// $0 and all 20 were served; now each is charged (the drain read the usage the client never
/// saw) and the client is refused from the first request after the spend crossed the budget.
#[tokio::test]
async fn streams_left_early_are_charged_and_a_small_budget_refuses_after_the_crossing() {
    let harness = Harness::start_editing(money_config(
        "budget_usd = 0.05\nbudget_period = \"day\"",
        "",
    ))
    .await;
    // The last three events (the finish chunk, the usage chunk, [DONE]) come 300 ms late:
    // the client has left by then.
    harness.mock.set_rules(vec![Rule::always(Fault::SlowEnd {
        events: 3,
        pause_ms: 300,
    })]);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let (status, body) = stream_and_leave(&harness, false, 40).await;
        if status != 200 {
            assert_eq!(status, 429, "{body}");
            assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        }
        statuses.push(status);
    }
    let served = statuses.iter().filter(|s| **s == 200).count();
    assert!(served >= 1, "{statuses:?}");
    assert!(
        statuses[served..].iter().all(|s| *s == 429),
        "once refused, always refused: {statuses:?}"
    );
    let events = wait_for_events(&harness, "request_succeeded", served).await;
    let usage = client_charges(&events);
    let spend_pusd: Vec<u64> = usage
        .iter()
        .map(|e| e["period_spend_pusd"].as_u64().unwrap())
        .collect();
    let budget_pusd = 50_000_000_000u64;
    let total = *spend_pusd.last().unwrap();
    assert!(
        total >= budget_pusd,
        "charged {total} pUSD for {served} streams"
    );
    // Each served stream was charged when its client left: the one that crossed the budget
    // was the last one served.
    let crossings = spend_pusd
        .iter()
        .position(|spend| *spend >= budget_pusd)
        .unwrap();
    let charged_requests: std::collections::BTreeSet<&str> = usage[..=crossings]
        .iter()
        .map(|e| e["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        charged_requests.len(),
        served,
        "served past the crossing: {statuses:?} {spend_pusd:?}"
    );
    // The connection saw the upstream's own usage (40 chunks out), not 0; the one stream read
    // on when the budget was reached stopped there, charged what it read.
    let successes = events_of(&events, "request_succeeded");
    for success in &successes {
        let tokens_out = success["tokens_out"].as_u64().unwrap();
        assert!((1..=40).contains(&tokens_out), "{success}");
        assert!(success["tokens_in"].as_u64().unwrap() > 0, "{success}");
        assert!(success["cost_usd"].as_f64().unwrap() > 0.0, "{success}");
    }
    let stopped = successes.iter().filter(|s| s["tokens_out"] != 40).count();
    assert!(stopped <= 1, "{successes:?}");
    let clients = harness.admin_get("/admin/clients").await;
    let spend = team_a(&clients)["spend_usd"].as_f64().unwrap();
    assert!(spend >= 0.05, "{clients}");
}

/// Prices of `money_config`, per token in USD.
const INPUT_USD: f64 = 150.0 / 1e6;
const OUTPUT_USD: f64 = 600.0 / 1e6;

/// What the mock generated for streams of this test, priced as output (every SSE event one
/// token: the role, content, finish and usage chunks alike, so it rounds up).
fn generated_usd(harness: &Harness, before: u64) -> f64 {
    (harness.mock.stream_events_sent() - before) as f64 * OUTPUT_USD
}

/// Issue 49 item 10 (the residual of turn 4's F1): a $0.05/day client opened three streams at
/// once and left each after a few words; each was read on to its end for its usage, and the
/// upstream generated $2.40 past the budget. Now the streams' running cost counts against the
/// budget while they run: once the client's spend and its streams' running cost reach the
/// budget, every stream of it stops reading its upstream (which stops generating), and is
/// charged what it used. Service past the budget is bounded by what was already on its way:
/// here under $0.10 (before: ~$2.70, every stream generated to its end).
#[tokio::test]
async fn concurrent_streams_left_early_stop_at_a_small_budget() {
    let harness = Harness::start_editing(money_config(
        "budget_usd = 0.05\nbudget_period = \"day\"",
        "",
    ))
    .await;
    // One event every 3 ms: 1,500 words take 4.5 s to generate, ~$0.90 of output each.
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Paced { every_ms: 3 })]);
    let before = harness.mock.stream_events_sent();
    // Each leaves after its first " mock" (6 words, under a cent), all three at once.
    let left = futures_util::future::join_all(
        (0..3).map(|_| stream_and_leave_after(&harness, false, 1_500, 1)),
    )
    .await;
    assert!(left.iter().all(|(status, _)| *status == 200), "{left:?}");
    let charges = wait_for_charges(&harness, 6).await;
    // Let anything still generating run on (it would take 4.5 s to the end).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let generated = generated_usd(&harness, before);
    let clients = harness.admin_get("/admin/clients").await;
    let spend = team_a(&clients)["spend_usd"].as_f64().unwrap();
    println!("generated ${generated:.4}, charged ${spend:.4}, charges {charges:?}");
    // Charged for what it caused: the budget was reached by what the streams read on.
    assert!(spend >= 0.05, "charged ${spend} {clients}");
    // The service past the budget is bounded.
    let input = 3.0 * 40.0 * INPUT_USD;
    assert!(
        generated + input <= 0.05 + 0.10,
        "the upstream generated ${generated:.4} of output (charged ${spend:.4})"
    );
    assert!(spend <= 0.05 + 0.10, "charged ${spend}");
    // And the client's next request is refused.
    let (status, body) = stream_and_leave_after(&harness, false, 10, 1).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
}

/// The same three streams read to their end by a client that stays: each stops with an error
/// event `budget_exceeded` once the budget is reached, instead of relaying ~$0.90 each.
#[tokio::test]
async fn concurrent_streams_read_to_the_end_stop_at_a_small_budget() {
    let harness = Harness::start_editing(money_config(
        "budget_usd = 0.05\nbudget_period = \"day\"",
        "",
    ))
    .await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Paced { every_ms: 3 })]);
    let before = harness.mock.stream_events_sent();
    let client = reqwest::Client::new();
    let read_all = |_| {
        let client = client.clone();
        let url = harness.url("/v1/chat/completions");
        async move {
            let body = json!({"model": "team", "max_tokens": 1_500, "stream": true,
                              "messages": [{"role": "user", "content": "tell me a long story please"}]});
            let response = client
                .post(url)
                .bearer_auth(KEY_A)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        }
    };
    let texts = futures_util::future::join_all((0..3).map(read_all)).await;
    for text in &texts {
        assert!(
            text.contains("budget_exceeded"),
            "{}",
            &text[text.len().saturating_sub(600)..]
        );
        assert!(
            !text.contains("[DONE]"),
            "a cut stream does not say it is done"
        );
    }
    wait_for_charges(&harness, 3).await;
    let generated = generated_usd(&harness, before);
    let clients = harness.admin_get("/admin/clients").await;
    let spend = team_a(&clients)["spend_usd"].as_f64().unwrap();
    println!("generated ${generated:.4}, charged ${spend:.4}");
    assert!(spend >= 0.05, "charged ${spend}");
    assert!(
        generated + 3.0 * 40.0 * INPUT_USD <= 0.05 + 0.10,
        "the upstream generated ${generated:.4} (charged ${spend:.4})"
    );
    assert!(spend <= 0.05 + 0.10, "charged ${spend}");
}

/// A `tokens_per_min = 1000` client leaving streams is counted: its window fills and it is
/// refused, where before it used 8,000 tokens with 0 counted.
#[tokio::test]
async fn a_tokens_per_min_client_leaving_streams_is_counted_and_limited() {
    let harness = Harness::start_editing(money_config("tokens_per_min = 1000", "")).await;
    harness.mock.set_rules(vec![Rule::always(Fault::SlowEnd {
        events: 3,
        pause_ms: 200,
    })]);
    let mut statuses = Vec::new();
    for _ in 0..30 {
        let (status, body) = stream_and_leave(&harness, false, 200).await;
        if status != 200 {
            assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
            statuses.push(status);
            break;
        }
        statuses.push(status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(statuses.last(), Some(&429), "never limited: {statuses:?}");
    // ~220 tokens a stream: the window is crossed by the fifth or sixth.
    assert!(statuses.len() <= 7, "{statuses:?}");
    let events = wait_for_events(&harness, "request_succeeded", statuses.len() - 1).await;
    let counted: u64 = events_of(&events, "request_succeeded")
        .iter()
        .map(|e| e["tokens_in"].as_u64().unwrap() + e["tokens_out"].as_u64().unwrap())
        .sum();
    assert!(counted >= 1000, "{counted}");
    let clients = harness.admin_get("/admin/clients").await;
    let window = team_a(&clients)["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == "tokens_per_min")
        .unwrap()
        .clone();
    assert!(window["used"].as_u64().unwrap() >= 1000, "{window}");
}

/// An Anthropic stream left after `message_start` counts its output too: read on to its
/// `message_delta`; and when the upstream never sends it within
/// `drain_after_client_left_ms`, an estimate is charged and marked so.
#[tokio::test]
async fn an_anthropic_stream_left_early_counts_its_output_read_on_or_estimated() {
    let harness = Harness::start_editing(money_config(
        "",
        "drain_after_client_left_ms = 500\ndrain_max_bytes = 1048576",
    ))
    .await;
    harness.mock.set_rules(
        vec![Rule::always(Fault::SlowEnd {
            events: 3,
            pause_ms: 200,
        })]
        .into_iter()
        .map(|rule| rule.times(1))
        .collect(),
    );
    assert_eq!(stream_and_leave(&harness, true, 30).await.0, 200);
    let events = wait_for_events(&harness, "request_succeeded", 1).await;
    let success = events_of(&events, "request_succeeded")[0].clone();
    assert_eq!(
        success["tokens_out"], 30,
        "read on to message_delta: {success}"
    );
    assert_eq!(success["usage_estimated"], false, "{success}");

    // Now the rest comes only after the drain gave up: the estimate is charged.
    harness.mock.set_rules(vec![Rule::always(Fault::SlowEnd {
        events: 3,
        pause_ms: 5_000,
    })]);
    assert_eq!(stream_and_leave(&harness, true, 30).await.0, 200);
    let events = wait_for_events(&harness, "request_succeeded", 2).await;
    let success = events_of(&events, "request_succeeded")[1].clone();
    assert_eq!(success["usage_estimated"], true, "{success}");
    assert!(success["tokens_out"].as_u64().unwrap() > 1, "{success}");
    assert!(success["tokens_in"].as_u64().unwrap() > 0, "{success}");
    let estimated: Vec<Value> = client_charges(&events)
        .into_iter()
        .filter(|e| e["request_id"] == success["request_id"])
        .collect();
    assert!(
        estimated.iter().any(|e| e["estimated"] == true),
        "{estimated:?}"
    );
    assert!(estimated
        .iter()
        .all(|e| e["cost_usd"].as_f64().is_some_and(|cost| cost > 0.0)));
}

/// What a hostile upstream's usage is charged, one JSON answer each.
async fn charged_for(harness: &Harness, usage: &str) -> Value {
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::HostileUsage {
            usage: usage.to_owned(),
        })]);
    let before = client_charges(&harness.journal_events().await).len();
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(KEY_A)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    wait_for_charges(harness, before + 1).await[before].clone()
}

/// `cached_tokens` 1e9 on a 5-token prompt was priced $100,000; `u64::MAX` tokens $18.4M;
/// negative, fractional and string counts were free. Now each is clamped or read, and priced
/// sanely.
#[tokio::test]
async fn hostile_usage_values_are_clamped_before_they_are_priced() {
    let harness = Harness::start_editing(money_config("", "usage_max_tokens = 100000")).await;
    let cached = charged_for(
        &harness,
        r#"{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1000000000}}"#,
    )
    .await;
    assert_eq!(cached["tokens_in"], 5, "{cached}");
    assert!(cached["tokens_cached"].as_u64().unwrap() <= 5, "{cached}");
    assert!(cached["cost_usd"].as_f64().unwrap() < 0.01, "{cached}");

    let huge = charged_for(
        &harness,
        r#"{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615}"#,
    )
    .await;
    assert_eq!(huge["tokens_in"], 100_000, "{huge}");
    assert_eq!(huge["tokens_out"], 100_000, "{huge}");
    // 100k × 150 + 100k × 600 USD per million = $75, not $18.4M.
    assert!(
        (huge["cost_usd"].as_f64().unwrap() - 75.0).abs() < 1e-6,
        "{huge}"
    );

    // Negative and non-numeric counts are no report: the estimate stands in.
    let negative = charged_for(&harness, r#"{"prompt_tokens":-5,"completion_tokens":-7}"#).await;
    assert_eq!(negative["estimated"], true, "{negative}");
    assert!(negative["tokens_out"].as_u64().unwrap() > 0, "{negative}");
    assert!(negative["cost_usd"].as_f64().unwrap() > 0.0, "{negative}");
    let fractional = charged_for(
        &harness,
        r#"{"prompt_tokens":10.5,"completion_tokens":3.2}"#,
    )
    .await;
    assert_eq!(
        (&fractional["tokens_in"], &fractional["tokens_out"]),
        (&json!(11), &json!(4))
    );
    let strings = charged_for(
        &harness,
        r#"{"prompt_tokens":"12","completion_tokens":"lots"}"#,
    )
    .await;
    assert!(strings["tokens_in"].as_u64().unwrap() >= 12, "{strings}");
    assert!(strings["tokens_out"].as_u64().unwrap() > 0, "{strings}");
    assert_eq!(strings["estimated"], true, "{strings}");
    // No usage at all: an estimate, never free.
    let missing = charged_for(&harness, "null").await;
    assert_eq!(missing["estimated"], true, "{missing}");
    assert!(missing["tokens_out"].as_u64().unwrap() > 0, "{missing}");
    assert!(missing["cost_usd"].as_f64().unwrap() > 0.0, "{missing}");
}

async fn chat_as(harness: &Harness, key: &str, model: &str) -> reqwest::Response {
    harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hello there"}]}))
        .send()
        .await
        .unwrap()
}

/// `openai/ok-2024-08-06` when only `ok` is priced cost a budgeted client nothing. Now it is
/// refused before anything is sent (a dated name takes no price from its alias); a client
/// without a budget still uses it, and a priced model still serves.
#[tokio::test]
async fn a_budgeted_client_cannot_use_a_model_without_a_price() {
    let harness = Harness::start_editing(|text| {
        money_config("budget_usd = 5.0", "")(text)
            + "\n[[prices]]\nmodel = \"ok\"\ninput = 1.0\noutput = 2.0\n"
    })
    .await;
    let upstream_before = harness.mock.stats().total;
    for (model, anthropic) in [
        ("openai/ok-2024-08-06", false),
        ("anthropic/unpriced", true),
    ] {
        let response = if anthropic {
            harness
                .client
                .post(harness.url("/v1/messages"))
                .header("x-api-key", KEY_A)
                .json(&json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap()
        } else {
            chat_as(&harness, KEY_A, model).await
        };
        assert_eq!(response.status(), 403, "{model}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], "permission_error", "{body}");
        assert_eq!(body["error"]["code"], "model_not_priced", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(model),
            "{body}"
        );
    }
    assert_eq!(
        harness.mock.stats().total,
        upstream_before,
        "nothing was sent upstream"
    );
    assert_eq!(chat_as(&harness, KEY_A, "openai/ok").await.status(), 200);
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 200);
    assert_eq!(
        chat_as(&harness, CLIENT_KEY, "openai/ok-2024-08-06")
            .await
            .status(),
        200,
        "a client without a budget is not held to prices"
    );
}

/// A spent budget's refusal stops clients at once: `x-should-retry: false`, and a message that
/// names the spend, the budget and the reset; a short wait stays retryable.
#[tokio::test]
async fn a_long_refusal_says_do_not_retry_and_when_a_short_one_does_not() {
    let harness = Harness::start_editing(money_config(
        "budget_usd = 0.001\nbudget_period = \"month\"\nrequests_per_min = 3",
        "",
    ))
    .await;
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 200);
    harness.settle().await;
    for anthropic in [false, true] {
        let response = if anthropic {
            harness
                .client
                .post(harness.url("/v1/messages"))
                .header("x-api-key", KEY_A)
                .json(&json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap()
        } else {
            chat_as(&harness, KEY_A, "team").await
        };
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "x-should-retry"), "false");
        let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
        assert!(retry_after > 60, "{retry_after}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        // The OpenAI shape carries the type Codex stops on, and when it frees; Anthropic's
        // keeps its own type (its clients read x-should-retry).
        if anthropic {
            assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
        } else {
            assert_eq!(body["error"]["type"], "usage_limit_reached", "{body}");
            assert!(
                body["error"]["resets_at"].as_u64().unwrap() > 1_700_000_000,
                "{body}"
            );
            assert_eq!(body["error"]["resets_in_seconds"], retry_after, "{body}");
        }
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("of its budget_usd $0.0010 for this month"),
            "{message}"
        );
        assert!(message.contains("it resets at 20"), "{message}");
        assert!(message.contains("UTC, in "), "{message}");
    }
    // requests_per_min: a wait under client_retry_max_ms stays retryable (no header).
    let harness = Harness::start_editing(money_config("requests_per_min = 1", "")).await;
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 200);
    let response = chat_as(&harness, KEY_A, "team").await;
    assert_eq!(response.status(), 429);
    assert!(response.headers().get("x-should-retry").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "client_rate_limited", "{body}");
}

/// Every account locked for an hour: the router's own 429 says so and stops clients too.
#[tokio::test]
async fn all_targets_locked_for_long_says_do_not_retry() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::rate_limited(3_600)]);
    let first = harness.chat("team").await;
    assert_eq!(first.status(), 429);
    harness.settle().await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "x-should-retry"), "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "all_targets_locked", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("UTC, in 1 h") || message.ends_with("UTC, in 59 min"),
        "{message}"
    );
}

/// Every account locked for half a minute: a wait under `client_retry_max_ms` stays retryable
/// (a `Retry-After`, no `x-should-retry`, the plain message), so clients come back by themselves.
#[tokio::test]
async fn all_targets_locked_briefly_stays_retryable() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::rate_limited(30)]);
    assert_eq!(harness.chat("team").await.status(), 429);
    harness.settle().await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 429);
    assert!(response.headers().get("x-should-retry").is_none());
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "all_targets_locked", "{body}");
    assert_eq!(
        body["error"]["message"], "every account of this model is rate limited or cooling down",
        "{body}"
    );
}

/// `POST /admin/clients/{id}/reset` clears a spent client; the reset is journaled by `admin`
/// and survives a restart (the spend folded from the journal does not come back); an unknown
/// client is 404.
#[tokio::test]
async fn an_admin_reset_clears_a_clients_spend_and_survives_a_restart() {
    let mut harness = Harness::start_editing(money_config(
        "budget_usd = 0.001\nbudget_period = \"month\"",
        "",
    ))
    .await;
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 200);
    harness.settle().await;
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 429);
    assert_eq!(
        harness
            .admin_post("/admin/clients/nobody/reset")
            .await
            .status(),
        404
    );
    let reset = harness.admin_post("/admin/clients/team-a/reset").await;
    assert_eq!(reset.status(), 200);
    let clients = harness.admin_get("/admin/clients").await;
    assert_eq!(team_a(&clients)["spend_usd"], 0.0, "{clients}");
    assert_eq!(team_a(&clients)["usage"][0]["used"], 0, "{clients}");
    assert_eq!(chat_as(&harness, KEY_A, "team").await.status(), 200);
    harness.settle().await;
    let events = harness.journal_events().await;
    let action = events
        .iter()
        .find(|e| e["kind"] == "admin_action" && e["action"] == "reset_client")
        .unwrap_or_else(|| panic!("no reset journaled"));
    assert_eq!(action["target"], "team-a");
    assert_eq!(action["by"], "admin");
    let spend_after: f64 = team_a(&harness.admin_get("/admin/clients").await)["spend_usd"]
        .as_f64()
        .unwrap();
    assert!(spend_after > 0.0 && spend_after < 0.01, "{spend_after}");

    // Restart on the same journal: the spend is what followed the reset, not the sum.
    let config = quotaroute::config::load(&harness.config_path).unwrap();
    harness.stop().await;
    let node = quotaroute::node::RunningNode::start(
        config,
        quotaroute::node::NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: std::fs::read_to_string(&harness.config_path).unwrap(),
            clock: std::sync::Arc::new(quotaroute::actors::SystemClock),
            listen: None,
        },
    )
    .await
    .unwrap();
    let base = format!("http://{}", node.addr);
    wait_ready(&harness.client, &base).await;
    let clients = admin_json(&harness.client, &base, "/admin/clients").await;
    let spend = team_a(&clients)["spend_usd"].as_f64().unwrap();
    assert!(
        (spend - spend_after).abs() < 1e-12,
        "after the restart {spend}, before it {spend_after}"
    );
    node.stop("test").await.unwrap();
}

/// A 429 passed through from an upstream that sent no `Retry-After` carries the router's own,
/// from the lock it just learned (behaviour §7): before, the client got none and retried at once.
#[tokio::test]
async fn a_429_passed_through_without_retry_after_gets_the_routers_own() {
    let harness = Harness::start().await;
    harness.mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: quotaroute_mock::ResetForm::None,
    })]);
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 429);
    let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
    assert!((1..=3_600).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["type"], "requests",
        "the upstream's own body: {body}"
    );
}
