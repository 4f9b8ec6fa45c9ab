//! The translated streams between Chat, Messages and Gemini written the fast way — text pieces
//! passed from reader to writer borrowed, a Messages upstream's other events read typed, the
//! opening and closing events written as bytes — against the same streams read and written
//! through whole `Value`s and events (`StreamTranslator::whole_values`): the same client bytes,
//! event by event, for every client API, over real-shaped streams and events the fast ways
//! decline.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::*;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{matters_after_commit, EventMeaning, StreamFormat, StreamUsage};

/// `stream` relayed as the relay does (a Gemini upstream's text chunks offered to
/// `gemini_text` first), fast or through whole values: the client's bytes after each event.
fn relayed(direction: Direction, stream: &str, whole: bool) -> Vec<String> {
    let mut translator = StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
    if whole {
        translator = translator.whole_values();
    }
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    parser.feed(stream.as_bytes(), &mut events).unwrap();
    if let Some(last) = parser.finish().unwrap() {
        events.push(last);
    }
    let mut outs = Vec::new();
    for event in &events {
        let mut out = BytesMut::new();
        if translator.gemini_text(event, &mut out).is_none() {
            translator.event(event, &mut out);
        }
        outs.push(String::from_utf8(out.to_vec()).unwrap());
    }
    let mut out = BytesMut::new();
    translator.finish(&mut out);
    translator.error("late", &mut out);
    outs.push(String::from_utf8(out.to_vec()).unwrap());
    outs
}

fn named(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn text_delta(index: u64, text: &str) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":text}}),
    )
}

/// Events the Messages reader's one scan reads or declines: members in any order, usage
/// counts of other kinds, `null`s, repeated members, blocks and deltas it leaves to `head`.
fn scanned_events() -> [&'static str; 28] {
    [
        r#"{"index":0,"delta":{"text":"t \u00e9\n","type":"text_delta","extra":[1,{"a":null}]},"type":"content_block_delta"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":null}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"other_delta","text":"x"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"url":"https://e.org","title":"E"}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}"#,
        r#"{"type":"content_block_delta","index":0}"#,
        r#"{"type":"message_delta","usage":{"output_tokens":-3,"input_tokens":2.5},"delta":{"stop_reason":"max_tokens"}}"#,
        r#"{"type":"message_delta","usage":{"cache_read_input_tokens":"x"},"delta":{"stop_reason":"max_tokens"}}"#,
        r#"{"type":"message_delta","usage":{"output_tokens":-0,"cache_creation_input_tokens":7,"server_tool_use":{"web_search_requests":1}},"delta":null}"#,
        r#"{"usage":{"output_tokens":0.0,"cache_read_input_tokens":null},"delta":{"stop_sequence":"x","stop_reason":"refusal"},"type":"message_delta"}"#,
        r#"{"type":"message_delta","usage":null,"delta":{"stop_reason":7}}"#,
        r#"{"type":"message_delta","usage":{"output_tokens":9},"message":{"usage":{"output_tokens":1}}}"#,
        r#"{"type":"message_start","message":{"model":null,"id":null,"usage":{"input_tokens":4,"input_tokens":5}}}"#,
        r#"{"type":"message_start","message":{"id":"m","model":{"odd":["model"]},"usage":{"input_tokens":4}}}"#,
        r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":4,"output_tokens":2}},"usage":{"output_tokens":99}}"#,
        r#"{"type":"message_start"}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"pre é","citations":[]}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"text":"pre \"é\"","type":"text","extra":{"x":[]}}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":null}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":"S1"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_é","name":"f","input":{"deep":[{"x":1.5}]}}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"a","id":"b","name":"f"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"image"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
        r#"{"type":"content_block_start","index":1}"#,
        r#"{"type":"something_new","delta":{"type":"text_delta","text":"x"}}"#,
    ]
}

