//! Web search results and citations across the APIs (behaviour §14), whole answers, one
//! test per direction that carries them.

use serde_json::{json, Value};

use super::{translate_answer, Api, Direction, Echo};

fn answer(client: Api, target: Api, upstream: &Value) -> Value {
    let direction = Direction::between(client, target).unwrap();
    let bytes = serde_json::to_vec(upstream).unwrap();
    let out = translate_answer(direction, &bytes, 1_700_000_000, &Echo::default()).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// Claude's answer to "where is Paris?" with one web search and a cited sentence.
pub(super) fn anthropic_answer() -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
           "content": [
               {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
                "input": {"query": "paris population"}},
               {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
                   {"type": "web_search_result", "url": "https://example.org/paris",
                    "title": "Paris facts", "encrypted_content": "xyz", "page_age": null}]},
               {"type": "text", "text": "Paris is in France. "},
               {"type": "text", "text": "About 2.1 million people live there.",
                "citations": [{"type": "web_search_result_location",
                               "url": "https://example.org/paris", "title": "Paris facts",
                               "cited_text": "Population: 2,102,650", "encrypted_index": "e"}]},
               {"type": "text", "text": " Its river is the Seine."}],
           "stop_reason": "end_turn", "stop_sequence": null,
           "usage": {"input_tokens": 10, "output_tokens": 20,
                     "server_tool_use": {"web_search_requests": 1}}})
}

/// Where the cited sentence sits in the joined text, in characters.
const CITED: (u64, u64) = (20, 56);

#[test]
fn messages_searches_and_citations_reach_a_responses_client() {
    let out = answer(Api::Responses, Api::Messages, &anthropic_answer());
    let output = out["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "web_search_call", "{out}");
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[0]["action"]["query"], "paris population");
    assert_eq!(
        output[0]["action"]["sources"],
        json!([{"type": "url", "url": "https://example.org/paris"}])
    );
    let text = &output[1]["content"][0];
    assert_eq!(
        text["text"],
        "Paris is in France. About 2.1 million people live there. Its river is the Seine."
    );
    assert_eq!(
        text["annotations"],
        json!([{"type": "url_citation", "start_index": CITED.0, "end_index": CITED.1,
                "url": "https://example.org/paris", "title": "Paris facts"}])
    );
    let joined = text["text"].as_str().unwrap();
    let cited: String = joined
        .chars()
        .skip(CITED.0 as usize)
        .take((CITED.1 - CITED.0) as usize)
        .collect();
    assert_eq!(cited, "About 2.1 million people live there.");
}

#[test]
fn messages_citations_reach_a_chat_client_as_message_annotations() {
    let out = answer(Api::Chat, Api::Messages, &anthropic_answer());
    let message = &out["choices"][0]["message"];
    assert_eq!(
        message["annotations"],
        json!([{"type": "url_citation", "url_citation": {
            "start_index": CITED.0, "end_index": CITED.1,
            "url": "https://example.org/paris", "title": "Paris facts"}}])
    );
}

/// OpenAI's Responses answer with one search and one cited span.
fn responses_answer() -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
           "output": [
               {"id": "ws_1", "type": "web_search_call", "status": "completed",
                "action": {"type": "search", "query": "paris population",
                           "sources": [{"type": "url", "url": "https://example.org/paris"}]}},
               {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text",
                             "text": "Paris is in France. About 2.1 million people live there.",
                             "annotations": [{"type": "url_citation", "start_index": 20,
                                              "end_index": 56, "url": "https://example.org/paris",
                                              "title": "Paris facts"}]}]}],
           "usage": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}})
}

