//! Every scripted fault of the mock upstream, observed over real loopback HTTP.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::time::{Duration, Instant};

use quotaroute_mock::{self as mock_upstream, Fault, MockUpstream, ResetForm, Rule};
use serde_json::{json, Value};

async fn start_with(rules: Vec<Rule>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    mock.set_rules(rules);
    tokio::spawn(mock_upstream::serve(listener, mock));
    base
}

async fn send(base: &str, path: &str, body: Value) -> Result<reqwest::Response, reqwest::Error> {
    reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth("sk-test-1234567890wxyz")
        .json(&body)
        .send()
        .await
}

async fn chat(base: &str, stream: bool) -> reqwest::Response {
    send(
        base,
        "/v1/chat/completions",
        json!({"model": "gpt-4o", "stream": stream}),
    )
    .await
    .unwrap()
}

async fn messages(base: &str, stream: bool) -> reqwest::Response {
    send(
        base,
        "/v1/messages",
        json!({"model": "claude", "stream": stream, "max_tokens": 6}),
    )
    .await
    .unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
}

fn limited(reset: ResetForm) -> Vec<Rule> {
    vec![Rule::always(Fault::Status429 { reset })]
}

#[tokio::test]
async fn status429_reset_forms() {
    let base = start_with(limited(ResetForm::RetryAfterSeconds(7))).await;
    let response = chat(&base, false).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after").as_deref(), Some("7"));
    assert_eq!(header(&response, "x-ratelimit-reset-requests"), None);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    let base = start_with(limited(ResetForm::RetryAfterHttpDate(60))).await;
    let date = header(&chat(&base, false).await, "retry-after").unwrap();
    assert!(httpdate_parses(&date), "{date}");

    let base = start_with(limited(ResetForm::RetryAfterMs(1500))).await;
    let response = chat(&base, false).await;
    assert_eq!(header(&response, "retry-after-ms").as_deref(), Some("1500"));
    assert_eq!(header(&response, "retry-after"), None);

    let base = start_with(limited(ResetForm::OpenAiResetHeaders("6m0s".into()))).await;
    let response = chat(&base, false).await;
    assert_eq!(
        header(&response, "x-ratelimit-reset-requests").as_deref(),
        Some("6m0s")
    );
    assert_eq!(
        header(&response, "x-ratelimit-reset-tokens").as_deref(),
        Some("6m0s")
    );
    assert_eq!(
        header(&response, "x-ratelimit-remaining-requests").as_deref(),
        Some("0")
    );

    let base = start_with(limited(ResetForm::AnthropicResetRfc3339(90))).await;
    let response = messages(&base, false).await;
    assert_eq!(response.status(), 429);
    let reset = header(&response, "anthropic-ratelimit-requests-reset").unwrap();
    assert!(reset.ends_with('Z') && reset.contains('T'), "{reset}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");

    let base = start_with(limited(ResetForm::BodyRetryDelay(30))).await;
    let body: Value = chat(&base, false).await.json().await.unwrap();
    assert_eq!(body["error"]["details"][0]["retryDelay"], "30s");

    let base = start_with(limited(ResetForm::MessageTryAgainIn("1m30s".into()))).await;
    let body: Value = chat(&base, false).await.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Please try again in 1m30s."));

    let base = start_with(limited(ResetForm::None)).await;
    let response = chat(&base, false).await;
    assert_eq!(response.status(), 429);
    for name in [
        "retry-after",
        "retry-after-ms",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    ] {
        assert_eq!(header(&response, name), None, "{name}");
    }
    let body: Value = response.json().await.unwrap();
    assert!(!body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("try again in"));
}

fn httpdate_parses(text: &str) -> bool {
    text.ends_with(" GMT") && text.len() == "Sun, 06 Nov 1994 08:49:37 GMT".len()
}

#[tokio::test]
async fn insufficient_quota_429() {
    let base = start_with(vec![Rule::always(Fault::InsufficientQuota429)]).await;
    let response = chat(&base, false).await;
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "insufficient_quota");
    assert_eq!(body["error"]["type"], "insufficient_quota");
}

