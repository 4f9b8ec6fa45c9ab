//! Table-driven tests of each direction (requests, answers, streams) and a proptest that any
//! chunking of an upstream stream translates to the same client stream.

use bytes::BytesMut;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::wire::sse::SseParser;

pub(super) const SETTINGS: RequestSettings<'static> = RequestSettings {
    model: "upstream-model",
    default_max_tokens: 8192,
    reasoning: None,
};

pub(super) fn up(direction: Direction, request: Value) -> (Value, Vec<String>) {
    let translated =
        translate_request(direction, request.to_string().as_bytes(), SETTINGS).unwrap();
    (
        serde_json::from_slice(&translated.body).unwrap(),
        translated.dropped,
    )
}

pub(super) fn refused(direction: Direction, request: Value) -> String {
    match translate_request(direction, request.to_string().as_bytes(), SETTINGS) {
        Err(TranslateError::Unsupported { parameter, .. }) => parameter,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn chat_requests_become_messages_requests() {
    let (out, dropped) = up(
        Direction::CHAT_TO_MESSAGES,
        json!({
            "model": "team",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "developer", "content": [{"type": "text", "text": "use tools"}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is here?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}
                ]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":\"x\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "look", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
                {"role": "tool", "tool_call_id": "call_2", "content": "a dog"},
                {"role": "user", "content": "thanks"}
            ],
            "tools": [{"type": "function", "function": {"name": "look", "description": "looks", "parameters": {"type": "object", "properties": {"at": {"type": "string"}}}}}],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "stop": "END",
            "temperature": 0.5,
            "top_p": 0.9,
            "user": "u-1",
            "seed": 7,
            "presence_penalty": 0.1,
            "stream": true,
            "stream_options": {"include_usage": true}
        }),
    );
    assert_eq!(out["model"], "upstream-model");
    assert_eq!(
        out["max_tokens"], 8192,
        "the default when the client sent none"
    );
    assert_eq!(
        out["system"],
        json!([{"type":"text","text":"be brief"},{"type":"text","text":"use tools"}])
    );
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(
        messages[0]["content"][1]["source"]["media_type"],
        "image/jpeg"
    );
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["input"], json!({"at": "x"}));
    assert_eq!(messages[1]["content"][1]["id"], "call_2");
    // Both tool results and the next user text in one user message, results first.
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results[0]["tool_use_id"], "call_1");
    assert_eq!(results[1]["content"], "a dog");
    assert_eq!(results[2], json!({"type":"text","text":"thanks"}));
    assert_eq!(
        out["tools"][0]["input_schema"]["properties"]["at"]["type"],
        "string"
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type":"any","disable_parallel_tool_use":true})
    );
    assert_eq!(out["stop_sequences"], json!(["END"]));
    assert_eq!(out["temperature"], 0.5);
    assert_eq!(out["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(out["stream"], true);
    assert_eq!(dropped, vec!["seed", "presence_penalty"]);
}

#[test]
fn reasoning_effort_becomes_a_thinking_budget_with_room_above_it() {
    for (effort, budget) in [("low", 2048), ("medium", 8192), ("high", 24576)] {
        let (out, dropped) = up(
            Direction::CHAT_TO_MESSAGES,
            json!({"model": "m", "messages": [{"role":"user","content":"hi"}],
                   "reasoning_effort": effort, "max_completion_tokens": 1000, "temperature": 0.2}),
        );
        assert_eq!(
            out["thinking"],
            json!({"type":"enabled","budget_tokens":budget})
        );
        assert!(out["max_tokens"].as_u64().unwrap() > budget);
        assert!(out.get("temperature").is_none());
        assert_eq!(dropped, vec!["temperature"]);
    }
    let (out, _) = up(
        Direction::MESSAGES_TO_CHAT,
        json!({"model": "m", "max_tokens": 100, "messages": [{"role":"user","content":"hi"}],
               "thinking": {"type": "enabled", "budget_tokens": 10000}}),
    );
    assert_eq!(out["reasoning_effort"], "medium");
}

#[test]
fn meaning_changing_parameters_are_refused_before_sending() {
    let base = |extra: Value| {
        let mut request = json!({"model": "m", "messages": [{"role":"user","content":"hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        request
    };
    assert_eq!(
        refused(Direction::CHAT_TO_MESSAGES, base(json!({"n": 2}))),
        "n"
    );
    assert_eq!(
        refused(Direction::CHAT_TO_MESSAGES, base(json!({"logprobs": true}))),
        "logprobs"
    );
    assert_eq!(
        refused(
            Direction::CHAT_TO_MESSAGES,
            base(json!({"top_logprobs": 2}))
        ),
        "top_logprobs"
    );
    assert_eq!(
        refused(
            Direction::CHAT_TO_MESSAGES,
            base(json!({"modalities": ["text", "audio"]}))
        ),
        "audio"
    );
    assert_eq!(
        refused(
            Direction::CHAT_TO_MESSAGES,
            base(json!({"prediction": {"type": "content", "content": "x"}}))
        ),
        "prediction"
    );
    assert_eq!(
        refused(
            Direction::RESPONSES_TO_MESSAGES,
            json!({"model": "m", "input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]})
        ),
        "file_search"
    );
    assert_eq!(
        refused(
            Direction::RESPONSES_TO_MESSAGES,
            json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"})
        ),
        "previous_response_id"
    );
}

#[test]
fn responses_requests_become_messages_requests() {
    let (out, dropped) = up(
        Direction::RESPONSES_TO_MESSAGES,
        json!({
            "model": "m",
            "instructions": "you are codex",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandboxed"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"},
                    {"type": "input_image", "image_url": "https://example.test/a.png"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "not ours"},
                {"type": "function_call", "call_id": "call_9", "name": "shell", "arguments": "{\"cmd\":[\"ls\"]}"},
                {"type": "function_call_output", "call_id": "call_9", "output": "a.txt"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "one file"}]},
                {"role": "user", "content": "and now?"}
            ],
            "tools": [{"type": "function", "name": "shell", "description": "runs", "parameters": {"type": "object"}, "strict": false}],
            "tool_choice": "auto",
            "reasoning": {"effort": "high"},
            "max_output_tokens": 30000,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "abc",
            "stream": true
        }),
    );
    assert_eq!(
        out["system"],
        json!([{"type":"text","text":"you are codex"},{"type":"text","text":"sandboxed"}])
    );
    let messages = out["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(
        messages[0]["content"][1]["source"]["url"],
        "https://example.test/a.png"
    );
    assert_eq!(messages[1]["content"][0]["input"], json!({"cmd": ["ls"]}));
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_9");
    assert_eq!(out["tools"][0]["name"], "shell");
    assert_eq!(out["thinking"]["budget_tokens"], 24576);
    assert_eq!(out["max_tokens"], 30000);
    assert_eq!(dropped, vec!["prompt_cache_key"]);
}

#[test]
fn messages_requests_become_chat_requests() {
    let (out, dropped) = up(
        Direction::MESSAGES_TO_CHAT,
        json!({
            "model": "m",
            "system": [{"type": "text", "text": "you are claude code"}],
            "max_tokens": 2048,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read it"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/a"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "contents"}]},
                    {"type": "text", "text": "summarise"}]}
            ],
            "tools": [{"name": "Read", "description": "reads", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
            "tool_choice": {"type": "tool", "name": "Read", "disable_parallel_tool_use": true},
            "stop_sequences": ["X"],
            "metadata": {"user_id": "user_abc"},
            "top_k": 5,
            "stream": true
        }),
    );
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "you are claude code"})
    );
    assert_eq!(
        messages[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,QUJD"
    );
    assert_eq!(messages[2]["content"], "reading");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"/a\"}"
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "toolu_1", "content": "contents"})
    );
    assert_eq!(messages[4], json!({"role": "user", "content": "summarise"}));
    assert_eq!(out["max_completion_tokens"], 2048);
    assert_eq!(
        out["tools"][0]["function"]["parameters"]["properties"]["path"]["type"],
        "string"
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type":"function","function":{"name":"Read"}})
    );
    assert_eq!(out["parallel_tool_calls"], false);
    assert_eq!(out["stop"], json!(["X"]));
    assert_eq!(out["user"], "user_abc");
    assert_eq!(out["stream_options"], json!({"include_usage": true}));
    assert_eq!(dropped, vec!["top_k"]);
}

