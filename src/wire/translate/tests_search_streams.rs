//! Web search across streams and Google Search grounding (behaviour §14): each upstream's
//! searches and citations reach each client in its own shape — Chat's `delta.annotations`
//! chunk, Messages' `server_tool_use` / `web_search_tool_result` blocks and `citations_delta`,
//! Responses' `web_search_call` items and `annotation.added`, Gemini's `groundingMetadata`
//! (byte indices) — and the search tool of each request reaches each host's own.

use serde_json::{json, Value};

use super::tests::{data_of, refused, translate_stream, up};
use super::tests_citations::{anthropic_answer, anthropic_stream};
use super::{translate_answer, Api, Direction, Echo};

const URL: &str = "https://example.org/paris";
/// A text with a two-byte character before its cited span: bytes 11..40, characters 10..39.
const TEXT: &str = "Zoë says: Paris has 2.1 million people.";
const CITED: &str = "Paris has 2.1 million people.";

fn grounding() -> Value {
    json!({"webSearchQueries": ["paris population"],
           "searchEntryPoint": {"renderedContent": "<div></div>"},
           "groundingChunks": [{"web": {"uri": URL, "title": "example.org"}}],
           "groundingSupports": [{"segment": {"startIndex": 11, "endIndex": 40, "text": CITED},
                                  "groundingChunkIndices": [0]}]})
}

fn gemini_answer() -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT}]},
               "finishReason": "STOP", "index": 0, "groundingMetadata": grounding()}],
           "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 9, "totalTokenCount": 14},
           "modelVersion": "gemini-2.5-flash", "responseId": "g1"})
}

pub(super) fn gemini_stream() -> String {
    let chunk = |text: &str, last: bool| {
        let mut candidate =
            json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
        if last {
            candidate["finishReason"] = json!("STOP");
            candidate["groundingMetadata"] = grounding();
        }
        json!({"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "g1",
               "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 9}})
    };
    [
        chunk("Zoë says: Paris", false),
        chunk(" has 2.1 million people.", true),
    ]
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .collect()
}

/// OpenAI's Responses stream: a search, then a message whose second half is cited.
pub(super) fn responses_stream() -> String {
    let item = json!({"id": "ws_1", "type": "web_search_call", "status": "completed",
                      "action": {"type": "search", "query": "paris population",
                                 "sources": [{"type": "url", "url": URL}]}});
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}}),
        json!({"type": "response.web_search_call.completed", "output_index": 0, "item_id": "ws_1"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.added", "output_index": 1,
               "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "output_index": 1, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "Zoë says: "}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": CITED}),
        json!({"type": "response.output_text.annotation.added", "output_index": 1,
               "content_index": 0, "annotation_index": 0,
               "annotation": {"type": "url_citation", "start_index": 10, "end_index": 39,
                              "url": URL, "title": "Paris facts"}}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-5",
               "status": "completed", "output": [],
               "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}}}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// A search model's Chat stream: text, then the annotations chunk, then the finish.
pub(super) fn chat_stream() -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-search-preview",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let annotations = json!([{"type": "url_citation", "url_citation": {
        "start_index": 10, "end_index": 39, "url": URL, "title": "Paris facts"}}]);
    let mut out: String = [
        chunk(
            json!({"role": "assistant", "content": "Zoë says: "}),
            Value::Null,
        ),
        chunk(json!({"content": CITED}), Value::Null),
        chunk(json!({"annotations": annotations}), Value::Null),
        chunk(json!({}), json!("stop")),
    ]
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .collect();
    out.push_str("data: [DONE]\n\n");
    out
}

