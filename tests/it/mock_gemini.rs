//! The mock upstream speaking Google's Gemini API over real loopback HTTP: both stream framings,
//! function calls without ids, `usageMetadata` with thought and cached tokens, the key's three
//! places, and Google's error bodies (quota per day and per minute, bad and suspended keys, 503,
//! a safety finish).

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use quotaroute_mock::{self as mock_upstream, Accepted, Fault, KeyGate, MockUpstream, Rule};
use serde_json::{json, Value};

const MODEL: &str = "gemini-2.5-flash";

async fn start() -> (String, MockUpstream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    tokio::spawn(mock_upstream::serve(listener, mock.clone()));
    (base, mock)
}

async fn call(base: &str, path_and_query: &str, key: &str, body: Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1beta/models/{MODEL}:{path_and_query}"))
        .header("x-goog-api-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn hello() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]})
}

#[tokio::test]
async fn generate_and_both_stream_framings_carry_text_and_usage() {
    let (base, _mock) = start().await;
    let (status, text) = call(&base, "generateContent", "AIzaOne", hello()).await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let candidate = &answer["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    assert_eq!(
        candidate["content"]["parts"][0]["text"],
        "This is a mock reply."
    );
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(answer["usageMetadata"]["candidatesTokenCount"], 6);

    let (status, sse) = call(&base, "streamGenerateContent?alt=sse", "AIzaOne", hello()).await;
    assert_eq!(status, 200);
    let events: Vec<Value> = sse
        .split("\r\n\r\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert_eq!(events.len(), 6, "{sse}");
    assert_eq!(events[5]["candidates"][0]["finishReason"], "STOP");

    let (status, array) = call(&base, "streamGenerateContent", "AIzaOne", hello()).await;
    assert_eq!(status, 200);
    let chunks: Vec<Value> = serde_json::from_str(&array).unwrap();
    assert_eq!(chunks.len(), 6);
    let words: String = chunks
        .iter()
        .map(|chunk| {
            chunk["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(words, "This is a mock reply.");
}

#[tokio::test]
async fn calls_thoughts_cache_count_embed_and_models() {
    let (base, _mock) = start().await;
    let body = json!({
        "systemInstruction": {"parts": [{"text": "s".repeat(4000)}]},
        "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}},
    });
    let (_, first) = call(&base, "generateContent", "AIzaOne", body.clone()).await;
    let first: Value = serde_json::from_str(&first).unwrap();
    let parts = &first["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["thought"], true);
    assert_eq!(parts[1]["functionCall"]["name"], "lookup");
    assert!(parts[1]["functionCall"].get("id").is_none());
    assert!(parts[1]["thoughtSignature"].is_string());
    assert_eq!(first["usageMetadata"]["thoughtsTokenCount"], 12);
    let (_, second) = call(&base, "generateContent", "AIzaOne", body).await;
    let second: Value = serde_json::from_str(&second).unwrap();
    assert!(
        second["usageMetadata"]["cachedContentTokenCount"]
            .as_u64()
            .unwrap()
            >= 1000
    );

    let (_, count) = call(&base, "countTokens", "AIzaOne", hello()).await;
    assert!(
        serde_json::from_str::<Value>(&count).unwrap()["totalTokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let (_, embedded) = call(
        &base,
        "embedContent",
        "AIzaOne",
        json!({"content": {"parts": [{"text": "a"}]}}),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&embedded).unwrap()["embedding"]["values"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let batch = json!({"requests": [{"content": {"parts": [{"text": "a"}]}}, {"content": {"parts": [{"text": "b"}]}}]});
    let (_, batch) = call(&base, "batchEmbedContents", "AIzaOne", batch).await;
    assert_eq!(
        serde_json::from_str::<Value>(&batch).unwrap()["embeddings"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let models: Value = reqwest::Client::new()
        .get(format!("{base}/v1beta/models?key=AIzaOne"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["models"][0]["name"], "models/gemini-2.5-flash");
    assert!(models["models"][0]["supportedGenerationMethods"].is_array());
}

#[tokio::test]
async fn google_error_bodies_for_quota_keys_overload_and_safety() {
    let (base, mock) = start().await;
    mock.set_rules(vec![
        Rule::always(Fault::GeminiQuota {
            per_day: true,
            retry_delay_s: 22,
        })
        .for_key("AIzaDay"),
        Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 7,
        })
        .for_key("AIzaMinute"),
        Rule::always(Fault::GeminiKeySuspended).for_key("AIzaSuspended"),
        Rule::always(Fault::Status(503)).for_key("AIzaBusy"),
        Rule::always(Fault::GeminiSafety).for_key("AIzaSafe"),
    ]);
    let (status, day) = call(&base, "generateContent", "AIzaDay", hello()).await;
    assert_eq!(status, 429);
    let day: Value = serde_json::from_str(&day).unwrap();
    assert_eq!(day["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(
        day["error"]["details"][0]["violations"][0]["quotaId"],
        "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
    );
    assert_eq!(
        day["error"]["details"][0]["violations"][0]["quotaDimensions"]["model"],
        MODEL
    );
    assert_eq!(day["error"]["details"][2]["retryDelay"], "22s");
    let (_, minute) = call(&base, "generateContent", "AIzaMinute", hello()).await;
    assert!(minute.contains("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"));
    let (status, suspended) = call(&base, "generateContent", "AIzaSuspended", hello()).await;
    assert_eq!(status, 403);
    assert!(suspended.contains("CONSUMER_SUSPENDED"), "{suspended}");
    let (status, busy) = call(&base, "generateContent", "AIzaBusy", hello()).await;
    assert_eq!(status, 503);
    assert!(busy.contains("The model is overloaded"));
    let (status, safe) = call(&base, "generateContent", "AIzaSafe", hello()).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&safe).unwrap()["candidates"][0]["finishReason"],
        "SAFETY"
    );

    // A key the gate refuses is Google's 400 API_KEY_INVALID, never a 401.
    mock.set_key_gate(Some(KeyGate {
        prefix: "AIzaW".into(),
        accepted: Accepted::Keys(vec!["AIzaWell".into()]),
    }));
    let (status, bad) = call(&base, "generateContent", "AIzaWrong", hello()).await;
    assert_eq!(status, 400);
    let bad: Value = serde_json::from_str(&bad).unwrap();
    assert_eq!(bad["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(bad["error"]["details"][0]["reason"], "API_KEY_INVALID");
    // The key's place is kept: here, a header, never the URL.
    let heads = mock.recent_heads();
    assert!(heads
        .iter()
        .any(|head| head.contains("x-goog-api-key: AIzaWrong")));
    assert!(heads
        .iter()
        .all(|head| !head.lines().next().unwrap().contains("AIzaWrong")));
}

#[tokio::test]
async fn a_thought_signature_goes_back_only_to_the_account_that_made_it() {
    let (base, _mock) = start().await;
    let thinking = json!({"thinkingConfig": {"thinkingBudget": 256}});
    let first = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                       "generationConfig": thinking});
    let (_, answer) = call(&base, "generateContent", "AIzaA", first).await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    let signed = answer["candidates"][0]["content"]["parts"][0].clone();
    assert!(signed["thoughtSignature"].is_string(), "{answer}");
    let next = json!({"contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [signed]},
        {"role": "user", "parts": [{"text": "more"}]}],
        "generationConfig": thinking});
    let (status, _) = call(&base, "generateContent", "AIzaA", next.clone()).await;
    assert_eq!(status, 200);
    let (status, refused) = call(&base, "generateContent", "AIzaB", next).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("Corrupted thought signature."));
    assert!(refused.contains("INVALID_ARGUMENT"));
}
