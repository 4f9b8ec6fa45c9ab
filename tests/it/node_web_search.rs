//! Web search carried through the node (behaviour §14): each client's search tool reaches
//! another API's host as that host's own tool, and the host's searches and citations come back
//! in the client's shape, streamed — a Chat client's `delta.annotations`, a Messages client's
//! search blocks and `citations_delta`, a Gemini client's `groundingMetadata` in bytes — over
//! real HTTP against the mock, which answers search as each provider does.

use serde_json::{json, Value};

use crate::node_gemini_native::gemini_pool;
use crate::support::{header, Harness, CLIENT_KEY};

const SOURCE: &str = "https://example.org/quotaroute-mock";

/// The `data:` payloads of an SSE body (`[DONE]` left out).
fn data_of(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The body the mock was last asked with.
fn last_upstream_body(harness: &Harness) -> Value {
    let (_, body) = harness.mock.recent_bodies().pop().unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_stream_on_a_claude_account_carries_the_citation_as_annotations() {
    let harness = Harness::start().await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "claude", "stream": true, "web_search_options": {},
                   "messages": [{"role": "user", "content": "what does the mock say?"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "chat>messages"
    );
    let upstream = last_upstream_body(&harness);
    assert_eq!(
        upstream["tools"][0]["type"], "web_search_20250305",
        "{upstream}"
    );
    let chunks = data_of(&response.text().await.unwrap());
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let annotations = chunks
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["annotations"].as_array())
        .unwrap_or_else(|| panic!("no annotations: {chunks:?}"));
    let citation = &annotations[0]["url_citation"];
    assert_eq!(citation["url"], SOURCE);
    let (start, end) = (
        citation["start_index"].as_u64().unwrap() as usize,
        citation["end_index"].as_u64().unwrap() as usize,
    );
    let cited: String = content.chars().skip(start).take(end - start).collect();
    assert_eq!(cited, " The mock cites one source.", "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_stream_on_gemini_keys_shows_the_search_and_cites_it() {
    let harness = Harness::start_editing(gemini_pool).await;
    let response = harness
        .client
        .post(harness.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "gemini", "max_tokens": 64, "stream": true,
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
            "messages": [{"role": "user", "content": "what does the mock say?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "messages>gemini"
    );
    assert_eq!(
        last_upstream_body(&harness)["tools"],
        json!([{"googleSearch": {}}])
    );
    let events = data_of(&response.text().await.unwrap());
    let block = |kind: &str| {
        events
            .iter()
            .find(|e| e["content_block"]["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind}: {events:?}"))
    };
    let call = block("server_tool_use");
    let result = block("web_search_tool_result");
    assert_eq!(
        result["content_block"]["tool_use_id"],
        call["content_block"]["id"]
    );
    assert_eq!(result["content_block"]["content"][0]["url"], SOURCE);
    let query = events
        .iter()
        .find(|e| e["index"] == call["index"] && e["delta"]["type"] == "input_json_delta")
        .unwrap();
    assert_eq!(
        query["delta"]["partial_json"],
        r#"{"query":"quotaroute mock"}"#
    );
    let citation = events
        .iter()
        .find(|e| e["delta"]["type"] == "citations_delta")
        .unwrap_or_else(|| panic!("no citation: {events:?}"));
    assert_eq!(citation["delta"]["citation"]["url"], SOURCE);
    // Google's support spans the whole text: the passage is all of it.
    let text: String = events
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert!(text.starts_with("This is a mock reply."), "{text}");
    assert_eq!(citation["delta"]["citation"]["cited_text"], text.as_str());
    assert_eq!(
        events[events.iter().position(|e| e == citation).unwrap()]["index"],
        events
            .iter()
            .find(|e| e["delta"]["type"] == "text_delta")
            .unwrap()["index"]
    );
    assert_eq!(events.last().unwrap()["type"], "message_stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_client_on_a_claude_account_gets_grounding_json_and_stream() {
    let harness = Harness::start_editing(gemini_pool).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "what does the mock say?"}]}],
                      "tools": [{"googleSearch": {}}]});
    let ask = |method: &str| {
        harness
            .client
            .post(harness.url(&format!("/v1beta/models/claude:{method}")))
            .header("x-goog-api-key", CLIENT_KEY)
            .json(&body)
            .send()
    };
    let response = ask("generateContent").await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "gemini>messages"
    );
    assert_eq!(
        last_upstream_body(&harness)["tools"][0]["type"],
        "web_search_20250305"
    );
    let whole: Value = response.json().await.unwrap();
    let streamed = ask("streamGenerateContent?alt=sse").await.unwrap();
    assert_eq!(streamed.status(), 200);
    let chunks = data_of(&streamed.text().await.unwrap());
    for (label, answers) in [("json", vec![whole]), ("stream", chunks)] {
        let text: String = answers
            .iter()
            .flat_map(|a| {
                a["candidates"][0]["content"]["parts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|part| part["text"].as_str().map(str::to_owned))
            .collect();
        let grounding = answers
            .iter()
            .find_map(|a| a["candidates"][0].get("groundingMetadata"))
            .unwrap_or_else(|| panic!("{label}: no grounding: {answers:?}"));
        assert_eq!(
            grounding["webSearchQueries"],
            json!(["quotaroute mock"]),
            "{label}"
        );
        assert_eq!(
            grounding["groundingChunks"][0]["web"]["uri"], SOURCE,
            "{label}"
        );
        let support = &grounding["groundingSupports"][0];
        let (start, end) = (
            support["segment"]["startIndex"].as_u64().unwrap() as usize,
            support["segment"]["endIndex"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            &text[start..end],
            " The mock cites one source.",
            "{label}: {text}"
        );
        assert_eq!(support["segment"]["text"], " The mock cites one source.");
        assert_eq!(support["groundingChunkIndices"], json!([0]), "{label}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_search_counts_as_web_search_when_a_combo_chooses_who_can_carry_it() {
    // A Responses client's search on a combo of a chat-only host and a Gemini key: the key is
    // chosen (it runs Google Search) and nothing is left out.
    let harness = Harness::start_editing(|text| {
        let text = gemini_pool(text).replacen(
            "name = \"openai\"\nformat = \"openai\"\n",
            "name = \"openai\"\nformat = \"openai\"\napis = [\"chat\"]\n",
            1,
        );
        text + r#"
[[combos]]
name = "searchers"
targets = [
  { connection = "oa-1", model = "gpt-4o-mini", weight = 1 },
  { connection = "gm-1", model = "gemini-2.5-flash", weight = 1 },
]
"#
    })
    .await;
    for _ in 0..4 {
        let response = harness
            .post_json(
                "/v1/responses",
                json!({"model": "searchers", "input": "news?", "tools": [{"type": "web_search"}]}),
            )
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "x-quotaroute-translated"),
            "responses>gemini"
        );
        assert_eq!(header(&response, "x-quotaroute-dropped"), "");
        let value: Value = response.json().await.unwrap();
        let output = value["output"].as_array().unwrap();
        assert!(
            output.iter().any(|item| item["type"] == "web_search_call"),
            "{value}"
        );
    }
    // A Gemini client's search on a chat-only host alone cannot be carried.
    let response = harness
        .client
        .post(harness.url("/v1beta/models/openai%2Fgpt-4o-mini:generateContent"))
        .header("x-goog-api-key", CLIENT_KEY)
        .json(
            &json!({"contents": [{"role": "user", "parts": [{"text": "news?"}]}],
                      "tools": [{"googleSearch": {}}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("googleSearch"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_accumulate_translated_search_streams_with_their_citations() {
    use crate::support::clients::{clean_command, client_home, run_bounded, CLIENT_TIMEOUT};
    let python = match std::env::var("QUOTAROUTE_SDK_PYTHON") {
        Ok(path) => std::path::PathBuf::from(path),
        Err(_) => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python"),
    };
    if !python.exists() {
        eprintln!("SDK venv not installed (.ci/run creates .venv-sdk): nothing to run");
        assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        return;
    }
    let harness = Harness::start_editing(gemini_pool).await;
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_search.py");
    let home = client_home("qr-python-search-");
    let mut command = clean_command(&python);
    command
        .env("HOME", home.path())
        .arg(&script)
        .arg(&harness.base)
        .arg(CLIENT_KEY);
    let run = tokio::task::spawn_blocking(move || run_bounded(command, CLIENT_TIMEOUT))
        .await
        .unwrap();
    assert!(run.success(), "sdk_search.py: {}", run.describe());
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let cited = " The mock cites one source.";
    // openai-python's chat stream on an Anthropic account: the annotations chunk.
    let chat = &out["chat_stream"];
    assert_eq!(chat["urls"], json!([SOURCE]), "{out}");
    assert_eq!(chat["cited"], json!([cited]));
    assert_eq!(chat["final"], chat["content"]);
    // anthropic-python's messages.stream on Gemini keys: the search blocks and the citation.
    let messages = &out["messages_stream"];
    assert_eq!(
        messages["types"],
        json!(["text", "server_tool_use", "web_search_tool_result"]),
        "{out}"
    );
    assert_eq!(messages["query"], json!({"query": "quotaroute mock"}));
    assert_eq!(messages["results"], json!([SOURCE]));
    assert_eq!(messages["citation_events"], json!([SOURCE]));
    assert_eq!(messages["cited"], json!([messages["text"]]));
    // google-genai on an Anthropic account: grounding, whole and streamed, spans in bytes.
    for label in ["genai", "genai_stream"] {
        let grounding = &out[label];
        assert_eq!(
            grounding["queries"],
            json!(["quotaroute mock"]),
            "{label}: {out}"
        );
        assert_eq!(grounding["uris"], json!([SOURCE]), "{label}");
        assert_eq!(grounding["span"], cited, "{label}");
        assert_eq!(grounding["segment"], cited, "{label}");
        assert_eq!(grounding["indices"], json!([0]), "{label}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_web_search_on_an_openai_account_goes_by_its_responses_api() {
    let harness = Harness::start().await;
    let ask = |body: Value| {
        harness
            .client
            .post(harness.url("/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    let response = ask(json!({"model": "team", "max_tokens": 64, "stream": true,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
        "messages": [{"role": "user", "content": "what does the mock say?"}]}))
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    // Chat Completions, the first API the account serves, runs no search: Responses does.
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "messages>responses"
    );
    let (path, body) = harness.mock.recent_bodies().pop().unwrap();
    assert!(path.ends_with("/responses"), "{path}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["tools"], json!([{"type": "web_search"}]), "{body}");
    // OpenAI's search and its citation, in Anthropic's stream shape.
    let events = data_of(&response.text().await.unwrap());
    let call = events
        .iter()
        .find(|e| e["content_block"]["type"] == "server_tool_use")
        .unwrap_or_else(|| panic!("no search: {events:?}"));
    let result = events
        .iter()
        .find(|e| e["content_block"]["type"] == "web_search_tool_result")
        .unwrap();
    assert_eq!(
        result["content_block"]["tool_use_id"],
        call["content_block"]["id"]
    );
    assert!(call["index"].as_u64() < result["index"].as_u64());
    let text: String = events
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    let citation = events
        .iter()
        .find(|e| e["delta"]["type"] == "citations_delta")
        .unwrap_or_else(|| panic!("no citation: {events:?}"));
    assert_eq!(citation["delta"]["citation"]["url"], SOURCE);
    assert_eq!(citation["delta"]["citation"]["cited_text"], text.as_str());
    // Without search the same client still goes by Chat Completions.
    let plain = ask(json!({"model": "team", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}]}))
    .await
    .unwrap();
    assert_eq!(header(&plain, "x-quotaroute-translated"), "messages>chat");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_client_on_an_openai_account_gets_openais_search_as_grounding() {
    let harness = Harness::start_editing(gemini_pool).await;
    let response = harness
        .client
        .post(harness.url("/v1beta/models/team:generateContent"))
        .header("x-goog-api-key", CLIENT_KEY)
        .json(
            &json!({"contents": [{"role": "user", "parts": [{"text": "news?"}]}],
                      "tools": [{"googleSearch": {}}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-quotaroute-translated"),
        "gemini>responses"
    );
    let answer: Value = response.json().await.unwrap();
    let grounding = &answer["candidates"][0]["groundingMetadata"];
    assert_eq!(
        grounding["webSearchQueries"],
        json!(["quotaroute mock"]),
        "{answer}"
    );
    assert_eq!(
        grounding["groundingChunks"],
        json!([{"web": {"uri": SOURCE, "title": "The mock's source"}}])
    );
    let text = answer["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        grounding["groundingSupports"][0]["segment"]["endIndex"],
        text.len()
    );
}