/// Anthropic streams: text of every kind, thinking with signatures, calls, usage in pieces
/// (cache reads and writes, `null`s), an error mid-stream, and events the typed read declines
/// or reads otherwise than a `Value` would if it were careless (repeated members, members of
/// other kinds, exponents, a `message` that is not an object, data that is not JSON).
fn anthropic_streams() -> Vec<String> {
    let start = json!({"type":"message_start","message":{"id":"msg_\"é\"","type":"message","role":"assistant",
        "model":"claude-é","content":[],"stop_reason":null,"stop_sequence":null,
        "usage":{"input_tokens":12,"cache_creation_input_tokens":3,"cache_read_input_tokens":40,
                 "cache_creation":{"ephemeral_5m_input_tokens":3},"output_tokens":1,"service_tier":"standard"}}});
    let text_start = (
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    );
    let stop = |index: u64| {
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        )
    };
    let delta = json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},
        "usage":{"output_tokens":64,"input_tokens":null}});
    let mut texts = vec![
        ("message_start", start.clone()),
        ("ping", json!({"type":"ping"})),
        text_start.clone(),
    ];
    for text in [
        "Hel",
        "lo é 🦀",
        "",
        "\"q\" \\ \n\t\u{1}",
        "</b>\u{7f}",
        "\\u00e9",
        " plain words here",
    ] {
        texts.push(text_delta(0, text));
    }
    texts.extend([
        stop(0),
        ("message_delta", delta.clone()),
        ("message_stop", json!({"type":"message_stop"})),
    ]);
    let plain = named(&texts);
    let odd_events = [
        r#"{"type":"content_block_stop","index":1e400}"#,
        r#"{"type":"content_block_stop","type":"message_stop"}"#,
        r#"{"type":"message_stop","index":123456789012345678901}"#,
        r#"{"type":7}"#,
        r#"{"type":"message_start","message":"not an object"}"#,
        r#"{"type":"message_start","message":{"id":5,"model":"m"}}"#,
        r#"{"type":"message_start","message":["msg_arr","claude-arr",{"input_tokens":5}]}"#,
        r#"{"type":"message_start","message":null}"#,
        r#"{"type":"message_delta","usage":7,"delta":{"stop_reason":"max_tokens"}}"#,
        r#"{"type":"message_delta","usage":{"output_tokens":2,"output_tokens":3},"delta":[1]}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"delta":{"stop_reason":"tool_use"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","text":"y"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"text":"\ud83e\udd80","type":"text_delta"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}"#,
        r#"{"type":"content_block_delta","delta":null}"#,
        r#"{"type":"content_block_start","index":1,"content_block":null}"#,
        r#"{"type" : "ping" , "x":[{"deep":[true,false,null,-2.5]}]}"#,
        r#"{"type":"message_stop"} x"#,
        "not json",
        r#"{"type":"error","error":{"type":"overloaded_error","message":"busy \"now\""}}"#,
    ];
    let mut streams = vec![super::tests::anthropic_stream(), plain.clone()];
    for odd in odd_events.into_iter().chain(scanned_events()) {
        // Each in the open text block, and after the text block closed.
        let at_text = plain.replacen(
            "event: content_block_stop",
            &format!("event: x\ndata: {odd}\n\nevent: content_block_stop"),
            1,
        );
        let at_end = plain.replacen(
            "event: message_delta",
            &format!("event: x\ndata: {odd}\n\nevent: message_delta"),
            1,
        );
        streams.extend([at_text, at_end]);
    }
    // Thinking with a signature, a call, a redacted block, usage of cache writes only.
    streams.push(named(&[
        ("message_start", json!({"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":1,"cache_creation_input_tokens":9}}})),
        ("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})),
        ("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm é"}})),
        ("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG=="}})),
        stop(0),
        ("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"REDACTED"}})),
        stop(1),
        ("content_block_start", json!({"type":"content_block_start","index":2,"content_block":{"type":"text","text":"Pre"}})),
        text_delta(2, " and after"),
        stop(2),
        ("content_block_start", json!({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_1","name":"look","input":{}}})),
        ("content_block_delta", json!({"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"at\":"}})),
        ("content_block_delta", json!({"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"\"x\"}"}})),
        stop(3),
        ("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30,"cache_read_input_tokens":null}})),
        ("message_stop", json!({"type":"message_stop"})),
    ]));
    // A text block begun with text, cited, then more text (the citation spans it all).
    streams.push(named(&[
        ("message_start", start.clone()),
        ("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Pre é 🦀"}})),
        ("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"citations_delta",
            "citation":{"type":"web_search_result_location","url":"https://e.org/é","title":"E","cited_text":"c"}}})),
        text_delta(0, " and after"),
        stop(0),
        ("message_delta", delta.clone()),
        ("message_stop", json!({"type":"message_stop"})),
    ]));
    // An error mid-stream, after text.
    streams.push(named(&[
        ("message_start", start),
        text_start,
        text_delta(0, "partial"),
        (
            "error",
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        ),
        text_delta(0, "late"),
    ]));
    streams
}