#[tokio::test]
async fn statuses_have_provider_faithful_bodies() {
    let openai_cases: [(u16, &str); 6] = [
        (400, "model_not_found"),
        (401, "invalid_api_key"),
        (404, "model_not_found"),
        (500, "The server had an error"),
        (503, "The engine is currently overloaded"),
        (529, "Overloaded"),
    ];
    for (status, fragment) in openai_cases {
        let base = start_with(vec![Rule::always(Fault::Status(status))]).await;
        let response = chat(&base, false).await;
        assert_eq!(response.status(), status);
        assert!(header(&response, "x-ratelimit-limit-requests").is_some());
        let text = response.text().await.unwrap();
        assert!(text.contains(fragment), "{status}: {text}");
    }
    // 401 echoes a masked part of the key, never all of it.
    let base = start_with(vec![Rule::always(Fault::Status(401))]).await;
    let text = chat(&base, false).await.text().await.unwrap();
    assert!(text.contains("sk-tes************wxyz"), "{text}");
    assert!(!text.contains("1234567890"));
    // Gateway errors come back as HTML, as they do in front of real APIs.
    for status in [502, 504] {
        let base = start_with(vec![Rule::always(Fault::Status(status))]).await;
        let response = chat(&base, false).await;
        assert_eq!(response.status(), status);
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("text/html")
        );
    }
    for status in [402, 403] {
        let base = start_with(vec![Rule::always(Fault::Status(status))]).await;
        let response = chat(&base, false).await;
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert!(body["error"]["message"].is_string());
    }

    let anthropic_cases: [(u16, &str); 9] = [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (500, "api_error"),
        (503, "api_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ];
    for (status, error_type) in anthropic_cases {
        let base = start_with(vec![Rule::always(Fault::Status(status))]).await;
        let response = messages(&base, false).await;
        assert_eq!(response.status(), status);
        assert!(header(&response, "anthropic-ratelimit-requests-limit").is_some());
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], error_type, "{status}");
    }
}

#[tokio::test]
async fn custom_fault_is_sent_verbatim() {
    let body = r#"{"error":{"message":"quota exceeded for region","type":"x"}}"#;
    let base = start_with(vec![Rule::always(Fault::Custom {
        status: 403,
        body: body.to_owned(),
    })])
    .await;
    let response = chat(&base, false).await;
    assert_eq!(response.status(), 403);
    assert_eq!(response.text().await.unwrap(), body);
}

#[tokio::test]
async fn connection_reset_before_headers() {
    let base = start_with(vec![Rule::always(Fault::ConnectionReset)]).await;
    let error = send(&base, "/v1/chat/completions", json!({"model": "m"}))
        .await
        .unwrap_err();
    assert!(error.is_request() || error.is_connect(), "{error:?}");
    assert!(error.status().is_none());
}

#[tokio::test]
async fn stall_and_latency_delay_the_headers_then_succeed() {
    for fault in [Fault::Stall { ms: 150 }, Fault::Latency { ms: 150 }] {
        let base = start_with(vec![Rule::always(fault.clone())]).await;
        let started = Instant::now();
        let response = chat(&base, false).await;
        assert!(started.elapsed() >= Duration::from_millis(150), "{fault:?}");
        assert_eq!(response.status(), 200);
    }
    // A client with a shorter timeout sees a timeout.
    let base = start_with(vec![Rule::always(Fault::Stall { ms: 2_000 })]).await;
    let error = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth("k")
        .timeout(Duration::from_millis(100))
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout());
}

/// Reads a streaming body chunk by chunk: the text received, and whether it ended in an error.
async fn read_stream(mut response: reqwest::Response) -> (String, bool) {
    let mut text = String::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => text.push_str(std::str::from_utf8(&chunk).unwrap()),
            Ok(None) => return (text, false),
            Err(_) => return (text, true),
        }
    }
}

