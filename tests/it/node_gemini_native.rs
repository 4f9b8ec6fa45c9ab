//! A pool of Gemini keys (`format = "gemini"`) reached on Google's own client paths, over real
//! HTTP with the mock speaking Google's API (behaviour §15): `generateContent`, both stream
//! framings (`alt=sse` and one JSON array), function calls, `countTokens`, embeddings and the
//! models list; the upstream gets the body byte for byte at `models/{model}:{method}` with the
//! connection's key in `x-goog-api-key`; usage is charged from `usageMetadata`; a key spent
//! for the day rests until midnight Pacific while the others serve; a bad key is disabled
//! after one answer; the router's own errors are Google's shape. Policy time is the test's.

#![expect(
    clippy::too_many_lines,
    reason = "each test is one scenario against the real node, in the order it happens"
)]

use quotaroute::actors::ManualClock;
use quotaroute_mock::{Fault, Rule};
use serde_json::{json, Value};

use crate::support::{connection, upstream_key, Harness, CLIENT_KEY};

const HOUR: u64 = 3_600_000;
/// 2026-12-05T18:00:00Z: 10:00 in Los Angeles (PST, UTC-8); its midnight is 14 hours away.
const TEN_AM_PACIFIC: u64 = 1_796_493_600_000;

/// Three AI Studio keys on `format = "gemini"`, combo `gemini`.
pub(crate) fn gemini_pool(text: String) -> String {
    let base = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("base_url = \"")
                .map(|rest| rest.trim_end_matches("/v1\"").to_owned())
        })
        .unwrap();
    google_keys(text, "gemini", &format!("{base}/v1beta"))
}

/// Three Google keys (`gm-1`…`gm-3`) on a provider `google` of `format` at `base_url`, and
/// the combo `gemini` over them.
pub(crate) fn google_keys(text: String, format: &str, base_url: &str) -> String {
    let mut text = text.replacen(
        "[[providers]]",
        &format!("[[providers]]\nname = \"google\"\nformat = \"{format}\"\nbase_url = \"{base_url}\"\n\n[[providers]]"),
        1,
    );
    for id in ["gm-1", "gm-2", "gm-3"] {
        text.push_str(&format!(
            "\n[[connections]]\nid = \"{id}\"\nprovider = \"google\"\napi_key = \"{}\"\n",
            upstream_key(id)
        ));
    }
    text.push_str(
        r#"
[[combos]]
name = "gemini"
targets = [
  { connection = "gm-1", model = "gemini-2.5-flash" },
  { connection = "gm-2", model = "gemini-2.5-flash" },
  { connection = "gm-3", model = "gemini-2.5-flash" },
]
"#,
    );
    text
}

async fn start(clock: &std::sync::Arc<ManualClock>) -> Harness {
    Harness::start_on_clock(gemini_pool, clock.clone()).await
}

fn hello() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
}

/// `POST /v1beta/models/{model}:{method}` with the client key in `x-goog-api-key`.
async fn call(
    harness: &Harness,
    path: &str,
    body: &Value,
) -> (u16, String, reqwest::header::HeaderMap) {
    let response = harness
        .client
        .post(harness.url(path))
        .header("x-goog-api-key", CLIENT_KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.text().await.unwrap(), headers)
}

fn asked(harness: &Harness, id: &str) -> u64 {
    harness.mock.stats().for_key(&upstream_key(id))
}

