//! A Gemini answer's `thoughtSignature`s sealed to the connection that made them (behaviour
//! §15), over real HTTP with the mock speaking Google's API — which refuses a signature its
//! key's account did not make with Google's 400 "Corrupted thought signature.": every signature
//! a client sees (JSON, SSE, the JSON-array stream) is the router's `qrg1…` seal; the next turn
//! gives the exact original back to its maker and, on any other key, leaves it out before
//! sending (no 400, no retry). A conversation's turns keep to one key and read its prompt cache.

use quotaroute::actors::ManualClock;
use quotaroute_mock::{gemini_thought_signature, Fault, Rule};
use serde_json::{json, Value};

use crate::node_gemini_native::gemini_pool;
use crate::support::{upstream_key, Harness, CLIENT_KEY};

/// 2026-12-05T18:00:00Z.
const TEN_AM_PACIFIC: u64 = 1_796_493_600_000;

const KEYS: [&str; 3] = ["gm-1", "gm-2", "gm-3"];

async fn start() -> Harness {
    Harness::start_on_clock(gemini_pool, ManualClock::new(TEN_AM_PACIFIC)).await
}

/// A first turn that thinks and calls a tool, its prefix long enough to name its conversation.
fn first_turn() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "Be brief. ".repeat(500)}]},
        "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}},
    })
}

/// The next turn: `turn`, the model's `parts` as the client got them, the tool's result.
fn next_turn(turn: &Value, parts: &[Value]) -> Value {
    let mut next = turn.clone();
    let contents = next["contents"].as_array_mut().unwrap();
    contents.push(json!({"role": "model", "parts": parts}));
    contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "y"}}}]}));
    next
}

/// `POST {path}` with the client key in `x-goog-api-key`: status, body, serving connection.
async fn call(harness: &Harness, path: &str, body: &Value) -> (u16, String, String) {
    let response = harness
        .client
        .post(harness.url(path))
        .header("x-goog-api-key", CLIENT_KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let connection = response
        .headers()
        .get("x-quotaroute-connection")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, response.text().await.unwrap(), connection)
}

/// Every answer in a body of any framing: one JSON object, SSE `data:` lines, one JSON array.
fn answers(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with("data:") {
        return body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| serde_json::from_str(data.trim()).unwrap())
            .collect();
    }
    match serde_json::from_str(body).unwrap() {
        Value::Array(items) => items,
        one => vec![one],
    }
}

