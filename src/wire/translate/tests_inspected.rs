//! The relay's one read of a Responses upstream's lifecycle events
//! (`StreamTranslator::responses_inspected` with `StreamUsage::observe_inspected`) against the
//! two it stands in for (`observe`, then the translator's `event`): the same meaning of every
//! event, the same usage after every event (what a budget is checked against) and the same
//! client bytes, over real-shaped streams (reasoning, text, tool calls, a web search, an
//! incomplete answer, failures, error events) and events a typed read refuses or reads
//! otherwise (garbage, repeated members, a `type` that is no string, a top-level `usage`).

use bytes::BytesMut;
use serde_json::json;

use super::tests_fast_reads::responses_streams;
use super::*;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{EventMeaning, StreamFormat, StreamUsage};

/// What one way of reading gave: per event its meaning, the usage after it and the client
/// bytes it became; and how many events the one read took.
#[derive(Debug, PartialEq)]
struct Reading {
    per_event: Vec<(EventMeaning, StreamUsage, String)>,
    taken: usize,
}

fn events_of(stream: &str) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    parser.feed(stream.as_bytes(), &mut events).unwrap();
    events.extend(parser.finish().unwrap());
    events
}

/// `events` read twice per event (`observe`, then `event`), or once where the one read takes
/// the event.
fn read(direction: Direction, events: &[SseEvent], one_read: bool) -> Reading {
    let format = StreamFormat::OpenAiResponses;
    let mut translator = StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
    let mut usage = StreamUsage::default();
    let mut per_event = Vec::new();
    let mut taken = 0;
    for event in events {
        let mut out = BytesMut::new();
        let once = match one_read {
            true => translator.responses_inspected(event, &mut out),
            false => None,
        };
        let meaning = match once {
            Some(inspected) => {
                taken += 1;
                usage.observe_inspected(format, event, inspected)
            }
            None => {
                let meaning = usage.observe(format, event);
                translator.event(event, &mut out);
                meaning
            }
        };
        per_event.push((meaning, usage, String::from_utf8(out.to_vec()).unwrap()));
    }
    Reading { per_event, taken }
}