#[tokio::test]
async fn stream_fail_before_content() {
    let base = start_with(vec![Rule::always(Fault::StreamFailBeforeContent)]).await;
    let response = chat(&base, true).await;
    assert_eq!(response.status(), 200);
    let (text, _) = read_stream(response).await;
    let error_at = text.find("\"error\"").unwrap();
    assert!(!text[..error_at].contains("\"content\":\"This"), "{text}");
    assert!(!text.contains("[DONE]"));

    let (text, _) = read_stream(messages(&base, true).await).await;
    assert!(text.contains("event: error"));
    assert!(text.contains("overloaded_error"));
    assert!(!text.contains("content_block_delta"));

    // A non-streaming request is unaffected.
    assert_eq!(chat(&base, false).await.status(), 200);
}

#[tokio::test]
async fn stream_fail_after_content_cuts_the_connection() {
    let base = start_with(vec![Rule::always(Fault::StreamFailAfterContent)]).await;
    let (text, cut) = read_stream(chat(&base, true).await).await;
    let first_content = text.find("\"content\":\"This\"").unwrap();
    let error_at = text.find("\"error\"").unwrap();
    assert!(first_content < error_at, "{text}");
    assert!(cut, "the body should end abruptly");
    assert!(!text.contains("[DONE]"));

    let (text, cut) = read_stream(messages(&base, true).await).await;
    assert!(text.find("content_block_delta").unwrap() < text.find("event: error").unwrap());
    assert!(cut);
    assert!(!text.contains("message_stop"));
}

#[tokio::test]
async fn bad_json_200() {
    let base = start_with(vec![Rule::always(Fault::BadJson200)]).await;
    let response = chat(&base, false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-type").as_deref(),
        Some("application/json")
    );
    let text = response.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err());
}

#[tokio::test]
async fn garbage_sse() {
    let base = start_with(vec![Rule::always(Fault::GarbageSse)]).await;
    let response = chat(&base, true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-type").as_deref(),
        Some("text/event-stream")
    );
    let text = response.text().await.unwrap();
    let first_data = text.lines().next().unwrap().strip_prefix("data: ").unwrap();
    assert!(serde_json::from_str::<Value>(first_data).is_err());
}

#[tokio::test]
async fn faults_are_scoped_by_key_and_model_and_times() {
    let base = start_with(vec![Rule::always(Fault::Status(503))
        .for_key("sk-test-1234567890wxyz")
        .for_model("gpt-4o")
        .times(1)])
    .await;
    assert_eq!(chat(&base, false).await.status(), 503);
    assert_eq!(chat(&base, false).await.status(), 200);
}

#[tokio::test]
async fn slow_start_sends_the_first_events_then_pauses() {
    let base = start_with(vec![Rule::always(Fault::SlowStart {
        events: 3,
        pause_ms: 400,
    })])
    .await;
    let started = Instant::now();
    let mut response = send(
        &base,
        "/v1/responses",
        json!({"model": "gpt-5", "input": "hi", "stream": true}),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let mut preamble_at = None;
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        if preamble_at.is_none() && text.matches("\n\n").count() >= 3 {
            preamble_at = Some(started.elapsed());
            assert_eq!(text.matches("\n\n").count(), 3, "{text}");
        }
    }
    let preamble_at = preamble_at.unwrap();
    assert!(preamble_at < Duration::from_millis(200), "{preamble_at:?}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(
        names[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    assert_eq!(names.last(), Some(&"response.completed"));

    // A JSON answer just waits, like latency.
    let started = Instant::now();
    let response = chat(&base, false).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn compression_faults_posted_as_json() {
    let base = start_with(vec![]).await;
    let rules = json!([
        {"fault": "mislabelled_compression", "times": 1},
        {"fault": "corrupt_compressed", "times": 1},
        {"fault": {"slow_start": {"events": 1, "pause_ms": 10}}, "times": 1},
    ]);
    let posted = reqwest::Client::new()
        .post(format!("{base}/mock/rules"))
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 204);
    let encodings: Vec<Option<String>> = [
        chat(&base, false).await,
        chat(&base, false).await,
        chat(&base, false).await,
    ]
    .iter()
    .map(|response| header(response, "content-encoding"))
    .collect();
    assert_eq!(
        encodings,
        [Some("gzip".to_owned()), Some("gzip".to_owned()), None]
    );
}
