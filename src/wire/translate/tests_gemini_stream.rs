//! Gemini streams on the hub, event by event: a Gemini upstream's chunks (each a whole
//! `GenerateContentResponse`) to every other client, every other upstream's events to a Gemini
//! client in both framings (SSE, one JSON array), errors, and any chunking of the bytes.

use bytes::BytesMut;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::tests::{anthropic_stream, chat_stream, data_of, translate_stream};
use super::tests_cross::responses_stream;
use super::*;
use crate::wire::sse::SseParser;

/// A Gemini stream as Google sends it with `alt=sse`: a thought, text in two chunks, a signed
/// call whole in one chunk, the finish with the closing usage (every chunk carries the counts
/// so far).
pub(super) fn gemini_stream() -> String {
    let chunk = |parts: Value, finish: Option<&str>, candidates: u64, thoughts: u64| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({"candidates": [candidate],
               "usageMetadata": {"promptTokenCount": 50, "cachedContentTokenCount": 32,
                   "candidatesTokenCount": candidates, "thoughtsTokenCount": thoughts,
                   "totalTokenCount": 50 + candidates + thoughts},
               "modelVersion": "gemini-2.5-pro", "responseId": "resp-S"})
    };
    let chunks = [
        chunk(json!([{"text": "hm", "thought": true}]), None, 0, 4),
        chunk(json!([{"text": "Hel"}]), None, 1, 4),
        chunk(json!([{"text": "lo é"}]), None, 2, 4),
        chunk(
            json!([{"functionCall": {"name": "Read", "args": {"path": 1}}, "thoughtSignature": "GEMSIG"}]),
            None,
            8,
            4,
        ),
        chunk(json!([{"text": ""}]), Some("STOP"), 9, 4),
    ];
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

#[test]
fn gemini_streams_become_chat_chunks() {
    let data = data_of(&translate_stream(
        Direction::CHAT_TO_GEMINI,
        &gemini_stream(),
        &[],
    ));
    let deltas: Vec<&Value> = data
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|c| &c["delta"])
        .collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[1], &json!({"reasoning_content": "hm"}));
    assert_eq!(deltas[2], &json!({"content": "Hel"}));
    assert_eq!(deltas[3], &json!({"content": "lo é"}));
    assert_eq!(deltas[4]["tool_calls"][0]["id"], "call_resp-S_0");
    assert_eq!(deltas[4]["tool_calls"][0]["function"]["name"], "Read");
    assert_eq!(
        deltas[5]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":1}"
    );
    let finish = data
        .iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("tool_calls"));
    let usage = &data.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], 50);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 32);
    assert_eq!(usage["completion_tokens"], 13);
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 4);
    assert!(!format!("{data:?}").contains("GEMSIG"));
}

#[test]
fn gemini_streams_become_anthropic_events() {
    let events = translate_stream(Direction::MESSAGES_TO_GEMINI, &gemini_stream(), &[]);
    let names: Vec<&str> = events.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data = data_of(&events);
    assert_eq!(data[1]["content_block"]["type"], "thinking");
    assert_eq!(
        data[2]["delta"],
        json!({"type": "thinking_delta", "thinking": "hm"})
    );
    // The call's signature, in a thinking block of its own before it, in the plain form the
    // node seals before it leaves.
    assert_eq!(data[8]["content_block"]["type"], "thinking");
    assert_eq!(
        data[9]["delta"],
        json!({"type": "signature_delta", "signature": "qrgplain1.GEMSIG"})
    );
    assert_eq!(data[11]["content_block"]["name"], "Read");
    assert_eq!(
        data[12]["delta"],
        json!({"type": "input_json_delta", "partial_json": "{\"path\":1}"})
    );
    assert_eq!(data[14]["delta"]["stop_reason"], "tool_use");
    assert_eq!(data[14]["usage"]["input_tokens"], 18);
    assert_eq!(data[14]["usage"]["cache_read_input_tokens"], 32);
    assert_eq!(data[14]["usage"]["output_tokens"], 13);
    let text = format!("{data:?}");
    assert_eq!(
        text.matches("GEMSIG").count(),
        text.matches("qrgplain1.GEMSIG").count()
    );
}