/// Chat streams: text of every kind, reasoning, refusals, calls, the usage chunk, finish
/// reasons, an error mid-stream, and chunks the text read declines.
fn chat_streams() -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id":"chatcmpl-\"s\"","object":"chat.completion.chunk","created":1,"model":"gpt-é",
               "choices":[{"index":0,"delta":delta,"finish_reason":finish,"logprobs":null}],"usage":null})
    };
    let mut chunks = vec![chunk(json!({"role":"assistant","content":""}), Value::Null)];
    for text in [
        "Hel",
        "lo é 🦀",
        "\"q\" \\ \n\t\u{1}",
        "</b>\u{7f}",
        "\\u00e9",
        " plain words",
    ] {
        chunks.push(chunk(json!({"content": text}), Value::Null));
    }
    chunks.push(chunk(json!({"refusal": "no"}), Value::Null));
    chunks.push(chunk(json!({"content": "again"}), Value::Null));
    chunks.push(chunk(json!({}), json!("length")));
    chunks.push(json!({"id":"chatcmpl-\"s\"","object":"chat.completion.chunk","created":1,"model":"gpt-é","choices":[],
        "usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59,
                 "prompt_tokens_details":{"cached_tokens":32},"completion_tokens_details":{"reasoning_tokens":4}}}));
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    let error = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: {}\n\n",
        chunk(json!({"role":"assistant","content":""}), Value::Null),
        chunk(json!({"content":"partial"}), Value::Null),
        json!({"error": {"message": "busy \"now\"", "type": "server_error"}}),
        chunk(json!({"content":"late"}), Value::Null),
    );
    // A stream that finished without `[DONE]`.
    let unended = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\n",
        chunk(json!({"role":"assistant","content":""}), Value::Null),
        chunk(json!({"content":"all"}), Value::Null),
        chunk(json!({}), json!("stop")),
    );
    // Chunks the typed read declines or must read as a `Value` reads them, first and later.
    let odd = [
        r#"{"id":"c1","model":null,"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"id":7,"model":"m","choices":[{"delta":{"content":"x"},"finish_reason":null}]}"#,
        r#"{"id":"c2","choices":[[{"content":"by position"},"stop"]]}"#,
        r#"{"id":"c3","choices":{"0":{"delta":{"content":"object"}}}}"#,
        r#"{"id":"c4","choices":null,"usage":{"prompt_tokens":4,"completion_tokens":2}}"#,
        r#"{"id":"c5","choices":[null]}"#,
        r#"{"id":"c6","choices":[{"delta":null,"finish_reason":"stop"}],"created":1e400}"#,
        r#"{"id":"c7","choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}"#,
        r#"{"id":"c8","choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}"#,
        r#"{"id":"c9","choices":[{"delta":{"content":"a"},"finish_reason":7,"index":123456789012345678901}]}"#,
        r#"{"id":"c10","error":null,"choices":[{"delta":{"content":"a"}}]}"#,
        r#"{"id":"c11","choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_é","function":{"name":"f","arguments":"{\"a\":"}}]}}]}"#,
        r#"{"id":"c12","choices":[],"usage":7}"#,
        r#"{"id":"c13","model":{"odd":["model"]},"choices":[{"delta":{"reasoning":"r","content":"c"},"finish_reason":"content_filter"}]}"#,
    ];
    let mut streams = vec![
        super::tests::chat_stream(),
        super::tests_search_streams::chat_stream(),
        text.clone(),
        error,
        unended,
    ];
    for odd in odd {
        streams.push(format!("data: {odd}\n\n{text}"));
        streams.push(text.replacen("data: ", &format!("data: {odd}\n\ndata: "), 3));
    }
    streams
}

