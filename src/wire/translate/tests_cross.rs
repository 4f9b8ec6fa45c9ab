//! The pairs the hub added (Responses on a chat-only host, Messages on a responses-only host,
//! Chat Completions on a responses-only host): requests, answers, streams and errors, and the
//! pieces every pair shares (images, tool choices, merged turns).

use proptest::prelude::*;
use serde_json::{json, Value};

use super::tests::{chat_stream, data_of, down, refused, translate_stream, up};
use super::*;

/// A Codex-style turn: instructions, a developer message, a tool loop, reasoning effort.
fn codex_request() -> Value {
    json!({
        "model": "m",
        "instructions": "you are codex",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandboxed"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"},
                {"type": "input_image", "image_url": "data:image/png;base64,QUJD"}]},
            {"type": "function_call", "call_id": "call_9", "name": "shell", "arguments": "{\"cmd\":[\"ls\"]}"},
            {"type": "function_call_output", "call_id": "call_9", "output": "a.txt"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "one file"}]},
            {"role": "user", "content": "and now?"}
        ],
        "tools": [{"type": "function", "name": "shell", "description": "runs", "parameters": {"type": "object"}, "strict": false}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "high"},
        "max_output_tokens": 3000,
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc",
        "stream": true
    })
}

#[test]
fn responses_requests_become_chat_requests() {
    let (out, dropped) = up(Direction::RESPONSES_TO_CHAT, codex_request());
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "you are codex\nsandboxed"})
    );
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(
        messages[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,QUJD"
    );
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_9");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        "{\"cmd\":[\"ls\"]}"
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_9", "content": "a.txt"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "assistant", "content": "one file"})
    );
    assert_eq!(messages[5], json!({"role": "user", "content": "and now?"}));
    assert_eq!(out["tools"][0]["function"]["name"], "shell");
    assert_eq!(out["tool_choice"], "required");
    assert_eq!(out["parallel_tool_calls"], false);
    assert_eq!(out["reasoning_effort"], "high");
    assert_eq!(out["max_completion_tokens"], 3000);
    assert_eq!(out["stream_options"], json!({"include_usage": true}));
    assert_eq!(dropped, vec!["prompt_cache_key"]);
}

