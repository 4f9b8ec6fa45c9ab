//! Issue #39, behaviour §10 "Encrypted items" and the contract's `POST /v1/responses/compact`,
//! through the node against the mock, which (like OpenAI) lets only the key that made a
//! reasoning or compaction item read its `encrypted_content` and answers any other key 400
//! `invalid_encrypted_content`: compaction is routed like `/v1/responses`; a turn carrying
//! encrypted reasoning goes back to the account that made it (with other traffic in between,
//! affinity on or off, across a restart); when that account is locked the turn is served
//! elsewhere without the items it cannot read (journaled as `items_left_out`); a 400 that still
//! happens is retried once without them.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::sync::Arc;

use quotaroute::config;
use quotaroute::node::{NodeOptions, RunningNode};
use quotaroute_actors::SystemClock;
use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::{json, Value};

use crate::replay_support;
use crate::support::*;

/// One Responses turn as Codex sends it: reasoning included, `store: false`, the conversation
/// so far as `input`.
fn turn(input: Vec<Value>) -> Value {
    json!({
        "model": "team",
        "input": input,
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "stream": false,
    })
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// A turn's answer: its status, the connection that served, and its body.
async fn send(harness: &Harness, path: &str, body: Value) -> (u16, String, Value, String) {
    let response = harness.post_json(path, body).await;
    let status = response.status().as_u16();
    let connection = header(&response, "x-quotaroute-connection");
    let request_id = header(&response, "x-request-id");
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, connection, body, request_id)
}

/// The output items of a response the client keeps for its next turn.
fn output_items(body: &Value) -> Vec<Value> {
    body["output"].as_array().cloned().unwrap_or_default()
}

fn reasoning_of(body: &Value) -> Value {
    output_items(body)
        .into_iter()
        .find(|item| item["type"] == "reasoning")
        .unwrap_or_else(|| panic!("no reasoning item: {body}"))
}

/// Requests that are not the conversation: chats and stateless Responses turns, so DRR moves
/// on between the conversation's turns.
async fn other_traffic(harness: &Harness, n: usize) {
    for i in 0..n {
        if i % 2 == 0 {
            assert_eq!(harness.chat("team").await.status(), 200);
        } else {
            let (status, _, body, _) = send(
                harness,
                "/v1/responses",
                turn(vec![user(&format!("unrelated {i}"))]),
            )
            .await;
            assert_eq!(status, 200, "{body}");
        }
    }
}

/// The `request_succeeded` of `request_id`.
async fn succeeded(harness: &Harness, request_id: &str) -> Value {
    harness.settle().await;
    let events = harness.journal_events().await;
    events
        .into_iter()
        .find(|e| e["kind"] == "request_succeeded" && e["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no request_succeeded for {request_id}"))
}

/// Turn one, then `between` other requests, then turn two carrying turn one's output.
/// Returns (the connection of turn one, the answer to turn two).
async fn two_turns(
    harness: &Harness,
    between: usize,
    tag: &str,
) -> (String, (u16, String, Value, String)) {
    let first_input = vec![user(&format!("conversation {tag}: hello"))];
    let (status, maker, first, _) = send(harness, "/v1/responses", turn(first_input.clone())).await;
    assert_eq!(status, 200, "{first}");
    let reasoning = reasoning_of(&first);
    let sealed = reasoning["encrypted_content"].as_str().unwrap();
    assert!(
        sealed.starts_with("qrs1."),
        "the router seals the item it hands out: {reasoning}"
    );
    other_traffic(harness, between).await;
    let mut second_input = first_input;
    second_input.extend(output_items(&first));
    second_input.push(user(&format!("conversation {tag}: and again")));
    let answer = send(harness, "/v1/responses", turn(second_input)).await;
    (maker, answer)
}

async fn four_of_four(affinity: bool) {
    let harness = Harness::start_with(if affinity {
        ""
    } else {
        "\n[affinity]\nenabled = false\n"
    })
    .await;
    let mut home = 0;
    for round in 0..4 {
        let (maker, (status, served, body, _)) =
            two_turns(&harness, 1, &format!("{affinity}-{round}")).await;
        assert_eq!(status, 200, "round {round}: {body}");
        if served == maker {
            home += 1;
        }
    }
    assert_eq!(
        home, 4,
        "affinity {affinity}: every second turn reached its maker"
    );
}