#[test]
fn streams_between_chat_messages_and_gemini_give_the_bytes_of_whole_values() {
    let mut compared = 0;
    for direction in Direction::ALL {
        let streams = match direction.target {
            Api::Messages => anthropic_streams(),
            Api::Chat => chat_streams(),
            Api::Gemini => {
                let mut streams = super::tests_fast_reads::streams();
                streams.push(super::tests_search_streams::gemini_stream());
                streams
            }
            Api::Responses => continue,
        };
        for stream in streams {
            let fast = relayed(direction, &stream, false);
            let whole = relayed(direction, &stream, true);
            assert_eq!(fast.len(), whole.len());
            if direction.client == Api::Responses {
                // Its writer's whole values hold a finished item's events back until the
                // next event: the stream's bytes are compared whole.
                assert_eq!(fast.concat(), whole.concat(), "{direction:?} of\n{stream}");
                compared += 1;
                continue;
            }
            for (n, (fast, whole)) in fast.iter().zip(&whole).enumerate() {
                assert_eq!(fast, whole, "{direction:?}, event {n} of\n{stream}");
                compared += usize::from(!fast.is_empty());
            }
        }
    }
    assert!(compared > 400, "{compared}");
}

/// A translated upstream's `stream` (of `format`) relayed as the relay relays it after commit,
/// with the relay's one-pass reads (`one_pass`: a Chat upstream's text chunks through
/// `chat_text`, an Anthropic or Responses upstream's deltas through `event_counted`, their
/// text bytes counted from the reader's template) or without: the client's bytes, the usage
/// the relay counted, and how many events had their bytes counted from a template.
fn relayed_after_commit(
    direction: Direction,
    format: StreamFormat,
    stream: &str,
    one_pass: bool,
) -> (String, StreamUsage, usize) {
    let mut translator = StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
    let mut usage = StreamUsage::default();
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    parser.feed(stream.as_bytes(), &mut events).unwrap();
    let mut out = BytesMut::new();
    let mut counted = 0;
    for event in &events {
        let read = match format {
            _ if !one_pass => None,
            StreamFormat::OpenAiChat => translator.chat_text(event, &mut out),
            _ if matters_after_commit(format, event) => None,
            _ => Some(translator.event_counted(event, &mut out)),
        };
        if let Some(bytes) = read {
            match bytes {
                Some(bytes) => {
                    counted += 1;
                    usage.count_content_bytes(bytes);
                }
                None => usage.count_content(format, event),
            }
            continue;
        }
        if !matters_after_commit(format, event) {
            usage.count_content(format, event);
            translator.event(event, &mut out);
            continue;
        }
        match usage.observe(format, event) {
            EventMeaning::Error { .. } => {
                translator.event(event, &mut out);
                break;
            }
            meaning => {
                if meaning == EventMeaning::Content {
                    usage.count_content(format, event);
                }
                translator.event(event, &mut out);
            }
        }
    }
    translator.finish(&mut out);
    (String::from_utf8(out.to_vec()).unwrap(), usage, counted)
}

