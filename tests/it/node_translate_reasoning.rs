//! Issue 37 deliverable 4, behaviour §14 "Responses are stateless when translated": Anthropic
//! thinking reaches a Responses client as a `reasoning` item whose `encrypted_content` the
//! router encrypts for the answering connection; the next turn carrying it goes back to that
//! connection (affinity off: the seal alone steers it) and the block goes up again, signature
//! and all, which the mock verifies per account; served elsewhere it is left out; a 400
//! refusing its signature is retried once on the same target without it. Chat Completions
//! clients get thinking as `reasoning_content`.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use base64::Engine;
use quotaroute::wire::item_seal::SealKey;
use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::{json, Value};

use crate::support::*;

/// Affinity off, so only the seal can steer a turn; `claude-one` has one Anthropic account.
const EXTRA: &str = r#"
[affinity]
enabled = false

[[combos]]
name = "claude-one"
targets = [{ connection = "an-1", model = "claude-3-5-haiku" }]
"#;

/// What the mock thinks (`mock_upstream::thinking`).
const MOCK_THINKING: &str = "The user wants a reply; a short one will do.";

/// A Responses turn as Codex sends it, with reasoning on.
fn turn(model: &str, input: &[Value], stream: bool) -> Value {
    json!({
        "model": model,
        "input": input,
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "max_output_tokens": 16,
        "stream": stream,
    })
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// Status, serving connection, body and request id of one JSON turn.
async fn send(harness: &Harness, body: Value) -> (u16, String, Value, String) {
    let response = harness.post_json("/v1/responses", body).await;
    let status = response.status().as_u16();
    let connection = header(&response, "x-quotaroute-connection");
    let request_id = header(&response, "x-request-id");
    (
        status,
        connection,
        response.json().await.unwrap_or(Value::Null),
        request_id,
    )
}

/// The last request the mock received, parsed, with its path.
fn last_upstream(harness: &Harness) -> (String, Value) {
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    (path, serde_json::from_slice(&body).unwrap())
}

/// The thinking blocks of the upstream request's assistant messages.
fn thinking_blocks(sent: &Value) -> Vec<Value> {
    sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "thinking")
        .collect()
}

/// Whether `text` shows in `sealed` as it is or base64-encoded (standard or URL-safe, at each
/// of the three alignments).
fn in_clear(sealed: &str, text: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    sealed.contains(text)
        || (0..3).any(|shift| {
            let padded = format!("{}{text}", "x".repeat(shift));
            [STANDARD_NO_PAD, URL_SAFE_NO_PAD].iter().any(|engine| {
                let encoded = engine.encode(&padded);
                // The 4-character groups made of `text`'s bytes alone.
                let (start, end) = (4 * shift.div_ceil(3), 4 * (padded.len() / 3));
                start + 8 <= end && sealed.contains(&encoded[start..end])
            })
        })
}

fn reasoning_of(output: &[Value]) -> Value {
    output
        .iter()
        .find(|item| item["type"] == "reasoning")
        .cloned()
        .unwrap_or_else(|| panic!("no reasoning item: {output:?}"))
}

async fn succeeded(harness: &Harness, request_id: &str) -> Value {
    harness.settle().await;
    harness
        .journal_events()
        .await
        .into_iter()
        .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no request_succeeded for {request_id}"))
}

/// The output items of a streamed Responses answer (`response.completed`).
async fn streamed_output(response: reqwest::Response) -> Vec<Value> {
    let text = response.text().await.unwrap();
    let completed = text
        .split("\n\n")
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|event| event["type"] == "response.completed")
        .unwrap_or_else(|| panic!("no response.completed: {text}"));
    completed["response"]["output"].as_array().cloned().unwrap()
}

#[tokio::test]
async fn thinking_crosses_turns_sealed_and_returns_only_to_its_connection() {
    let harness = Harness::start_with(EXTRA).await;
    for round in 0..3 {
        let stream = round == 1;
        let first_input = vec![user(&format!("round {round}: hello"))];
        let response = harness
            .post_json("/v1/responses", turn("claude", &first_input, stream))
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "responses>messages"
        );
        let maker = header(&response, "x-quotaroute-connection");
        let output = if stream {
            streamed_output(response).await
        } else {
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["store"], false, "{body}");
            body["output"].as_array().cloned().unwrap()
        };
        // The thinking went up as Anthropic's `thinking` and came back as a sealed reasoning
        // item whose summary is the thinking's text.
        let (path, sent) = last_upstream(&harness);
        assert_eq!(path, "/v1/messages");
        assert_eq!(sent["thinking"]["type"], "enabled", "{sent}");
        let reasoning = reasoning_of(&output);
        assert_eq!(reasoning["summary"][0]["text"], MOCK_THINKING);
        let sealed = reasoning["encrypted_content"].as_str().unwrap();
        assert!(sealed.starts_with("qrt1."), "{reasoning}");
        assert!(
            !in_clear(sealed, MOCK_THINKING),
            "the block is carried encrypted: {sealed}"
        );
        let sealed = sealed.to_string();

        // Other traffic in between moves DRR on; the next turn still reaches the maker, whose
        // account verifies the signature it made.
        for _ in 0..2 {
            assert_eq!(harness.chat("claude").await.status(), 200);
        }
        let mut second_input = first_input;
        second_input.extend(output);
        second_input.push(user(&format!("round {round}: again")));
        let (status, served, body, request_id) =
            send(&harness, turn("claude", &second_input, false)).await;
        assert_eq!(status, 200, "round {round}: {body}");
        assert_eq!(
            served, maker,
            "round {round}: the seal names its connection"
        );
        let (_, sent) = last_upstream(&harness);
        let blocks = thinking_blocks(&sent);
        assert_eq!(blocks.len(), 1, "{sent}");
        assert_eq!(blocks[0]["thinking"], MOCK_THINKING);
        let signature = blocks[0]["signature"].as_str().unwrap();
        assert!(signature.len() > 8);
        assert!(
            !in_clear(&sealed, signature),
            "the signature is carried encrypted: {sealed}"
        );
        let event = succeeded(&harness, &request_id).await;
        assert_eq!(event["items_left_out"], 0, "{event}");
        assert_eq!(event["translated"], "responses>messages");
    }
}

