//! Gemini on the translation hub through the node (behaviour §14, §15): a Chat Completions
//! and a Messages client served by a pool of Gemini keys (the upstream gets Google's request at
//! `models/{model}:{method}`, streams as SSE), and a Gemini client on Google's path served by
//! OpenAI and Anthropic accounts, each answer in the client's own shape with its usage.

use serde_json::{json, Value};

use crate::node_gemini_native::gemini_pool;
use crate::support::{upstream_key, Harness, CLIENT_KEY};

fn asked(harness: &Harness, id: &str) -> u64 {
    harness.mock.stats().for_key(&upstream_key(id))
}

fn asked_gemini(harness: &Harness) -> u64 {
    ["gm-1", "gm-2", "gm-3"]
        .iter()
        .map(|id| asked(harness, id))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_client_is_served_by_gemini_keys_json_and_stream() {
    let harness = Harness::start_editing(gemini_pool).await;
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&json!({"model": "gemini", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("x-quotaroute-translated")
            .and_then(|v| v.to_str().ok()),
        Some("chat>gemini")
    );
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["object"], "chat.completion", "{answer}");
    assert!(answer["choices"][0]["message"]["content"]
        .as_str()
        .is_some_and(|text| !text.is_empty()));
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(asked_gemini(&harness), 1);

    let streamed = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&json!({"model": "gemini", "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let text = streamed.text().await.unwrap();
    assert!(text.contains("chat.completion.chunk"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(text.contains("\"prompt_tokens\""), "{text}");
    assert_eq!(asked_gemini(&harness), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_client_streams_from_gemini_keys() {
    let harness = Harness::start_editing(gemini_pool).await;
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "gemini", "max_tokens": 64, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    assert_eq!(asked_gemini(&harness), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_client_is_served_by_openai_and_anthropic_accounts() {
    let harness = Harness::start_editing(gemini_pool).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    for (combo, ids) in [
        ("team", ["oa-1", "oa-2", "oa-3"]),
        ("claude", ["an-1", "an-2", "an-3"]),
    ] {
        let before: u64 = ids.iter().map(|id| asked(&harness, id)).sum();
        let response = harness
            .client
            .post(harness.url(&format!("/v1beta/models/{combo}:generateContent")))
            .header("x-goog-api-key", CLIENT_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{combo}");
        let answer: Value = response.json().await.unwrap();
        let parts = &answer["candidates"][0]["content"]["parts"];
        assert!(
            parts[0]["text"].as_str().is_some_and(|t| !t.is_empty()),
            "{combo}: {answer}"
        );
        assert!(
            answer["usageMetadata"]["promptTokenCount"]
                .as_u64()
                .unwrap()
                > 0
        );
        let after: u64 = ids.iter().map(|id| asked(&harness, id)).sum();
        assert_eq!(after, before + 1, "{combo}");
        assert_eq!(asked_gemini(&harness), 0);

        // Streamed as SSE (`alt=sse`) and as Google's one JSON array.
        for (query, sse) in [("?alt=sse", true), ("", false)] {
            let response = harness
                .client
                .post(harness.url(&format!(
                    "/v1beta/models/{combo}:streamGenerateContent{query}"
                )))
                .header("x-goog-api-key", CLIENT_KEY)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{combo}{query}");
            let text = response.text().await.unwrap();
            assert!(text.contains("\"candidates\""), "{combo}{query}: {text}");
            if sse {
                assert!(text.starts_with("data: "), "{text}");
            } else {
                let chunks: Vec<Value> = serde_json::from_str(&text).unwrap();
                assert!(chunks
                    .iter()
                    .any(|chunk| chunk.get("usageMetadata").is_some()));
            }
        }
    }
}
