//! Behaviour §14 through the node: a client API served by accounts of the other format (JSON
//! and streams both ways), what cannot be carried refused before sending or dropped and named,
//! `translate = false`, a mixed combo spreading over both formats, same-format bodies reaching
//! the upstream byte for byte, and the journal's `translated`.

use crate::support;

use serde_json::{json, Value};
use sha2::Digest;
use support::*;

/// `team` (OpenAI-format) and `claude` (Anthropic-format) from the standard config, plus a
/// mixed combo and one that keeps formats apart.
const EXTRA: &str = r#"
[[combos]]
name = "mixed"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 1 },
  { connection = "an-1", model = "claude-3-5-haiku", weight = 1 },
]

[[combos]]
name = "claude-only"
translate = false
targets = [{ connection = "an-2", model = "claude-3-5-haiku" }]
"#;

/// What Claude Code sends as `metadata.user_id`: a JSON string of about 150 characters.
const CLAUDE_CODE_USER_ID: &str = r#"{"device_id":"5f0c2a8e4b1d4e7f9a3c6b2d8e1f4a7c5f0c2a8e4b1d4e7f9a3c6b2d8e1f4a7c","account_uuid":"","session_id":"0f8b6c2e-3a1d-4e5f-9b7c-2d4e6f8a0b1c"}"#;

fn sse_data(text: &str) -> Vec<(Option<String>, String)> {
    let mut events = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut name = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            }
        }
        events.push((name, data));
    }
    events
}

#[tokio::test]
async fn chat_clients_are_served_by_anthropic_accounts_json_and_stream() {
    let harness = Harness::start_with(EXTRA).await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "seed": 3}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "chat>messages"
    );
    assert_eq!(header(&response, "x-quotaroute-dropped"), "seed");
    assert!(header(&response, "x-quotaroute-connection").starts_with("an-"));
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["object"], "chat.completion", "{value}");
    // No max_tokens from the client: the default 8192 (the mock answers at most 4096 words).
    let content = value["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        content.starts_with("This is a mock reply.This"),
        "{content}"
    );
    assert_eq!(value["choices"][0]["finish_reason"], "stop");
    assert!(value["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        value["usage"]["completion_tokens"], 4096,
        "the mock's longest answer"
    );
    // The upstream got a Messages request: system apart, the default max_tokens, no seed.
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    assert_eq!(path, "/v1/messages");
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["model"], "claude-3-5-haiku");
    assert_eq!(sent["system"][0]["text"], "be brief");
    assert_eq!(sent["max_tokens"], 8192);
    assert!(sent.get("seed").is_none());

    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "max_tokens": 6, "messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "content-type").starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    let events = sse_data(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]", "{text}");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "This is a mock reply.");
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 6, "{text}");
    assert!(!text.contains("message_start") && !text.contains("ping"));

    harness.settle().await;
    let events = harness.journal_events().await;
    let translated: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "request_succeeded")
        .map(|e| &e["translated"])
        .collect();
    assert_eq!(
        translated,
        [&json!("chat>messages"), &json!("chat>messages")]
    );
    let usage_in: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "request_succeeded")
        .map(|e| e["tokens_out"].as_u64().unwrap())
        .collect();
    assert_eq!(
        usage_in,
        [4096, 6],
        "usage counted from the upstream's own answer"
    );
}