/// The model's parts over every answer of a body.
fn parts(body: &str) -> Vec<Value> {
    answers(body)
        .iter()
        .flat_map(|answer| {
            answer["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

fn signatures(parts: &[Value]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|part| part["thoughtSignature"].as_str().map(str::to_owned))
        .collect()
}

fn asked(harness: &Harness) -> Vec<u64> {
    KEYS.iter()
        .map(|id| harness.mock.stats().for_key(&upstream_key(id)))
        .collect()
}

/// What the upstream got last.
fn last_upstream_body(harness: &Harness) -> String {
    let bodies = harness.mock.recent_bodies();
    String::from_utf8_lossy(&bodies.last().unwrap().1).into_owned()
}

/// Each signature the client sees is the router's seal: not the account's own, none of the
/// keys in it, valid base64 (Google's clients hold signatures as bytes).
fn assert_sealed(signatures: &[String], maker: &str) {
    use base64::Engine;
    assert!(!signatures.is_empty());
    let original = gemini_thought_signature(&upstream_key(maker));
    for signature in signatures {
        assert!(signature.starts_with("qrg1"), "{signature}");
        assert_ne!(signature, &original);
        assert!(!signature.contains(&original), "{signature}");
        base64::engine::general_purpose::STANDARD
            .decode(signature)
            .unwrap();
        let decoded = String::from_utf8_lossy(
            &base64::engine::general_purpose::STANDARD
                .decode(signature)
                .unwrap(),
        )
        .into_owned();
        for key in KEYS.map(upstream_key) {
            assert!(!decoded.contains(&key) && !signature.contains(&key));
        }
        assert!(!decoded.contains(CLIENT_KEY) && !signature.contains(CLIENT_KEY));
    }
}

/// Turn two forced off its maker (the maker's minute quota runs out): the turn is served by
/// another key with the maker's signatures left out before sending — the mock would refuse
/// them with 400 — so the serving key is asked once: no 400, no retry.
#[tokio::test]
async fn a_turn_forced_to_another_key_goes_without_the_signatures_and_is_not_refused() {
    let harness = start().await;
    let first = first_turn();
    let (status, body, maker) =
        call(&harness, "/v1beta/models/gemini:generateContent", &first).await;
    assert_eq!(status, 200, "{body}");
    let first_parts = parts(&body);
    assert_sealed(&signatures(&first_parts), &maker);
    harness.settle().await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 30,
        })
        .for_key(upstream_key(&maker))]);
    let before = asked(&harness);
    let second = next_turn(&first, &first_parts);
    let (status, body, served) =
        call(&harness, "/v1beta/models/gemini:generateContent", &second).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(served, maker);
    let after = asked(&harness);
    let new: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let index = |id: &str| KEYS.iter().position(|k| *k == id).unwrap();
    // The maker's 429, then one request on the key that served: no 400 and no retry.
    assert_eq!(new[index(&maker)], 1, "{new:?}");
    assert_eq!(new[index(&served)], 1, "{new:?}");
    assert_eq!(new.iter().sum::<u64>(), 2, "{new:?}");
    let upstream = last_upstream_body(&harness);
    assert!(!upstream.contains("thoughtSignature"), "{upstream}");
    assert!(!upstream.contains("qrg1"), "{upstream}");
    // The answer's own signature is sealed to the key that served it.
    assert_sealed(&signatures(&parts(&body)), &served);
}

