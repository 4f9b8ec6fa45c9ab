//! The mock upstream over real loopback HTTP: every endpoint's JSON and stream shape, usage,
//! rate-limit headers, key echo and the control API.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use quotaroute_mock::{self as mock_upstream, Fault, MockUpstream, Rule};
use serde_json::{json, Value};

async fn start() -> (String, MockUpstream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    tokio::spawn(mock_upstream::serve(listener, mock.clone()));
    (base, mock)
}

async fn post(base: &str, path: &str, key: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// `post`, then the answer's body as JSON.
async fn post_for_json(base: &str, path: &str, key: &str, body: Value) -> Value {
    post(base, path, key, body).await.json().await.unwrap()
}

/// `post`, then the answer's body as text.
async fn post_for_text(base: &str, path: &str, key: &str, body: Value) -> String {
    post(base, path, key, body).await.text().await.unwrap()
}

/// `(event name, data)` pairs of an SSE body.
fn sse_events(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(payload) = line.strip_prefix("data: ") {
                    data.push_str(payload);
                }
            }
            (event, data)
        })
        .collect()
}

#[tokio::test]
async fn chat_completion_json_has_usage_and_key_echo() {
    let (base, _mock) = start().await;
    let response = post(
        &base,
        "/v1/chat/completions",
        "sk-one",
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-key"], "sk-one");
    for header in [
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    ] {
        assert!(response.headers().contains_key(header), "{header}");
    }
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "This is a mock reply."
    );
    assert_eq!(body["usage"]["completion_tokens"], 6);
    let usage = &body["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + 6
    );
}

#[tokio::test]
async fn responses_are_deterministic() {
    let (base, _mock) = start().await;
    let request = json!({"model": "m", "messages": []});
    let first: Value = post_for_json(&base, "/v1/chat/completions", "k", request.clone()).await;
    let second: Value = post_for_json(&base, "/v1/chat/completions", "k", request).await;
    assert_eq!(first["choices"], second["choices"]);
    assert_eq!(first["usage"], second["usage"]);
}

#[tokio::test]
async fn chat_stream_has_role_content_usage_and_done() {
    let (base, _mock) = start().await;
    let response = post(
        &base,
        "/v1/chat/completions",
        "k",
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 3}),
    )
    .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_events(&response.text().await.unwrap());
    let datas: Vec<&str> = events.iter().map(|(_, data)| data.as_str()).collect();
    assert_eq!(*datas.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "This is a");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], 3);
}

