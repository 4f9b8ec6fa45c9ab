//! Behaviour §14 on hosts that serve only some APIs (providers' `apis`): Codex's Responses on
//! a chat-only host, Claude Code's Messages on a responses-only host (the mock answering 404 for
//! the others, as real hosts do), and a mixed combo that never fails by chance on a parameter
//! one of its targets can carry.

use crate::support;

use serde_json::{json, Value};
use support::*;

/// A mixed combo over both formats.
const MIXED: &str = r#"
[[combos]]
name = "mixed"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 1 },
  { connection = "an-1", model = "claude-3-5-haiku", weight = 1 },
]
"#;

/// The standard config with the `openai` provider's hosts serving only `apis`, and the mock
/// answering 404 for the others on its keys.
pub(crate) async fn openai_hosts_serving(apis: &[&str]) -> Harness {
    let list = apis
        .iter()
        .map(|api| format!("\"{api}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let harness = Harness::start_editing(|text| {
        text.replacen(
            "name = \"openai\"\nformat = \"openai\"\n",
            &format!("name = \"openai\"\nformat = \"openai\"\napis = [{list}]\n"),
            1,
        )
    })
    .await;
    for connection in ["oa-1", "oa-2", "oa-3"] {
        harness
            .mock
            .set_served_apis(&upstream_key(connection), apis);
    }
    harness
}

/// The paths the mock was asked for, in order.
pub(crate) fn upstream_paths(harness: &Harness) -> Vec<String> {
    harness
        .mock
        .recent_bodies()
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

#[tokio::test]
async fn a_mixed_combo_never_refuses_what_one_of_its_targets_can_carry() {
    let harness = Harness::start_with(MIXED).await;
    for i in 0..6 {
        let response = harness
            .post_json(
                "/v1/chat/completions",
                json!({"model": "mixed", "logprobs": true, "messages": [{"role": "user", "content": format!("hi {i}")}]}),
            )
            .await;
        assert_eq!(response.status(), 200, "request {i}");
        assert!(
            header(&response, "x-quotaroute-connection").starts_with("oa-"),
            "only the OpenAI key carries logprobs"
        );
    }
    // What no target can carry is still refused before sending, naming the parameter.
    let before = harness.mock.recent_bodies().len();
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "logprobs": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unsupported_parameter");
    assert_eq!(harness.mock.recent_bodies().len(), before);
}

#[tokio::test]
async fn a_target_that_cannot_carry_is_named_in_skipped_and_blocked() {
    let harness = Harness::start_with(MIXED).await;
    let logprobs = |text: &str| json!({"model": "mixed", "logprobs": true, "messages": [{"role": "user", "content": text}]});
    let response = harness
        .post_json("/v1/chat/completions", logprobs("hi"))
        .await;
    assert_eq!(response.status(), 200);
    let request_id = header(&response, "x-request-id");
    let events = harness.journal_events().await;
    let cannot_carry = json!([{"connection": "an-1", "model": "claude-3-5-haiku",
                               "reason": "cannot_carry", "remaining_ms": null}]);
    for kind in ["route_decided", "request_succeeded"] {
        let event = events
            .iter()
            .find(|e| e["kind"] == kind && e["request_id"] == request_id.as_str())
            .unwrap_or_else(|| panic!("no {kind} in {events:?}"));
        assert_eq!(event["skipped"], cannot_carry, "{kind}");
    }
    // The one key that can carry it is rate limited: the answer names both blocks, and the
    // key that can carry it decides the status and the wait.
    harness.mock.set_rules(vec![
        quotaroute_mock::Rule::rate_limited(600).for_key(upstream_key("oa-1"))
    ]);
    let limited = harness
        .post_json("/v1/chat/completions", logprobs("again"))
        .await;
    assert_eq!(limited.status(), 429);
    let answer = harness
        .post_json("/v1/chat/completions", logprobs("once more"))
        .await;
    assert_eq!(answer.status(), 429);
    assert!(answer.headers().get("retry-after").is_some());
    let error: Value = answer.json().await.unwrap();
    let mut reasons: Vec<(String, String)> = error["error"]["blocked"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocked list: {error}"))
        .iter()
        .map(|b| {
            let field = |name: &str| b[name].as_str().unwrap().to_owned();
            (field("connection"), field("reason"))
        })
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            ("an-1".to_owned(), "cannot_carry".to_owned()),
            ("oa-1".to_owned(), "rate_limited".to_owned())
        ]
    );
}

