//! The real wire, black-box over loopback: upstreams that compress like a CDN (every coding,
//! JSON, errors and streams), corrupt or mislabelled compressed bodies, compressed client
//! bodies, the header rules, CORS, the endpoints clients call (`/`, `/v1/models/{id}`,
//! `count_tokens`, stored responses with their affinity), Codex's WebSocket probe, and stream
//! timing for a model that thinks before its first delta.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use quotaroute_mock::{Compression, Fault, Rule};
use serde_json::{json, Value};
use support::*;

/// The config of every test here: the router asks upstreams for every coding it reads.
fn asks_for_compression(text: String) -> String {
    text.replace(
        "base_url = \"",
        "accept_encoding = \"gzip, deflate, br, zstd\"\nbase_url = \"",
    )
}

async fn compressing_harness() -> Harness {
    Harness::start_editing(asks_for_compression).await
}

const ALL_CODINGS: [(&str, Compression); 4] = [
    ("gzip", Compression::Gzip),
    ("deflate", Compression::Deflate),
    ("br", Compression::Br),
    ("zstd", Compression::Zstd),
];

async fn post(harness: &Harness, path: &str, body: Value) -> reqwest::Response {
    harness
        .client
        .post(harness.url(path))
        .bearer_auth(CLIENT_KEY)
        .header("accept-encoding", "gzip, deflate, br, zstd")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn chat_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn message_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "max_tokens": 16,
           "messages": [{"role": "user", "content": "hi"}]})
}