#[tokio::test]
async fn chat_stream_without_include_usage_has_no_usage_chunk() {
    let (base, _mock) = start().await;
    let text = post_for_text(
        &base,
        "/v1/chat/completions",
        "k",
        json!({"model": "m", "stream": true}),
    )
    .await;
    assert!(!text.contains("\"usage\""));
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn legacy_completions_json_and_stream() {
    let (base, _mock) = start().await;
    let body: Value = post_for_json(
        &base,
        "/v1/completions",
        "k",
        json!({"model": "m", "prompt": "x"}),
    )
    .await;
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["choices"][0]["text"], "This is a mock reply.");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let text = post_for_text(
        &base,
        "/v1/completions",
        "k",
        json!({"model": "m", "prompt": "x", "stream": true, "stream_options": {"include_usage": true}}),
    ).await;
    let events = sse_events(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let usage_chunk: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn embeddings_one_vector_per_input() {
    let (base, _mock) = start().await;
    let body: Value = post_for_json(
        &base,
        "/v1/embeddings",
        "k",
        json!({"model": "text-embedding-3-small", "input": ["a", "b"]}),
    )
    .await;
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["data"][1]["index"], 1);
    assert_eq!(body["data"][0]["embedding"].as_array().unwrap().len(), 8);
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn responses_api_json_and_typed_stream() {
    let (base, _mock) = start().await;
    let body: Value = post_for_json(
        &base,
        "/v1/responses",
        "k",
        json!({"model": "m", "input": "hi"}),
    )
    .await;
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    // A reasoning item first, then the message, as reasoning models answer.
    assert_eq!(body["output"][0]["type"], "reasoning");
    assert_eq!(body["output"][1]["type"], "message");
    assert_eq!(
        body["output"][1]["content"][0]["text"],
        "This is a mock reply."
    );
    assert_eq!(body["usage"]["output_tokens"], 6);

    let text = post_for_text(
        &base,
        "/v1/responses",
        "k",
        json!({"model": "m", "input": "hi", "stream": true}),
    )
    .await;
    let events = sse_events(&text);
    let names: Vec<&str> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    let added: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(added["item"]["type"], "reasoning");
    assert_eq!(names.last(), Some(&"response.completed"));
    assert_eq!(
        names
            .iter()
            .filter(|name| **name == "response.output_text.delta")
            .count(),
        6
    );
    let completed: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(completed["response"]["usage"]["output_tokens"], 6);
}

#[tokio::test]
async fn anthropic_messages_json_with_x_api_key() {
    let (base, _mock) = start().await;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", "sk-ant-1")
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 4, "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-key"], "sk-ant-1");
    for kind in ["requests", "tokens", "input-tokens", "output-tokens"] {
        for part in ["limit", "remaining", "reset"] {
            let header = format!("anthropic-ratelimit-{kind}-{part}");
            assert!(response.headers().contains_key(&header), "{header}");
        }
    }
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "message");
    assert_eq!(body["content"][0]["text"], "This is a mock");
    assert_eq!(body["usage"]["output_tokens"], 4);
    assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn anthropic_stream_event_sequence() {
    let (base, _mock) = start().await;
    let text = post_for_text(
        &base,
        "/v1/messages",
        "k",
        json!({"model": "claude", "max_tokens": 2, "stream": true, "messages": []}),
    )
    .await;
    let events = sse_events(&text);
    let names: Vec<&str> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let delta: Value = serde_json::from_str(&events[6].1).unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn rate_limit_headers_count_down_per_key() {
    let (base, mock) = start().await;
    mock.set_budget(
        "k",
        mock_upstream::RateBudget {
            requests_limit: 10,
            tokens_limit: 1000,
            reset_ms: 6 * 60_000,
        },
    );
    let remaining = |response: &reqwest::Response| {
        response.headers()["x-ratelimit-remaining-requests"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    let first = post(&base, "/v1/chat/completions", "k", json!({"model": "m"})).await;
    assert_eq!(remaining(&first), "9");
    assert_eq!(first.headers()["x-ratelimit-limit-requests"], "10");
    assert_eq!(first.headers()["x-ratelimit-reset-requests"], "6m0s");
    let second = post(&base, "/v1/chat/completions", "k", json!({"model": "m"})).await;
    assert_eq!(remaining(&second), "8");
    // Another key has its own (large default) budget.
    let other = post(&base, "/v1/chat/completions", "k2", json!({"model": "m"})).await;
    assert_eq!(remaining(&other), "999999");
}

#[tokio::test]
async fn spent_budget_gives_a_real_429() {
    let (base, mock) = start().await;
    mock.set_budget(
        "k",
        mock_upstream::RateBudget {
            requests_limit: 1,
            tokens_limit: 1000,
            reset_ms: 2_500,
        },
    );
    assert_eq!(
        post(&base, "/v1/chat/completions", "k", json!({"model": "m"}))
            .await
            .status(),
        200
    );
    let limited = post(&base, "/v1/chat/completions", "k", json!({"model": "m"})).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "3");
    assert_eq!(limited.headers()["x-ratelimit-remaining-requests"], "0");
}

#[tokio::test]
async fn missing_key_is_401() {
    let (base, _mock) = start().await;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn control_api_rules_and_stats() {
    let (base, mock) = start().await;
    let client = reqwest::Client::new();
    let rules = json!([{"key": "k1", "model": "m", "fault": {"status": 503}, "times": 1}]);
    let posted = client
        .post(format!("{base}/mock/rules"))
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 204);
    assert_eq!(mock.rules().len(), 1);
    let statuses = [
        post(&base, "/v1/chat/completions", "k1", json!({"model": "m"}))
            .await
            .status(),
        post(&base, "/v1/chat/completions", "k1", json!({"model": "m"}))
            .await
            .status(),
        post(
            &base,
            "/v1/chat/completions",
            "k1",
            json!({"model": "other"}),
        )
        .await
        .status(),
    ];
    assert_eq!(statuses.map(|status| status.as_u16()), [503, 200, 200]);

    let stats: Value = client
        .get(format!("{base}/mock/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["total"], 3);
    assert_eq!(stats["per_key"]["k1"], 3);
    assert_eq!(stats["per_key_model"]["k1"]["m"], 2);
    assert_eq!(stats["per_key_model"]["k1"]["other"], 1);

    client
        .delete(format!("{base}/mock/rules"))
        .send()
        .await
        .unwrap();
    assert!(mock.rules().is_empty());
    mock.set_rules(vec![Rule::always(Fault::Status(500))]);
    client
        .delete(format!("{base}/mock/stats"))
        .send()
        .await
        .unwrap();
    assert_eq!(mock.stats().total, 0);
    let budget = client
        .post(format!("{base}/mock/budgets"))
        .json(&json!({"key": "k9", "requests_limit": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(budget.status(), 204);
    let response = post(&base, "/v1/chat/completions", "k9", json!({"model": "m"})).await;
    assert_eq!(response.status(), 500);
    assert_eq!(response.headers()["x-ratelimit-remaining-requests"], "4");
}

#[tokio::test]
async fn request_id_is_echoed_and_any_prefix_works() {
    let (base, _mock) = start().await;
    let response = reqwest::Client::new()
        .post(format!("{base}/openai/v1/chat/completions"))
        .bearer_auth("k")
        .header("x-request-id", "req-42")
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "req-42");
}

#[tokio::test]
async fn anthropic_count_tokens_is_deterministic_and_free() {
    let (base, mock) = start().await;
    mock.set_budget(
        "k",
        mock_upstream::RateBudget {
            requests_limit: 10,
            tokens_limit: 1000,
            reset_ms: 60_000,
        },
    );
    let request = json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello there"}]});
    let first = post(&base, "/v1/messages/count_tokens", "k", request.clone()).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-mock-key"], "k");
    assert_eq!(
        first.headers()["anthropic-ratelimit-requests-remaining"],
        "9"
    );
    assert_eq!(
        first.headers()["anthropic-ratelimit-tokens-remaining"],
        "1000"
    );
    let first: Value = first.json().await.unwrap();
    let tokens = first["input_tokens"].as_u64().unwrap();
    assert!(tokens > 0);
    assert_eq!(first, json!({"input_tokens": tokens}));
    let second = post_for_json(&base, "/v1/messages/count_tokens", "k", request).await;
    assert_eq!(second, first);
    let longer = post_for_json(
        &base,
        "/v1/messages/count_tokens",
        "k",
        json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "a much longer question than before, with many more words in it"}]}),
    )
    .await;
    assert!(longer["input_tokens"].as_u64().unwrap() > tokens);
    // Faults apply as on messages.
    mock.set_rules(vec![Rule::always(Fault::Status(529))]);
    let overloaded = post(
        &base,
        "/v1/messages/count_tokens",
        "k",
        json!({"model": "claude-sonnet-4-5", "messages": []}),
    )
    .await;
    assert_eq!(overloaded.status(), 529);
    let body: Value = overloaded.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
}

async fn request(method: reqwest::Method, base: &str, path: &str, key: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn not_found(id: &str) -> Value {
    json!({"error": {
        "message": format!("Response with id '{id}' not found."),
        "type": "invalid_request_error",
        "param": null,
        "code": null,
    }})
}

/// A stored response made by `key` (`{"model": "gpt-5", "input": "hi"}`).
async fn create_response(base: &str, key: &str) -> Value {
    post_for_json(
        base,
        "/v1/responses",
        key,
        json!({"model": "gpt-5", "input": "hi"}),
    )
    .await
}

#[tokio::test]
async fn stored_responses_belong_to_the_key_that_made_them() {
    use reqwest::Method;
    let (base, mock) = start().await;
    let created = create_response(&base, "k1").await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Another key's response with the same body gets another id.
    let other = create_response(&base, "k2").await;
    assert_ne!(other["id"], created["id"]);

    let path = format!("/v1/responses/{id}");
    assert_eq!(
        request(Method::GET, &base, &path, "k1").await,
        (200, created.clone())
    );
    assert_eq!(
        request(Method::GET, &base, &path, "k2").await,
        (404, not_found(&id))
    );

    let (status, items) = request(Method::GET, &base, &format!("{path}/input_items"), "k1").await;
    assert_eq!(status, 200);
    assert_eq!(items["object"], "list");
    assert_eq!(items["has_more"], false);
    assert_eq!(items["data"][0]["role"], "user");
    assert_eq!(items["data"][0]["content"][0]["text"], "hi");
    assert_eq!(items["first_id"], items["data"][0]["id"]);
    assert_eq!(items["last_id"], items["data"][0]["id"]);
    assert_eq!(
        request(Method::GET, &base, &format!("{path}/input_items"), "k2").await,
        (404, not_found(&id))
    );

    let (status, cancelled) = request(Method::POST, &base, &format!("{path}/cancel"), "k1").await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["id"], id.as_str());
    assert_eq!(cancelled["status"], "cancelled");

    assert_eq!(
        request(Method::DELETE, &base, &path, "k2").await,
        (404, not_found(&id))
    );
    assert_eq!(
        request(Method::DELETE, &base, &path, "k1").await,
        (
            200,
            json!({"id": id, "object": "response", "deleted": true})
        )
    );
    assert_eq!(
        request(Method::GET, &base, &path, "k1").await,
        (404, not_found(&id))
    );
    assert_eq!(
        request(Method::DELETE, &base, &path, "k1").await,
        (404, not_found(&id))
    );

    // The stats say which key asked for what.
    let lookups = mock.stats().stored_lookups;
    let asked: Vec<(&str, &str, bool)> = lookups
        .iter()
        .map(|lookup| (lookup.key.as_str(), lookup.action.as_str(), lookup.found))
        .collect();
    assert_eq!(
        asked,
        [
            ("k1", "get", true),
            ("k2", "get", false),
            ("k1", "input_items", true),
            ("k2", "input_items", false),
            ("k1", "cancel", true),
            ("k2", "delete", false),
            ("k1", "delete", true),
            ("k1", "get", false),
            ("k1", "delete", false),
        ]
    );
    assert!(lookups.iter().all(|lookup| lookup.response_id == id));
    assert_eq!(mock.stats().stored_lookups_for("k2"), 3);
}

#[tokio::test]
async fn streamed_responses_are_stored_too() {
    let (base, _mock) = start().await;
    let text = post_for_text(
        &base,
        "/v1/responses",
        "k1",
        json!({"model": "gpt-5", "input": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "stream": true}),
    )
    .await;
    let completed: Value = serde_json::from_str(&sse_events(&text).last().unwrap().1).unwrap();
    let id = completed["response"]["id"].as_str().unwrap().to_owned();
    let (status, stored) = request(
        reqwest::Method::GET,
        &base,
        &format!("/v1/responses/{id}"),
        "k1",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(stored, completed["response"]);
    // Newest first by default, as OpenAI lists them; `order=asc` for oldest first.
    let (_, items) = request(
        reqwest::Method::GET,
        &base,
        &format!("/v1/responses/{id}/input_items"),
        "k1",
    )
    .await;
    assert_eq!(items["data"][0]["content"][0]["text"], "b");
    let (_, items) = request(
        reqwest::Method::GET,
        &base,
        &format!("/v1/responses/{id}/input_items?order=asc"),
        "k1",
    )
    .await;
    assert_eq!(items["data"][0]["content"][0]["text"], "a");
    assert_eq!(items["data"][1]["content"][0]["text"], "b");

    // `"store": false` keeps nothing.
    let unstored = post_for_json(
        &base,
        "/v1/responses",
        "k1",
        json!({"model": "gpt-5", "input": "x", "store": false}),
    )
    .await;
    let id = unstored["id"].as_str().unwrap().to_owned();
    assert_eq!(
        request(
            reqwest::Method::GET,
            &base,
            &format!("/v1/responses/{id}"),
            "k1"
        )
        .await,
        (404, not_found(&id))
    );
}

#[tokio::test]
async fn previous_response_id_must_be_the_keys_own() {
    let (base, _mock) = start().await;
    let first = create_response(&base, "k1").await;
    let id = first["id"].as_str().unwrap().to_owned();
    let follow_up = json!({"model": "gpt-5", "input": "and then?", "previous_response_id": id});

    let refused = post(&base, "/v1/responses", "k2", follow_up.clone()).await;
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.headers()["x-mock-key"], "k2");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {
            "message": format!("Previous response with id '{id}' not found."),
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }})
    );
    let mut streaming = follow_up.clone();
    streaming["stream"] = json!(true);
    assert_eq!(
        post(&base, "/v1/responses", "k2", streaming).await.status(),
        400
    );

    let continued = post(&base, "/v1/responses", "k1", follow_up).await;
    assert_eq!(continued.status(), 200);
    let body: Value = continued.json().await.unwrap();
    assert_eq!(body["previous_response_id"], id.as_str());
    assert_ne!(body["id"], id.as_str());
}