#[test]
fn gemini_streams_become_the_responses_event_sequence_with_the_signature_sealed() {
    let events = translate_stream(Direction::RESPONSES_TO_GEMINI, &gemini_stream(), &[]);
    let data = data_of(&events);
    let done: Vec<&Value> = data
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    let kinds: Vec<&str> = done.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["reasoning", "message", "reasoning", "function_call"]
    );
    assert_eq!(
        super::tests::carried_block(done[2]),
        json!({"type": "thinking", "thinking": "", "signature": "GEMSIG"})
    );
    assert_eq!(done[3]["arguments"], "{\"path\":1}");
    let completed = data.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["usage"]["input_tokens"], 50);
    assert_eq!(completed["response"]["usage"]["output_tokens"], 13);
}

/// The chunks a Gemini client got: each SSE event's data as JSON.
fn gemini_chunks(events: &[(Option<String>, String)]) -> Vec<Value> {
    assert!(events.iter().all(|(name, _)| name.is_none()));
    data_of(events)
}

/// The parts of every chunk but the last, and the last.
fn parts_and_last(chunks: &[Value]) -> (Vec<Value>, &Value) {
    let (last, rest) = chunks.split_last().unwrap();
    let parts = rest
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    (parts, last)
}

#[test]
fn anthropic_and_chat_streams_become_gemini_chunks() {
    let chunks = gemini_chunks(&translate_stream(
        Direction::GEMINI_TO_MESSAGES,
        &anthropic_stream(),
        &[],
    ));
    let (mut parts, last) = parts_and_last(&chunks);
    // The signed thinking block rides in the next part's `thoughtSignature`, whole (its text
    // as it streamed), in its plain carried form: the node encrypts it before it leaves.
    let carried = parts[1]
        .as_object_mut()
        .unwrap()
        .remove("thoughtSignature")
        .unwrap();
    assert_eq!(
        super::thinking_carry::block_of(carried.as_str().unwrap()),
        Some(json!({"type": "thinking", "thinking": "hm", "signature": "SIG"}))
    );
    // Text goes out as it comes; the call once its arguments are whole.
    assert_eq!(
        parts,
        [
            json!({"text": "hm", "thought": true}),
            json!({"text": "Hel"}),
            json!({"text": "lo é"}),
            json!({"functionCall": {"id": "toolu_1", "name": "look", "args": {"at": "x"}}}),
        ]
    );
    assert_eq!(chunks[0]["responseId"], "msg_s");
    assert_eq!(chunks[0]["modelVersion"], "claude-x");
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        last["usageMetadata"],
        json!({"promptTokenCount": 43, "cachedContentTokenCount": 40,
               "candidatesTokenCount": 12, "totalTokenCount": 55})
    );
    assert!(!format!("{parts:?}").contains("SIG"));

    let chunks = gemini_chunks(&translate_stream(
        Direction::GEMINI_TO_CHAT,
        &chat_stream(),
        &[],
    ));
    let (parts, last) = parts_and_last(&chunks);
    assert_eq!(parts[0], json!({"text": "mm", "thought": true}));
    assert_eq!(
        parts[3],
        json!({"functionCall": {"id": "call_1", "name": "Read", "args": {"path": 1}}})
    );
    assert_eq!(last["usageMetadata"]["promptTokenCount"], 50);
    assert_eq!(last["usageMetadata"]["cachedContentTokenCount"], 32);

    let chunks = gemini_chunks(&translate_stream(
        Direction::GEMINI_TO_RESPONSES,
        &responses_stream(),
        &[],
    ));
    let (parts, last) = parts_and_last(&chunks);
    assert_eq!(parts.len(), 4);
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 9);
}

/// `stream` through a translator whose Gemini client asked without `alt=sse`.
fn json_array_stream(direction: Direction, stream: &str, broken: bool) -> BytesMut {
    let mut translator =
        StreamTranslator::new(direction, false, 1, Default::default()).gemini_json_array();
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    parser.feed(stream.as_bytes(), &mut events).unwrap();
    let mut out = BytesMut::new();
    for event in &events {
        translator.event(event, &mut out);
    }
    if broken {
        translator.error("upstream went away", &mut out);
    } else {
        translator.finish(&mut out);
    }
    out
}