pub(super) fn anthropic_answer() -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "let me see", "signature": "sig-1"},
            {"type": "text", "text": "I will look."},
            {"type": "tool_use", "id": "toolu_7", "name": "look", "input": {"at": "x"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5, "output_tokens": 20}
    })
}

/// The thinking block a reasoning item carries (before the node seals it).
pub(super) fn carried_block(item: &Value) -> Value {
    super::thinking_carry::block_of(item["encrypted_content"].as_str().unwrap()).unwrap()
}

pub(super) fn down(direction: Direction, answer: &Value) -> Value {
    let body = translate_answer(
        direction,
        answer.to_string().as_bytes(),
        1_700_000_000,
        &Echo::default(),
    )
    .unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn messages_answers_become_chat_answers() {
    let out = down(Direction::CHAT_TO_MESSAGES, &anthropic_answer());
    let choice = &out["choices"][0];
    assert_eq!(out["object"], "chat.completion");
    assert_eq!(out["created"], 1_700_000_000u64);
    assert_eq!(choice["message"]["content"], "I will look.");
    assert_eq!(choice["message"]["reasoning_content"], "let me see");
    assert_eq!(choice["message"]["tool_calls"][0]["id"], "toolu_7");
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"at\":\"x\"}"
    );
    assert_eq!(choice["finish_reason"], "tool_calls");
    // prompt_tokens includes cache reads and writes; cached_tokens = the reads.
    assert_eq!(out["usage"]["prompt_tokens"], 105);
    assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 90);
    assert_eq!(out["usage"]["completion_tokens"], 20);
    assert_eq!(out["usage"]["total_tokens"], 125);
}