/// The same connection gets the exact original signature back, whatever framing the client
/// read the first turn in; the mock accepts it (it refuses any other).
#[tokio::test]
async fn the_maker_gets_its_exact_signature_back_from_every_framing() {
    let harness = start().await;
    for (round, path) in [
        "/v1beta/models/gemini:generateContent",
        "/v1beta/models/gemini:streamGenerateContent?alt=sse",
        "/v1beta/models/gemini:streamGenerateContent",
    ]
    .into_iter()
    .enumerate()
    {
        let mut first = first_turn();
        first["contents"][0]["parts"][0]["text"] =
            json!(format!("mock-tool-call:lookup {{\"q\":\"{round}\"}}"));
        first["systemInstruction"]["parts"][0]["text"] =
            json!(format!("Agent {round}. {}", "Be brief. ".repeat(500)));
        let (status, body, maker) = call(&harness, path, &first).await;
        assert_eq!(status, 200, "{path}: {body}");
        let first_parts = parts(&body);
        assert_sealed(&signatures(&first_parts), &maker);
        harness.settle().await;
        let before = asked(&harness);
        let second = next_turn(&first, &first_parts);
        let (status, body, served) =
            call(&harness, "/v1beta/models/gemini:generateContent", &second).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(served, maker, "{path}");
        let new: u64 = asked(&harness).iter().sum::<u64>() - before.iter().sum::<u64>();
        assert_eq!(new, 1, "{path}: one upstream request");
        let upstream = last_upstream_body(&harness);
        let original = gemini_thought_signature(&upstream_key(&maker));
        let sent: Value = serde_json::from_str(&upstream).unwrap();
        let sent_signatures = signatures(
            &sent["contents"][1]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        assert!(!sent_signatures.is_empty(), "{path}: {upstream}");
        assert!(
            sent_signatures.iter().all(|s| *s == original),
            "{path}: {sent_signatures:?} vs {original}"
        );
        assert!(!upstream.contains("qrg1"), "{path}");
        harness.settle().await;
    }
}

/// Three Gemini conversations interleaved on a pool of three keys: each keeps to the key its
/// first turn went to, and every later turn reads that key's prompt cache.
#[tokio::test]
async fn a_gemini_conversation_keeps_to_one_key_and_reads_its_cache() {
    let harness = start().await;
    let mut turns: Vec<Value> = (0..3)
        .map(|agent| {
            json!({
                "systemInstruction": {"parts": [{"text": format!("You are agent {agent}. {}", "Answer briefly. ".repeat(400))}]},
                "contents": [{"role": "user", "parts": [{"text": format!("task {agent}: begin")}]}],
            })
        })
        .collect();
    let mut homes: Vec<Option<String>> = vec![None; 3];
    for round in 0..4 {
        for agent in 0..3 {
            let (status, body, served) = call(
                &harness,
                "/v1beta/models/gemini:generateContent",
                &turns[agent],
            )
            .await;
            assert_eq!(status, 200, "{body}");
            match &homes[agent] {
                None => homes[agent] = Some(served.clone()),
                Some(home) => assert_eq!(&served, home, "agent {agent}, turn {round}"),
            }
            let answer: Value = serde_json::from_str(&body).unwrap();
            let cached = answer["usageMetadata"]["cachedContentTokenCount"]
                .as_u64()
                .unwrap_or(0);
            if round > 0 {
                assert!(cached > 1000, "agent {agent}, turn {round}: {answer}");
            }
            let reply = answer["candidates"][0]["content"].clone();
            let contents = turns[agent]["contents"].as_array_mut().unwrap();
            contents.push(reply);
            contents
                .push(json!({"role": "user", "parts": [{"text": format!("turn {round}: go on")}]}));
            harness.settle().await;
        }
    }
}

/// A Gemini client on Anthropic accounts (behaviour §14): the account's thinking block comes
/// to the client encrypted in a `thoughtSignature` (`qrt1…`, nothing of it in clear); the next
/// turn goes to that account and gets the exact block back (the mock refuses any other); with
/// that account locked the turn is served by another without it, asked once.
#[tokio::test]
async fn an_anthropic_thinking_block_goes_round_a_gemini_client_only_to_its_account() {
    let harness = start().await;
    let first = json!({
        "systemInstruction": {"parts": [{"text": "Be brief. ".repeat(500)}]},
        "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:lookup {\"q\":\"x\"}"}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}}}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 4096}},
    });
    let path = "/v1beta/models/claude:generateContent";
    let (status, body, maker) = call(&harness, path, &first).await;
    assert_eq!(status, 200, "{body}");
    assert!(maker.starts_with("an-"), "{maker}");
    let first_parts = parts(&body);
    let carried = signatures(&first_parts);
    assert_eq!(carried.len(), 1, "{body}");
    assert!(carried[0].starts_with("qrt1"), "{}", carried[0]);
    assert!(!body.contains(&upstream_key(&maker)));
    harness.settle().await;

    // Back to its account: the block is restored and accepted.
    let second = next_turn(&first, &first_parts);
    let before: u64 = asked_all(&harness);
    let (status, body, served) = call(&harness, path, &second).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
    assert_eq!(asked_all(&harness), before + 1);
    let upstream: Value = serde_json::from_str(&last_upstream_body(&harness)).unwrap();
    let assistant = &upstream["messages"][1]["content"];
    assert_eq!(assistant[0]["type"], "thinking", "{upstream}");
    assert!(upstream.get("thinking").is_some(), "{upstream}");
    harness.settle().await;

    // Its account locked: served by another, without the block, asked once.
    harness.mock.set_rules(vec![Rule::always(Fault::Status429 {
        reset: quotaroute_mock::ResetForm::RetryAfterSeconds(3600),
    })
    .for_key(upstream_key(&maker))]);
    let before: Vec<u64> = ["an-1", "an-2", "an-3"]
        .iter()
        .map(|id| harness.mock.stats().for_key(&upstream_key(id)))
        .collect();
    let (status, body, served) = call(&harness, path, &second).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(served, maker);
    let index = ["an-1", "an-2", "an-3"]
        .iter()
        .position(|id| *id == served)
        .unwrap();
    assert_eq!(
        harness.mock.stats().for_key(&upstream_key(&served)),
        before[index] + 1
    );
    let upstream = last_upstream_body(&harness);
    assert!(
        !upstream.contains("\"thinking\",\"thinking\""),
        "{upstream}"
    );
    assert!(!upstream.contains("\"type\":\"thinking\""), "{upstream}");

    // Streamed (both framings), the block is carried and opens the same way.
    harness.mock.clear_rules();
    for stream in [
        "/v1beta/models/claude:streamGenerateContent?alt=sse",
        "/v1beta/models/claude:streamGenerateContent",
    ] {
        let (status, body, maker) = call(&harness, stream, &first).await;
        assert_eq!(status, 200, "{body}");
        let streamed = parts(&body);
        let carried = signatures(&streamed);
        assert_eq!(carried.len(), 1, "{stream}: {body}");
        assert!(carried[0].starts_with("qrt1"), "{stream}");
        assert!(!body.contains("\"signature\""), "{stream}: {body}");
        harness.settle().await;
        let (status, body, served) = call(&harness, path, &next_turn(&first, &streamed)).await;
        assert_eq!(status, 200, "{stream}: {body}");
        assert_eq!(served, maker, "{stream}");
        let upstream: Value = serde_json::from_str(&last_upstream_body(&harness)).unwrap();
        assert_eq!(
            upstream["messages"][1]["content"][0]["type"], "thinking",
            "{stream}: {upstream}"
        );
        harness.settle().await;
    }
}

