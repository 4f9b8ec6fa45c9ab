//! An answer that is the model's own is the client's answer (issue #49, finding 1): a tool call
//! that `max_tokens` cut short (its `arguments` not JSON) reaches a Messages client on
//! OpenAI-format accounts translated as far as it goes — `stop_reason: max_tokens`, the
//! arguments as the text they are — is charged to the client, and never cools, disables or
//! trips anything: before, each such answer failed over through the whole combo, cooled every
//! account for free, and starved every other client of the pool.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

const ABUSER: &str = "sk-qr-answers-abuser-secret";
const ORDINARY: &str = "sk-qr-answers-ordinary-secret";
/// The call's whole arguments, which `max_tokens: 2` cuts short.
const ARGUMENTS: &str = r#"{"city":"Paris","days":7,"units":"metric"}"#;

/// Two clients on the standard pool; `gpt-4o-mini` priced so a call costs something.
fn two_clients(text: String) -> String {
    text + &format!(
        r#"
[[clients]]
id = "abuser"
key = "{ABUSER}"

[[clients]]
id = "ordinary"
key = "{ORDINARY}"

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0
"#
    )
}

/// A Messages request on the OpenAI-format `team` asking for a tool call whose arguments are
/// longer than `max_tokens` lets the model write (the mock writes them in three pieces, a
/// token each).
fn cut_short_call(stream: bool) -> Value {
    json!({
        "model": "team",
        "max_tokens": 2,
        "stream": stream,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": format!("mock-tool-call:get_weather {ARGUMENTS}")}],
    })
}

