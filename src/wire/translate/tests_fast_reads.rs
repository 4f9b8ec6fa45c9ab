//! The stream readers' fast reads against the whole `Value` reads they stand in for, on
//! real-shaped streams and on events they decline: the relay's one read of a Gemini
//! upstream's text chunks (`StreamTranslator::gemini_text` with
//! `StreamUsage::observe_gemini_text`, for the translator's `event` and `stream_watch`'s
//! `observe`) gives the same client bytes and usage; a Responses upstream's lifecycle events
//! read with only the members the reader reads (`picked`) give the same client bytes; and the
//! Responses writer's direct writes give the bytes of its events built as `Value`s.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::tests_gemini_stream::gemini_stream;
use super::*;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{StreamFormat, StreamUsage};

/// `stream` relayed both ways: (client bytes, usage after each event: what a budget is
/// checked against) read twice per event, and read once where the one read takes the event.
fn both_ways(direction: Direction, stream: &str) -> [(Vec<u8>, Vec<StreamUsage>); 2] {
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    parser.feed(stream.as_bytes(), &mut events).unwrap();
    if let Some(last) = parser.finish().unwrap() {
        events.push(last);
    }
    let mut results = Vec::new();
    for one_read in [false, true] {
        let mut translator =
            StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
        let mut usage = StreamUsage::default();
        let mut after_each = Vec::new();
        let mut out = BytesMut::new();
        for event in &events {
            after_each.push(usage);
            if one_read {
                if let Some((seen, bytes)) = translator.gemini_text(event, &mut out) {
                    usage.observe_gemini_text(event, seen);
                    // Its text bytes as the translator's template counts them.
                    match bytes {
                        Some(bytes) => usage.count_content_bytes(bytes),
                        None => usage.count_content(StreamFormat::Gemini, event),
                    }
                    continue;
                }
            }
            usage.observe(StreamFormat::Gemini, event);
            usage.count_content(StreamFormat::Gemini, event);
            translator.event(event, &mut out);
        }
        translator.finish(&mut out);
        after_each.push(usage);
        results.push((out.to_vec(), after_each));
    }
    let once = results.pop().unwrap();
    let twice = results.pop().unwrap();
    [twice, once]
}

fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

/// A chunk of `parts` with the counts so far (`usage`: its `usageMetadata`, under `name`).
fn chunk(parts: Value, name: &str, usage: Value) -> Value {
    let mut chunk = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                           "modelVersion": "gemini-2.5-flash", "responseId": "r-1"});
    chunk[name] = usage;
    chunk
}

fn counts(out: u64) -> Value {
    json!({"promptTokenCount": 12, "cachedContentTokenCount": 4, "candidatesTokenCount": out,
           "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12}],
           "totalTokenCount": 12 + out})
}

