//! Issue 52 item 6, behaviour §14 "unless the router stores them": with `[responses] store =
//! true` a Responses client on a Messages-only (Anthropic) account gets `store: true`, continues
//! with `previous_response_id` (the upstream sees the earlier turns), reads the response and its
//! input items back and deletes it; another client is told none of it exists; the store
//! survives a restart; the journal says what was kept, never its content. (`store = false`
//! keeps today's 400: `node_translate`'s `previous_response_id` test.)

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::sync::Arc;

use quotaroute::config;
use quotaroute::node::{NodeOptions, RunningNode};
use quotaroute_actors::SystemClock;
use serde_json::{json, Value};

use crate::support::*;

const OTHER_KEY: &str = "sk-qr-store52-other-client";

/// The store on, and a second client.
fn extra() -> String {
    format!(
        "\n[responses]\nstore = true\nmax_bytes = 16777216\nttl_days = 1\n\n\
         [[clients]]\nid = \"other\"\nkey = \"{OTHER_KEY}\"\n"
    )
}

async fn start() -> Harness {
    Harness::start_with(&extra()).await
}

async fn call(
    harness: &Harness,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = harness
        .client
        .request(method, harness.url(path))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn create(harness: &Harness, body: Value) -> (u16, Value) {
    call(
        harness,
        reqwest::Method::POST,
        "/v1/responses",
        CLIENT_KEY,
        Some(body),
    )
    .await
}

async fn get(harness: &Harness, path: &str, key: &str) -> (u16, Value) {
    call(harness, reqwest::Method::GET, path, key, None).await
}

/// The text of every message the upstream (Messages API) was last sent, in order.
fn last_messages_sent(harness: &Harness) -> Vec<String> {
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    assert!(path.ends_with("/messages"), "{path}");
    let sent: Value = serde_json::from_slice(&body).unwrap();
    sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| match &message["content"] {
            Value::String(text) => format!("{}: {text}", message["role"].as_str().unwrap()),
            Value::Array(blocks) => format!(
                "{}: {}",
                message["role"].as_str().unwrap(),
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("")
            ),
            other => panic!("content {other}"),
        })
        .collect()
}

fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().unwrap())
        .filter_map(|part| part["text"].as_str())
        .collect()
}

/// The `response.completed` object of a Responses event stream.
fn completed(stream: &str) -> Value {
    stream
        .split("\n\n")
        .filter_map(|event| {
            let data = event.lines().find_map(|l| l.strip_prefix("data: "))?;
            let data: Value = serde_json::from_str(data).ok()?;
            (data["type"] == "response.completed").then(|| data["response"].clone())
        })
        .next()
        .unwrap_or_else(|| panic!("no response.completed in {stream}"))
}

/// Another client: as if none of it existed, and nothing goes upstream.
async fn another_client_sees_none_of_it(harness: &Harness, first_id: &str) {
    let upstream_before = harness.mock.recent_bodies().len();
    for path in [
        format!("/v1/responses/{first_id}"),
        format!("/v1/responses/{first_id}/input_items"),
    ] {
        let (status, _) = get(harness, &path, OTHER_KEY).await;
        assert_eq!(status, 404, "{path}");
    }
    let (status, _) = call(
        harness,
        reqwest::Method::DELETE,
        &format!("/v1/responses/{first_id}"),
        OTHER_KEY,
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, refused) = call(
        harness,
        reqwest::Method::POST,
        "/v1/responses",
        OTHER_KEY,
        Some(json!({"model": "claude", "previous_response_id": first_id, "input": "steal"})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(refused["error"]["code"], "previous_response_not_found");
    assert_eq!(harness.mock.recent_bodies().len(), upstream_before);
}

/// The journal says what was kept and deleted, never what it said.
async fn journal_says_what_was_kept_never_what_it_said(
    harness: &Harness,
    first_id: &str,
    turn_one_answer: &str,
) {
    harness.settle().await;
    let events = harness.journal_events().await;
    let stored: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "response_stored")
        .collect();
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert_eq!(stored[0]["response_id"], first_id);
    assert_eq!(stored[0]["client"], "default");
    assert!(stored[0]["connection"].as_str().unwrap().starts_with("an-"));
    assert!(stored[0]["bytes"].as_u64().unwrap() > 0);
    let deleted: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "response_deleted")
        .collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(
        (&deleted[0]["response_id"], &deleted[0]["reason"]),
        (&json!(first_id), &json!("client"))
    );
    let journal = admin_journal_all(&harness.client, &harness.base).await;
    assert!(!journal.contains("my name is Ada"));
    assert!(!journal.contains(turn_one_answer));
}