#[test]
fn messages_answers_become_stateless_responses() {
    let out = down(Direction::RESPONSES_TO_MESSAGES, &anthropic_answer());
    assert_eq!(out["object"], "response");
    assert_eq!(out["id"], "resp_qrt_01");
    assert_eq!(out["store"], false);
    assert_eq!(out["status"], "completed");
    let kinds: Vec<&str> = out["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    assert_eq!(
        carried_block(&out["output"][0]),
        json!({"type": "thinking", "thinking": "let me see", "signature": "sig-1"})
    );
    assert_eq!(out["output"][1]["content"][0]["text"], "I will look.");
    assert_eq!(out["output"][2]["call_id"], "toolu_7");
    assert_eq!(out["output"][2]["arguments"], "{\"at\":\"x\"}");
    assert_eq!(out["usage"]["input_tokens"], 105);
    assert_eq!(out["usage"]["input_tokens_details"]["cached_tokens"], 90);
    let mut cut = anthropic_answer();
    cut["stop_reason"] = json!("max_tokens");
    assert_eq!(
        down(Direction::RESPONSES_TO_MESSAGES, &cut)["status"],
        "incomplete"
    );
}

#[test]
fn chat_answers_become_messages_answers() {
    let answer = json!({
        "id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "checking", "reasoning_content": "think",
            "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "Read", "arguments": "{\"path\":\"/a\"}"}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107, "prompt_tokens_details": {"cached_tokens": 64}}
    });
    let out = down(Direction::MESSAGES_TO_CHAT, &answer);
    assert_eq!(out["type"], "message");
    assert_eq!(out["id"], "msg_9");
    assert_eq!(out["content"][0]["type"], "thinking");
    assert_eq!(
        out["content"][1],
        json!({"type": "text", "text": "checking"})
    );
    assert_eq!(
        out["content"][2],
        json!({"type": "tool_use", "id": "call_3", "name": "Read", "input": {"path": "/a"}})
    );
    assert_eq!(out["stop_reason"], "tool_use");
    assert_eq!(
        out["usage"]["input_tokens"], 36,
        "Anthropic's input excludes cache reads"
    );
    assert_eq!(out["usage"]["cache_read_input_tokens"], 64);
    assert_eq!(out["usage"]["output_tokens"], 7);
}

/// An Anthropic stream with thinking, text and a tool call whose arguments come in pieces.
pub(super) fn anthropic_stream() -> String {
    let events = [
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"cache_read_input_tokens":40,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
        ),
        ("ping", json!({"type":"ping"})),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo é"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":1}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"look","input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"at\":"}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"x\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":2}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ];
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// An OpenAI chat stream with reasoning, text and a tool call in pieces, then usage.
pub(super) fn chat_stream() -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-x",
               "choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
    };
    let chunks = [
        chunk(json!({"role":"assistant","content":""}), Value::Null),
        chunk(json!({"reasoning_content":"mm"}), Value::Null),
        chunk(json!({"content":"Hi "}), Value::Null),
        chunk(json!({"content":"there"}), Value::Null),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Read","arguments":""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"th\":1}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],
               "usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59,"prompt_tokens_details":{"cached_tokens":32}}}),
    ];
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