fn answer(client: Api, target: Api, upstream: &Value) -> Value {
    let direction = Direction::between(client, target).unwrap();
    let bytes = serde_json::to_vec(upstream).unwrap();
    let out = translate_answer(direction, &bytes, 1_700_000_000, &Echo::default()).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn stream(direction: Direction, upstream: &str) -> Vec<Value> {
    data_of(&translate_stream(direction, upstream, &[7, 300]))
}

/// The `url_citation` spans in a Chat client's stream (its annotations chunk).
fn chat_spans(chunks: &[Value]) -> Vec<(u64, u64, String)> {
    let finish = chunks
        .iter()
        .position(|c| c["choices"][0]["finish_reason"].is_string())
        .unwrap();
    let at = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["annotations"].is_array())
        .unwrap_or_else(|| panic!("no annotations chunk: {chunks:?}"));
    assert!(at < finish, "the annotations come before the finish");
    chunks[at]["choices"][0]["delta"]["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let c = &a["url_citation"];
            (
                c["start_index"].as_u64().unwrap(),
                c["end_index"].as_u64().unwrap(),
                c["url"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_streamed_citation_reaches_a_chat_client_as_an_annotations_chunk() {
    // (upstream, its stream, the span in the client's content)
    for (direction, upstream, span) in [
        (Direction::CHAT_TO_MESSAGES, anthropic_stream(), (19, 37)),
        (Direction::CHAT_TO_RESPONSES, responses_stream(), (10, 39)),
        (Direction::CHAT_TO_GEMINI, gemini_stream(), (10, 39)),
    ] {
        let chunks = stream(direction, &upstream);
        assert_eq!(
            chat_spans(&chunks),
            [(span.0, span.1, URL.to_owned())],
            "{direction:?}"
        );
    }
}

/// The Messages events of a client's stream: (event, block type or delta type).
fn messages_outline(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "content_block_start" => {
                format!("start {}", e["content_block"]["type"].as_str().unwrap())
            }
            "content_block_delta" => e["delta"]["type"].as_str().unwrap().to_owned(),
            other => other.to_owned(),
        })
        .collect()
}

#[test]
fn searches_and_citations_reach_a_messages_stream_as_anthropic_streams_them() {
    for (direction, upstream) in [
        (Direction::MESSAGES_TO_RESPONSES, responses_stream()),
        (Direction::MESSAGES_TO_GEMINI, gemini_stream()),
        (Direction::MESSAGES_TO_CHAT, chat_stream()),
    ] {
        let events = stream(direction, &upstream);
        let outline = messages_outline(&events);
        let citation = events
            .iter()
            .find(|e| e["delta"]["type"] == "citations_delta")
            .unwrap_or_else(|| panic!("{direction:?}: {outline:?}"));
        assert_eq!(
            citation["delta"]["citation"],
            json!({"type": "web_search_result_location", "url": URL,
                   "title": citation["delta"]["citation"]["title"], "cited_text": CITED,
                   "encrypted_index": ""}),
            "{direction:?}"
        );
        let text = events
            .iter()
            .position(|e| e["delta"]["type"] == "text_delta")
            .unwrap();
        let cited = events
            .iter()
            .position(|e| e["delta"]["type"] == "citations_delta")
            .unwrap();
        assert_eq!(
            events[text]["index"], events[cited]["index"],
            "{direction:?}: {outline:?}"
        );
        if direction == Direction::MESSAGES_TO_CHAT {
            continue; // Chat Completions has no search call to show.
        }
        let call = events
            .iter()
            .find(|e| e["content_block"]["type"] == "server_tool_use")
            .unwrap_or_else(|| panic!("{direction:?}: {outline:?}"));
        assert_eq!(call["content_block"]["name"], "web_search");
        let index = &call["index"];
        let query = events
            .iter()
            .find(|e| e["index"] == *index && e["delta"]["type"] == "input_json_delta")
            .unwrap();
        assert_eq!(
            query["delta"]["partial_json"],
            r#"{"query":"paris population"}"#
        );
        let result = events
            .iter()
            .find(|e| e["content_block"]["type"] == "web_search_tool_result")
            .unwrap();
        assert_eq!(
            result["content_block"]["tool_use_id"],
            call["content_block"]["id"]
        );
        assert_eq!(result["content_block"]["content"][0]["url"], URL);
        assert_eq!(outline.last().unwrap(), "message_stop", "{direction:?}");
    }
}

#[test]
fn a_gemini_stream_shows_a_responses_client_the_search_and_the_citation() {
    let events = stream(Direction::RESPONSES_TO_GEMINI, &gemini_stream());
    let completed = events
        .iter()
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    let output = completed["response"]["output"].as_array().unwrap();
    let search = output
        .iter()
        .find(|i| i["type"] == "web_search_call")
        .unwrap();
    assert_eq!(search["action"]["query"], "paris population");
    let message = output.iter().find(|i| i["type"] == "message").unwrap();
    assert_eq!(
        message["content"][0]["annotations"],
        json!([{"type": "url_citation", "start_index": 10, "end_index": 39, "url": URL,
                "title": "example.org"}])
    );
}

#[test]
fn every_streamed_citation_reaches_a_gemini_client_as_grounding_in_bytes() {
    // (upstream, its stream, the cited span in bytes of the client's text, queries)
    for (direction, upstream, span, queries) in [
        (
            Direction::GEMINI_TO_MESSAGES,
            anthropic_stream(),
            (19, 37),
            json!(["paris population"]),
        ),
        (
            Direction::GEMINI_TO_RESPONSES,
            responses_stream(),
            (11, 40),
            json!(["paris population"]),
        ),
        (
            Direction::GEMINI_TO_CHAT,
            chat_stream(),
            (11, 40),
            json!([]),
        ),
    ] {
        let chunks = stream(direction, &upstream);
        let last = chunks.last().unwrap();
        let grounding = &last["candidates"][0]["groundingMetadata"];
        assert_eq!(
            grounding["webSearchQueries"], queries,
            "{direction:?}: {last}"
        );
        assert_eq!(
            grounding["groundingChunks"][0]["web"]["uri"], URL,
            "{direction:?}"
        );
        let segment = &grounding["groundingSupports"][0]["segment"];
        assert_eq!(
            (
                segment["startIndex"].as_u64().unwrap(),
                segment["endIndex"].as_u64().unwrap()
            ),
            span,
            "{direction:?}"
        );
        let text: String = chunks
            .iter()
            .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(
            text.get(span.0 as usize..span.1 as usize),
            segment["text"].as_str()
        );
        assert_eq!(
            grounding["groundingSupports"][0]["groundingChunkIndices"],
            json!([0])
        );
    }
}

#[test]
fn gemini_grounding_reaches_every_other_client_in_characters() {
    let responses = answer(Api::Responses, Api::Gemini, &gemini_answer());
    let output = responses["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "web_search_call", "{responses}");
    assert_eq!(output[0]["action"]["sources"][0]["url"], URL);
    assert_eq!(output[1]["content"][0]["annotations"][0]["start_index"], 10);
    assert_eq!(output[1]["content"][0]["annotations"][0]["end_index"], 39);
    let chat = answer(Api::Chat, Api::Gemini, &gemini_answer());
    assert_eq!(
        chat["choices"][0]["message"]["annotations"][0]["url_citation"]["start_index"], 10,
        "{chat}"
    );
    let messages = answer(Api::Messages, Api::Gemini, &gemini_answer());
    let content = messages["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "web_search_tool_result", "text", "text"],
        "{messages}"
    );
    assert_eq!(content[2]["text"], "Zoë says: ");
    assert_eq!(content[3]["text"], CITED);
    assert_eq!(content[3]["citations"][0]["cited_text"], CITED);
}

#[test]
fn every_answers_citations_reach_a_gemini_client_as_grounding_in_bytes() {
    let responses_answer = json!({"id": "resp_1", "object": "response", "status": "completed",
        "model": "gpt-5", "output": [
            {"id": "ws_1", "type": "web_search_call", "status": "completed",
             "action": {"type": "search", "query": "paris population",
                        "sources": [{"type": "url", "url": URL}]}},
            {"id": "msg_1", "type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": TEXT, "annotations": [{"type": "url_citation",
                 "start_index": 10, "end_index": 39, "url": URL, "title": "Paris facts"}]}]}],
        "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}});
    for (target, upstream, span) in [
        (Api::Messages, anthropic_answer(), (20, 56)),
        (Api::Responses, responses_answer, (11, 40)),
    ] {
        let out = answer(Api::Gemini, target, &upstream);
        let grounding = &out["candidates"][0]["groundingMetadata"];
        assert_eq!(
            grounding["webSearchQueries"],
            json!(["paris population"]),
            "{out}"
        );
        assert_eq!(
            grounding["groundingChunks"],
            json!([{"web": {"uri": URL, "title": "Paris facts"}}])
        );
        let segment = &grounding["groundingSupports"][0]["segment"];
        assert_eq!(segment["startIndex"], span.0, "{out}");
        assert_eq!(segment["endIndex"], span.1);
    }
    let plain = answer(
        Api::Gemini,
        Api::Messages,
        &json!({"id": "m", "type": "message",
        "role": "assistant", "model": "m", "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
    );
    assert!(
        plain["candidates"][0].get("groundingMetadata").is_none(),
        "{plain}"
    );
}

#[test]
fn every_clients_search_tool_becomes_each_hosts_own() {
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "news?"}],
        "web_search_options": {"search_context_size": "low", "user_location": {
            "type": "approximate", "approximate": {"city": "Paris", "country": "FR"}}}});
    let (out, dropped) = up(Direction::CHAT_TO_MESSAGES, chat.clone());
    assert_eq!(
        out["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search",
                "user_location": {"type": "approximate", "city": "Paris", "country": "FR"}}])
    );
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(
        up(Direction::CHAT_TO_RESPONSES, chat.clone()).0["tools"][0]["type"],
        "web_search"
    );
    assert_eq!(
        up(Direction::CHAT_TO_GEMINI, chat).0["tools"],
        json!([{"googleSearch": {}}])
    );
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "news?"}]}],
                        "tools": [{"googleSearch": {}}]});
    assert_eq!(
        up(Direction::GEMINI_TO_MESSAGES, gemini.clone()).0["tools"][0]["type"],
        "web_search_20250305"
    );
    // A Chat host runs no search: a Gemini client's search cannot go there.
    assert_eq!(refused(Direction::GEMINI_TO_CHAT, gemini), "googleSearch");
    let messages = json!({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "news?"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
    assert_eq!(
        up(Direction::MESSAGES_TO_GEMINI, messages).0["tools"],
        json!([{"googleSearch": {}}])
    );
}