/// No connection is cooling down or disabled: nothing counted a compressed answer as a failure.
async fn assert_pool_healthy(harness: &Harness) {
    let state = harness.admin_get("/admin/state").await;
    for connection in state["connections"].as_array().unwrap() {
        assert_eq!(
            connection["cooldown_remaining_ms"], 0,
            "{}: {connection}",
            connection["id"]
        );
        assert!(connection["disabled"].is_null(), "{connection}");
        assert!(
            connection["lockouts"].as_array().unwrap().is_empty(),
            "{connection}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_coding_json_and_stream_in_both_formats_is_served_and_counted() {
    let harness = compressing_harness().await;
    for (name, mode) in ALL_CODINGS {
        harness.mock.set_compression(mode);
        // OpenAI JSON: the usage is read from the decoded body.
        let response = post(&harness, "/v1/chat/completions", chat_body("team", false)).await;
        assert_eq!(response.status(), 200, "{name}");
        assert!(response.headers().get("content-encoding").is_none());
        let length: usize = header(&response, "content-length").parse().unwrap();
        let value: Value = response.json().await.unwrap();
        assert!(
            value["usage"]["prompt_tokens"].as_u64().unwrap() > 0,
            "{name}"
        );
        assert!(length > 0);
        // OpenAI stream.
        let response = post(&harness, "/v1/chat/completions", chat_body("team", true)).await;
        assert_eq!(response.status(), 200, "{name}");
        assert!(response.headers().get("content-encoding").is_none());
        let text = response.text().await.unwrap();
        assert!(text.contains("\"delta\""), "{name}: {text}");
        assert!(text.trim_end().ends_with("data: [DONE]"), "{name}: {text}");
        // Anthropic JSON and stream.
        let response = post(&harness, "/v1/messages", message_body("claude", false)).await;
        assert_eq!(response.status(), 200, "{name}");
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["type"], "message", "{name}");
        let response = post(&harness, "/v1/messages", message_body("claude", true)).await;
        assert_eq!(response.status(), 200, "{name}");
        let text = response.text().await.unwrap();
        assert!(text.contains("event: content_block_delta"), "{name}");
        assert!(text.contains("event: message_stop"), "{name}");
    }
    assert_pool_healthy(&harness).await;
    // The journal counted the tokens of every compressed answer, streamed or not.
    harness.settle().await;
    let events = harness.journal_events().await;
    let succeeded: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "request_succeeded")
        .collect();
    assert_eq!(succeeded.len(), 16);
    assert!(succeeded
        .iter()
        .all(|e| e["tokens_in"].as_u64().unwrap() > 0 && e["tokens_out"].as_u64().unwrap() > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_errors_are_classified_and_passed_through_readable() {
    let harness = compressing_harness().await;
    harness.mock.set_compression(Compression::Gzip);
    harness
        .mock
        .add_rule(Rule::rate_limited(30).for_key(upstream_key("oa-1")));
    harness
        .mock
        .add_rule(Rule::rate_limited(30).for_key(upstream_key("oa-2")));
    harness
        .mock
        .add_rule(Rule::rate_limited(30).for_key(upstream_key("oa-3")));
    let response = post(&harness, "/v1/chat/completions", chat_body("team", false)).await;
    // The gzip 429 bodies were read: a rate limit with its reset, passed through decoded.
    assert_eq!(response.status(), 429);
    assert!(response.headers().get("content-encoding").is_none());
    assert_eq!(header(&response, "retry-after"), "30");
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["type"], "requests", "{value}");
    let lockouts = harness.admin_get("/admin/lockouts").await;
    assert_eq!(
        lockouts["lockouts"].as_array().unwrap().len(),
        3,
        "{lockouts}"
    );
    for lockout in lockouts["lockouts"].as_array().unwrap() {
        assert_eq!(lockout["reason"], "rate_limited");
        assert_eq!(lockout["error_code"], 429, "{lockout}");
        assert!(lockout["upstream_code"].is_string(), "{lockout}");
        assert!(
            lockout["remaining_ms"].as_u64().unwrap() > 25_000,
            "{lockout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_and_mislabelled_compressed_bodies_are_server_errors_that_fail_over() {
    let harness = compressing_harness().await;
    harness.mock.set_compression(Compression::Gzip);
    for (fault, stream) in [
        (Fault::CorruptCompressed, false),
        (Fault::MislabelledCompression, false),
        (Fault::MislabelledCompression, true),
    ] {
        harness.mock.clear_rules();
        // The first try answers garbage; the request fails over and is served.
        harness.mock.add_rule(Rule::always(fault.clone()).times(1));
        let response = post(&harness, "/v1/chat/completions", chat_body("team", stream)).await;
        assert_eq!(response.status(), 200, "{fault:?} stream={stream}");
        assert_eq!(header(&response, "x-quotaroute-attempts"), "2");
        let _ = response.text().await.unwrap();
        for id in ["oa-1", "oa-2", "oa-3"] {
            harness
                .admin_post(&format!("/admin/connections/{id}/clear"))
                .await
                .error_for_status()
                .unwrap();
        }
    }
    // A stream whose gzip breaks after its first content is committed: the client gets one
    // final error event in its protocol.
    harness.mock.clear_rules();
    harness
        .mock
        .add_rule(Rule::always(Fault::CorruptCompressed).times(1));
    let response = post(&harness, "/v1/chat/completions", chat_body("team", true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
    let text = response.text().await.unwrap();
    assert!(text.contains("\"delta\""), "{text}");
    assert!(text.contains("not valid gzip"), "{text}");
    harness.settle().await;
    let events = harness.journal_events().await;
    let failures: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "request_failed")
        .collect();
    assert_eq!(failures.len(), 4, "{failures:?}");
    for failure in &failures {
        assert_eq!(failure["class"], "server_error", "{failure}");
        let message = failure["message"].as_str().unwrap();
        assert!(message.contains("not valid gzip"), "{message}");
    }
    assert_eq!(failures[3]["after_first_content"], true);
    // Every key corrupt: a 502 that says why, never a hang.
    harness.mock.clear_rules();
    harness
        .mock
        .add_rule(Rule::always(Fault::CorruptCompressed));
    let response = post(&harness, "/v1/chat/completions", chat_body("team", false)).await;
    assert_eq!(response.status(), 502);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "upstream_error");
    assert!(value["error"]["message"]
        .as_str()
        .unwrap()
        .contains("does not decode"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_client_bodies_are_read_and_unknown_codings_refused() {
    use async_compression::tokio::write::GzipEncoder;
    use tokio::io::AsyncWriteExt;
    let harness = Harness::start().await;
    let plain = serde_json::to_vec(&chat_body("team", false)).unwrap();
    let mut encoder = GzipEncoder::new(Vec::new());
    encoder.write_all(&plain).await.unwrap();
    encoder.shutdown().await.unwrap();
    let gzipped = encoder.into_inner();
    let send = |body: Vec<u8>, coding: &'static str| {
        harness
            .client
            .post(harness.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .header("content-type", "application/json")
            .header("content-encoding", coding)
            .body(body)
            .send()
    };
    let response = send(gzipped.clone(), "gzip").await.unwrap();
    assert_eq!(response.status(), 200);
    let response = send(plain.clone(), "compress").await.unwrap();
    assert_eq!(response.status(), 415);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "unsupported_content_encoding");
    assert!(value["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`compress`"));
    let response = send(gzipped[..gzipped.len() / 2].to_vec(), "gzip")
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "invalid_content_encoding");
    let response = send(plain, "gzip").await.unwrap();
    assert_eq!(response.status(), 400);
    // Nothing was sent upstream for the refused bodies.
    assert_eq!(harness.mock.stats().total, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_headers_reach_the_client_but_never_a_key() {
    let harness = Harness::start().await;
    let response = post(&harness, "/v1/chat/completions", chat_body("team", false)).await;
    assert_eq!(response.status(), 200);
    // The mock's rate-limit headers pass through; its key echo does not.
    assert!(response
        .headers()
        .contains_key("x-ratelimit-remaining-requests"));
    assert_eq!(response.headers()["x-mock-key"], "***");
    let response = post(&harness, "/v1/messages", message_body("claude", true)).await;
    assert!(response
        .headers()
        .keys()
        .any(|name| name.as_str().starts_with("anthropic-ratelimit-")));
    assert_eq!(response.headers()["x-mock-key"], "***");
}

/// A bare HTTP/1 upstream that keeps the head of every request it gets and answers each with
/// one chat completion: what went over the wire, not what a server library made of it.
pub(crate) async fn recording_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>)
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    let length = head
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    while buffer.len() < end + 4 + length {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buffer.drain(..end + 4 + length);
                    seen.lock().unwrap().push(head);
                    let body = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (base, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_gets_its_own_host_with_its_port_never_the_clients() {
    let (upstream, heads) = recording_upstream().await;
    let authority = upstream.trim_start_matches("http://").to_string();
    // The `openai` provider (combo `team`) at the recording upstream; `anthropic` stays on the mock.
    let harness = Harness::start_editing(|text| {
        let mock_url = text
            .split("base_url = \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_string();
        text.replacen(&mock_url, &format!("{upstream}/v1"), 1)
    })
    .await;
    for _ in 0..2 {
        let response = harness
            .client
            .post(harness.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .header("host", "router.example")
            .json(&chat_body("team", false))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in &heads {
        let hosts: Vec<&str> = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .filter(|(name, _)| name.eq_ignore_ascii_case("host"))
            .map(|(_, value)| value.trim())
            .collect();
        assert_eq!(hosts, vec![authority.as_str()], "{head}");
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{head}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_for_listed_origins_only() {
    let harness = Harness::start_editing(|text| {
        text.replace(
            "shutdown_grace_ms = 2000",
            "shutdown_grace_ms = 2000\ncors_allow_origins = [\"https://app.example\"]",
        )
    })
    .await;
    let preflight = |origin: &'static str| {
        harness
            .client
            .request(
                reqwest::Method::OPTIONS,
                harness.url("/v1/chat/completions"),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let response = preflight("https://app.example").await.unwrap();
    assert_eq!(response.status(), 204);
    assert_eq!(
        header(&response, "access-control-allow-origin"),
        "https://app.example"
    );
    assert!(header(&response, "access-control-allow-methods").contains("POST"));
    assert_eq!(
        header(&response, "access-control-allow-headers"),
        "authorization, content-type"
    );
    let response = preflight("https://evil.example").await.unwrap();
    assert_eq!(response.status(), 403);
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("origin", "https://app.example")
        .json(&chat_body("team", false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "access-control-allow-origin"),
        "https://app.example"
    );
    assert!(header(&response, "access-control-expose-headers").contains("x-quotaroute-connection"));
    // Without an Origin, nothing changes.
    let response = harness.chat("team").await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_models_by_id_unknown_paths_and_the_websocket_probe() {
    let harness = Harness::start().await;
    for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
        let response = harness
            .client
            .request(method.clone(), harness.url("/"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method}");
    }
    let root: Value = harness
        .client
        .get(harness.url("/"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(root["name"], "quotaroute");
    assert_eq!(root["version"], env!("CARGO_PKG_VERSION"));

    let get = |path: &str, anthropic: bool| {
        let mut request = harness
            .client
            .get(harness.url(path))
            .bearer_auth(CLIENT_KEY);
        if anthropic {
            request = request.header("anthropic-version", "2023-06-01");
        }
        request.send()
    };
    let openai: Value = get("/v1/models/team", false)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        openai,
        json!({"id": "team", "object": "model", "owned_by": "quotaroute"})
    );
    let response = get("/v1/models/openai/gpt-4o-mini", false).await.unwrap();
    assert_eq!(response.status(), 200);
    let anthropic: Value = get("/v1/models/claude", true)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(anthropic["type"], "model");
    assert_eq!(anthropic["id"], "claude");
    assert!(anthropic["created_at"].as_str().unwrap().ends_with('Z'));
    let list: Value = get("/v1/models", true).await.unwrap().json().await.unwrap();
    assert_eq!(list["has_more"], false);
    assert_eq!(list["first_id"], "team");
    let response = get("/v1/models/nope", false).await.unwrap();
    assert_eq!(response.status(), 404);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "model_not_found");

    let response = get("/v1/assistants", false).await.unwrap();
    assert_eq!(response.status(), 404);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "not_found");

    // Codex opens the Responses WebSocket first: 426 sends it to HTTP at once.
    let response = harness
        .client
        .get(harness.url("/v1/responses"))
        .bearer_auth(CLIENT_KEY)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 426);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "websocket_not_supported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_routes_like_messages_and_counts_no_tokens() {
    let harness = Harness::start().await;
    let response = post(
        &harness,
        "/v1/messages/count_tokens",
        json!({"model": "claude", "messages": [{"role": "user", "content": "hello there"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "x-quotaroute-connection").starts_with("an-"));
    let value: Value = response.json().await.unwrap();
    assert!(value["input_tokens"].as_u64().unwrap() > 0, "{value}");
    harness.settle().await;
    let events = harness.journal_events().await;
    let succeeded = events
        .iter()
        .find(|e| e["kind"] == "request_succeeded")
        .unwrap();
    assert_eq!(succeeded["tokens_in"], 0);
    assert_eq!(succeeded["tokens_out"], 0);
    // On the OpenAI combo (through translation, behaviour §14) the count is the router's own
    // estimate: answered locally, nothing sent upstream.
    let upstream_before = harness.mock.stats().total;
    let response = post(
        &harness,
        "/v1/messages/count_tokens",
        json!({"model": "team", "messages": [{"role": "user", "content": "hello there"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let value: Value = response.json().await.unwrap();
    assert!(value["input_tokens"].as_u64().unwrap() > 0, "{value}");
    assert_eq!(harness.mock.stats().total, upstream_before);
}

/// A client-key request without a body.
async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: impl reqwest::IntoUrl,
) -> reqwest::Response {
    client
        .request(method, url)
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
}

fn responses_body(stream: bool, previous: Option<&str>) -> Value {
    let mut body = json!({"model": "team", "input": "hello", "stream": stream});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    body
}

async fn create_response(harness: &Harness, stream: bool) -> (String, String) {
    let response = post(harness, "/v1/responses", responses_body(stream, None)).await;
    assert_eq!(response.status(), 200);
    let connection = header(&response, "x-quotaroute-connection");
    let text = response.text().await.unwrap();
    let id = if stream {
        let created = text
            .lines()
            .find(|line| line.starts_with("data:") && line.contains("response.created"))
            .unwrap();
        let value: Value = serde_json::from_str(created.trim_start_matches("data:")).unwrap();
        value["response"]["id"].as_str().unwrap().to_string()
    } else {
        let value: Value = serde_json::from_str(&text).unwrap();
        value["id"].as_str().unwrap().to_string()
    };
    (id, connection)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_responses_go_to_the_account_that_holds_them_across_a_restart() {
    let mut harness = Harness::start().await;
    let (json_id, json_connection) = create_response(&harness, false).await;
    let (stream_id, stream_connection) = create_response(&harness, true).await;
    for (id, connection) in [
        (&json_id, &json_connection),
        (&stream_id, &stream_connection),
    ] {
        // DRR alone would spread these over three keys; affinity keeps each on its account.
        for _ in 0..4 {
            let response = post(&harness, "/v1/responses", responses_body(false, Some(id))).await;
            assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
            assert_eq!(&header(&response, "x-quotaroute-connection"), connection);
        }
        for path in [
            format!("/v1/responses/{id}"),
            format!("/v1/responses/{id}/input_items"),
        ] {
            let response = call(&harness.client, reqwest::Method::GET, harness.url(&path)).await;
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(&header(&response, "x-quotaroute-connection"), connection);
        }
    }
    let response = call(
        &harness.client,
        reqwest::Method::GET,
        harness.url("/v1/responses/resp_never_made"),
    )
    .await;
    assert_eq!(response.status(), 404);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "not_found");

    // The bindings are journaled and come back after a restart.
    harness.settle().await;
    let events = harness.journal_events().await;
    let bound: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "response_bound")
        .collect();
    assert!(bound.len() >= 2, "{bound:?}");
    assert!(bound
        .iter()
        .any(|e| e["response_id"] == json!(json_id) && e["connection"] == json!(json_connection)));
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
    let response = call(
        &harness.client,
        reqwest::Method::DELETE,
        format!("{base}/v1/responses/{json_id}"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-connection"),
        json_connection
    );
    // Deleted upstream: the account's own 404 is the answer, and it locks nothing.
    let response = call(
        &harness.client,
        reqwest::Method::GET,
        format!("{base}/v1/responses/{json_id}"),
    )
    .await;
    assert_eq!(response.status(), 404);
    assert_eq!(
        header(&response, "x-quotaroute-connection"),
        json_connection
    );
    let lockouts: Value = harness
        .client
        .get(format!("{base}/admin/lockouts"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(lockouts["lockouts"].as_array().unwrap().is_empty());
    node.stop("test").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_responses_account_that_is_locked_answers_for_itself() {
    let harness = Harness::start().await;
    let (id, connection) = create_response(&harness, false).await;
    harness
        .mock
        .add_rule(Rule::rate_limited(40).for_key(upstream_key(&connection)));
    let response = post(&harness, "/v1/responses", responses_body(false, Some(&id))).await;
    // The 429 is that account's; no other account is tried with a response it does not hold.
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
    let response = post(&harness, "/v1/responses", responses_body(false, Some(&id))).await;
    assert_eq!(response.status(), 429);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "all_targets_locked");
    let blocked = value["error"]["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["connection"], json!(connection));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_thinks_before_its_first_delta_is_waited_for_but_silence_fails_over() {
    // first_token_timeout_ms is 3000 in the standard config.
    let harness = Harness::start_editing(|text| {
        text.replace(
            "shutdown_grace_ms = 2000",
            "shutdown_grace_ms = 2000\nstream_idle_timeout_ms = 5000",
        )
    })
    .await;
    // Three events (created, in_progress, a reasoning item), then 4 s of thought: longer than
    // first_token_timeout_ms, shorter than stream_idle_timeout_ms.
    harness.mock.add_rule(Rule::always(Fault::SlowStart {
        events: 3,
        pause_ms: 4_000,
    }));
    let response = post(&harness, "/v1/responses", responses_body(true, None)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
    let text = response.text().await.unwrap();
    assert!(text.contains("response.output_text.delta"), "{text}");
    assert!(text.contains("response.completed"));
    assert_pool_healthy(&harness).await;

    // Silence past stream_idle_timeout_ms on the first try: it times out, the next key serves.
    harness.mock.clear_rules();
    harness.mock.add_rule(
        Rule::always(Fault::SlowStart {
            events: 3,
            pause_ms: 7_000,
        })
        .times(1),
    );
    let response = post(&harness, "/v1/responses", responses_body(true, None)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-attempts"), "2");
    let text = response.text().await.unwrap();
    assert!(text.contains("response.completed"));
    harness.settle().await;
    let events = harness.journal_events().await;
    let failed = events
        .iter()
        .find(|e| e["kind"] == "request_failed")
        .unwrap();
    assert_eq!(failed["class"], "timeout");
    assert!(failed["message"]
        .as_str()
        .unwrap()
        .contains("stream_idle_timeout_ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_journal_reads_typed_query_parameters() {
    let harness = Harness::start().await;
    assert_eq!(harness.chat("team").await.status(), 200);
    harness.settle().await;
    let page = harness
        .admin_text("/admin/journal?since_seq=1&limit=2")
        .await;
    assert_eq!(page.lines().count(), 2, "{page}");
    let response = harness
        .client
        .get(harness.url("/admin/journal?since_seq=soon"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let value: Value = response.json().await.unwrap();
    assert!(value.to_string().contains("whole numbers"), "{value}");
}