fn asked_all(harness: &Harness) -> u64 {
    let stats = harness.mock.stats();
    ["an-1", "an-2", "an-3", "gm-1", "gm-2", "gm-3"]
        .iter()
        .map(|id| stats.for_key(&upstream_key(id)))
        .sum()
}

/// A Messages client (Claude Code's API) on Gemini keys: the account's signature comes in a
/// thinking block, sealed (`qrg1…`); the next turn gives the exact original back to the call it
/// signed on that key (the mock refuses any other); with the key locked the turn is served by
/// another without it, asked once.
#[tokio::test]
async fn a_messages_client_carries_a_gemini_signature_back_only_to_its_key() {
    let harness = start().await;
    let first = json!({
        "model": "gemini", "max_tokens": 1024,
        "system": "Be brief. ".repeat(500),
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "mock-tool-call:lookup {\"q\":\"x\"}"}],
    });
    let (status, body, maker) = send_messages(&harness, first.clone()).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let content = answer["content"].as_array().unwrap().clone();
    let signed: Vec<&str> = content
        .iter()
        .filter_map(|block| block["signature"].as_str())
        .filter(|signature| !signature.is_empty())
        .collect();
    assert_eq!(signed.len(), 1, "{answer}");
    assert_sealed(&[signed[0].to_owned()], &maker);
    let call_id = content
        .iter()
        .find(|block| block["type"] == "tool_use")
        .unwrap()["id"]
        .clone();
    let mut second = first.clone();
    let messages = second["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": content}));
    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "y"}]}));
    harness.settle().await;

    let before: u64 = asked(&harness).iter().sum();
    let (status, body, served) = send_messages(&harness, second.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, maker);
    assert_eq!(asked(&harness).iter().sum::<u64>(), before + 1);
    let upstream: Value = serde_json::from_str(&last_upstream_body(&harness)).unwrap();
    let original = gemini_thought_signature(&upstream_key(&maker));
    let sent = signatures(upstream["contents"][1]["parts"].as_array().unwrap());
    assert_eq!(sent, [original], "{upstream}");
    harness.settle().await;

    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 30,
        })
        .for_key(upstream_key(&maker))]);
    let before = asked(&harness);
    let (status, body, served) = send_messages(&harness, second).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(served, maker);
    let index = KEYS.iter().position(|id| *id == served).unwrap();
    assert_eq!(
        asked(&harness)[index],
        before[index] + 1,
        "no 400, no retry"
    );
    assert!(!last_upstream_body(&harness).contains("thoughtSignature"));

    // Streamed, the signature comes sealed in its `signature_delta`.
    harness.mock.clear_rules();
    let mut streamed = first.clone();
    streamed["stream"] = json!(true);
    let (status, body, _) = send_messages(&harness, streamed).await;
    assert_eq!(status, 200, "{body}");
    let deltas: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| event["delta"]["type"] == "signature_delta")
        .collect();
    assert_eq!(deltas.len(), 1, "{body}");
    assert!(
        deltas[0]["delta"]["signature"]
            .as_str()
            .unwrap()
            .starts_with("qrg1"),
        "{body}"
    );
    assert!(!body.contains("qrgplain1"), "{body}");
}

