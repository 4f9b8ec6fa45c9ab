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