#[tokio::test]
async fn a_kept_response_is_continued_read_listed_and_deleted_by_its_client_only() {
    let harness = start().await;
    let (status, first) = create(
        &harness,
        json!({"model": "claude", "instructions": "be brief", "input": "store52: my name is Ada"}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let first_id = first["id"].as_str().unwrap().to_owned();
    assert!(first_id.starts_with("resp_qrt_"), "{first_id}");
    assert_eq!(first["store"], true);

    // Turn 2 names turn 1: the Messages upstream is sent turn 1's input and answer first.
    let (status, second) = create(
        &harness,
        json!({"model": "claude", "previous_response_id": first_id, "input": "what is my name?"}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let turn_one_answer = output_text(&first);
    assert!(!turn_one_answer.is_empty(), "{first}");
    assert_eq!(
        last_messages_sent(&harness),
        [
            "user: store52: my name is Ada".to_owned(),
            format!("assistant: {turn_one_answer}"),
            "user: what is my name?".to_owned(),
        ]
    );
    let second_id = second["id"].as_str().unwrap().to_owned();
    assert_ne!(second_id, first_id);
    assert_eq!(second["previous_response_id"], first_id.as_str());

    // A chain of three: turn 3 sees both before it.
    let (status, third) = create(
        &harness,
        json!({"model": "claude", "previous_response_id": second_id, "input": "and again?"}),
    )
    .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(last_messages_sent(&harness).len(), 5);

    // Read back whole, as the client was given it.
    let (status, read) = get(&harness, &format!("/v1/responses/{second_id}"), CLIENT_KEY).await;
    assert_eq!((status, &read), (200, &second));
    // Its input items: turn 1's input and answer, then its own input; newest first by default.
    let path = format!("/v1/responses/{second_id}/input_items");
    let (status, items) = get(&harness, &path, CLIENT_KEY).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["has_more"], false);
    let data = items["data"].as_array().unwrap();
    assert_eq!(data.len(), 3, "{items}");
    assert_eq!(data[0]["content"][0]["text"], "what is my name?");
    assert_eq!(data[0]["role"], "user");
    assert_eq!(data[1]["role"], "assistant");
    assert_eq!(items["first_id"], data[0]["id"]);
    assert_eq!(items["last_id"], data[2]["id"]);
    let (_, oldest) = get(&harness, &format!("{path}?order=asc&limit=1"), CLIENT_KEY).await;
    assert_eq!(
        oldest["data"][0]["content"][0]["text"],
        "store52: my name is Ada"
    );
    assert_eq!(oldest["has_more"], true);
    let after = oldest["last_id"].as_str().unwrap();
    let (_, next) = get(
        &harness,
        &format!("{path}?order=asc&limit=1&after={after}"),
        CLIENT_KEY,
    )
    .await;
    assert_eq!(next["data"][0]["role"], "assistant");

    another_client_sees_none_of_it(&harness, &first_id).await;

    // Its own client deletes it, once; turn 2 keeps what it holds.
    let (status, deleted) = call(
        &harness,
        reqwest::Method::DELETE,
        &format!("/v1/responses/{first_id}"),
        CLIENT_KEY,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        deleted,
        json!({"id": first_id, "object": "response.deleted", "deleted": true})
    );
    let (status, _) = get(&harness, &format!("/v1/responses/{first_id}"), CLIENT_KEY).await;
    assert_eq!(status, 404);
    let (status, _) = get(&harness, &format!("/v1/responses/{second_id}"), CLIENT_KEY).await;
    assert_eq!(status, 200);

    journal_says_what_was_kept_never_what_it_said(&harness, &first_id, &turn_one_answer).await;
}

#[tokio::test]
async fn a_streamed_answer_is_kept_and_a_restart_keeps_it() {
    let mut harness = start().await;
    let response = harness
        .post_json(
            "/v1/responses",
            json!({"model": "claude", "stream": true, "input": "store52: streamed turn"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let stream = response.text().await.unwrap();
    let first = completed(&stream);
    assert_eq!(first["store"], true);
    let first_id = first["id"].as_str().unwrap().to_owned();
    assert!(first_id.starts_with("resp_qrt_"));
    // `store: false` on the request: not kept, as OpenAI does.
    let (status, unkept) = create(
        &harness,
        json!({"model": "claude", "store": false, "input": "store52: not kept"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(unkept["store"], false);
    let unkept_path = format!("/v1/responses/{}", unkept["id"].as_str().unwrap());
    assert_eq!(get(&harness, &unkept_path, CLIENT_KEY).await.0, 404);

    harness.settle().await;
    harness.stop().await;
    let config = config::load(&harness.config_path).unwrap();
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    let node = RunningNode::start(
        config,
        NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: text,
            clock: Arc::new(SystemClock),
            listen: None,
        },
    )
    .await
    .unwrap();
    harness.base = format!("http://{}", node.addr);
    harness.node = Some(node);
    wait_ready(&harness.client, &harness.base).await;

    let (status, read) = get(&harness, &format!("/v1/responses/{first_id}"), CLIENT_KEY).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read, first);
    let (status, second) = create(
        &harness,
        json!({"model": "claude", "previous_response_id": first_id, "input": "after the restart"}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let sent = last_messages_sent(&harness);
    assert_eq!(sent.first().unwrap(), "user: store52: streamed turn");
    assert_eq!(sent.last().unwrap(), "user: after the restart");
    assert_eq!(sent.len(), 3);
}

/// The Python SDKs' venv (`.ci/run` makes it; `QUOTAROUTE_SDK_PYTHON` overrides).
fn sdk_python() -> Option<std::path::PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(path.into());
    }
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

/// The real client: openai-python's `previous_response_id`, `retrieve`, `input_items.list`
/// and `delete` against the router on a Messages-only account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_runs_a_stateful_responses_flow_on_a_messages_account() {
    use crate::support::clients::{clean_command, client_home, run_bounded, CLIENT_TIMEOUT};
    let Some(python) = sdk_python() else {
        eprintln!("SDK venv not installed (.ci/run creates .venv-sdk): nothing to run");
        assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        return;
    };
    let harness = start().await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk/sdk_responses_store.py");
    let home = client_home("qr-python-store-");
    let mut command = clean_command(&python);
    command
        .env("HOME", home.path())
        .arg(&script)
        .arg(&harness.base)
        .arg(CLIENT_KEY)
        .arg(OTHER_KEY);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "sdk_responses_store.py: {}", run.describe());
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let reply = "This is a mock reply.";
    let (first, second, third) = (&out["first"], &out["second"], &out["third_streamed"]);
    for turn in [first, second, third] {
        assert_eq!(turn["store"], true, "{out}");
        assert_eq!(turn["text"], reply, "{out}");
        assert_eq!(turn["status"], "completed", "{out}");
        assert!(
            turn["id"].as_str().unwrap().starts_with("resp_qrt_"),
            "{out}"
        );
    }
    assert_eq!(third["deltas"], reply);
    assert_eq!(second["previous_response_id"], first["id"]);
    assert_eq!(third["previous_response_id"], second["id"]);
    // The streamed third turn went up with both turns before it.
    let sent = last_messages_sent(&harness);
    assert_eq!(
        sent,
        [
            "user: store52-sdk: remember the word tangerine".to_owned(),
            format!("assistant: {reply}"),
            "user: store52-sdk: which word?".to_owned(),
            format!("assistant: {reply}"),
            "user: store52-sdk: and once more?".to_owned(),
        ]
    );
    assert_eq!(out["retrieved"], *second);
    let items = &out["input_items"];
    let texts: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    // Newest first, as OpenAI lists them.
    assert_eq!(
        texts,
        [
            "store52-sdk: which word?",
            reply,
            "store52-sdk: remember the word tangerine"
        ]
    );
    assert_eq!(items["has_more"], false);
    assert_eq!(items["first_id"], items["items"][0]["id"]);
    // Paged one at a time with `after`, oldest first: the third turn's five input items.
    let paged = out["input_items_paged"].as_array().unwrap();
    assert_eq!(paged.len(), 5, "{out}");
    assert_eq!(paged[0], items["items"][2]["id"]);
    assert_eq!(
        out["other_client"],
        json!({"retrieve": 404, "continue": 400, "continue_code": "previous_response_not_found"})
    );
    assert_eq!(out["deleted"]["status"], 200);
    assert_eq!(
        out["deleted"]["body"],
        json!({"id": first["id"], "object": "response.deleted", "deleted": true})
    );
    assert_eq!(out["gone_after_delete"]["status"], 404);
}

/// Status, serving connection and body of one Responses request.
async fn create_on(harness: &Harness, body: Value) -> (u16, String, Value) {
    let response = harness.post_json("/v1/responses", body).await;
    let status = response.status().as_u16();
    let connection = header(&response, "x-quotaroute-connection");
    (status, connection, response.json().await.unwrap())
}

/// Behaviour §10: a kept chain is one conversation, so its turns keep to the connection its
/// first turn went to while other conversations spread over the combo's three accounts.
#[tokio::test]
async fn a_kept_chain_keeps_to_its_connection() {
    let harness = start().await;
    let (status, chain_on, mut last) = create_on(
        &harness,
        json!({"model": "claude", "input": "store52: chain start"}),
    )
    .await;
    assert_eq!(status, 200, "{last}");
    let mut others = std::collections::BTreeSet::new();
    for turn in 0..4 {
        // Another conversation between turns: DRR moves on.
        for other in 0..1 {
            let (status, on, _) = create_on(
                &harness,
                json!({"model": "claude", "input": format!("store52: other {turn}.{other}")}),
            )
            .await;
            assert_eq!(status, 200);
            others.insert(on);
        }
        let (status, on, next) = create_on(
            &harness,
            json!({"model": "claude", "previous_response_id": last["id"], "input": format!("turn {turn}")}),
        )
        .await;
        assert_eq!(status, 200, "{next}");
        assert_eq!(on, chain_on, "turn {turn} of the chain left its connection");
        last = next;
    }
    assert!(
        others.len() > 1,
        "the other conversations spread: {others:?}"
    );
}

/// Behaviour §14: a kept answer's reasoning item is kept sealed as the client saw it; the
/// next turn naming it goes back to that connection and its thinking block goes up again.
#[tokio::test]
async fn kept_reasoning_goes_back_to_the_connection_that_made_it() {
    let harness = start().await;
    let turn = |input: Value, previous: Option<&Value>| {
        let mut body = json!({"model": "claude", "input": input, "reasoning": {"effort": "low"},
            "include": ["reasoning.encrypted_content"], "max_output_tokens": 16});
        if let Some(previous) = previous {
            body["previous_response_id"] = previous.clone();
        }
        body
    };
    let (status, made_on, first) =
        create_on(&harness, turn(json!("store52: think first"), None)).await;
    assert_eq!(status, 200, "{first}");
    let reasoning = first["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "reasoning")
        .unwrap_or_else(|| panic!("no reasoning item: {first}"));
    assert!(reasoning["encrypted_content"].as_str().is_some());
    let (status, on, second) =
        create_on(&harness, turn(json!("and then?"), Some(&first["id"]))).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(on, made_on);
    let (_, sent) = harness.mock.recent_bodies().pop().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let thinking = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "thinking")
        .count();
    assert_eq!(thinking, 1, "{sent}");
}