/// `POST /v1/messages` as a Messages client: status, body, serving connection.
async fn send_messages(harness: &Harness, body: Value) -> (u16, String, String) {
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let served = response
        .headers()
        .get("x-quotaroute-connection")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, response.text().await.unwrap(), served)
}

/// A combo of a Gemini key first and an Anthropic key behind it.
fn mixed_pool(text: String) -> String {
    let mut text = gemini_pool(text);
    text.push_str(
        r#"
[[combos]]
name = "mixed"
strategy = "priority"
targets = [
  { connection = "gm-1", model = "gemini-2.5-flash" },
  { connection = "an-1", model = "claude-3-5-haiku" },
]
"#,
    );
    text
}

/// A Messages client on a combo of a Gemini and an Anthropic key: the thinking blocks a Gemini
/// answer handed it (a sealed `qrg1…` signature, thought text with none) are left out when its
/// next turn goes as is to the Anthropic key, which could read none of them; the turn is served
/// there at once, not refused for an invalid signature.
#[tokio::test]
async fn a_messages_turn_leaves_gemini_thinking_out_when_it_goes_to_an_anthropic_key() {
    let harness = Harness::start_on_clock(mixed_pool, ManualClock::new(TEN_AM_PACIFIC)).await;
    let first = json!({
        "model": "mixed", "max_tokens": 1024,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "mock-tool-call:lookup {\"q\":\"x\"}"}],
    });
    let (status, body, served) = send_messages(&harness, first.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, "gm-1");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let content = answer["content"].as_array().unwrap().clone();
    assert!(
        content.iter().any(|block| block["type"] == "thinking"
            && block["signature"].as_str().unwrap().starts_with("qrg1")),
        "{answer}"
    );
    let call_id = content
        .iter()
        .find(|block| block["type"] == "tool_use")
        .unwrap()["id"]
        .clone();
    let mut second = first;
    let messages = second["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": content}));
    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "y"}]}));
    harness.settle().await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::GeminiQuota {
            per_day: false,
            retry_delay_s: 30,
        })
        .for_key(upstream_key("gm-1"))]);
    let before = harness.mock.stats().for_key(&upstream_key("an-1"));

    let (status, body, served) = send_messages(&harness, second).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(served, "an-1");
    assert_eq!(
        harness.mock.stats().for_key(&upstream_key("an-1")),
        before + 1,
        "asked once: nothing refused"
    );
    let upstream = last_upstream_body(&harness);
    assert!(!upstream.contains("qrg1"), "{upstream}");
    let upstream: Value = serde_json::from_str(&upstream).unwrap();
    let history = upstream["messages"][1]["content"].as_array().unwrap();
    assert!(
        history.iter().all(|block| block["type"] != "thinking"),
        "{upstream}"
    );
    assert!(history.iter().any(|block| block["type"] == "tool_use"));
    // Anthropic wants a tool loop's last assistant turn to open with thinking when thinking is
    // on: with that turn's thinking left out, the turn goes without thinking.
    assert!(upstream.get("thinking").is_none(), "{upstream}");
}