#[test]
fn messages_requests_become_responses_requests() {
    let (out, dropped) = up(
        Direction::MESSAGES_TO_RESPONSES,
        json!({
            "model": "m",
            "system": [{"type": "text", "text": "you are claude code"}],
            "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 30000},
            "messages": [
                {"role": "user", "content": "read /a"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/a"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "contents", "is_error": true},
                    {"type": "text", "text": "summarise"}]}
            ],
            "tools": [{"name": "Read", "description": "reads", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "Read"},
            "metadata": {"user_id": "user_abc"},
            "stream": true
        }),
    );
    assert_eq!(out["instructions"], "you are claude code");
    assert_eq!(
        out["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read /a"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "reading"}]},
            {"type": "function_call", "call_id": "toolu_1", "name": "Read", "arguments": "{\"path\":\"/a\"}"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": "Error: contents"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "summarise"}]}
        ])
    );
    assert_eq!(
        out["tools"],
        json!([{"type": "function", "name": "Read", "description": "reads", "parameters": {"type": "object"}}])
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type": "function", "name": "Read"})
    );
    // Thinking asked for is thinking shown: the host's reasoning summary becomes its text.
    assert_eq!(
        out["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(out["max_output_tokens"], 2048);
    assert_eq!(out["store"], false);
    assert_eq!(out["stream"], true);
    assert_eq!(out["user"], "user_abc");
    assert!(dropped.is_empty(), "{dropped:?}");
}

#[test]
fn chat_requests_become_responses_requests() {
    let (out, dropped) = up(
        Direction::CHAT_TO_RESPONSES,
        json!({"model": "m", "seed": 3, "max_tokens": 50, "stop": ["X"], "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"}]}),
    );
    assert_eq!(out["instructions"], "be brief");
    assert_eq!(
        out["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    );
    assert_eq!(out["max_output_tokens"], 50);
    assert_eq!(dropped, vec!["seed"]);
    // A chat client's effort asks for no visible reasoning, as on OpenAI's own chat API.
    let (out, _) = up(
        Direction::CHAT_TO_RESPONSES,
        json!({"model": "m", "reasoning_effort": "low", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(out["reasoning"], json!({"effort": "low"}));
    // What no translation carries is refused by name, whichever the target.
    assert_eq!(
        refused(
            Direction::CHAT_TO_RESPONSES,
            json!({"model": "m", "logprobs": true, "messages": [{"role": "user", "content": "hi"}]})
        ),
        "logprobs"
    );
}

/// A Responses answer with reasoning, text and a call.
fn responses_answer(status: &str, arguments: &str) -> Value {
    json!({
        "id": "resp_7", "object": "response", "created_at": 1, "status": status, "model": "gpt-x",
        "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "gAAA"},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "checking", "annotations": []}]},
            {"id": "fc_1", "type": "function_call", "call_id": "call_3", "name": "Read", "arguments": arguments, "status": "completed"}
        ],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 7,
                  "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 107}
    })
}

#[test]
fn responses_answers_become_messages_and_chat_answers() {
    let out = down(
        Direction::MESSAGES_TO_RESPONSES,
        &responses_answer("completed", "{\"path\":\"/a\"}"),
    );
    assert_eq!(out["id"], "msg_resp_7");
    assert_eq!(
        out["content"][0],
        json!({"type": "thinking", "thinking": "think", "signature": ""})
    );
    assert_eq!(
        out["content"][1],
        json!({"type": "text", "text": "checking"})
    );
    assert_eq!(
        out["content"][2],
        json!({"type": "tool_use", "id": "call_3", "name": "Read", "input": {"path": "/a"}})
    );
    assert_eq!(out["stop_reason"], "tool_use");
    assert_eq!(out["usage"]["input_tokens"], 36);
    assert_eq!(out["usage"]["cache_read_input_tokens"], 64);
    // Cut short by max_output_tokens: the arguments as the text they are, never an error.
    let out = down(
        Direction::MESSAGES_TO_RESPONSES,
        &responses_answer("incomplete", "{\"pa"),
    );
    assert_eq!(out["stop_reason"], "max_tokens");
    assert_eq!(out["content"][2]["input"], "{\"pa");

    let out = down(
        Direction::CHAT_TO_RESPONSES,
        &responses_answer("completed", "{}"),
    );
    let choice = &out["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "checking");
    assert_eq!(choice["message"]["reasoning_content"], "think");
    assert_eq!(choice["message"]["tool_calls"][0]["id"], "call_3");
    assert_eq!(out["usage"]["prompt_tokens"], 100);
    assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
    assert_eq!(
        out["usage"]["completion_tokens_details"]["reasoning_tokens"],
        3
    );
    // Nothing in it at all: an empty answer.
    let out = down(Direction::CHAT_TO_RESPONSES, &json!({"id": "resp_0"}));
    assert_eq!(out["choices"][0]["message"]["content"], "");
}

#[test]
fn chat_answers_become_responses_answers() {
    let answer = json!({
        "id": "chatcmpl-9", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "length", "message": {
            "role": "assistant", "content": "checking", "reasoning_content": "think",
            "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "Read", "arguments": "{\"pa"}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 64}}
    });
    let out = down(Direction::RESPONSES_TO_CHAT, &answer);
    assert_eq!(out["id"], "resp_qrt_9");
    assert_eq!(out["status"], "incomplete");
    let kinds: Vec<&str> = out["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    assert_eq!(out["output"][0]["summary"][0]["text"], "think");
    assert!(
        out["output"][0].get("encrypted_content").is_none(),
        "no signature to carry"
    );
    assert_eq!(out["output"][2]["arguments"], "{\"pa");
    assert_eq!(out["usage"]["input_tokens"], 100);
    assert_eq!(out["usage"]["input_tokens_details"]["cached_tokens"], 64);
    // No choice at all: an empty, complete response.
    let out = down(Direction::RESPONSES_TO_CHAT, &json!({"choices": []}));
    assert_eq!(out["status"], "completed");
    assert_eq!(out["output"], json!([]));
}

/// A Responses stream: reasoning, text, a call whose arguments come in pieces, usage.
pub(super) fn responses_stream() -> String {
    let events = [
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_s", "object": "response", "status": "in_progress", "model": "gpt-x", "output": []}}),
        json!({"type": "response.in_progress", "sequence_number": 1, "response": {"id": "resp_s", "status": "in_progress", "model": "gpt-x", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "mm"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "mm"}]}}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
        json!({"type": "response.content_part.added", "output_index": 1, "part": {"type": "output_text", "text": ""}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "Hi "}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "there"}),
        json!({"type": "response.output_text.done", "output_index": 1, "text": "Hi there"}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message", "content": [{"type": "output_text", "text": "Hi there"}]}}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "Read", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"pa"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "th\":1}"}),
        json!({"type": "response.function_call_arguments.done", "output_index": 2, "arguments": "{\"path\":1}"}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "Read", "arguments": "{\"path\":1}"}}),
        json!({"type": "response.completed", "response": {"id": "resp_s", "status": "completed", "model": "gpt-x", "output": [],
            "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 32}, "output_tokens": 9, "total_tokens": 59}}}),
    ];
    events
        .iter()
        .map(|data| {
            format!(
                "event: {}\ndata: {data}\n\n",
                data["type"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn responses_streams_become_anthropic_events() {
    let events = translate_stream(Direction::MESSAGES_TO_RESPONSES, &responses_stream(), &[]);
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
    assert_eq!(data[0]["message"]["id"], "msg_resp_s");
    assert_eq!(data[1]["content_block"]["type"], "thinking");
    assert_eq!(
        data[8]["content_block"],
        json!({"type": "tool_use", "id": "call_1", "name": "Read", "input": {}})
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
fn responses_streams_become_chat_chunks() {
    let events = translate_stream(Direction::CHAT_TO_RESPONSES, &responses_stream(), &[]);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks = data_of(&events);
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0).map(|c| &c["delta"]))
        .collect();
    assert_eq!(deltas[0]["role"], "assistant");
    let text: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, "Hi there");
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| d["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning, "mm");
    let arguments: String = deltas
        .iter()
        .filter_map(|d| d["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, "{\"path\":1}");
    let finish: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|c| &c["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], 50);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 32);
}

#[test]
fn chat_streams_become_the_responses_event_sequence() {
    let events = translate_stream(Direction::RESPONSES_TO_CHAT, &chat_stream(), &[]);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    let data = data_of(&events);
    for (n, event) in data.iter().enumerate() {
        assert_eq!(event["sequence_number"], n as u64);
    }
    let completed = &data.last().unwrap()["response"];
    let kinds: Vec<&str> = completed["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    assert_eq!(completed["output"][1]["content"][0]["text"], "Hi there");
    assert_eq!(completed["output"][2]["arguments"], "{\"path\":1}");
    assert_eq!(completed["output"][2]["call_id"], "call_1");
    assert_eq!(completed["usage"]["input_tokens"], 50);
    assert_eq!(
        completed["usage"]["input_tokens_details"]["cached_tokens"],
        32
    );
}

/// A reasoning model's host sends a reasoning item whatever was asked, its summary empty
/// unless one was asked for: no text, no thinking block (as in a whole answer), streamed or
/// whole; a summary sent only in the `done` item is still carried.
#[test]
fn an_empty_reasoning_item_opens_no_thinking_block() {
    let stream = |summary: Value| {
        [
            json!({"type": "response.created", "response": {"id": "resp_r", "model": "m"}}),
            json!({"type": "response.output_item.added", "item": {"type": "reasoning", "summary": []}}),
            json!({"type": "response.output_item.done", "item": {"type": "reasoning", "summary": summary}}),
            json!({"type": "response.output_item.added", "item": {"type": "message", "content": []}}),
            json!({"type": "response.output_text.delta", "delta": "Hi"}),
            json!({"type": "response.output_item.done", "item": {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}}),
            json!({"type": "response.completed", "response": {"id": "resp_r", "status": "completed", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ]
        .iter()
        .map(|d| format!("data: {d}\n\n"))
        .collect::<String>()
    };
    let blocks = |summary: Value| {
        let events = translate_stream(Direction::MESSAGES_TO_RESPONSES, &stream(summary), &[]);
        let data = data_of(&events);
        let starts: Vec<Value> = data
            .iter()
            .filter(|d| d["type"] == "content_block_start")
            .map(|d| d["content_block"]["type"].clone())
            .collect();
        let stops = data
            .iter()
            .filter(|d| d["type"] == "content_block_stop")
            .count();
        let indexes: Vec<Value> = data
            .iter()
            .filter(|d| d["type"] == "content_block_start")
            .map(|d| d["index"].clone())
            .collect();
        (starts, stops, indexes)
    };
    assert_eq!(blocks(json!([])), (vec![json!("text")], 1, vec![json!(0)]));
    let thought = json!([{"type": "summary_text", "text": "mm"}]);
    assert_eq!(
        blocks(thought),
        (
            vec![json!("thinking"), json!("text")],
            2,
            vec![json!(0), json!(1)]
        )
    );
    // Chat Completions clients see the same: reasoning_content only when there is some.
    let events = translate_stream(Direction::CHAT_TO_RESPONSES, &stream(json!([])), &[]);
    assert!(
        data_of(&events)
            .iter()
            .all(|c| c["choices"][0]["delta"].get("reasoning_content").is_none()),
        "{events:?}"
    );
}

#[test]
fn a_host_that_sends_items_whole_still_has_them_carried() {
    let stream = [
        json!({"type": "response.created", "response": {"id": "resp_w", "model": "m"}}),
        json!({"type": "response.output_item.added", "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}}),
        json!({"type": "response.output_item.done", "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\":1}"}}),
        json!({"type": "response.output_item.added", "item": {"type": "web_search_call"}}),
        json!({"type": "response.output_item.done", "item": {"type": "web_search_call"}}),
        json!({"type": "response.completed", "response": {"id": "resp_w", "status": "completed", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ]
    .iter()
    .map(|d| format!("data: {d}\n\n"))
    .collect::<String>();
    let events = translate_stream(Direction::CHAT_TO_RESPONSES, &stream, &[]);
    let chunks = data_of(&events);
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, "{\"a\":1}");
}

#[test]
fn upstream_errors_in_a_responses_stream_become_the_clients() {
    let stream = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
    let events = translate_stream(Direction::MESSAGES_TO_RESPONSES, stream, &[]);
    assert_eq!(events[0].0.as_deref(), Some("error"));
    assert_eq!(data_of(&events)[0]["error"]["message"], "boom");
    let events = translate_stream(Direction::CHAT_TO_RESPONSES, stream, &[]);
    assert_eq!(data_of(&events)[0]["error"]["message"], "boom");
}

#[test]
fn errors_take_the_clients_shape_for_every_pair() {
    let openai = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    for direction in Direction::ALL {
        let out: Value = serde_json::from_slice(&error_body(direction, 429, openai)).unwrap();
        assert_eq!(
            out["error"]["message"], "Rate limit reached",
            "{direction:?}"
        );
        assert_eq!(
            out.get("type").is_some(),
            direction.client == Api::Messages,
            "{direction:?}"
        );
    }
}

#[test]
fn images_tool_choices_and_turns_cross_every_pair() {
    // Images: data URLs ↔ base64 sources, http URLs ↔ url sources, and back.
    let request = json!({"model": "m", "max_tokens": 10, "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}}]},
            {"role": "user", "content": "two turns of one role merge"}]});
    let (chat, _) = up(Direction::MESSAGES_TO_CHAT, request.clone());
    assert_eq!(chat["messages"].as_array().unwrap().len(), 1);
    let parts = &chat["messages"][0]["content"];
    assert_eq!(parts[0]["image_url"]["url"], "data:image/png;base64,QUJD");
    assert_eq!(parts[1]["image_url"]["url"], "https://example.test/a.png");
    assert_eq!(chat["tool_choice"], "required");
    assert_eq!(chat["parallel_tool_calls"], false);
    let mut back = chat.clone();
    back["model"] = json!("m");
    let (messages, _) = up(Direction::CHAT_TO_MESSAGES, back);
    assert_eq!(
        messages["messages"][0]["content"][0]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "QUJD"})
    );
    assert_eq!(
        messages["messages"][0]["content"][1]["source"],
        json!({"type": "url", "url": "https://example.test/a.png"})
    );
    assert_eq!(
        messages["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let (responses, _) = up(Direction::MESSAGES_TO_RESPONSES, request);
    assert_eq!(
        responses["input"][0]["content"][0],
        json!({"type": "input_image", "image_url": "data:image/png;base64,QUJD"})
    );
    assert_eq!(responses["tool_choice"], "required");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// However the upstream's bytes are cut, the client gets the same events, for the pairs
    /// the hub added.
    #[test]
    fn any_chunking_translates_the_new_pairs_the_same(mut cuts in proptest::collection::vec(0usize..4000, 0..40)) {
        cuts.sort_unstable();
        for (direction, stream) in [
            (Direction::RESPONSES_TO_CHAT, chat_stream()),
            (Direction::MESSAGES_TO_RESPONSES, responses_stream()),
            (Direction::CHAT_TO_RESPONSES, responses_stream()),
        ] {
            let whole = translate_stream(direction, &stream, &[]);
            let pieces = translate_stream(direction, &stream, &cuts);
            prop_assert_eq!(whole, pieces);
        }
    }
}

/// `request` translated up, and `answer` down with the echo the request left.
fn round(direction: Direction, request: &Value, answer: &Value) -> (Value, Value) {
    let settings = RequestSettings {
        model: "upstream-model",
        default_max_tokens: 8192,
        reasoning: None,
    };
    let up = translate_request(direction, request.to_string().as_bytes(), settings).unwrap();
    let body = translate_answer(direction, answer.to_string().as_bytes(), 7, &up.echo).unwrap();
    (
        serde_json::from_slice(&up.body).unwrap(),
        serde_json::from_slice(&body).unwrap(),
    )
}

#[test]
fn a_translated_response_is_a_whole_responses_object_echoing_its_request() {
    let tools = json!([{"type": "function", "name": "look", "parameters": {"type": "object"}}]);
    let request = json!({"model": "m", "input": "hi", "tools": tools, "tool_choice": "required",
        "temperature": 0.3, "top_p": 0.5, "instructions": "be brief", "max_output_tokens": 500,
        "text": {"format": {"type": "text"}, "verbosity": "low"}, "metadata": {"k": "v"}});
    let (_, out) = round(
        Direction::RESPONSES_TO_MESSAGES,
        &request,
        &super::tests::anthropic_answer(),
    );
    assert_eq!(out["tools"], tools);
    assert_eq!(out["tool_choice"], "required");
    assert_eq!(out["temperature"], 0.3);
    assert_eq!(out["top_p"], 0.5);
    assert_eq!(out["instructions"], "be brief");
    assert_eq!(out["max_output_tokens"], 500);
    assert_eq!(out["text"]["verbosity"], "low");
    assert_eq!(out["metadata"], json!({"k": "v"}));
    assert_eq!(out["completed_at"], 7);
    for field in [
        "background",
        "error",
        "incomplete_details",
        "parallel_tool_calls",
        "previous_response_id",
        "reasoning",
        "service_tier",
        "store",
        "truncation",
        "user",
        "top_logprobs",
    ] {
        assert!(out.get(field).is_some(), "{field} missing: {out}");
    }
    // The stream's objects too.
    let events = {
        let up = translate_request(
            Direction::RESPONSES_TO_MESSAGES,
            request.to_string().as_bytes(),
            RequestSettings {
                model: "m",
                default_max_tokens: 8192,
                reasoning: None,
            },
        )
        .unwrap();
        let mut translator =
            StreamTranslator::new(Direction::RESPONSES_TO_MESSAGES, false, 7, up.echo);
        let mut parser = crate::wire::sse::SseParser::new();
        let mut parsed = Vec::new();
        parser
            .feed(super::tests::anthropic_stream().as_bytes(), &mut parsed)
            .unwrap();
        let mut out = bytes::BytesMut::new();
        for event in &parsed {
            translator.event(event, &mut out);
        }
        let mut client = crate::wire::sse::SseParser::new();
        let mut events = Vec::new();
        client.feed(&out, &mut events).unwrap();
        events
    };
    let created: Value = serde_json::from_str(&events[0].data).unwrap();
    assert_eq!(created["response"]["tools"], tools);
    assert_eq!(created["response"]["status"], "in_progress");
    let completed: Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
    assert_eq!(completed["response"]["tool_choice"], "required");
}

#[test]
fn json_schema_formats_cross_to_anthropic_structured_outputs_and_back() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let request = json!({"model": "m", "input": "hi",
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": true}}});
    let translated = translate_request(
        Direction::RESPONSES_TO_MESSAGES,
        request.to_string().as_bytes(),
        RequestSettings {
            model: "m",
            default_max_tokens: 8192,
            reasoning: None,
        },
    )
    .unwrap();
    let body: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(
        body["output_format"],
        json!({"type": "json_schema", "schema": schema})
    );
    assert_eq!(translated.anthropic_beta, Some(STRUCTURED_OUTPUTS_BETA));
    // Chat Completions' response_format, both ways through the hub.
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": true}}});
    let (out, _) = up(Direction::CHAT_TO_MESSAGES, chat.clone());
    assert_eq!(out["output_format"]["schema"], schema);
    let (out, _) = up(Direction::CHAT_TO_RESPONSES, chat);
    assert_eq!(
        out["text"]["format"],
        json!({"type": "json_schema", "name": "answer", "schema": schema, "strict": true})
    );
    let (out, _) = up(
        Direction::MESSAGES_TO_CHAT,
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
               "output_format": {"type": "json_schema", "schema": schema}}),
    );
    assert_eq!(out["response_format"]["json_schema"]["schema"], schema);
    // A schema-less JSON mode has no Anthropic equivalent: refused by its client's name (so a
    // target that can carry it is chosen).
    assert_eq!(
        refused(
            Direction::CHAT_TO_MESSAGES,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})
        ),
        "response_format"
    );
}

#[test]
fn freeform_tools_go_as_a_function_of_one_string_and_come_back_as_custom_calls() {
    let request = json!({"model": "m", "input": [
            {"role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": "call_0", "name": "apply_patch", "input": "*** Begin Patch 0"},
            {"type": "custom_tool_call_output", "call_id": "call_0", "output": "done"}],
        "tools": [{"type": "custom", "name": "apply_patch", "description": "patches",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]});
    let answer = json!({"id": "msg_c", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "apply_patch", "input": {"input": "*** Begin Patch 1"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}});
    let (body, out) = round(Direction::RESPONSES_TO_MESSAGES, &request, &answer);
    assert_eq!(body["tools"][0]["name"], "apply_patch");
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["input"]["type"],
        "string"
    );
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"input": "*** Begin Patch 0"})
    );
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "call_0");
    let call = &out["output"][0];
    assert_eq!(call["type"], "custom_tool_call");
    assert_eq!(call["call_id"], "toolu_1");
    assert_eq!(call["input"], "*** Begin Patch 1");
    // Streamed: the input whole when the call ends.
    let up = translate_request(
        Direction::RESPONSES_TO_CHAT,
        request.to_string().as_bytes(),
        RequestSettings {
            model: "m",
            default_max_tokens: 8192,
            reasoning: None,
        },
    )
    .unwrap();
    let chunk = |delta: Value| json!({"id": "chatcmpl-c", "model": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    let stream: String = [
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "apply_patch", "arguments": "{\"inp"}}]})),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ut\":\"*** P\"}"}}]})),
        json!({"id": "chatcmpl-c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]
    .iter()
    .map(|c| format!("data: {c}\n\n"))
    .chain(std::iter::once("data: [DONE]\n\n".to_string()))
    .collect();
    let mut translator = StreamTranslator::new(Direction::RESPONSES_TO_CHAT, false, 7, up.echo);
    let mut parser = crate::wire::sse::SseParser::new();
    let mut parsed = Vec::new();
    parser.feed(stream.as_bytes(), &mut parsed).unwrap();
    let mut out = bytes::BytesMut::new();
    for event in &parsed {
        translator.event(event, &mut out);
    }
    let mut client = crate::wire::sse::SseParser::new();
    let mut events = Vec::new();
    client.feed(&out, &mut events).unwrap();
    let done = events
        .iter()
        .find(|e| e.event.as_deref() == Some("response.custom_tool_call_input.done"))
        .unwrap();
    let done: Value = serde_json::from_str(&done.data).unwrap();
    assert_eq!(done["input"], "*** P");
    assert!(!events
        .iter()
        .any(|e| e.event.as_deref() == Some("response.function_call_arguments.delta")));
}

#[test]
fn web_search_crosses_between_the_providers_own_tools() {
    let (out, _) = up(
        Direction::RESPONSES_TO_MESSAGES,
        json!({"model": "m", "input": "news?", "tools": [
            {"type": "web_search", "external_web_access": false,
             "filters": {"allowed_domains": ["example.test"]},
             "user_location": {"type": "approximate", "country": "FR"}}]}),
    );
    assert_eq!(
        out["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search",
                "allowed_domains": ["example.test"], "user_location": {"type": "approximate", "country": "FR"}}])
    );
    let (out, _) = up(
        Direction::MESSAGES_TO_RESPONSES,
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "news?"}],
               "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}),
    );
    assert_eq!(out["tools"], json!([{"type": "web_search"}]));
    // Chat Completions hosts run none: refused by the client's name, so another target serves.
    assert_eq!(
        refused(
            Direction::RESPONSES_TO_CHAT,
            json!({"model": "m", "input": "news?", "tools": [{"type": "web_search_preview"}]})
        ),
        "web_search_preview"
    );
}