#[test]
fn a_chat_upstreams_text_chunks_read_once_give_the_bytes_and_usage_of_two_reads() {
    let text = |content: &str, more: &str| {
        format!(
            r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":{}{more}}},"finish_reason":null}}]}}"#,
            json!(content)
        )
    };
    // Text chunks that say more somewhere the text read does not look (or declines).
    let odd = [
        text("a", r#","x":{"error":{"message":"no"}}"#),
        text(
            "b",
            r#","x":{"usage":{"prompt_tokens":5,"completion_tokens":6}}"#,
        ),
        text("c", r#","x":{"finish_reason":"stop"}"#),
        text("d", r#","role":"assistant""#),
        text("\"error\" \"usage\":{} \"finish_reason\":\"stop\"", ""),
        text("e", "").replace(r#""index":0"#, r#""index":0,"text":"t","text":"u""#),
        text("f", "").replace(r#""index":0"#, r#""index":0,"text":"t""#),
        text("f", r#","x":{"error":1}"#)
            .replace(r#""index":0"#, r#""index":0,"text":"t","text":"u""#),
        text("g", "").replace(
            r#""model":"m""#,
            r#""model":"m","usage":{"completion_tokens":3}"#,
        ),
        text("h", "").replace(r#""model":"m""#, r#""model":"m","error":null"#),
        text("i", "").replace(r#""created":1"#, r#""created":1e400"#),
        text("", ""),
    ];
    let mut streams = chat_streams();
    for odd in &odd {
        for stream in chat_streams() {
            // After the first text chunk, and as the first chunk after the role chunk.
            let mut events: Vec<&str> = stream.split("\n\n").collect();
            let line = format!("data: {odd}");
            events.insert(3.min(events.len()), &line);
            streams.push(events.join("\n\n"));
            let mut events: Vec<&str> = stream.split("\n\n").collect();
            events.insert(1.min(events.len()), &line);
            streams.push(events.join("\n\n"));
        }
    }
    let mut compared = 0;
    for direction in [
        Direction::MESSAGES_TO_CHAT,
        Direction::GEMINI_TO_CHAT,
        Direction::RESPONSES_TO_CHAT,
    ] {
        for stream in &streams {
            let (once, once_usage, _) =
                relayed_after_commit(direction, StreamFormat::OpenAiChat, stream, true);
            let (twice, twice_usage, _) =
                relayed_after_commit(direction, StreamFormat::OpenAiChat, stream, false);
            assert_eq!(
                (once, once_usage),
                (twice, twice_usage),
                "{direction:?} of\n{stream}"
            );
            compared += 1;
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn anthropic_and_responses_deltas_translated_in_one_pass_count_the_bytes_of_the_search() {
    let delta = |json: &str| format!("event: content_block_delta\ndata: {json}\n\n");
    // Text deltas whose text the relay's search counts elsewhere (a member of the same name
    // before it), or escaped, after the plain ones a template is learnt from.
    let odd = [
        r#"{"x":{"text":"zzzzz"},"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\\c\n\u00e9 🦀"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"text":"reordered","type":"text_delta"}}"#,
        r#"{"type":"content_block_delta","index":0,"x":{"partial_json":"p"},"delta":{"type":"text_delta","text":"t"}}"#,
    ];
    let mut anthropic = anthropic_streams();
    for base in anthropic_streams().into_iter().take(2) {
        for odd in odd {
            let twice = format!("{}{}", delta(odd), delta(odd));
            anthropic.push(base.replacen(
                "event: content_block_stop",
                &format!("{twice}event: content_block_stop"),
                1,
            ));
        }
    }
    let mut responses = super::tests_fast_reads::responses_streams();
    let escaped = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"q\\\"\\n\\u00e9\",\"sequence_number\":9}\n\n";
    for stream in super::tests_fast_reads::responses_streams() {
        if let Some(at) = stream.find("event: response.output_text.done") {
            responses.push(format!(
                "{}{escaped}{escaped}{}",
                &stream[..at],
                &stream[at..]
            ));
        }
    }
    let (mut compared, mut counted) = (0, 0);
    let cases = [
        (StreamFormat::Anthropic, &anthropic, Api::Messages),
        (StreamFormat::OpenAiResponses, &responses, Api::Responses),
    ];
    for (format, streams, target) in cases {
        for direction in Direction::ALL.into_iter().filter(|d| d.target == target) {
            if direction.client == target {
                continue;
            }
            for stream in streams {
                let (bytes, usage, one) = relayed_after_commit(direction, format, stream, true);
                let (two_bytes, two_usage, _) =
                    relayed_after_commit(direction, format, stream, false);
                assert_eq!(bytes, two_bytes, "{direction:?} of\n{stream}");
                assert_eq!(usage, two_usage, "{direction:?} of\n{stream}");
                compared += 1;
                counted += one;
            }
        }
    }
    assert!(compared > 100, "{compared}");
    // Most text deltas had their bytes counted from the template.
    assert!(counted > 300, "{counted}");
}

/// A text piece whose text names every member a sealer seals, as a model could write them.
const SEAL_BAIT: &str = r#"say \"signature\":\"sigplain.abc\", \"encrypted_content\":\"x\" and \"thoughtSignature\":\"y\" \\ é"#;

/// An upstream stream of `api` with three text pieces of [`SEAL_BAIT`] between its opening
/// and closing events.
fn bait_stream(api: Api) -> String {
    let texts = |line: &dyn Fn() -> String| (0..3).map(|_| line()).collect::<String>();
    match api {
        Api::Chat => format!(
            "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n{}data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}}}\n\ndata: [DONE]\n\n",
            texts(&|| format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{SEAL_BAIT}\"}},\"finish_reason\":null}}]}}\n\n"))
        ),
        Api::Messages => format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{{\"input_tokens\":3,\"output_tokens\":0}}}}}}\n\nevent: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n{}event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":5}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
            texts(&|| format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{SEAL_BAIT}\"}}}}\n\n"))
        ),
        Api::Responses => format!(
            "event: response.created\ndata: {{\"type\":\"response.created\",\"response\":{{\"id\":\"resp_1\",\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}}}\n\nevent: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}}}\n\nevent: response.content_part.added\ndata: {{\"type\":\"response.content_part.added\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{{\"type\":\"output_text\",\"text\":\"\"}}}}\n\n{}event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"resp_1\",\"model\":\"m\",\"status\":\"completed\",\"output\":[],\"usage\":{{\"input_tokens\":3,\"output_tokens\":5,\"total_tokens\":8}}}}}}\n\n",
            texts(&|| format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"{SEAL_BAIT}\"}}\n\n"))
        ),
        Api::Gemini => format!(
            "{}data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{{\"text\":\"\"}}]}},\"finishReason\":\"STOP\",\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":3,\"candidatesTokenCount\":5,\"totalTokenCount\":8}},\"modelVersion\":\"m\"}}\n\n",
            texts(&|| format!("data: {{\"candidates\":[{{\"content\":{{\"role\":\"model\",\"parts\":[{{\"text\":\"{SEAL_BAIT}\"}}]}},\"index\":0}}],\"modelVersion\":\"m\"}}\n\n"))
        ),
    }
}

/// What the relay skips when a read wrote text pieces alone (`wrote_text_alone`), sealing
/// would not have changed: over every direction, a stream whose text names every sealed
/// member is relayed as the relay reads it (a Chat upstream's text through `chat_text`, the
/// rest through `event_counted`, a Gemini upstream's through `gemini_text`), and each read said
/// to be text alone is left as it is by every sealer. Each direction from a Chat, Responses or
/// Messages upstream takes that path for its text pieces after the first.
#[test]
fn text_pieces_alone_hold_nothing_any_sealer_seals() {
    use crate::wire::item_seal::{seal_all, Items, SealKey, SealedFor};
    let key = SealKey::from_secret(b"text alone test secret");
    let to = SealedFor {
        client: "client",
        connection: "k1",
    };
    let sealers = [
        Items::Upstream,
        Items::Translated,
        Items::MessagesTranslated,
        Items::GeminiSignatures,
        Items::GeminiTranslated,
    ];
    for direction in Direction::ALL {
        let mut translator =
            StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
        let mut parser = SseParser::new();
        let mut events: Vec<SseEvent> = Vec::new();
        parser
            .feed(bait_stream(direction.target).as_bytes(), &mut events)
            .unwrap();
        let mut text_alone = 0;
        for event in &events {
            let mut out = BytesMut::new();
            if translator.gemini_text(event, &mut out).is_some() {
                // Sealed whole by the relay.
                continue;
            }
            if translator.chat_text(event, &mut out).is_none() {
                translator.event_counted(event, &mut out);
            }
            if !translator.wrote_text_alone() {
                continue;
            }
            text_alone += 1;
            assert!(
                String::from_utf8_lossy(&out).contains("sigplain"),
                "{}: the bait is in the text: {}",
                direction.label(),
                String::from_utf8_lossy(&out)
            );
            for items in sealers {
                assert!(
                    matches!(
                        seal_all(&out, &key, to, items),
                        std::borrow::Cow::Borrowed(_)
                    ),
                    "{} {items:?} would seal {}",
                    direction.label(),
                    String::from_utf8_lossy(&out)
                );
            }
        }
        // A Gemini upstream's text chunks go through `gemini_text`, which the relay seals
        // whole; the first text piece may come with the opening events a client is owed.
        if direction.target == Api::Gemini {
            assert_eq!(text_alone, 0, "{}", direction.label());
        } else {
            assert!(
                text_alone >= 2,
                "{}: {text_alone} reads of text alone",
                direction.label()
            );
        }
    }
}