#[tokio::test]
async fn elsewhere_the_thinking_is_left_out() {
    let harness = Harness::start_with(EXTRA).await;
    let first_input = vec![user("locked: hello")];
    let (status, maker, first, _) = send(&harness, turn("claude", &first_input, false)).await;
    assert_eq!(status, 200, "{first}");
    // The maker's account answers 429 for an hour from now on.
    harness.mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: ResetForm::RetryAfterSeconds(3600),
    })
    .for_key(upstream_key(&maker))]);
    let mut second_input = first_input;
    second_input.extend(first["output"].as_array().cloned().unwrap());
    second_input.push(user("locked: again"));
    let (status, served, body, request_id) =
        send(&harness, turn("claude", &second_input, false)).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(served, maker);
    let (_, sent) = last_upstream(&harness);
    assert_eq!(thinking_blocks(&sent), Vec::<Value>::new(), "{sent}");
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["items_left_out"], 1, "{event}");
}

/// The node's seal key, read from its file beside the journal (as only the node can).
fn node_seal_key(harness: &Harness) -> SealKey {
    let path = harness
        .dir
        .path()
        .join("journal")
        .join(quotaroute::node::seal_secret::SEAL_KEY_FILE);
    let hex = std::fs::read_to_string(path).unwrap();
    let secret: Vec<u8> = (0..32)
        .map(|at| u8::from_str_radix(&hex.trim()[2 * at..2 * at + 2], 16).unwrap())
        .collect();
    SealKey::from_secret(&secret)
}

/// A reasoning item sealed for `connection` (handed to client `default`) whose thinking
/// block's signature its account never made (as after the account's key rotated): the
/// router's seal verifies, the account refuses.
fn sealed_with_a_foreign_signature(harness: &Harness, connection: &str) -> Value {
    let block =
        json!({"type": "thinking", "thinking": "old thoughts", "signature": "bm90LW91cnM="});
    let sealed = node_seal_key(harness)
        .seal_carried("default", connection, block.to_string().as_bytes())
        .unwrap();
    json!({"type": "reasoning", "id": "rs_old", "summary": [], "encrypted_content": sealed})
}

#[tokio::test]
async fn a_refused_signature_is_retried_once_without_thinking() {
    let harness = Harness::start_with(EXTRA).await;
    harness.mock.reset_stats();
    let input = vec![
        user("rotated: hello"),
        sealed_with_a_foreign_signature(&harness, "an-1"),
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}),
        user("rotated: again"),
    ];
    let (status, served, body, request_id) =
        send(&harness, turn("claude-one", &input, false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, "an-1");
    assert_eq!(
        harness.mock.stats().for_key(&upstream_key("an-1")),
        2,
        "one 400 refusing the signature, one retry on the same target"
    );
    let (_, sent) = last_upstream(&harness);
    assert_eq!(thinking_blocks(&sent), Vec::<Value>::new(), "{sent}");
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["items_left_out"], 1, "{event}");

    // The mock refuses it as Anthropic does, in Anthropic's shape, when sent directly.
    let direct = harness
        .client
        .post(format!("{}/v1/messages", harness.mock_base))
        .header("x-api-key", upstream_key("an-1"))
        .json(&json!({"model": "claude-3-5-haiku", "max_tokens": 8, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "forged"}]},
            {"role": "user", "content": "again"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 400);
    let error: Value = direct.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(
        error["error"]["message"],
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    );
}

#[tokio::test]
async fn chat_clients_get_thinking_as_reasoning_content() {
    let harness = Harness::start_with(EXTRA).await;
    let request = |stream: bool| {
        json!({"model": "claude", "reasoning_effort": "low", "max_completion_tokens": 8, "stream": stream,
               "messages": [{"role": "user", "content": "hi"}]})
    };
    let value: Value = harness
        .post_json("/v1/chat/completions", request(false))
        .await
        .json()
        .await
        .unwrap();
    let message = &value["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], MOCK_THINKING, "{value}");
    assert!(message["content"]
        .as_str()
        .unwrap()
        .starts_with("This is a mock"));
    let text = harness
        .post_json("/v1/chat/completions", request(true))
        .await
        .text()
        .await
        .unwrap();
    let reasoning: String = text
        .split("\n\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["reasoning_content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(reasoning, MOCK_THINKING, "{text}");
    assert!(
        !text.contains("signature"),
        "no signature reaches a chat client"
    );
}