#[tokio::test]
async fn googles_paths_serve_json_both_stream_framings_tools_count_and_embeddings() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;

    // generateContent: Google's answer, usage from usageMetadata.
    let (status, body, _) = call(&harness, "/v1beta/models/gemini:generateContent", &hello()).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(answer["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("mock"));
    // The upstream got `models/{target model}:generateContent`, its own key in the header.
    let heads = harness.mock.recent_heads();
    let head = heads.last().unwrap();
    assert!(
        head.starts_with("POST /v1beta/models/gemini-2.5-flash:generateContent"),
        "{head}"
    );
    assert!(head.contains("x-goog-api-key: sk-mock-gm-"), "{head}");
    assert!(!head.contains(CLIENT_KEY), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );

    // The same under /v1/, the key as `?key=`, the model as `provider/model` with `%2F`.
    let response = harness
        .client
        .post(harness.url(&format!(
            "/v1/models/google%2Fgemini-2.5-flash:generateContent?key={CLIENT_KEY}"
        )))
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());

    // A stream with alt=sse: SSE events, each a GenerateContentResponse; SSE upstream.
    let (status, body, headers) = call(
        &harness,
        "/v1beta/models/gemini:streamGenerateContent?alt=sse",
        &hello(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert!(events.len() >= 2, "{body}");
    let text: String = events
        .iter()
        .filter_map(|event| event["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "This is a mock reply.");
    let head = harness.mock.recent_heads().last().unwrap().clone();
    assert!(
        head.starts_with("POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
        "{head}"
    );

    // Without alt=sse: one JSON array (SSE still upstream).
    let (status, body, headers) = call(
        &harness,
        "/v1beta/models/gemini:streamGenerateContent",
        &hello(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    let array: Vec<Value> = serde_json::from_str(&body).unwrap();
    let text: String = array
        .iter()
        .filter_map(|event| event["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "This is a mock reply.");
    assert!(array.last().unwrap()["usageMetadata"]["candidatesTokenCount"].is_u64());
    let head = harness.mock.recent_heads().last().unwrap().clone();
    assert!(head.contains(":streamGenerateContent?alt=sse"), "{head}");

    // A function call comes back as Google's functionCall part, untouched.
    let tools = json!({
        "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}}}]}],
    });
    let (status, body, _) = call(&harness, "/v1beta/models/gemini:generateContent", &tools).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let call_part = &answer["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call_part["name"], "lookup", "{answer}");
    assert_eq!(call_part["args"]["q"], "x", "{answer}");

    // countTokens, embedContent, batchEmbedContents.
    let (status, body, _) = call(&harness, "/v1beta/models/gemini:countTokens", &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["totalTokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let (status, body, _) = call(
        &harness,
        "/v1beta/models/gemini:embedContent",
        &json!({"content": {"parts": [{"text": "a"}]}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["embedding"]["values"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let (status, body, _) = call(
        &harness,
        "/v1beta/models/gemini:batchEmbedContents",
        &json!({"requests": [{"content": {"parts": [{"text": "a"}]}}, {"content": {"parts": [{"text": "b"}]}}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Usage charged from usageMetadata: the generate and stream requests journaled with tokens.
    harness.settle().await;
    let events = harness.journal_events().await;
    let succeeded: Vec<&Value> = events
        .iter()
        .filter(|event| event["kind"] == "request_succeeded" && event["combo"] == "gemini")
        .collect();
    let text = serde_json::to_string(&succeeded).unwrap();
    // The mock's answer says 6 candidate tokens; JSON and streams both charged.
    for stream in [false, true] {
        assert!(
            succeeded.iter().any(|event| event["stream"] == stream
                && event["tokens_in"].as_u64().unwrap() > 0
                && event["tokens_out"].as_u64().unwrap() > 0),
            "stream {stream}: {text}"
        );
    }

    // The models list and one model, Google's shape.
    let models: Value = harness
        .client
        .get(harness.url("/v1beta/models"))
        .header("x-goog-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"models/gemini"), "{models}");
    assert!(
        names.contains(&"models/google/gemini-2.5-flash"),
        "{models}"
    );
    let one: Value = harness
        .client
        .get(harness.url(&format!("/v1/models/gemini?key={CLIENT_KEY}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["name"], "models/gemini", "{one}");
    assert!(one["supportedGenerationMethods"].is_array());
    // An OpenAI client on /v1/models still gets OpenAI's list.
    let openai: Value = harness
        .client
        .get(harness.url("/v1/models"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(openai["object"], "list", "{openai}");
}

#[tokio::test]
async fn the_routers_own_errors_on_googles_paths_are_googles_shape() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    // An unknown client key.
    let response = harness
        .client
        .post(harness.url("/v1beta/models/gemini:generateContent?key=AIza-not-a-client"))
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], 401, "{body}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body}");
    let info = &body["error"]["details"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(info["reason"], "invalid_api_key");
    assert_eq!(info["domain"], "quotaroute");
    // An unknown model.
    let (status, body, _) = call(&harness, "/v1beta/models/nope:generateContent", &hello()).await;
    assert_eq!(status, 404, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND", "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "model_not_found");
    // Every key spent for the day: the spent pool's 429 with RetryInfo.
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: true,
            retry_delay_s: 22,
        })]);
    let mut last = (0, String::new(), reqwest::header::HeaderMap::new());
    for _ in 0..4 {
        last = call(&harness, "/v1beta/models/gemini:generateContent", &hello()).await;
        harness.settle().await;
    }
    let (status, body, headers) = last;
    assert_eq!(status, 429, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    let details = body["error"]["details"].as_array().unwrap();
    assert_eq!(details[0]["domain"], "quotaroute", "{body}");
    let retry = details
        .iter()
        .find(|detail| detail["@type"] == "type.googleapis.com/google.rpc.RetryInfo")
        .unwrap_or_else(|| panic!("{body}"));
    // Midnight Pacific is 14 hours away.
    let delay: u64 = retry["retryDelay"]
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!((13 * 3600..=14 * 3600).contains(&delay), "{body}");
    assert!(headers.contains_key("retry-after"));
}

#[tokio::test]
async fn a_key_spent_for_the_day_rests_until_midnight_pacific_on_googles_paths() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: true,
            retry_delay_s: 22,
        })
        .for_key(upstream_key("gm-1"))]);
    let served = || async {
        let (status, body, _) =
            call(&harness, "/v1beta/models/gemini:generateContent", &hello()).await;
        assert_eq!(status, 200, "{body}");
        assert!(!body.contains("RESOURCE_EXHAUSTED"), "{body}");
        harness.settle().await;
    };
    for _ in 0..12 {
        served().await;
        if asked(&harness, "gm-1") > 0 {
            break;
        }
    }
    assert_eq!(asked(&harness, "gm-1"), 1, "{:?}", harness.mock.stats());
    // Item 7: the lockout says its kind and when it ends, in /admin/lockouts and /metrics.
    let lockouts = harness.admin_get("/admin/lockouts").await;
    let lock = lockouts["lockouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|lock| lock["connection"] == "gm-1")
        .cloned()
        .unwrap_or_else(|| panic!("{lockouts}"));
    assert_eq!(lock["reason"], "quota_exhausted", "{lock}");
    assert_eq!(lock["quota_window"], "day", "{lock}");
    assert_eq!(lock["resets_at_ms"], TEN_AM_PACIFIC + 14 * HOUR, "{lock}");
    let metrics = harness.admin_text("/metrics").await;
    let line = |name: &str| {
        metrics
            .lines()
            .find(|line| {
                line.starts_with(name)
                    && line.contains("connection=\"gm-1\"")
                    && line.contains("window=\"day\"")
            })
            .unwrap_or_else(|| panic!("{name}: {metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    assert_eq!(line("quotaroute_quota_lockouts{"), 1.0);
    assert_eq!(
        line("quotaroute_quota_lockout_reset_seconds{"),
        14.0 * 3600.0
    );
    for hour in [0, 1, 6, 13] {
        clock.set(TEN_AM_PACIFIC + hour * HOUR + 60_000);
        for _ in 0..4 {
            served().await;
        }
    }
    assert_eq!(asked(&harness, "gm-1"), 1, "{:?}", harness.mock.stats());
    harness.mock.clear_rules();
    clock.set(TEN_AM_PACIFIC + 14 * HOUR + 1_000);
    for _ in 0..12 {
        served().await;
        if asked(&harness, "gm-1") > 1 {
            break;
        }
    }
    assert_eq!(asked(&harness, "gm-1"), 2, "{:?}", harness.mock.stats());
}

#[tokio::test]
async fn a_bad_key_on_googles_paths_is_disabled_after_one_answer_and_never_shown() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    harness.mock.set_rules(vec![
        Rule::always(Fault::GeminiKeyInvalid).for_key(upstream_key("gm-2")),
        Rule::always(Fault::GeminiKeySuspended).for_key(upstream_key("gm-3")),
    ]);
    for n in 0..12 {
        let path = if n % 2 == 0 {
            "/v1beta/models/gemini:generateContent"
        } else {
            "/v1beta/models/gemini:streamGenerateContent?alt=sse"
        };
        let (status, body, _) = call(&harness, path, &hello()).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            !body.contains("API key not valid") && !body.contains("suspended"),
            "{body}"
        );
        harness.settle().await;
    }
    assert_eq!(asked(&harness, "gm-2"), 1, "{:?}", harness.mock.stats());
    assert_eq!(asked(&harness, "gm-3"), 1, "{:?}", harness.mock.stats());
    let state = harness.admin_get("/admin/state").await;
    for id in ["gm-2", "gm-3"] {
        let disabled: &Value = &connection(&state, id)["disabled"];
        assert_eq!(disabled["reason"], "auth", "{id}: {disabled}");
    }
}

/// A conversation's turns keep to the account whose `thoughtSignature` they carry (Gemini CLI
/// sends them back; any other account answers 400 "Corrupted thought signature."): seen
/// failing with Gemini CLI before Gemini requests had an affinity prefix.
#[tokio::test]
async fn a_conversations_thought_signatures_go_back_to_the_account_that_made_them() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    for round in 0..6 {
        let system = format!("You are agent {round}. {}", "Be brief. ".repeat(500));
        let first = json!({
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
            "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}},
        });
        let (status, body, _) =
            call(&harness, "/v1beta/models/gemini:generateContent", &first).await;
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        let parts = answer["candidates"][0]["content"]["parts"].clone();
        assert!(
            parts
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["thoughtSignature"].is_string()),
            "{answer}"
        );
        let mut second = first.clone();
        let contents = second["contents"].as_array_mut().unwrap();
        contents.push(json!({"role": "model", "parts": parts}));
        contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "y"}}}]}));
        let (status, body, _) =
            call(&harness, "/v1beta/models/gemini:generateContent", &second).await;
        assert_eq!(status, 200, "round {round}: {body}");
        harness.settle().await;
    }
}

/// A Vertex AI publisher URL (behaviour §15): the key command's token goes as Bearer, never in
/// `x-goog-api-key`, to `…/publishers/google/models/{model}:{method}`.
#[tokio::test]
async fn a_vertex_ai_account_gets_its_token_as_bearer() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = Harness::start_on_clock(
        |text| {
            let base = text
                .lines()
                .find_map(|line| {
                    line.strip_prefix("base_url = \"")
                        .map(|rest| rest.trim_end_matches("/v1\"").to_owned())
                })
                .unwrap();
            format!(
                "{}\n[[providers]]\nname = \"vertex\"\nformat = \"gemini\"\nbase_url = \"{base}/v1/projects/demo/locations/us-central1/publishers/google\"\n\n[[connections]]\nid = \"vx-1\"\nprovider = \"vertex\"\napi_key_command = [\"/bin/echo\", \"ya29.vertex-token\"]\n\n[[combos]]\nname = \"vertex\"\ntargets = [{{ connection = \"vx-1\", model = \"gemini-2.5-flash\" }}]\n",
                text
            )
        },
        clock.clone(),
    )
    .await;
    let (status, body, _) = call(&harness, "/v1beta/models/vertex:generateContent", &hello()).await;
    assert_eq!(status, 200, "{body}");
    let head = harness.mock.recent_heads().last().unwrap().clone();
    assert!(
        head.starts_with(
            "POST /v1/projects/demo/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
        ),
        "{head}"
    );
    assert!(
        head.contains("authorization: Bearer ya29.vertex-token"),
        "{head}"
    );
    assert!(!head.contains("x-goog-api-key"), "{head}");
    assert_eq!(harness.mock.stats().for_key("ya29.vertex-token"), 1);
}

/// The account that made a turn's `thoughtSignature`s is locked: the turn goes to another,
/// which refuses them (400 "Corrupted thought signature."); it is tried again there without
/// them and served — the client never sees the 400.
#[tokio::test]
async fn a_turn_whose_signatures_maker_is_locked_is_served_elsewhere_without_them() {
    let clock = ManualClock::new(TEN_AM_PACIFIC);
    let harness = start(&clock).await;
    let system = "Be brief. ".repeat(500);
    let first = json!({
        "systemInstruction": {"parts": [{"text": system}]},
        "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}},
    });
    let (status, body, headers) =
        call(&harness, "/v1beta/models/gemini:generateContent", &first).await;
    assert_eq!(status, 200, "{body}");
    let maker = headers["x-quotaroute-connection"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = serde_json::from_str(&body).unwrap();
    let mut second = first.clone();
    let contents = second["contents"].as_array_mut().unwrap();
    contents.push(json!({"role": "model", "parts": answer["candidates"][0]["content"]["parts"]}));
    contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "y"}}}]}));
    harness.settle().await;
    // The maker's minute quota runs out.
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 30,
        })
        .for_key(upstream_key(&maker))]);
    let (status, body, headers) =
        call(&harness, "/v1beta/models/gemini:generateContent", &second).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(headers["x-quotaroute-connection"].to_str().unwrap(), maker);
    assert!(!body.contains("signature"), "{body}");
    // The retry went without the signatures.
    let bodies = harness.mock.recent_bodies();
    let (_, last) = bodies.last().unwrap();
    assert!(!String::from_utf8_lossy(last).contains("thoughtSignature"));
}
