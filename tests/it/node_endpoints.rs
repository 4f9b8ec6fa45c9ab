//! Every routing endpoint of the contract through the node (JSON and stream), the replay tool
//! against a live node (`--from` through `GET /admin/journal`, and the clear error when the
//! journal is held), and `/healthz` / `/metrics` access rules.

use crate::support;

use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn every_openai_endpoint_routes_and_streams() {
    let harness = Harness::start().await;
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]}),
            "chat.completion",
        ),
        (
            "/v1/completions",
            json!({"model": "team", "prompt": "hi"}),
            "text_completion",
        ),
        (
            "/v1/embeddings",
            json!({"model": "team", "input": "hi"}),
            "list",
        ),
        (
            "/v1/responses",
            json!({"model": "team", "input": "hi"}),
            "response",
        ),
    ];
    for (path, body, object) in cases {
        let response = harness.post_json(path, body.clone()).await;
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            header(&response, "x-quotaroute-connection").starts_with("oa-"),
            "{path}"
        );
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["object"], object, "{path}: {value}");
        if path == "/v1/embeddings" {
            continue;
        }
        let mut streaming = body;
        streaming["stream"] = json!(true);
        let response = harness.post_json(path, streaming).await;
        assert_eq!(response.status(), 200, "{path} stream");
        assert!(header(&response, "content-type").starts_with("text/event-stream"));
        let text = response.text().await.unwrap();
        assert!(
            text.starts_with("data: ") || text.starts_with("event: "),
            "{path}: {text}"
        );
    }
    // The mock saw model names rewritten to the target's upstream model.
    assert!(
        harness
            .mock
            .stats()
            .for_key_model(&upstream_key("oa-1"), "gpt-4o-mini")
            > 0
    );
}

#[tokio::test]
async fn anthropic_messages_with_x_api_key_json_and_stream() {
    let harness = Harness::start().await;
    let body = json!({"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["type"], "message");
    let mut streaming = body;
    streaming["stream"] = json!(true);
    let response = harness.post_json("/v1/messages", streaming).await;
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_start"));
    assert!(text.contains("event: content_block_delta"));
    assert!(text.contains("event: message_stop"));
    // An OpenAI-format combo that says `translate = false` is never used from /v1/messages.
    drop(harness);
    let harness = Harness::start_with(
        "[[combos]]\nname = \"apart\"\ntranslate = false\ntargets = [{ connection = \"oa-1\", model = \"gpt-4o-mini\" }]\n",
    )
    .await;
    let response = harness
        .post_json(
            "/v1/messages",
            json!({"model": "apart", "max_tokens": 8, "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["type"], "error");
    assert_eq!(value["error"]["code"], "unsupported_endpoint");
    assert!(value["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/chat/completions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reads_a_live_node_with_from_and_refuses_its_held_journal() {
    let harness = Harness::start().await;
    for _ in 0..5 {
        assert_eq!(harness.chat("team").await.status(), 200);
    }
    harness.settle().await;
    let journal = harness.dir.path().join("journal");
    let bin = env!("CARGO_BIN_EXE_quotaroute");
    let base = harness.base.clone();
    let (from, held) = tokio::task::spawn_blocking(move || {
        let from = std::process::Command::new(bin)
            .args(["replay", "--from", &base, "--format", "json"])
            .env("QUOTAROUTE_ADMIN_KEY", ADMIN_KEY)
            .output()
            .unwrap();
        let held = std::process::Command::new(bin)
            .args(["replay", "--journal"])
            .arg(&journal)
            .output()
            .unwrap();
        (from, held)
    })
    .await
    .unwrap();
    assert!(
        from.status.success(),
        "{}",
        String::from_utf8_lossy(&from.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&from.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|e| e["kind"] == "node_started"));
    assert_eq!(
        lines
            .iter()
            .filter(|e| e["kind"] == "request_succeeded")
            .count(),
        5
    );
    assert!(!String::from_utf8_lossy(&from.stdout).contains("sk-mock"));
    assert_eq!(held.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&held.stderr);
    assert!(stderr.contains("--from"), "{stderr}");
}

#[tokio::test]
async fn health_is_public_metrics_need_the_admin_key() {
    let harness = Harness::start().await;
    let health = harness
        .client
        .get(harness.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let metrics = harness
        .client
        .get(harness.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 401);
    let unknown = harness
        .client
        .get(harness.url("/v2/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}