fn named(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The mock upstream's stream as the bench reads it: a reasoning item without text, a message
/// streamed in pieces, every lifecycle event repeating the request, the end repeating the text.
fn mock_shaped() -> String {
    let response = |status: &str, output: serde_json::Value, usage: serde_json::Value| {
        json!({"background": false, "created_at": 1_700_000_000, "error": null, "id": "resp_mock_1",
               "incomplete_details": null, "instructions": "You are a helpful assistant.",
               "max_output_tokens": 64, "metadata": {}, "model": "gpt-4o-mini", "object": "response",
               "output": output, "parallel_tool_calls": true, "reasoning": {"effort": null, "summary": null},
               "status": status, "store": true, "temperature": 0, "text": {"format": {"type": "text"}},
               "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
               "usage": usage, "user": null})
    };
    let text = "This is a mock reply.";
    let reasoning = json!({"id": "rs_1", "summary": [], "type": "reasoning"});
    let message = json!({"content": [{"annotations": [], "text": text, "type": "output_text"}],
                         "id": "msg_1", "role": "assistant", "status": "completed", "type": "message"});
    let usage = json!({"input_tokens": 49, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 64,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 113});
    let mut events = vec![
        json!({"response": response("in_progress", json!([]), json!(null)), "sequence_number": 0, "type": "response.created"}),
        json!({"response": response("in_progress", json!([]), json!(null)), "sequence_number": 1, "type": "response.in_progress"}),
        json!({"item": reasoning, "output_index": 0, "sequence_number": 2, "type": "response.output_item.added"}),
        json!({"item": reasoning, "output_index": 0, "sequence_number": 3, "type": "response.output_item.done"}),
        json!({"item": {"content": [], "id": "msg_1", "role": "assistant", "status": "in_progress", "type": "message"},
               "output_index": 1, "sequence_number": 4, "type": "response.output_item.added"}),
        json!({"content_index": 0, "item_id": "msg_1", "output_index": 1, "part": {"annotations": [], "text": "", "type": "output_text"},
               "sequence_number": 5, "type": "response.content_part.added"}),
    ];
    for piece in ["This", " is", " a", " mock", " reply."] {
        events.push(json!({"content_index": 0, "delta": piece, "item_id": "msg_1", "output_index": 1, "type": "response.output_text.delta"}));
    }
    events.extend([
        json!({"content_index": 0, "item_id": "msg_1", "output_index": 1, "text": text, "type": "response.output_text.done"}),
        json!({"content_index": 0, "item_id": "msg_1", "output_index": 1, "part": message["content"][0], "type": "response.content_part.done"}),
        json!({"item": message, "output_index": 1, "type": "response.output_item.done"}),
        json!({"response": response("completed", json!([reasoning, message]), usage), "type": "response.completed"}),
    ]);
    events
        .iter()
        .map(|data| named(data["type"].as_str().unwrap(), &data.to_string()))
        .collect()
}

/// Lifecycle events a typed read refuses, reads otherwise than their members say, or that
/// carry their usage oddly: each after a stream's opening, so it is read as the relay would.
fn odd_events() -> Vec<String> {
    let usage = r#"{"input_tokens":4,"output_tokens":5}"#;
    [
        // Usage read from a `type` of null or none: the SSE name says what it is.
        named("response.completed", &format!(r#"{{"type":null,"response":{{"usage":{usage}}}}}"#)),
        named("response.incomplete", &format!(r#"{{"response":{{"status":"incomplete","usage":{usage}}}}}"#)),
        // The `type` decides over the name.
        named("response.in_progress", &format!(r#"{{"type":"response.completed","response":{{"usage":{usage}}}}}"#)),
        named("response.completed", &format!(r#"{{"type":"response.in_progress","response":{{"usage":{usage}}}}}"#)),
        named("response.completed", &format!(r#"{{"type":"response.c\u006fmpleted","response":{{"usage":{usage}}}}}"#)),
        // Usage that is no usage, or odd counts.
        named("response.completed", r#"{"type":"response.completed","response":{"usage":null}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"usage":{}}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"usage":"many"}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"usage":[7,8]}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"usage":{"input_tokens":-3,"output_tokens":2.5,"input_tokens_details":7}}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"usage":{"input_tokens":1,"input_tokens":2}}}"#),
        named("response.completed", r#"{"type":"response.completed","response":{"id":"r"}}"#),
        named("response.completed", r#"{"type":"response.completed"}"#),
        named("response.completed", r#"{"type":"response.completed","response":null}"#),
        named("response.completed", r#"{"type":"response.completed","response":[1]}"#),
        // Repeats a typed read refuses (garbage) or reads as no usage.
        named("response.completed", &format!(r#"{{"type":"response.completed","type":"response.completed","response":{{"usage":{usage}}}}}"#)),
        named("response.completed", &format!(r#"{{"type":"response.completed","response":{{"usage":{usage}}},"response":{{}}}}"#)),
        named("response.completed", &format!(r#"{{"type":"response.completed","response":{{"usage":{usage},"usage":{usage}}}}}"#)),
        named("response.created", r#"{"type":"response.created","message":1,"message":2,"response":{"id":"r"}}"#),
        named("response.created", r#"{"type":"response.created","response":{"id":"r","id":"s"}}"#),
        // A top-level usage (read by the typed read as usage fields), a type that is no string.
        named("response.completed", &format!(r#"{{"type":"response.completed","usage":{usage},"response":{{"usage":{usage}}}}}"#)),
        named("response.completed", r#"{"type":"response.completed","usage":5,"response":{}}"#),
        named("response.completed", &format!(r#"{{"type":7,"response":{{"usage":{usage}}}}}"#)),
        named("response.completed", &format!(r#"{{"typ\u0065":"response.completed","response":{{"usage":{usage}}}}}"#)),
        // Not JSON, or not one object.
        named("response.completed", &format!(r#"{{"type":"response.completed","response":{{"usage":{usage}}}"#)),
        named("response.completed", &format!(r#"{{"type":"response.completed","response":{{"usage":{usage}}}}} x"#)),
        named("response.created", r#"{"type":"response.created","response":{"id":"r","x":[1,}}"#),
        named("response.created", r#"{"type":"response.created","response":{"id":"\ud800"}}"#),
        named("response.created", "[DONE]"),
        named("response.created", ""),
        named("response.created", "not json"),
        // Spacing, and a queued start.
        named("response.queued", " {\n  \"type\" : \"response.queued\" ,\t\"response\" : { \"id\" : \"q\" }\r}  "),
        // Errors by name or by type, a failure.
        named("error", r#"{"type":"response.created","response":{"id":"r"}}"#),
        named("response.created", r#"{"type":"error","code":"server_error","message":"typed as an error"}"#),
        named("response.failed", r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"slow"}}}"#),
        // Other names and deltas named otherwise.
        named("response.web_search_call.searching", r#"{"type":"response.web_search_call.searching","item_id":"ws_1","output_index":0}"#),
        named("response.reasoning_summary_part.added", r#"{"type":"response.reasoning_summary_part.added","part":{"type":"summary_text","text":""}}"#),
        named("response.output_text.delta", r#"{"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":1}}}"#),
        named("response.in_progress", r#"{"type":"response.output_text.delta","delta":"named otherwise"}"#),
        format!("data: {}\n\n", r#"{"type":"response.completed","response":{"usage":{"input_tokens":2,"output_tokens":2}}}"#),
    ]
    .to_vec()
}

const CLIENTS: [Direction; 3] = [
    Direction::CHAT_TO_RESPONSES,
    Direction::MESSAGES_TO_RESPONSES,
    Direction::GEMINI_TO_RESPONSES,
];

#[test]
fn one_read_of_a_lifecycle_event_gives_the_meaning_usage_and_bytes_of_two() {
    let mut streams = responses_streams();
    streams.push(mock_shaped());
    // The start's response with a number a `Value` cannot hold where no arm looks: the
    // reader's read refuses the event (and takes its start from the next), `observe` not.
    for number in ["1e400".to_string(), "9".repeat(310), "1.5E+2".to_string()] {
        let status = format!(r#""status":{number}"#);
        streams.push(mock_shaped().replacen(r#""status":"in_progress""#, &status, 1));
    }
    let mut taken = 0;
    for stream in &streams {
        let events = events_of(stream);
        for direction in CLIENTS {
            let twice = read(direction, &events, false);
            let once = read(direction, &events, true);
            assert_eq!(once.per_event, twice.per_event, "{direction:?}\n{stream}");
            taken += once.taken;
        }
    }
    assert!(taken > 60, "the one read took {taken} events");
}

#[test]
fn odd_lifecycle_events_read_once_as_observe_and_event_read_them() {
    let opening = events_of(&mock_shaped());
    // The stream as far as its first text, then each odd event on its own.
    let first_text = opening
        .iter()
        .position(|event| event.event.as_deref() == Some("response.output_text.delta"))
        .unwrap();
    let odd = odd_events();
    let mut taken = 0;
    for data in &odd {
        let mut events = opening[..=first_text].to_vec();
        events.extend(events_of(data));
        for direction in CLIENTS {
            let twice = read(direction, &events, false);
            let once = read(direction, &events, true);
            assert_eq!(once.per_event, twice.per_event, "{direction:?}\n{data}");
            taken += once.taken - read(direction, &opening[..=first_text], true).taken;
        }
    }
    // Some are read once (a `type` of null, odd usage, spacing …), the rest declined.
    assert!(taken >= 3 * 12, "the one read took {taken} odd events");
}

#[test]
fn the_one_read_takes_lifecycle_events_and_declines_the_rest() {
    let events = events_of(&mock_shaped());
    let mut translator =
        StreamTranslator::new(Direction::CHAT_TO_RESPONSES, true, 1, Default::default());
    let mut usage = StreamUsage::default();
    let mut taken = Vec::new();
    for event in &events {
        let mut out = BytesMut::new();
        match translator.responses_inspected(event, &mut out) {
            Some(inspected) => {
                usage.observe_inspected(StreamFormat::OpenAiResponses, event, inspected);
                taken.push(event.event.clone().unwrap());
            }
            None => translator.event(event, &mut out),
        }
    }
    let names: Vec<&str> = taken.iter().map(|name| name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(
        (usage.tokens_in, usage.tokens_out, usage.final_seen),
        (49, 64, true)
    );
    // Not a Responses upstream, or the reference path of tests: nothing read.
    let event = &events[0];
    let mut out = BytesMut::new();
    let mut chat = StreamTranslator::new(Direction::RESPONSES_TO_CHAT, true, 1, Default::default());
    assert!(chat.responses_inspected(event, &mut out).is_none());
    let mut whole =
        StreamTranslator::new(Direction::CHAT_TO_RESPONSES, true, 1, Default::default())
            .whole_values();
    assert!(whole.responses_inspected(event, &mut out).is_none());
    assert!(out.is_empty());
}