#[tokio::test]
async fn messages_clients_are_served_by_openai_accounts_json_and_stream() {
    let harness = Harness::start_with(EXTRA).await;
    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "team", "max_tokens": 4, "system": "be brief", "top_k": 3,
                   "metadata": {"user_id": CLAUDE_CODE_USER_ID},
                   "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "messages>chat"
    );
    let first_connection = header(&response, "x-quotaroute-connection");
    assert_eq!(header(&response, "x-quotaroute-dropped"), "top_k");
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["type"], "message", "{value}");
    assert_eq!(value["content"][0]["text"], "This is a mock");
    assert_eq!(value["stop_reason"], "end_turn");
    assert_eq!(value["usage"]["output_tokens"], 4);
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    assert_eq!(path, "/v1/chat/completions");
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(sent["max_completion_tokens"], 4);
    // Claude Code's 150-character user id goes as OpenAI's `user` within its 64 characters: a
    // stable digest of it.
    let user = sent["user"].as_str().unwrap();
    let digest: String = sha2::Sha256::digest(CLAUDE_CODE_USER_ID.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(user, digest);

    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "team", "max_tokens": 4, "stream": true,
                   "metadata": {"user_id": CLAUDE_CODE_USER_ID},
                   "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    // The whole id still groups the conversation: the next turn stays on its account.
    assert_eq!(
        header(&response, "x-quotaroute-connection"),
        first_connection
    );
    let (_, body) = harness.mock.recent_bodies().pop().unwrap();
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["user"], digest.as_str(), "the same user every turn");
    let text = response.text().await.unwrap();
    let events = sse_data(&text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(names.last(), Some(&"message_stop"), "{text}");
    let delta: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(delta["type"], "message_delta");
    assert_eq!(delta["usage"]["output_tokens"], 4, "{text}");
    let words: String = events
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| d["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(words, "This is a mock");
    assert!(!text.contains("[DONE]"));
}

#[tokio::test]
async fn responses_clients_get_stateless_responses_from_anthropic_accounts() {
    let harness = Harness::start_with(EXTRA).await;
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "input": "hi", "instructions": "be brief", "max_output_tokens": 6}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "responses>messages"
    );
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["object"], "response", "{value}");
    assert_eq!(value["store"], false);
    assert_eq!(
        value["output"][0]["content"][0]["text"],
        "This is a mock reply."
    );

    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "input": "hi", "stream": true, "max_output_tokens": 6}),
        )
        .await;
    let text = response.text().await.unwrap();
    let events = sse_data(&text);
    assert_eq!(events[0].0.as_deref(), Some("response.created"), "{text}");
    assert_eq!(
        events.last().unwrap().0.as_deref(),
        Some("response.completed")
    );
    let completed: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(
        completed["response"]["output"][0]["content"][0]["text"],
        "This is a mock reply."
    );
    assert_eq!(completed["response"]["usage"]["output_tokens"], 6);

    // Nothing of a translated response is stored: continuing one is refused, not sent.
    let before = harness.mock.recent_bodies().len();
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "input": "more", "previous_response_id": value["id"]}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unsupported_parameter");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("previous_response_id"));
    assert_eq!(harness.mock.recent_bodies().len(), before);
    // Whichever account it would reach: on an OpenAI-format combo too (its accounts never
    // stored it either).
    assert!(value["id"].as_str().unwrap().starts_with("resp_qrt_"));
    for model in ["team", "mixed"] {
        let response = harness
            .post_json(
                "/v1/responses",
                json!({"model": model, "input": "more", "previous_response_id": value["id"]}),
            )
            .await;
        assert_eq!(response.status(), 400, "{model}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "unsupported_parameter", "{model}");
    }
    assert_eq!(harness.mock.recent_bodies().len(), before);
}

#[tokio::test]
async fn what_cannot_be_carried_is_refused_before_sending() {
    let harness = Harness::start_with(EXTRA).await;
    for (body, parameter) in [
        (
            json!({"model": "claude", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
            "n",
        ),
        (
            json!({"model": "claude", "logprobs": true, "messages": [{"role": "user", "content": "hi"}]}),
            "logprobs",
        ),
    ] {
        let response = harness.post_json("/v1/chat/completions", body).await;
        assert_eq!(response.status(), 400);
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "chat>messages"
        );
        // Nothing was sent: no connection or upstream model is named, and no attempt counted.
        assert_eq!(header(&response, "x-quotaroute-connection"), "");
        assert_eq!(header(&response, "x-quotaroute-model"), "");
        assert_eq!(header(&response, "x-quotaroute-attempts"), "0");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "unsupported_parameter", "{error}");
        assert!(error["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("`{parameter}`")));
    }
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}),
        )
        .await;
    assert_eq!(response.status(), 400);
    assert!(
        harness.mock.recent_bodies().is_empty(),
        "nothing was sent upstream"
    );
    // The same `n` on an OpenAI-format combo goes as it came.
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "team", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-quotaroute-translated").is_none());
}

#[tokio::test]
async fn translate_false_keeps_formats_apart_and_same_format_bodies_go_byte_for_byte() {
    let harness = Harness::start_with(EXTRA).await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude-only", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unsupported_endpoint");

    // Same format: the body reaches the upstream as sent, only `model` rewritten.
    let raw = r#"{"model":"claude","max_tokens":5,  "messages":[{"role":"user","content":"hi"}],"x_extra":{"kept":true}}"#;
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-quotaroute-translated").is_none());
    let (_, body) = harness.mock.recent_bodies().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        raw.replace("\"claude\"", "\"claude-3-5-haiku\"")
    );
}