/// Streams of text (escapes, non-ASCII, several parts), thinking with signatures, calls,
/// grounding, a mid-stream error, snake_case and odd usage, and chunks the one read declines.
pub(super) fn streams() -> Vec<String> {
    let last = |out| {
        let mut c = chunk(json!([{"text": "."}]), "usageMetadata", counts(out));
        c["candidates"][0]["finishReason"] = json!("STOP");
        c
    };
    let mut grounded = chunk(json!([{"text": "cited"}]), "usageMetadata", counts(3));
    grounded["candidates"][0]["groundingMetadata"] = json!({
        "webSearchQueries": ["q"],
        "groundingChunks": [{"web": {"uri": "https://example.org/a", "title": "ex"}}],
        "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 9, "text": "Hi \"there\""},
                               "groundingChunkIndices": [0]}]});
    let mut two_candidates = chunk(json!([{"text": "one"}]), "usageMetadata", counts(2));
    two_candidates["candidates"]
        .as_array_mut()
        .unwrap()
        .push(json!({"content": {"parts": [{"text": "two"}]}, "finishReason": 5}));
    vec![
        gemini_stream(),
        sse(&[
            chunk(
                json!([{"text": "Hi \"there\"\n\u{1}"}]),
                "usageMetadata",
                counts(1),
            ),
            chunk(
                json!([{"text": "héllo 🦀 </b>"}, {"text": "\\u00e9"}]),
                "usageMetadata",
                counts(2),
            ),
            chunk(json!([{"text": " more"}]), "usageMetadata", json!(null)),
            chunk(json!([{"text": " snake"}]), "usage_metadata", counts(4)),
            chunk(
                json!([{"text": " null snake"}]),
                "usage_metadata",
                json!(null),
            ),
            chunk(
                json!([{"text": " odd"}]),
                "usageMetadata",
                json!({"candidatesTokenCount": 5.5}),
            ),
            chunk(
                json!([{"text": " empty"}]),
                "usageMetadata",
                json!({"cachedContentTokenCount": 1}),
            ),
            chunk(
                json!([{"text": " data"}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}]),
                "usageMetadata",
                counts(6),
            ),
            two_candidates,
            last(7),
        ]),
        sse(&[
            chunk(
                json!([{"text": "think", "thought": true}]),
                "usageMetadata",
                counts(1),
            ),
            chunk(
                json!([{"text": "more", "thought": true, "thoughtSignature": "SIG1"}]),
                "usageMetadata",
                counts(2),
            ),
            chunk(json!([{"text": "Then"}]), "usageMetadata", counts(3)),
            chunk(
                json!([{"text": " signed", "thoughtSignature": "SIG2"}]),
                "usageMetadata",
                counts(4),
            ),
            chunk(
                json!([{"functionCall": {"name": "f", "args": {"a": "é"}}}]),
                "usageMetadata",
                counts(5),
            ),
            chunk(json!([{"text": "after"}]), "usageMetadata", counts(6)),
            last(7),
        ]),
        sse(&[
            chunk(json!([{"text": "Hi "}]), "usageMetadata", counts(1)),
            grounded,
            chunk(json!([{"text": " on"}]), "usageMetadata", counts(4)),
            last(5),
        ]),
        // An error mid-stream, then chunks after it.
        format!(
            "{}data: {}\r\n\r\n{}",
            sse(&[
                chunk(json!([{"text": "Hi"}]), "usageMetadata", counts(1)),
                chunk(json!([{"text": " you"}]), "usageMetadata", counts(2))
            ]),
            json!({"error": {"code": 503, "message": "overloaded \"now\"", "status": "UNAVAILABLE"}}),
            sse(&[chunk(json!([{"text": "late"}]), "usageMetadata", counts(3))]),
        ),
        // A named event, a blocked prompt, and data that is not JSON.
        format!(
            "{}event: error\ndata: {}\n\n{}data: not json\r\n\r\n{}",
            sse(&[chunk(json!([{"text": "Hi"}]), "usageMetadata", counts(1))]),
            chunk(json!([{"text": "named"}]), "usageMetadata", counts(2)),
            sse(&[json!({"promptFeedback": {"blockReason": "SAFETY"},
                         "candidates": [{"content": {"parts": [{"text": "x"}]}}]})]),
            sse(&[last(3)]),
        ),
        // The stream broke: no finish reason.
        sse(&[
            chunk(json!([{"text": "Hi"}]), "usageMetadata", counts(1)),
            chunk(json!([{"text": " cut"}]), "usageMetadata", counts(2)),
        ]),
    ]
    .into_iter()
    .chain(finish_elsewhere_streams())
    .collect()
}

/// Text chunks naming a string `finishReason` outside the candidate (the relay's search finds
/// it: they close the answer), and ones whose candidate's is `null`; several of each, read
/// through their template.
fn finish_elsewhere_streams() -> [String; 2] {
    let named = |out| {
        let mut c = chunk(json!([{"text": "w "}]), "usageMetadata", counts(out));
        c["echo"] = json!({"finishReason": "STOP"});
        c
    };
    let null = |out| {
        let mut c = chunk(json!([{"text": "w "}]), "usageMetadata", counts(out));
        c["candidates"][0]["finishReason"] = json!(null);
        c
    };
    [
        sse(&(1..=4).map(named).collect::<Vec<_>>()),
        sse(&(1..=4).map(null).collect::<Vec<_>>()),
    ]
}