/// Feeds `stream` to a translator in the pieces `cuts` make and returns the client's events.
pub(super) fn translate_stream(
    direction: Direction,
    stream: &str,
    cuts: &[usize],
) -> Vec<(Option<String>, String)> {
    let mut translator = StreamTranslator::new(direction, true, 1_700_000_000, Default::default());
    let mut parser = SseParser::new();
    let mut out = BytesMut::new();
    let bytes = stream.as_bytes();
    let mut start = 0;
    let mut events = Vec::new();
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(start, bytes.len());
        parser.feed(&bytes[start..cut], &mut events).unwrap();
        for event in events.drain(..) {
            translator.event(&event, &mut out);
        }
        start = cut;
    }
    if let Some(last) = parser.finish().unwrap() {
        translator.event(&last, &mut out);
    }
    translator.finish(&mut out);
    let mut client = SseParser::new();
    let mut parsed = Vec::new();
    client.feed(&out, &mut parsed).unwrap();
    parsed
        .into_iter()
        .map(|e| (e.event.map(|name| name.into_owned()), e.data))
        .collect()
}

pub(super) fn data_of(events: &[(Option<String>, String)]) -> Vec<Value> {
    events
        .iter()
        .filter(|(_, data)| data != "[DONE]")
        .map(|(_, data)| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn anthropic_streams_become_chat_chunks() {
    let events = translate_stream(Direction::CHAT_TO_MESSAGES, &anthropic_stream(), &[]);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks = data_of(&events);
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0).map(|c| &c["delta"]))
        .collect();
    assert_eq!(deltas[0]["role"], "assistant");
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| d["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning, "hm");
    let text: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, "Hello é");
    let arguments: String = deltas
        .iter()
        .filter_map(|d| d["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, "{\"at\":\"x\"}");
    assert!(deltas.iter().any(|d| d["tool_calls"][0]["id"] == "toolu_1"));
    assert!(deltas
        .iter()
        .all(|d| d["tool_calls"].is_null() || d["tool_calls"][0]["index"] == 0));
    let finish: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|c| &c["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], 43);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 40);
    assert_eq!(usage["completion_tokens"], 12);
    assert!(events.iter().all(|(_, data)| !data.contains("ping")));
}

#[test]
fn anthropic_streams_become_the_responses_event_sequence() {
    let events = translate_stream(Direction::RESPONSES_TO_MESSAGES, &anthropic_stream(), &[]);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let data = data_of(&events);
    for (n, event) in data.iter().enumerate() {
        assert_eq!(event["sequence_number"], n as u64);
        assert_eq!(event["type"], names[n]);
    }
    let completed = &data.last().unwrap()["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["store"], false);
    assert_eq!(
        carried_block(&completed["output"][0]),
        json!({"type": "thinking", "thinking": "hm", "signature": "SIG"})
    );
    assert_eq!(completed["output"][1]["content"][0]["text"], "Hello é");
    assert_eq!(completed["output"][2]["arguments"], "{\"at\":\"x\"}");
    assert_eq!(completed["usage"]["input_tokens"], 43);
    assert_eq!(completed["usage"]["output_tokens"], 12);
}

#[test]
fn chat_streams_become_anthropic_events() {
    let events = translate_stream(Direction::MESSAGES_TO_CHAT, &chat_stream(), &[]);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
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
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let data = data_of(&events);
    assert_eq!(data[1]["content_block"]["type"], "thinking");
    assert_eq!(
        data[8]["content_block"],
        json!({"type":"tool_use","id":"call_1","name":"Read","input":{}})
    );
    let json: String = data
        .iter()
        .filter_map(|d| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(json, "{\"path\":1}");
    let delta = &data[12];
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["input_tokens"], 18);
    assert_eq!(delta["usage"]["cache_read_input_tokens"], 32);
    assert_eq!(delta["usage"]["output_tokens"], 9);
}

#[test]
fn upstream_error_events_become_the_clients() {
    let stream = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let events = translate_stream(Direction::CHAT_TO_MESSAGES, stream, &[]);
    let data = data_of(&events);
    assert_eq!(data[0]["error"]["message"], "Overloaded");
    let events = translate_stream(Direction::RESPONSES_TO_MESSAGES, stream, &[]);
    assert_eq!(events[0].0.as_deref(), Some("error"));
    assert_eq!(data_of(&events)[0]["code"], "overloaded_error");
    let events = translate_stream(
        Direction::MESSAGES_TO_CHAT,
        "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n",
        &[],
    );
    assert_eq!(events[0].0.as_deref(), Some("error"));
    assert_eq!(data_of(&events)[0]["error"]["message"], "boom");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// However the upstream's bytes are cut, the client gets the same events.
    #[test]
    fn any_chunking_translates_to_the_same_stream(mut cuts in proptest::collection::vec(0usize..4000, 0..40)) {
        cuts.sort_unstable();
        for (direction, stream) in [
            (Direction::CHAT_TO_MESSAGES, anthropic_stream()),
            (Direction::RESPONSES_TO_MESSAGES, anthropic_stream()),
            (Direction::MESSAGES_TO_CHAT, chat_stream()),
        ] {
            let whole = translate_stream(direction, &stream, &[]);
            let pieces = translate_stream(direction, &stream, &cuts);
            prop_assert_eq!(whole, pieces);
        }
    }
}

#[test]
fn reasoning_items_become_thinking_blocks_only_for_their_connection() {
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let block = json!({"type": "thinking", "thinking": "hm", "signature": "SIG"});
    let sealed =
        super::thinking_carry::encrypted(&key, "an-1", &super::thinking_carry::carried(&block));
    let request = json!({"model": "m", "reasoning": {"effort": "low"}, "input": [
        {"role": "user", "content": "look"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": sealed},
        {"type": "function_call", "call_id": "toolu_1", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "seen"},
    ]});
    let on = |connection: &str| {
        let settings = RequestSettings {
            reasoning: Some(ReasoningKey {
                key: &key,
                client: super::thinking_carry::TEST_CLIENT,
                connection,
            }),
            ..SETTINGS
        };
        let translated = translate_request(
            Direction::RESPONSES_TO_MESSAGES,
            request.to_string().as_bytes(),
            settings,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&translated.body).unwrap();
        (body, translated.reasoning, translated.dropped)
    };
    // Its own connection: the block opens the assistant turn, before the call; thinking on.
    let (body, counts, dropped) = on("an-1");
    assert_eq!(body["messages"][1]["content"][0], block);
    assert_eq!(body["messages"][1]["content"][1]["type"], "tool_use");
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_eq!(
        counts,
        ReasoningCounts {
            restored: 1,
            left_out: 0
        }
    );
    assert!(dropped.is_empty(), "{dropped:?}");
    // Another connection: left out, and a tool turn without its thinking cannot have
    // thinking on (Anthropic refuses it), so the effort is dropped and named.
    let (body, counts, dropped) = on("an-2");
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
    assert!(body.get("thinking").is_none(), "{body}");
    assert_eq!(
        counts,
        ReasoningCounts {
            restored: 0,
            left_out: 1
        }
    );
    assert_eq!(dropped, ["reasoning"]);
}

#[test]
fn a_chat_tool_loop_cannot_keep_thinking_on() {
    let (out, dropped) = up(
        Direction::CHAT_TO_MESSAGES,
        json!({"model": "m", "reasoning_effort": "high", "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "seen"}]}),
    );
    assert!(out.get("thinking").is_none(), "{out}");
    assert_eq!(dropped, ["reasoning_effort"]);
}

#[test]
fn a_namespace_of_tools_is_flattened_and_built_in_tools_refused() {
    let (out, _) = up(
        Direction::RESPONSES_TO_MESSAGES,
        json!({"model": "m", "input": "hi", "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [
                {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
                {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]}]}),
    );
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["exec_command", "spawn_agent"]);
    assert_eq!(
        refused(
            Direction::RESPONSES_TO_MESSAGES,
            json!({"model": "m", "input": "hi", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}),
        ),
        "code_interpreter"
    );
}