/// A Codex-shaped turn: its shell tool and, as Codex sends by default, the web search tool.
fn codex_turn_with_search(model: &str, text: &str) -> Value {
    json!({"model": model, "instructions": "you are codex", "store": false, "stream": false,
           "include": ["reasoning.encrypted_content"],
           "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}},
                     {"type": "web_search", "external_web_access": false}],
           "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]})
}

#[tokio::test]
async fn codex_web_search_is_left_out_only_when_no_target_can_run_it() {
    // Chat-only hosts alone: served without the tool, which the answer names.
    let harness = openai_hosts_serving(&["chat"]).await;
    for i in 0..3 {
        let response = harness
            .post_json(
                "/v1/responses",
                codex_turn_with_search("team", &format!("hi {i}")),
            )
            .await;
        assert_eq!(response.status(), 200, "turn {i}");
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "responses>chat"
        );
        assert_eq!(header(&response, "x-quotaroute-dropped"), "web_search");
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["status"], "completed", "{value}");
    }
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(path.ends_with("/chat/completions"), "{path}");
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{body}");
    assert_eq!(tools[0]["function"]["name"], "shell");
    drop(harness);

    // A combo with a target that runs web search (Anthropic's server tool): it goes there,
    // with the tool, every time.
    let harness = Harness::start_editing(|text| {
        text.replacen(
            "name = \"openai\"\nformat = \"openai\"\n",
            "name = \"openai\"\nformat = \"openai\"\napis = [\"chat\"]\n",
            1,
        ) + MIXED
    })
    .await;
    harness
        .mock
        .set_served_apis(&upstream_key("oa-1"), &["chat"]);
    for i in 0..4 {
        let response = harness
            .post_json(
                "/v1/responses",
                codex_turn_with_search("mixed", &format!("hi {i}")),
            )
            .await;
        assert_eq!(response.status(), 200, "turn {i}");
        assert_eq!(header(&response, "x-quotaroute-connection"), "an-1");
        assert!(response.headers().get("x-quotaroute-dropped").is_none());
    }
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(path.ends_with("/messages"), "{path}");
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["type"] == "web_search_20250305"),
        "{body}"
    );
}

#[tokio::test]
async fn codex_web_search_on_a_claude_account_shows_the_search_and_its_citation() {
    let harness = Harness::start().await;
    let mut turn = codex_turn_with_search("claude", "what does the mock say?");
    turn["tools"] = json!([{"type": "web_search"}]);
    let response = harness.post_json("/v1/responses", turn).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "responses>messages"
    );
    let value: Value = response.json().await.unwrap();
    let output = value["output"].as_array().unwrap();
    let search = output
        .iter()
        .find(|item| item["type"] == "web_search_call")
        .unwrap_or_else(|| panic!("no search: {value}"));
    assert_eq!(search["status"], "completed");
    assert_eq!(search["action"]["query"], "quotaroute mock");
    let message = output
        .iter()
        .find(|item| item["type"] == "message")
        .unwrap();
    let text = &message["content"][0];
    let annotation = &text["annotations"][0];
    assert_eq!(annotation["type"], "url_citation", "{value}");
    assert_eq!(annotation["url"], "https://example.org/quotaroute-mock");
    let (start, end) = (
        annotation["start_index"].as_u64().unwrap() as usize,
        annotation["end_index"].as_u64().unwrap() as usize,
    );
    let cited: String = text["text"]
        .as_str()
        .unwrap()
        .chars()
        .skip(start)
        .take(end - start)
        .collect();
    assert_eq!(cited, " The mock cites one source.");
}

#[tokio::test]
async fn codex_responses_are_served_by_a_chat_only_host() {
    let harness = openai_hosts_serving(&["chat"]).await;
    // The host itself refuses the Responses API, as vLLM does.
    let direct = harness
        .client
        .post(format!("{}/v1/responses", harness.mock_base))
        .bearer_auth(upstream_key("oa-1"))
        .json(&json!({"model": "gpt-4o-mini", "input": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 404);
    let prompt = r#"mock-tool-call:shell {"command":["ls"]}"#;
    let tools = json!([{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}]);
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "team", "instructions": "you are codex", "tools": tools, "store": false,
                   "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "responses>chat"
    );
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["object"], "response");
    let call = value["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .unwrap_or_else(|| panic!("no call: {value}"));
    // The whole Responses object, repeating the request's own tools.
    assert_eq!(value["tools"], tools);
    assert_eq!(value["instructions"], "you are codex");
    // Stateless: asking for it again says why it is not there.
    let id = value["id"].as_str().unwrap();
    let stored = harness
        .client
        .get(format!("{}/v1/responses/{id}", harness.base))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 404);
    let error: Value = stored.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("served through translation and is not stored"),
        "{error}"
    );
    assert_eq!(call["name"], "shell");
    assert_eq!(call["arguments"], r#"{"command":["ls"]}"#);
    // The next turn carries the call and its output back, streamed.
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "team", "stream": true, "tools": tools, "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
                {"type": "function_call", "call_id": call["call_id"], "name": "shell", "arguments": call["arguments"]},
                {"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: response.created"), "{text}");
    assert!(text.contains("event: response.completed"), "{text}");
    let paths = upstream_paths(&harness);
    assert!(
        paths[1..]
            .iter()
            .all(|path| path.ends_with("/chat/completions")),
        "{paths:?}"
    );
}

#[tokio::test]
async fn claude_code_messages_are_served_by_a_responses_only_host() {
    let harness = openai_hosts_serving(&["responses"]).await;
    let prompt = r#"mock-tool-call:Read {"file_path":"/a"}"#;
    let tools = json!([{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]);
    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "team", "max_tokens": 1024, "system": "you are claude code", "tools": tools,
                   "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "messages>responses"
    );
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["type"], "message");
    assert_eq!(value["stop_reason"], "tool_use", "{value}");
    let call = value["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "tool_use")
        .unwrap();
    assert_eq!(call["input"], json!({"file_path": "/a"}));
    // Streamed, with the tool's result carried back.
    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "team", "max_tokens": 1024, "stream": true, "tools": tools, "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "text of /a"}]}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    let paths = upstream_paths(&harness);
    assert!(
        paths.iter().all(|path| path.ends_with("/responses")),
        "{paths:?}"
    );
    // count_tokens on a host without Messages is counted here.
    let response = harness
        .post_json(
            "/v1/messages/count_tokens",
            json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
}