#[test]
fn one_read_of_a_gemini_chunk_gives_the_bytes_and_usage_of_two() {
    let clients = [
        Direction::CHAT_TO_GEMINI,
        Direction::RESPONSES_TO_GEMINI,
        Direction::MESSAGES_TO_GEMINI,
    ];
    for stream in streams() {
        for direction in clients {
            let [twice, once] = both_ways(direction, &stream);
            assert_eq!(
                String::from_utf8_lossy(&once.0),
                String::from_utf8_lossy(&twice.0),
                "{direction:?}\n{stream}"
            );
            assert_eq!(once.1, twice.1, "{direction:?}\n{stream}");
        }
    }
}

#[test]
fn a_relayed_gemini_streams_text_chunks_read_for_usage_count_what_observe_counts() {
    let mut read = 0;
    for stream in streams() {
        let mut parser = SseParser::new();
        let mut events: Vec<SseEvent> = Vec::new();
        parser.feed(stream.as_bytes(), &mut events).unwrap();
        let (mut fast, mut whole) = (StreamUsage::default(), StreamUsage::default());
        let mut chunks = GeminiTextUsage::default();
        for event in &events {
            let meaning = whole.observe(StreamFormat::Gemini, event);
            match chunks.text_usage(event) {
                Some(seen) => {
                    read += 1;
                    assert_eq!(
                        fast.observe_gemini_text(event, seen),
                        meaning,
                        "{}",
                        event.data
                    );
                }
                None => {
                    fast.observe(StreamFormat::Gemini, event);
                }
            }
            assert_eq!(fast, whole, "{}\n{stream}", event.data);
        }
    }
    assert!(read > 10, "{read}");
}

#[test]
fn the_one_read_takes_text_chunks_and_declines_the_rest() {
    let mut translator =
        StreamTranslator::new(Direction::CHAT_TO_GEMINI, true, 1, Default::default());
    let event = |data: Value| SseEvent {
        event: None,
        data: data.to_string(),
        raw: Default::default(),
    };
    let text = event(chunk(json!([{"text": "a"}]), "usageMetadata", counts(1)));
    let mut out = BytesMut::new();
    // Not before the first chunk (it starts the answer).
    assert!(translator.gemini_text(&text, &mut out).is_none());
    translator.event(&text, &mut out);
    let read = translator
        .gemini_text(&text, &mut out)
        .expect("a text chunk");
    let read = read.0.usage.expect("its usage");
    assert_eq!(
        (read.tokens_in, read.tokens_out, read.tokens_cached),
        (12, 1, 4)
    );
    for declined in [
        chunk(json!([{"text": "a"}]), "usage_metadata", counts(1)),
        chunk(
            json!([{"text": "a", "thought": true}]),
            "usageMetadata",
            counts(1),
        ),
        chunk(
            json!([{"text": "a"}, {"executableCode": {"code": "1"}}]),
            "usageMetadata",
            json!(null),
        ),
        json!({"error": {"code": 500}}),
    ] {
        let mut out = BytesMut::new();
        assert!(
            translator
                .gemini_text(&event(declined.clone()), &mut out)
                .is_none(),
            "{declined}"
        );
        assert!(out.is_empty());
    }
    // Another upstream's translator declines everything.
    let mut chat = StreamTranslator::new(Direction::GEMINI_TO_CHAT, true, 1, Default::default());
    assert!(chat.gemini_text(&text, &mut out).is_none());
}

/// `stream` translated for `direction`'s client: fast reads and direct writes, and whole
/// `Value`s.
fn fast_and_whole(direction: Direction, stream: &str) -> [String; 2] {
    [false, true].map(|whole| {
        let mut translator =
            StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
        if whole {
            translator = translator.whole_values();
        }
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        parser.feed(stream.as_bytes(), &mut events).unwrap();
        let mut out = BytesMut::new();
        for event in &events {
            translator.event(event, &mut out);
        }
        translator.finish(&mut out);
        String::from_utf8(out.to_vec()).unwrap()
    })
}