/// A plan account's windows on every answer, in each provider's headers, and a 429 naming the
/// reset once a window is spent: Anthropic's unified status `rejected`, ChatGPT's
/// `usage_limit_reached` with `resets_at` (what Codex reads).
#[tokio::test]
async fn a_plan_account_reports_its_windows_and_refuses_when_one_is_spent() {
    use mock_upstream::{PlanWindow, SubscriptionPlan, FIVE_HOURS_MS, WEEK_MS};
    let (base, mock) = start().await;
    let plan = SubscriptionPlan {
        five_hour: PlanWindow::fresh(FIVE_HOURS_MS, 2),
        weekly: PlanWindow::fresh(WEEK_MS, 10),
    };
    mock.set_plan("sk-plan-claude", plan);
    mock.set_plan("sk-plan-chatgpt", plan);
    let claude = json!({"model": "claude-3-5-haiku", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let chat = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let first = post(&base, "/v1/messages", "sk-plan-claude", claude.clone()).await;
    assert_eq!(first.status(), 200);
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(
        header(&first, "anthropic-ratelimit-unified-5h-utilization"),
        "0.50"
    );
    assert_eq!(
        header(&first, "anthropic-ratelimit-unified-7d-utilization"),
        "0.10"
    );
    assert_eq!(
        header(&first, "anthropic-ratelimit-unified-status"),
        "allowed"
    );
    assert!(header(&first, "anthropic-ratelimit-requests-remaining").is_empty());
    post(&base, "/v1/messages", "sk-plan-claude", claude.clone()).await;
    let spent = post(&base, "/v1/messages", "sk-plan-claude", claude).await;
    assert_eq!(spent.status(), 429);
    assert_eq!(
        header(&spent, "anthropic-ratelimit-unified-status"),
        "rejected"
    );
    let retry: u64 = header(&spent, "retry-after").parse().unwrap();
    assert!((5 * 3_600 - 5..=5 * 3_600).contains(&retry), "{retry}");

    let first = post(
        &base,
        "/v1/chat/completions",
        "sk-plan-chatgpt",
        chat.clone(),
    )
    .await;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "x-codex-primary-used-percent"), "50");
    assert_eq!(header(&first, "x-codex-primary-window-minutes"), "300");
    assert_eq!(header(&first, "x-codex-secondary-window-minutes"), "10080");
    post(
        &base,
        "/v1/chat/completions",
        "sk-plan-chatgpt",
        chat.clone(),
    )
    .await;
    let spent = post(&base, "/v1/chat/completions", "sk-plan-chatgpt", chat).await;
    assert_eq!(spent.status(), 429);
    let body: Value = spent.json().await.unwrap();
    assert_eq!(body["error"]["type"], "usage_limit_reached", "{body}");
    assert!(body["error"]["resets_in_seconds"].as_u64().unwrap() <= 5 * 3_600);
    // A refused request is not counted.
    assert_eq!(mock.plan("sk-plan-chatgpt").unwrap().five_hour.used, 2);
}