#[test]
fn responses_searches_and_citations_reach_a_messages_client() {
    let out = answer(Api::Messages, Api::Responses, &responses_answer());
    let content = out["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "server_tool_use", "{out}");
    assert_eq!(content[0]["name"], "web_search");
    assert_eq!(content[0]["input"]["query"], "paris population");
    assert_eq!(content[1]["type"], "web_search_tool_result");
    assert_eq!(content[1]["tool_use_id"], content[0]["id"]);
    assert_eq!(content[1]["content"][0]["url"], "https://example.org/paris");
    assert_eq!(
        content[2],
        json!({"type": "text", "text": "Paris is in France. "})
    );
    assert_eq!(content[3]["text"], "About 2.1 million people live there.");
    assert_eq!(
        content[3]["citations"],
        json!([{"type": "web_search_result_location", "url": "https://example.org/paris",
                "title": "Paris facts", "cited_text": "About 2.1 million people live there.",
                "encrypted_index": ""}])
    );
    assert_eq!(content.len(), 4);
}

#[test]
fn chat_annotations_reach_a_messages_client_and_a_responses_client() {
    let chat = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-search-preview",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "Paris is in France. About 2.1 million people live there.",
            "annotations": [{"type": "url_citation", "url_citation": {"start_index": 20,
                "end_index": 56, "url": "https://example.org/paris", "title": "Paris facts"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}});
    let messages = answer(Api::Messages, Api::Chat, &chat);
    assert_eq!(
        messages["content"][1]["citations"][0]["url"], "https://example.org/paris",
        "{messages}"
    );
    let responses = answer(Api::Responses, Api::Chat, &chat);
    assert_eq!(
        responses["output"][0]["content"][0]["annotations"][0]["start_index"], 20,
        "{responses}"
    );
}

#[test]
fn responses_citations_reach_a_chat_client() {
    let out = answer(Api::Chat, Api::Responses, &responses_answer());
    assert_eq!(
        out["choices"][0]["message"]["annotations"][0]["url_citation"]["end_index"], 56,
        "{out}"
    );
}

#[test]
fn an_answer_without_search_says_nothing_of_it() {
    let plain = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    let responses = answer(Api::Responses, Api::Messages, &plain);
    assert_eq!(responses["output"].as_array().unwrap().len(), 1);
    assert_eq!(
        responses["output"][0]["content"][0]["annotations"],
        json!([])
    );
    let chat = answer(Api::Chat, Api::Messages, &plain);
    assert!(chat["choices"][0]["message"].get("annotations").is_none());
}

/// Claude's stream for the same answer: the search's query in pieces, its result whole, and
/// the cited block's citation before its text.
pub(super) fn anthropic_stream() -> String {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
               "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use",
               "id": "srvtoolu_01", "name": "web_search", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
               "partial_json": "{\"query\": \"paris "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
               "partial_json": "population\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result",
               "tool_use_id": "srvtoolu_01", "content": [{"type": "web_search_result",
               "url": "https://example.org/paris", "title": "Paris facts", "encrypted_content": "x"}]}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Paris is in France."}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": "", "citations": []}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "citations_delta", "citation": {
               "type": "web_search_result_location", "url": "https://example.org/paris",
               "title": "Paris facts", "cited_text": "Population: 2,102,650", "encrypted_index": "e"}}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "About 2.1 million."}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_messages_stream_shows_a_responses_client_the_search_and_the_citation() {
    let stream = anthropic_stream();
    let events = super::tests::data_of(&super::tests::translate_stream(
        Direction::RESPONSES_TO_MESSAGES,
        &stream,
        &[97, 400, 1_000],
    ));
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_else(|| panic!("{kinds:?}"))
    };
    assert!(at("response.web_search_call.completed") < at("response.output_text.annotation.added"));
    let added = &events[at("response.output_item.added")];
    assert_eq!(added["item"]["type"], "web_search_call");
    let annotation = &events[at("response.output_text.annotation.added")]["annotation"];
    assert_eq!(
        *annotation,
        json!({"type": "url_citation", "start_index": 0, "end_index": 18,
               "url": "https://example.org/paris", "title": "Paris facts"})
    );
    let completed = &events[at("response.completed")]["response"];
    let output = completed["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "web_search_call");
    assert_eq!(output[0]["action"]["query"], "paris population");
    assert_eq!(
        output[0]["action"]["sources"][0]["url"],
        "https://example.org/paris"
    );
    assert_eq!(output[1]["content"][0]["annotations"], json!([]));
    assert_eq!(output[2]["content"][0]["text"], "About 2.1 million.");
    assert_eq!(output[2]["content"][0]["annotations"][0], *annotation);
    assert_eq!(output.len(), 3);
}