fn responses_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|data| {
            format!(
                "event: {}\ndata: {data}\n\n",
                data["type"].as_str().unwrap_or("x")
            )
        })
        .collect()
}

/// Responses streams: thinking, text with escapes and non-ASCII, a refusal, annotations, calls,
/// a search, an incomplete answer, a failed one, an error event, and events a whole parse
/// reads otherwise than `picked` (a response that is not an object, repeated members).
pub(super) fn responses_streams() -> Vec<String> {
    let created = json!({"type": "response.created", "sequence_number": 0,
        "response": {"id": "resp_é", "object": "response", "status": "in_progress", "model": {"odd": "model"},
                     "instructions": "long \"echo\"", "tools": [{"type": "function", "name": "f"}], "output": []}});
    let message = |id: &str, text: &str| {
        json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": [
                   {"type": "url_citation", "start_index": 0, "end_index": 2, "url": "https://e.org/é", "title": "E \"x\""}]}]})
    };
    let completed = |status: &str, extra: Value| {
        let mut response = json!({"id": "resp_é", "status": status, "model": "gpt-x", "output": [message("m0", "big")],
            "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 7,
                      "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 12}});
        if let Some(extra) = extra.as_object() {
            for (key, value) in extra {
                response[key] = value.clone();
            }
        }
        json!({"type": format!("response.{status}"), "sequence_number": 99, "response": response})
    };
    let added = |item: Value| json!({"type": "response.output_item.added", "output_index": 0, "item": item});
    let done =
        |item: Value| json!({"type": "response.output_item.done", "output_index": 0, "item": item});
    vec![
        super::tests_cross::responses_stream(),
        super::tests_search_streams::responses_stream(),
        responses_sse(&[
            created.clone(),
            json!({"type": "response.in_progress", "response": {"id": "other", "model": "m2"}}),
            added(json!({"type": "message", "id": "m1", "content": []})),
            json!({"type": "response.content_part.added", "item_id": "m1", "part": {"type": "output_text", "text": ""}}),
            json!({"type": "response.output_text.delta", "item_id": "m1", "delta": "Hé \"q\"\n\u{1} 🦀"}),
            json!({"type": "response.output_text.annotation.added", "item_id": "m1",
                   "annotation": {"type": "url_citation", "start_index": 0, "end_index": 1, "url": "https://a.b", "title": "t"}}),
            json!({"type": "response.refusal.delta", "item_id": "m1", "delta": "no"}),
            json!({"type": "response.output_text.done", "item_id": "m1", "text": "Hé"}),
            done(message("m1", "Hé")),
            added(json!({"type": "message", "id": "m2", "content": []})),
            done(message("m2", "unstreamed é")),
            added(json!({"type": "reasoning", "id": "r1", "summary": []})),
            done(json!({"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "thought"}]})),
            added(json!({"type": "function_call", "id": "f1", "call_id": "c1", "name": "g", "arguments": ""})),
            done(json!({"type": "function_call", "id": "f1", "call_id": "c1", "name": "g", "arguments": "{\"a\":1}"})),
            added(json!({"type": "image_generation_call", "id": "i1"})),
            done(json!({"type": "image_generation_call", "id": "i1"})),
            completed("incomplete", json!({"incomplete_details": {"reason": "content_filter"}})),
        ]),
        responses_sse(&[
            created.clone(),
            added(json!({"type": "message", "id": "m1", "content": []})),
            json!({"type": "response.output_text.delta", "delta": "a"}),
            json!({"type": "response.failed", "response": {"id": "resp_é", "status": "failed",
                   "error": {"code": "server_error", "message": "it \"broke\""}}}),
        ]),
        responses_sse(&[
            created.clone(),
            added(json!({"type": "message", "id": "m1", "content": []})),
            json!({"type": "response.output_text.delta", "delta": "a"}),
            json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": null}),
        ]),
        responses_sse(&[
            json!({"type": "response.created", "response": "not an object"}),
            created,
            added(json!({"type": "message", "id": "m1", "content": []})),
            json!({"type": "response.output_text.delta", "delta": 7}),
            json!({"type": "response.output_text.delta", "delta": "b"}),
            completed("completed", json!({"usage": null})),
        ]) + "event: x\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\",\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n",
        responses_named_otherwise(),
    ]
}

/// A Responses stream whose events' SSE names are ones the reader ignores (it leaves those
/// out after finding their `type` alone) but whose `type` is one it reads, or is written with
/// an escape, repeated, or not a string; and events that are not JSON.
fn responses_named_otherwise() -> String {
    let named = |name: &str, data: &str| format!("event: {name}\ndata: {data}\n\n");
    let text = r#"{"type":"output_text","text":"Hé \"x\"","annotations":[{"type":"url_citation","start_index":0,"end_index":2,"url":"https://e.org","title":"E"}]}"#;
    [
        // Before the start, a created event is read: an ignored name does not hide it.
        named("response.output_text.done", r#"{"sequence_number":0,"response":{"id":"resp_1","model":"m1"},"type":"response.created"}"#),
        named("response.in_progress", r#"{"response":{"id":"resp_2","model":"m2"},"type":"response.in_progress"}"#),
        named("response.content_part.done", r#"{"item":{"type":"message","id":"m1","content":[]},"type":"response.output_item.added"}"#),
        named("response.content_part.added", r#"{"part":{"type":"output_text","text":""},"type":"response.content_part.added"}"#),
        named("response.output_text.delta", r#"{"type":"response.output_text.delta","delta":"Hé "}"#),
        named("response.content_part.done", r#"{"type":"response.output_text.delta","delta":"\"x\""}"#),
        named("response.output_text.done", r#"{"type":"response.output_text.annotation.added","annotation":{"type":"url_citation","start_index":1,"end_index":2,"url":"https://a.b","title":"t"}}"#),
        named("response.output_text.done", r#"{"type":"response.refusal.d\u0065lta","delta":"escaped"}"#),
        named("response.output_text.done", r#"{"typ\u0065":"response.refusal.delta","delta":"escaped key"}"#),
        named("response.output_text.done", r#"{"type":"response.output_text.done","delta":"{\"type\":\"error\"}","type":"response.refusal.delta"}"#),
        named("response.output_text.done", r#"{"type":"response.refusal.delta","delta":"lost","type":"response.output_text.done"}"#),
        named("response.output_text.done", r#"{"type":7,"delta":"not a name"}"#),
        named("response.output_text.done", r#"{"type":"response.refusal.delta","delta":"not JSON""#),
        named("response.output_text.done", r#"["response.refusal.delta"]"#),
        named("response.content_part.done", &format!(r#"{{"part":{text},"type":"response.content_part.done"}}"#)),
        named("response.output_text.done", &format!(r#"{{"item":{{"type":"message","content":[{text}]}},"type":"response.output_item.done"}}"#)),
        named("response.reasoning_summary_part.added", r#"{"type":"response.reasoning_summary_part.added","part":{}}"#),
        named("response.in_progress", r#"{"type":"response.in_progress","response":{"id":"resp_3"}}"#),
        named("response.content_part.added", r#"{"type":"response.content_part.added","part":{}}"#),
        named("response.output_text.annotation.added", r#"{"type":"response.output_text.annotation.added","annotation":{"type":"url_citation","start_index":0,"end_index":1,"url":"https://c.d","title":"c"}}"#),
        named("response.output_text.done", r#"{"response":{"id":"resp_4","status":"completed","usage":{"input_tokens":3,"output_tokens":4}},"type":"response.completed"}"#),
        named("response.completed", r#"{"response":{"id":"resp_5","status":"incomplete","usage":{"input_tokens":9,"output_tokens":9}},"type":"response.completed"}"#),
        named("response.output_text.done", r#"{"type":"error","message":"named as done","code":"server_error"}"#),
    ]
    .concat()
}

#[test]
fn responses_events_read_picked_give_the_bytes_of_whole_values() {
    let clients = [
        Direction::CHAT_TO_RESPONSES,
        Direction::MESSAGES_TO_RESPONSES,
        Direction::GEMINI_TO_RESPONSES,
    ];
    for stream in responses_streams() {
        for direction in clients {
            let [fast, whole] = fast_and_whole(direction, &stream);
            assert!(!fast.is_empty(), "{direction:?}\n{stream}");
            assert_eq!(fast, whole, "{direction:?}\n{stream}");
        }
    }
}

/// A Gemini upstream's text chunks read by the text shape (the first one with the id and
/// model it starts the answer with, the last one with its finish reason) give the bytes of
/// the chunks read as whole `Value`s: for each finish reason the reader tells apart (after a
/// call too) and one it ignores, and for ids and models of other kinds and names.
#[test]
fn gemini_text_chunks_read_fast_give_the_bytes_of_whole_values() {
    let clients = [
        Direction::CHAT_TO_GEMINI,
        Direction::MESSAGES_TO_GEMINI,
        Direction::RESPONSES_TO_GEMINI,
    ];
    let mut cases = streams();
    let stop = "\"finishReason\":\"STOP\"";
    for reason in [
        "MAX_TOKENS",
        "SAFETY",
        "FINISH_REASON_UNSPECIFIED",
        "ODD \\\"é\\\"",
    ] {
        let other = format!("\"finishReason\":\"{reason}\"");
        cases.extend(streams().iter().map(|stream| stream.replace(stop, &other)));
    }
    let model = "\"modelVersion\":\"gemini-2.5-flash\"";
    let id = "\"responseId\":\"r-1\"";
    for (from, to) in [
        (model, "\"modelVersion\":null"),
        (model, "\"modelVersion\":{\"v\":1}"),
        (model, "\"model_version\":\"m\""),
        (model, "\"modelVersion\":\"g \\\"é\\\"\""),
        (id, "\"responseId\":null"),
        (id, "\"responseId\":7"),
        (id, "\"response_id\":\"r-2\""),
        (id, "\"responseId\":\"r \\u00e9\""),
    ] {
        let changed: Vec<String> = streams().iter().map(|s| s.replace(from, to)).collect();
        assert!(changed.iter().any(|s| s.contains(to)), "{to}");
        cases.extend(changed);
    }
    let mut finished = 0;
    for stream in cases {
        finished += usize::from(stream.contains("finishReason"));
        for direction in clients {
            let [fast, whole] = fast_and_whole(direction, &stream);
            assert!(!fast.is_empty(), "{direction:?}\n{stream}");
            assert_eq!(fast, whole, "{direction:?}\n{stream}");
        }
    }
    assert!(finished > 20, "{finished}");
}

#[test]
fn the_responses_writers_direct_writes_are_the_bytes_of_its_values() {
    let upstreams = [
        (Direction::RESPONSES_TO_CHAT, super::tests::chat_stream()),
        (
            Direction::RESPONSES_TO_CHAT,
            super::tests_search_streams::chat_stream(),
        ),
        (
            Direction::RESPONSES_TO_MESSAGES,
            super::tests::anthropic_stream(),
        ),
        (Direction::RESPONSES_TO_GEMINI, gemini_stream()),
        (
            Direction::RESPONSES_TO_GEMINI,
            super::tests_search_streams::gemini_stream(),
        ),
    ];
    let mut cases: Vec<(Direction, String)> = upstreams.into_iter().collect();
    // Answers cut short: `response.incomplete` with its details.
    for finish in ["length", "content_filter"] {
        let cut = super::tests::chat_stream().replace(
            "\"finish_reason\":\"tool_calls\"",
            &format!("\"finish_reason\":\"{finish}\""),
        );
        assert!(cut.contains(finish));
        cases.push((Direction::RESPONSES_TO_CHAT, cut));
    }
    for stream in streams() {
        cases.push((Direction::RESPONSES_TO_GEMINI, stream));
    }
    for (direction, stream) in cases {
        let [fast, whole] = fast_and_whole(direction, &stream);
        assert!(fast.contains("response.created"), "{stream}");
        assert_eq!(fast, whole, "{direction:?}\n{stream}");
    }
}