#[tokio::test]
async fn a_mixed_combo_spreads_over_both_formats() {
    let harness = Harness::start_with(EXTRA).await;
    let mut served = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..20 {
        let response = harness
            .post_json(
                "/v1/chat/completions",
                json!({"model": "mixed", "messages": [{"role": "user", "content": format!("hi {i}")}]}),
            )
            .await;
        assert_eq!(response.status(), 200);
        let connection = header(&response, "x-quotaroute-connection");
        let translated = response.headers().get("x-quotaroute-translated").is_some();
        assert_eq!(translated, connection == "an-1", "{connection}");
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["object"], "chat.completion");
        *served.entry(connection).or_default() += 1;
    }
    assert_eq!(served.get("oa-1"), Some(&10), "{served:?}");
    assert_eq!(served.get("an-1"), Some(&10), "{served:?}");
    let metrics = harness
        .client
        .get(harness.url("/metrics"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l
                .starts_with("quotaroute_translated_requests_total{direction=\"chat>messages\"}")),
        "{metrics}"
    );
}

#[tokio::test]
async fn upstream_errors_reach_the_client_in_its_own_shape() {
    let harness = Harness::start_with(EXTRA).await;
    harness
        .mock
        .add_rule(quotaroute_mock::Rule::always(
            quotaroute_mock::Fault::Custom {
                status: 400,
                body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}"#.to_string(),
            },
        ));
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(error.get("type").is_none(), "an OpenAI error body: {error}");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(
        error["error"]["message"],
        "messages: text content blocks must be non-empty"
    );
}

#[tokio::test]
async fn tool_calls_cross_formats_with_arguments_in_pieces() {
    let harness = Harness::start_with(EXTRA).await;
    let prompt = r#"mock-tool-call:get_weather {"city":"Paris","unit":"c"}"#;
    let chat_tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    // Chat Completions client, Anthropic account: JSON.
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "max_tokens": 6, "tools": chat_tools, "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    let value: Value = response.json().await.unwrap();
    let call = &value["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(
        value["choices"][0]["finish_reason"], "tool_calls",
        "{value}"
    );
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        call["function"]["arguments"],
        r#"{"city":"Paris","unit":"c"}"#
    );
    let call_id = call["id"].as_str().unwrap().to_string();
    assert!(
        call_id.starts_with("toolu_mock_"),
        "the upstream's own id: {call_id}"
    );
    // Stream: the arguments arrive in pieces under one index.
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "max_tokens": 6, "stream": true, "tools": chat_tools, "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    let text = response.text().await.unwrap();
    let chunks: Vec<Value> = sse_data(&text)
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .filter(|p| !p.is_empty())
        .collect();
    assert!(pieces.len() > 1, "{text}");
    assert_eq!(pieces.concat(), r#"{"city":"Paris","unit":"c"}"#);
    // The result goes back up as a tool_result block.
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "max_tokens": 6, "tools": chat_tools, "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": null, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}}]},
                {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21"}
            ]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let (_, body) = harness.mock.recent_bodies().pop().unwrap();
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        sent["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": call_id, "content": "sunny, 21"})
    );
    assert_eq!(
        sent["messages"][1]["content"][0]["input"],
        json!({"city": "Paris", "unit": "c"})
    );

    // Messages client, OpenAI account: a stream of tool_use with input_json_delta pieces.
    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "team", "max_tokens": 6, "stream": true,
                   "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
                   "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    let text = response.text().await.unwrap();
    let events: Vec<Value> = sse_data(&text)
        .into_iter()
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "content_block_start")
        .unwrap();
    assert_eq!(start["content_block"]["type"], "tool_use", "{text}");
    assert_eq!(start["content_block"]["name"], "get_weather");
    let json: Vec<&str> = events
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert!(json.len() > 1);
    assert_eq!(json.concat(), r#"{"city":"Paris","unit":"c"}"#);
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");

    // Responses client, Anthropic account: a function_call item.
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "max_output_tokens": 6, "input": prompt,
                   "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}),
        )
        .await;
    let value: Value = response.json().await.unwrap();
    let item = &value["output"][0];
    assert_eq!(item["type"], "function_call", "{value}");
    assert_eq!(item["name"], "get_weather");
    assert_eq!(item["arguments"], r#"{"city":"Paris","unit":"c"}"#);
}