#[test]
fn without_alt_sse_a_gemini_client_gets_one_json_array() {
    let out = json_array_stream(Direction::GEMINI_TO_MESSAGES, &anthropic_stream(), false);
    assert!(out.starts_with(b"[{"), "{out:?}");
    let chunks: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(chunks.len(), 5);
    assert_eq!(chunks[4]["candidates"][0]["finishReason"], "STOP");
    // A break after commit: Google's error object is the last element, the array closed.
    let cut: String = anthropic_stream()
        .split("\n\n")
        .take(8)
        .collect::<Vec<_>>()
        .join("\n\n");
    let out = json_array_stream(Direction::GEMINI_TO_MESSAGES, &cut, true);
    let chunks: Vec<Value> = serde_json::from_slice(&out).unwrap();
    let last = chunks.last().unwrap();
    assert_eq!(last["error"]["message"], "upstream went away");
    assert_eq!(last["error"]["status"], "INTERNAL");
}

#[test]
fn error_events_cross_both_ways() {
    let google = "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n";
    let events = translate_stream(Direction::MESSAGES_TO_GEMINI, google, &[]);
    assert_eq!(events[0].0.as_deref(), Some("error"));
    assert_eq!(
        data_of(&events)[0]["error"]["message"],
        "The model is overloaded."
    );
    let events = translate_stream(Direction::CHAT_TO_GEMINI, google, &[]);
    assert_eq!(
        data_of(&events)[0]["error"]["message"],
        "The model is overloaded."
    );

    let anthropic = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let chunks = gemini_chunks(&translate_stream(
        Direction::GEMINI_TO_MESSAGES,
        anthropic,
        &[],
    ));
    assert_eq!(chunks[0]["error"]["code"], 503);
    assert_eq!(chunks[0]["error"]["status"], "UNAVAILABLE");
    assert_eq!(chunks[0]["error"]["message"], "Overloaded");
    // A stream the router stopped: its code is the reason.
    let mut translator =
        StreamTranslator::new(Direction::GEMINI_TO_CHAT, false, 1, Default::default());
    let mut out = BytesMut::new();
    translator.error_coded(
        "budget spent",
        "budget_exceeded",
        "rate_limit_error",
        &mut out,
    );
    let text = String::from_utf8(out.to_vec()).unwrap();
    let chunk: Value = serde_json::from_str(text.trim().strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(chunk["error"]["code"], 429);
    assert_eq!(chunk["error"]["details"][0]["reason"], "budget_exceeded");
}

#[test]
fn a_gemini_stream_that_never_finished_is_not_ended_here() {
    let cut: String = gemini_stream()
        .split("\r\n\r\n")
        .take(3)
        .map(|c| format!("{c}\r\n\r\n"))
        .collect();
    let data = data_of(&translate_stream(Direction::CHAT_TO_GEMINI, &cut, &[]));
    assert!(
        data.iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null()),
        "{data:?}"
    );
    let blocked = "data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"},\"usageMetadata\":{\"promptTokenCount\":7}}\r\n\r\n";
    let events = translate_stream(Direction::MESSAGES_TO_GEMINI, blocked, &[]);
    let data = data_of(&events);
    assert_eq!(data[1]["delta"]["stop_reason"], "refusal");
    assert_eq!(data[1]["usage"]["input_tokens"], 7);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// However the upstream's bytes are cut, the client gets the same events, Gemini either
    /// side.
    #[test]
    fn any_chunking_translates_gemini_streams_the_same(mut cuts in proptest::collection::vec(0usize..4000, 0..40)) {
        cuts.sort_unstable();
        for (direction, stream) in [
            (Direction::CHAT_TO_GEMINI, gemini_stream()),
            (Direction::MESSAGES_TO_GEMINI, gemini_stream()),
            (Direction::RESPONSES_TO_GEMINI, gemini_stream()),
            (Direction::GEMINI_TO_MESSAGES, anthropic_stream()),
            (Direction::GEMINI_TO_CHAT, chat_stream()),
        ] {
            let whole = translate_stream(direction, &stream, &[]);
            let pieces = translate_stream(direction, &stream, &cuts);
            prop_assert_eq!(whole, pieces);
        }
    }
}