async fn post(
    client: &reqwest::Client,
    harness: &Harness,
    key: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

fn spend_of(clients: &Value, id: &str) -> f64 {
    clients["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|client| client["id"] == id)
        .unwrap()["spend_usd"]
        .as_f64()
        .unwrap()
}

fn kinds(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

#[tokio::test]
async fn a_tool_call_cut_short_is_the_clients_answer_charged_and_no_fault() {
    let harness = Harness::start_editing(two_clients).await;
    let client = reqwest::Client::new();

    let response = post(&client, &harness, ABUSER, &cut_short_call(false)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["type"], "message", "{answer}");
    assert_eq!(answer["stop_reason"], "max_tokens", "{answer}");
    let call = &answer["content"][0];
    assert_eq!(call["type"], "tool_use", "{answer}");
    assert_eq!(call["name"], "get_weather", "{answer}");
    // Two of the three pieces the mock writes the arguments in: the text as the model wrote
    // it, not JSON.
    let written = call["input"].as_str().unwrap_or_else(|| panic!("{answer}"));
    assert!(
        ARGUMENTS.starts_with(written) && written.len() > 10,
        "{answer}"
    );
    assert!(serde_json::from_str::<Value>(written).is_err(), "{answer}");

    // The client sends the call back with its result: the OpenAI account gets the arguments as
    // the model wrote them (not a JSON string of them), and answers.
    let mut turn = cut_short_call(false);
    turn["max_tokens"] = json!(6);
    turn["messages"] = json!([
        turn["messages"][0].clone(),
        {"role": "assistant", "content": answer["content"].clone()},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"].clone(), "content": "sunny"}]},
    ]);
    let response = post(&client, &harness, ABUSER, &turn).await;
    assert_eq!(response.status(), 200);
    let (_, sent) = harness.mock.recent_bodies().pop().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(
        sent["messages"][1]["tool_calls"][0]["function"]["arguments"],
        json!(written),
        "{sent}"
    );

    // The stream: the pieces go as they came, and the stream ends with max_tokens.
    let response = post(&client, &harness, ABUSER, &cut_short_call(true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("\"input_json_delta\""), "{text}");
    assert!(text.contains("\"stop_reason\":\"max_tokens\""), "{text}");
    assert!(text.contains("message_stop"), "{text}");

    harness.settle().await;
    let events = harness.journal_events().await;
    assert_eq!(kinds(&events, "request_succeeded"), 3, "{events:?}");
    assert_eq!(kinds(&events, "request_failed"), 0, "{events:?}");
    assert_eq!(kinds(&events, "connection_cooldown"), 0, "{events:?}");
    assert_eq!(kinds(&events, "breaker_counted"), 0, "{events:?}");
    let clients = harness.admin_get("/admin/clients").await;
    assert!(spend_of(&clients, "abuser") > 0.0, "charged: {clients}");
}

/// The probe's load: one client asking for cut-short calls as fast as it can, another asking
/// ordinary questions on the same accounts. The ordinary client is served every time, nothing
/// is cooled, and the abuser pays for every answer it got.
#[tokio::test]
async fn an_abuser_of_cut_short_calls_costs_the_pool_nothing_it_is_not_charged_for() {
    let harness = Harness::start_editing(two_clients).await;
    let client = reqwest::Client::new();
    let ordinary = json!({"model": "team", "max_tokens": 6,
        "messages": [{"role": "user", "content": "hello"}]});

    let mut quiet = Vec::new();
    for _ in 0..40 {
        let started = Instant::now();
        let response = post(&client, &harness, ORDINARY, &ordinary).await;
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        quiet.push(started.elapsed());
    }

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut abusers = Vec::new();
    for n in 0..2 {
        let (client, url, stop) = (client.clone(), harness.url("/v1/messages"), stop.clone());
        abusers.push(tokio::spawn(async move {
            let mut served = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let response = client
                    .post(&url)
                    .header("x-api-key", ABUSER)
                    .header("anthropic-version", "2023-06-01")
                    .json(&cut_short_call(n % 2 == 1))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap();
                served += 1;
            }
            served
        }));
    }
    let mut loaded = Vec::new();
    for _ in 0..40 {
        let started = Instant::now();
        let response = post(&client, &harness, ORDINARY, &ordinary).await;
        assert_eq!(response.status(), 200, "the ordinary client is served");
        assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
        response.bytes().await.unwrap();
        loaded.push(started.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut abused = 0;
    for abuser in abusers {
        abused += abuser.await.unwrap();
    }
    quiet.sort();
    loaded.sort();
    eprintln!(
        "cut-short abuse: ordinary p99 quiet {:?}, under abuse {:?}; abuser served {abused}",
        percentile(&quiet, 99),
        percentile(&loaded, 99)
    );

    harness.settle().await;
    let events = harness.journal_events().await;
    assert_eq!(kinds(&events, "connection_cooldown"), 0);
    assert_eq!(kinds(&events, "request_failed"), 0);
    let state = harness.admin_get("/admin/state").await;
    assert_eq!(provider(&state, "openai")["breaker"], "CLOSED", "{state}");
    // Every answer the abuser got was charged: its spend is what its successes cost.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let charged: u64 = client_charges(&harness.journal_events().await)
        .iter()
        .filter(|charge| charge["client"] == "abuser")
        .count() as u64;
    assert_eq!(charged, u64::from(abused), "one charge per answer");
    let clients = harness.admin_get("/admin/clients").await;
    assert!(spend_of(&clients, "abuser") > 0.0, "{clients}");
}

/// A chat client sends back a call `max_tokens` cut short (its arguments not JSON): an
/// Anthropic account cannot take it (its `input` must be an object), so a mixed combo gives the
/// turn to its OpenAI account, every time; a combo of Anthropic accounts alone refuses it
/// before sending, naming what it cannot carry.
#[tokio::test]
async fn a_cut_short_call_sent_back_goes_where_it_can_be_carried() {
    let harness = Harness::start_with(
        r#"
[[combos]]
name = "mixed"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 1 },
  { connection = "an-1", model = "claude-3-5-haiku", weight = 1 },
]
"#,
    )
    .await;
    let turn = |model: &str| {
        json!({"model": model, "max_tokens": 6,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Par"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})
    };
    for _ in 0..6 {
        let response = harness
            .post_json("/v1/chat/completions", turn("mixed"))
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-quotaroute-connection"), "oa-1");
    }
    let response = harness
        .post_json("/v1/chat/completions", turn("claude"))
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_parameter", "{body}");
}