#[tokio::test]
async fn a_turn_with_encrypted_reasoning_reaches_its_maker_4_of_4_with_affinity() {
    four_of_four(true).await;
}

#[tokio::test]
async fn a_turn_with_encrypted_reasoning_reaches_its_maker_4_of_4_without_affinity() {
    four_of_four(false).await;
}

/// The mock on its own: another key's reasoning is OpenAI's 400 (what the router prevents).
#[tokio::test]
async fn the_mock_refuses_another_keys_encrypted_items() {
    let (mock_base, _mock) = start_mock().await;
    let client = reqwest::Client::new();
    let post = |key: String, body: Value| {
        client
            .post(format!("{mock_base}/v1/responses"))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let made: Value = post(
        upstream_key("oa-1"),
        json!({"model": "m", "input": "hi", "include": ["reasoning.encrypted_content"]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let reasoning = reasoning_of(&made);
    let content = reasoning["encrypted_content"].as_str().unwrap();
    assert!(content.starts_with("gAAAAA"), "{reasoning}");
    assert!(!content.contains("oa-1"), "no key in the content");
    for field in [
        "created_at",
        "status",
        "parallel_tool_calls",
        "tool_choice",
        "tools",
        "store",
    ] {
        assert!(made.get(field).is_some(), "{field} missing: {made}");
    }
    assert!(made["usage"]["output_tokens_details"]["reasoning_tokens"].is_u64());
    let next = json!({"model": "m", "input": [user("hi"), reasoning, user("again")]});
    let own = post(upstream_key("oa-1"), next.clone()).await.unwrap();
    assert_eq!(own.status(), 200);
    let other = post(upstream_key("oa-2"), next).await.unwrap();
    assert_eq!(other.status(), 400);
    let error: Value = other.json().await.unwrap();
    assert_eq!(
        error["error"]["code"], "invalid_encrypted_content",
        "{error}"
    );
}

#[tokio::test]
async fn compact_is_routed_like_responses_and_its_item_is_sealed() {
    let harness = Harness::start().await;
    let input = vec![
        user("a long session"),
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
        user("more"),
    ];
    let (status, served, body, request_id) = send(
        &harness,
        "/v1/responses/compact",
        json!({"model": "team", "input": input, "instructions": "be brief"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(served.starts_with("oa-"), "{served}");
    assert_eq!(body["object"], "response.compaction", "{body}");
    let output = output_items(&body);
    assert_eq!(
        output.len(),
        3,
        "two user messages kept, one compaction: {body}"
    );
    let compaction = output.last().unwrap();
    assert_eq!(compaction["type"], "compaction");
    assert!(compaction["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("qrs1."));
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["connection"], served);
    assert!(event["tokens_in"].as_u64().unwrap() > 0, "{event}");
    assert_eq!(event["items_left_out"], 0);
    // Counted against its client like any routed request (limits and spend).
    let events = harness.journal_events().await;
    let usage = client_charges(&events)
        .into_iter()
        .find(|e| e["request_id"] == request_id.as_str())
        .unwrap_or_else(|| panic!("no charge for {request_id}"));
    assert_eq!(usage["client"], "default");
    assert_eq!(usage["tokens_in"], event["tokens_in"]);

    // The next turn carries the compaction item: it goes back to its maker and is read there.
    other_traffic(&harness, 1).await;
    let mut next = output.clone();
    next.push(user("after compaction"));
    let (status, again, body, _) = send(&harness, "/v1/responses", turn(next)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(again, served);
}

#[tokio::test]
async fn a_locked_maker_sends_the_turn_elsewhere_without_its_items() {
    let harness = Harness::start().await;
    let first_input = vec![user("locked: hello")];
    let (status, maker, first, _) =
        send(&harness, "/v1/responses", turn(first_input.clone())).await;
    assert_eq!(status, 200, "{first}");
    // The maker's account answers 429 for an hour from now on.
    harness.mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: ResetForm::RetryAfterSeconds(3600),
    })
    .for_key(upstream_key(&maker))]);
    let mut second_input = first_input;
    second_input.extend(output_items(&first));
    second_input.push(user("locked: again"));
    let (status, served, second, request_id) =
        send(&harness, "/v1/responses", turn(second_input.clone())).await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(served, maker);
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["connection"], served);
    assert_eq!(event["items_left_out"], 1, "{event}");

    // Turn three carries both accounts' reasoning: it goes to the newest item's maker, which
    // reads its own and never sees the locked account's.
    let mut third_input = second_input;
    third_input.extend(output_items(&second));
    third_input.push(user("locked: third"));
    let (status, third_served, body, request_id) =
        send(&harness, "/v1/responses", turn(third_input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(third_served, served);
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["items_left_out"], 1, "{event}");

    // `replay` says so too.
    let mut harness = harness;
    harness.settle().await;
    harness.stop().await;
    let (code, out, err) =
        replay_support::run(&replay_support::args(&harness.dir.path().join("journal")));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|line| line.contains("request_succeeded") && line.contains(&request_id))
        .collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains(" items_left_out=1 "), "{}", lines[0]);
}

#[tokio::test]
async fn an_invalid_encrypted_content_is_retried_once_without_the_items() {
    let harness = Harness::start().await;
    // An item the router never sealed (made elsewhere, for a key none of its accounts have).
    let foreign = json!({
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAAAAbm90LW91cnM",
    });
    harness.mock.reset_stats();
    let (status, served, body, request_id) = send(
        &harness,
        "/v1/responses",
        turn(vec![user("foreign"), foreign, user("again")]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let event = succeeded(&harness, &request_id).await;
    assert_eq!(event["connection"], served);
    assert_eq!(event["items_left_out"], 1, "{event}");
    let stats = harness.mock.stats();
    assert_eq!(
        stats.for_key(&upstream_key(&served)),
        2,
        "one 400, one retry on the same target"
    );
}

/// The seal lives in the item, under the node's own key kept beside the journal: a restarted
/// node reads it.
#[tokio::test]
async fn a_restart_in_between_keeps_the_maker() {
    let mut harness = Harness::start().await;
    let first_input = vec![user("restart: hello")];
    let (status, maker, first, _) =
        send(&harness, "/v1/responses", turn(first_input.clone())).await;
    assert_eq!(status, 200, "{first}");
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

    other_traffic(&harness, 1).await;
    let mut second_input = first_input;
    second_input.extend(output_items(&first));
    second_input.push(user("restart: again"));
    let (status, served, body, _) = send(&harness, "/v1/responses", turn(second_input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
}

/// Streams seal their items too: the `response.output_item.done` and `response.completed`
/// events, and the next turn finds its maker from them.
#[tokio::test]
async fn streamed_reasoning_is_sealed_and_finds_its_maker() {
    let harness = Harness::start().await;
    let first_input = vec![user("stream: hello")];
    let mut body = turn(first_input.clone());
    body["stream"] = json!(true);
    let response = harness.post_json("/v1/responses", body).await;
    assert_eq!(response.status(), 200);
    let maker = header(&response, "x-quotaroute-connection");
    let text = response.text().await.unwrap();
    let mut completed = Value::Null;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let event: Value = serde_json::from_str(data).unwrap();
        if let Some(content) = event["item"]["encrypted_content"].as_str() {
            assert!(content.starts_with("qrs1."), "{event}");
        }
        if event["type"] == "response.completed" {
            completed = event["response"].clone();
        }
    }
    let reasoning = reasoning_of(&completed);
    assert!(reasoning["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("qrs1."));
    other_traffic(&harness, 1).await;
    let mut second_input = first_input;
    second_input.extend(output_items(&completed));
    second_input.push(user("stream: again"));
    let (status, served, body, _) = send(&harness, "/v1/responses", turn(second_input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
}

/// Two nodes of one config (no shared state at all: each its own journal) in front of the same
/// accounts: a turn one node answered goes, through the other, to the account that made its
/// items — the seal carries the maker, so nothing but the config's `server.seal_key` needs to
/// be shared.
#[tokio::test]
async fn another_node_of_the_same_config_reads_the_seal() {
    let shared_key = |text: String| {
        text.replace(
            "[server]\n",
            "[server]\nseal_key = \"a-cluster-wide-seal-secret-of-some-length\"\n",
        )
    };
    let first_node = Harness::start_editing(shared_key).await;
    let second_node = Harness::on_mock(
        first_node.mock_base.clone(),
        first_node.mock.clone(),
        shared_key,
        Arc::new(SystemClock),
    )
    .await;
    let mut home = 0;
    for round in 0..4 {
        let first_input = vec![user(&format!("two nodes {round}: hello"))];
        let (status, maker, first, _) =
            send(&first_node, "/v1/responses", turn(first_input.clone())).await;
        assert_eq!(status, 200, "{first}");
        // The second node's DRR has its own phase; some traffic there moves it on.
        other_traffic(&second_node, round + 1).await;
        let mut second_input = first_input;
        second_input.extend(output_items(&first));
        second_input.push(user(&format!("two nodes {round}: again")));
        let (status, served, body, _) =
            send(&second_node, "/v1/responses", turn(second_input)).await;
        assert_eq!(status, 200, "{body}");
        if served == maker {
            home += 1;
        }
    }
    assert_eq!(
        home, 4,
        "every second turn, through the other node, reached its maker"
    );
}

/// A stored response fetched again (`GET /v1/responses/{id}`) hands out its encrypted reasoning
/// sealed like the answer did, so a turn built from it finds its maker too.
#[tokio::test]
async fn a_stored_response_fetched_again_is_sealed_too() {
    let harness = Harness::start().await;
    let first_input = vec![user("stored: hello")];
    let mut body = turn(first_input.clone());
    body["store"] = json!(true);
    let (status, maker, first, _) = send(&harness, "/v1/responses", body).await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();
    let fetched: Value = harness
        .client
        .get(harness.url(&format!("/v1/responses/{id}")))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reasoning = reasoning_of(&fetched);
    assert!(
        reasoning["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("qrs1."),
        "{fetched}"
    );
    other_traffic(&harness, 1).await;
    let mut second_input = first_input;
    second_input.extend(output_items(&fetched));
    second_input.push(user("stored: again"));
    let (status, served, body, _) = send(&harness, "/v1/responses", turn(second_input)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
}

/// The mock's Responses stream, as the public schema has it: typed events, each with its
/// `sequence_number` counting up from 0, the reasoning item (with its encrypted content when
/// included) and the message, and a complete response object in `response.completed`.
#[tokio::test]
async fn the_mock_streams_the_responses_schema() {
    let (mock_base, _mock) = start_mock().await;
    let text = reqwest::Client::new()
        .post(format!("{mock_base}/v1/responses"))
        .bearer_auth(upstream_key("oa-1"))
        .json(&json!({
            "model": "m",
            "input": "hi",
            "stream": true,
            "include": ["reasoning.encrypted_content"],
            "tools": [],
            "tool_choice": "auto",
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for (at, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], at as u64, "{event}");
    }
    assert_eq!(kinds[0], "response.created");
    assert_eq!(kinds[1], "response.in_progress");
    for kind in [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    assert_eq!(*kinds.last().unwrap(), "response.completed");
    let done_reasoning = events
        .iter()
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "reasoning")
        .unwrap();
    assert!(done_reasoning["item"]["encrypted_content"]
        .as_str()
        .unwrap()
        .starts_with("gAAAAA"));
    let response = &events.last().unwrap()["response"];
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["tool_choice"], "auto");
    assert_eq!(response["output"].as_array().unwrap().len(), 2);
    assert!(response["usage"]["input_tokens_details"]["cached_tokens"].is_u64());
    assert!(response["usage"]["output_tokens_details"]["reasoning_tokens"].is_u64());
}