#[tokio::test]
async fn count_tokens_for_an_openai_account_is_counted_here_and_never_sent() {
    let harness = Harness::start_with(EXTRA).await;
    let response = harness
        .post_json(
            "/v1/messages/count_tokens",
            json!({"model": "team", "messages": [{"role": "user", "content": "Hello, world!"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    // Counted with that account's tokenizer, but nothing was sent to it.
    assert!(header(&response, "x-quotaroute-connection").starts_with("oa-"));
    assert_eq!(header(&response, "x-quotaroute-attempts"), "0");
    let value: Value = response.json().await.unwrap();
    assert_eq!(
        value,
        json!({"input_tokens": 10}),
        "o200k: 4 tokens + framing"
    );
    assert!(
        harness.mock.recent_bodies().is_empty(),
        "nothing sent upstream"
    );
    // On an Anthropic account it goes upstream as before.
    let response = harness
        .post_json(
            "/v1/messages/count_tokens",
            json!({"model": "claude", "messages": [{"role": "user", "content": "Hello, world!"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(harness.mock.recent_bodies().len(), 1);
}

/// The Python SDKs' venv (`.ci/run` makes it; `QUOTAROUTE_SDK_PYTHON` overrides).
fn sdk_python() -> Option<std::path::PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(path.into());
    }
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdks_parse_translated_answers_streams_tool_calls_and_errors() {
    use support::clients::{clean_command, client_home, run_bounded, CLIENT_TIMEOUT};
    let Some(python) = sdk_python() else {
        eprintln!("SDK venv not installed (.ci/run creates .venv-sdk): nothing to run");
        assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        return;
    };
    let harness = Harness::start_with(EXTRA).await;
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_translated.py");
    let home = client_home("qr-python-translated-");
    let mut command = clean_command(&python);
    command
        .env("HOME", home.path())
        .arg(&script)
        .arg(&harness.base)
        .arg(CLIENT_KEY);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "sdk_translated.py: {}", run.describe());
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let six = "This is a mock reply.";
    // openai-python on Anthropic-format accounts.
    assert_eq!(out["chat"]["content"], six, "{out}");
    assert_eq!(out["chat"]["finish"], "stop");
    assert_eq!(out["chat"]["completion_tokens"], 6);
    assert!(out["chat"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(out["chat"]["translated"], "chat>messages");
    assert_eq!(out["chat_stream"]["content"], six);
    assert_eq!(out["chat_stream"]["completion_tokens"], 6);
    assert_eq!(out["chat_tool"]["finish"], "tool_calls");
    assert_eq!(out["chat_tool"]["name"], "get_weather");
    assert_eq!(out["chat_tool"]["arguments"], json!({"city": "Paris"}));
    assert_eq!(out["chat_tool"]["follow_up"], six);
    assert_eq!(
        out["chat_tool_stream"]["arguments"],
        json!({"city": "Paris"})
    );
    assert!(out["chat_tool_stream"]["pieces"].as_u64().unwrap() > 1);
    assert_eq!(out["chat_refused"]["status"], 400);
    assert_eq!(out["chat_refused"]["code"], "unsupported_parameter");
    assert_eq!(out["responses"]["text"], six);
    assert_eq!(out["responses"]["store"], false);
    assert_eq!(out["responses"]["output_tokens"], 6);
    assert_eq!(out["responses_stream"]["text"], six);
    assert_eq!(out["responses_stream"]["deltas"], 6);
    assert_eq!(out["responses_tool"]["arguments"], json!({"city": "Paris"}));
    assert_eq!(out["responses_tool"]["follow_up"], six);
    // anthropic-python on OpenAI-format accounts.
    assert_eq!(out["messages"]["text"], six);
    assert_eq!(out["messages"]["stop_reason"], "end_turn");
    assert_eq!(out["messages"]["output_tokens"], 6);
    assert_eq!(out["messages"]["translated"], "messages>chat");
    assert_eq!(out["messages_stream"]["text"], six);
    assert_eq!(out["messages_stream"]["output_tokens"], 6);
    assert_eq!(out["messages_tool"]["name"], "get_weather");
    assert_eq!(out["messages_tool"]["input"], json!({"city": "Paris"}));
    assert_eq!(out["messages_tool"]["stop_reason"], "tool_use");
    assert_eq!(out["messages_tool"]["follow_up"], six);
    assert_eq!(out["messages_refused"]["status"], 400);
    assert_eq!(out["messages_refused"]["code"], "unsupported_parameter");
    // Cached input tokens in each SDK's own terms, the second time a long prompt comes.
    assert_eq!(out["chat_cached"][0]["cached_tokens"], 0, "{out}");
    let cached = out["chat_cached"][1]["cached_tokens"].as_u64().unwrap();
    assert!(cached > 200, "{out}");
    assert!(out["chat_cached"][1]["prompt_tokens"].as_u64().unwrap() >= cached);
    assert_eq!(out["messages_cached"][0]["cache_read_input_tokens"], 0);
    assert!(
        out["messages_cached"][1]["cache_read_input_tokens"]
            .as_u64()
            .unwrap()
            > 200,
        "{out}"
    );
    // Thinking as a sealed reasoning item the SDK parses and sends back.
    assert_eq!(
        out["responses_reasoning"]["summary"],
        "The user wants a reply; a short one will do."
    );
    assert_eq!(out["responses_reasoning"]["sealed"], "qrt1.");
    // (Thinking raises max_tokens above its budget, so the mock answers at length.)
    assert!(out["responses_reasoning"]["second"]
        .as_str()
        .unwrap()
        .starts_with(six));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_node_sdks_parse_translated_answers_streams_and_tool_calls() {
    use support::clients::{clean_command, clients_dir, run_bounded, CLIENT_TIMEOUT};
    if !clients_dir().join("node_modules/openai").exists() {
        eprintln!("tests/clients/node_modules not installed (.ci/run): nothing to run");
        assert!(
            std::env::var("CI").is_err(),
            "CI must install the Node clients"
        );
        return;
    }
    let harness = Harness::start_with(EXTRA).await;
    let mut command = clean_command("node");
    command
        .arg(clients_dir().join("node_sdks_translated.mjs"))
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .current_dir(clients_dir());
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(
        run.success(),
        "node_sdks_translated.mjs: {}",
        run.describe()
    );
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let six = "This is a mock reply.";
    assert_eq!(out["chat"]["content"], six, "{out}");
    assert_eq!(out["chat"]["completion_tokens"], 6);
    assert_eq!(out["chat_stream_tool"]["name"], "get_weather");
    assert_eq!(
        out["chat_stream_tool"]["arguments"],
        json!({"city": "Paris"})
    );
    assert!(out["chat_stream_tool"]["pieces"].as_u64().unwrap() > 1);
    assert_eq!(out["chat_stream_tool"]["finish"], "tool_calls");
    assert_eq!(out["responses_stream"]["text"], six);
    assert_eq!(out["responses_stream"]["deltas"], 6);
    assert_eq!(out["responses_stream"]["output_tokens"], 6);
    assert_eq!(out["responses_stream"]["store"], false);
    assert_eq!(out["responses_tool"]["arguments"], json!({"city": "Paris"}));
    assert_eq!(out["messages"]["text"], six);
    assert_eq!(out["messages"]["output_tokens"], 6);
    assert_eq!(
        out["messages_stream_tool"]["input"],
        json!({"city": "Paris"})
    );
    assert!(out["messages_stream_tool"]["pieces"].as_u64().unwrap() > 1);
    assert_eq!(out["messages_stream_tool"]["stop_reason"], "tool_use");
    assert_eq!(out["messages_error"]["status"], 400);
    assert_eq!(out["messages_error"]["code"], "unsupported_parameter");
    for api in ["chat", "messages"] {
        assert_eq!(out["cached"][api][0], 0, "{out}");
        assert!(out["cached"][api][1].as_u64().unwrap() > 200, "{out}");
    }
}

/// Images cross as the other format's blocks, and the upstream's cached input tokens reach the
/// client in its own terms (`prompt_tokens_details.cached_tokens` from Anthropic's
/// `cache_read_input_tokens`, and back), the second time a long prompt reaches one account.
#[tokio::test]
async fn images_and_cached_tokens_cross_in_the_clients_terms() {
    let harness = Harness::start_with(&format!(
        "{EXTRA}\n[[combos]]\nname = \"an-one\"\ntargets = [{{ connection = \"an-1\", model = \"claude-3-5-haiku\" }}]\n\
         \n[[combos]]\nname = \"oa-one\"\ntargets = [{{ connection = \"oa-1\", model = \"gpt-4o-mini\" }}]\n"
    ))
    .await;
    let long = "You answer questions about the attached picture. ".repeat(100);
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let chat = json!({"model": "an-one", "max_tokens": 4, "messages": [
        {"role": "system", "content": long},
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]}]});
    let mut cached = Vec::new();
    for _ in 0..2 {
        let response = harness
            .post_json("/v1/chat/completions", chat.clone())
            .await;
        assert_eq!(response.status(), 200);
        let value: Value = response.json().await.unwrap();
        let usage = &value["usage"];
        cached.push(
            usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap(),
        );
        assert!(usage["prompt_tokens"].as_u64().unwrap() >= cached[cached.len() - 1]);
    }
    assert_eq!(cached[0], 0);
    assert!(
        cached[1] > 200,
        "the second read the prompt from cache: {cached:?}"
    );
    let (_, body) = harness.mock.recent_bodies().pop().unwrap();
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        sent["messages"][0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}})
    );

    let messages = json!({"model": "oa-one", "max_tokens": 4, "system": long, "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]});
    let mut cached = Vec::new();
    for _ in 0..2 {
        let response = harness
            .client
            .post(format!("{}/v1/messages", harness.base))
            .header("x-api-key", CLIENT_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&messages)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let value: Value = response.json().await.unwrap();
        cached.push(value["usage"]["cache_read_input_tokens"].as_u64().unwrap());
    }
    assert_eq!(cached[0], 0);
    assert!(cached[1] > 200, "{cached:?}");
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    assert_eq!(path, "/v1/chat/completions");
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        sent["messages"][1]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
}

/// A combo of one OpenAI-format and one Anthropic-format connection, weighted 2:1, spreads by
/// DRR over both whatever the client's API (chat and messages clients alternate); every body
/// served in its own format reaches the upstream byte for byte (only `model` rewritten), every
/// other one is translated and says so.
#[tokio::test]
async fn a_weighted_mixed_combo_spreads_by_drr_and_same_format_bodies_keep_their_bytes() {
    let harness = Harness::start_with(&format!(
        "{EXTRA}\n[[combos]]\nname = \"mixed-2-1\"\ntargets = [\n  \
         {{ connection = \"oa-2\", model = \"gpt-4o-mini\", weight = 2 }},\n  \
         {{ connection = \"an-2\", model = \"claude-3-5-haiku\", weight = 1 }},\n]\n"
    ))
    .await;
    let mut served = std::collections::BTreeMap::<(String, &str), u32>::new();
    for i in 0..30 {
        let (path, raw) = if i % 2 == 0 {
            (
                "/v1/chat/completions",
                format!(
                    r#"{{"model":"mixed-2-1",  "max_tokens":3,"messages":[{{"role":"user","content":"chat {i}"}}],"x_odd":[1, 2]}}"#
                ),
            )
        } else {
            (
                "/v1/messages",
                format!(
                    r#"{{"model":"mixed-2-1","max_tokens":3 ,"messages":[{{"role":"user","content":"messages {i}"}}]}}"#
                ),
            )
        };
        let response = harness
            .client
            .post(harness.url(path))
            .bearer_auth(CLIENT_KEY)
            .header("content-type", "application/json")
            .body(raw.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path} {i}");
        let connection = header(&response, "x-quotaroute-connection");
        let translated = response.headers().get("x-quotaroute-translated").is_some();
        let same_format = (path == "/v1/messages") == (connection == "an-2");
        assert_eq!(translated, !same_format, "{path} on {connection}");
        let (upstream_path, body) = harness.mock.recent_bodies().pop().unwrap();
        if same_format {
            let model = if connection == "an-2" {
                "claude-3-5-haiku"
            } else {
                "gpt-4o-mini"
            };
            assert_eq!(upstream_path, path);
            assert_eq!(
                std::str::from_utf8(&body).unwrap(),
                raw.replace("\"mixed-2-1\"", &format!("\"{model}\"")),
                "byte for byte"
            );
        } else {
            assert_ne!(upstream_path, path, "translated to the target's own path");
        }
        *served.entry((connection, path)).or_default() += 1;
    }
    let per_connection = |id: &str| -> u32 {
        served
            .iter()
            .filter(|((c, _), _)| c == id)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(per_connection("oa-2"), 20, "{served:?}");
    assert_eq!(per_connection("an-2"), 10, "{served:?}");
    // Both client APIs reached both formats.
    assert_eq!(served.len(), 4, "{served:?}");
}
