//! The typed answer path (`typed_answer` read, `answer_write` written) against the `Value`
//! path: for a corpus of answers of each upstream API, every client API gets byte-identical
//! bodies both ways, and each half either gives what the `Value` half gives or declines.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::*;
use crate::wire::usage::{response_summary, ResponseSummary};

const CREATED: u64 = 1_700_000_000;

const NASTY: &str = "Hello \"there\"\n\té ü 日本 🦀 </script> \\ \u{1} \u{7f} \u{2028}";

pub(super) fn chat_corpus() -> Vec<Value> {
    vec![
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": NASTY, "refusal": null,
                "annotations": []}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
                "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 2, "audio_tokens": 0}},
            "service_tier": "default", "system_fingerprint": "fp_1"}),
        json!({"id": "c2", "model": "m", "choices": [{"message": {"content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "shell", "arguments": {"cmd": ["ls"], "a": 1}}},
                {"id": "call_3", "type": "function", "function": {"name": "none", "arguments": null}},
                {"id": "call_4", "type": "function"}]},
            "finish_reason": "tool_calls"}]}),
        json!({"id": "c3", "model": "m", "choices": [{"message": {"content": "answer",
            "reasoning_content": "I think\n\"so\"", "tool_calls": [{"id": "call_9", "function": {"name": "f", "arguments": ""}}]},
            "finish_reason": "length"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
        json!({"id": "c4", "model": "m", "choices": [{"message": {"content": null, "reasoning": "other name",
            "refusal": "I can't help with that."}, "finish_reason": "content_filter"}]}),
        json!({"id": "c5", "model": "m", "choices": [{"message": {"content": "cited", "annotations": [
            {"type": "url_citation", "url_citation": {"start_index": 0, "end_index": 5, "url": "https://a.example", "title": "A"}}]},
            "finish_reason": "stop"}]}),
        json!({"id": "c6", "choices": []}),
        json!({}),
        json!({"model": null, "choices": [{"message": null, "finish_reason": null}], "usage": null}),
        json!({"id": 5, "choices": [{"message": {"content": "x"}}]}),
        json!({"id": "c7", "choices": [{"message": {"content": [{"type": "text", "text": "parts"}]}}]}),
        json!({"id": "c8", "choices": [{"message": {"content": "x"}, "finish_reason": 3}]}),
        json!({"id": "c9", "choices": [{"message": {"content": "x"}}], "usage": [1, 2, 3, 4]}),
        json!({"id": "c10", "choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1.5}}),
        json!({"id": "c11", "choices": ["x", {"message": {"content": "second"}}]}),
        json!({"id": "c12", "choices": [{"message": {"content": "first"}, "finish_reason": "function_call"},
            {"message": {"content": "second"}}]}),
        json!({"id": "c13", "choices": {"message": {"content": "x"}}}),
        json!({"id": "chatcmpl-\u{e9}\"q", "model": {"odd": ["model"]}, "choices": [{"message": {"content": ""}}]}),
    ]
}

fn responses_corpus() -> Vec<Value> {
    vec![
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-4o-mini",
            "output": [{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": NASTY, "annotations": [], "logprobs": []}]}],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 17},
            "tools": [], "text": {"format": {"type": "text"}}}),
        json!({"id": "resp_2", "status": "completed", "model": "m", "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "step one"},
                {"type": "summary_text", "text": "step two"}], "encrypted_content": "abc"},
            {"type": "reasoning", "id": "rs_2", "summary": []},
            {"type": "message", "content": [{"type": "output_text", "text": "part a "},
                {"type": "refusal", "refusal": "and no"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "status": "completed"},
            {"type": "function_call", "call_id": "call_2", "name": "get_weather"},
            {"type": "custom_tool_call", "call_id": "call_3", "name": "patch", "input": "x"}]}),
        json!({"id": "resp_3", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "cut"}]}]}),
        json!({"id": "resp_4", "status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []}),
        json!({"id": "resp_5", "status": "incomplete", "incomplete_details": null}),
        json!({"id": "resp_6", "output": [{"type": "message", "content": [{"type": "output_text", "text": "cited",
            "annotations": [{"type": "url_citation", "start_index": 0, "end_index": 5, "url": "https://a.example", "title": "A"}]}]}]}),
        json!({"id": "resp_7", "output": [{"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "q"}}]}),
        json!({}),
        json!({"id": "resp_8", "output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]}),
        json!({"id": "resp_9", "output": "text"}),
        json!({"id": "resp_10", "output": [{"type": "message", "content": [{"type": "output_text", "text": ""}]}],
            "usage": {"input_tokens": 1, "output_tokens": 1, "input_tokens_details": null}}),
        json!({"id": "resp_11", "model": null, "output": [{"content": [{"text": "no type"}]}]}),
    ]
}

pub(super) fn messages_corpus() -> Vec<Value> {
    vec![
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku",
            "content": [{"type": "text", "text": NASTY}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3,
                "cache_creation_input_tokens": 2, "service_tier": "standard"}}),
        json!({"id": "msg_2", "model": "m", "content": [
            {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "", "signature": ""},
            {"type": "text", "text": "calling"},
            {"type": "text", "text": ""},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "n": [1, 2.5, null]}},
            {"type": "tool_use", "id": "toolu_2", "name": "cut", "input": "{\"partial"},
            {"type": "tool_use", "id": "toolu_3", "name": "none", "input": null},
            {"type": "tool_use", "id": "toolu_4", "name": "absent"},
            {"type": "tool_use", "id": "toolu_5", "name": "empty", "input": {}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 2}}),
        json!({"id": "msg_3", "content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"}),
        json!({"id": "msg_4", "content": [], "stop_reason": "refusal"}),
        json!({"id": "msg_5", "content": [{"type": "text", "text": "cited", "citations": [
            {"type": "web_search_result_location", "url": "https://a.example", "title": "A", "cited_text": "x"}]}]}),
        json!({"id": "msg_6", "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "found"}]}),
        json!({}),
        json!({"id": "msg_7", "content": [{"type": "text", "text": "x", "citations": null}],
            "stop_reason": "model_context_window_exceeded"}),
        json!({"id": "msg_8", "content": [{"type": "text", "text": 5}]}),
        json!({"id": "chatcmpl-9", "model": 7, "content": [{"type": "image", "source": {}}, {"type": "text", "text": "t"}]}),
    ]
}

fn gemini_corpus() -> Vec<Value> {
    vec![
        json!({"candidates": [{"content": {"parts": [{"text": NASTY}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 20,
                "thoughtsTokenCount": 7, "cachedContentTokenCount": 2},
            "modelVersion": "gemini-2.5-flash", "responseId": "r1"}),
        json!({"candidates": [{"content": {"parts": [
                {"text": "thinking about it", "thought": true, "thoughtSignature": "c2ln"},
                {"text": "here", "thoughtSignature": "c2lnMg=="},
                {"text": ""},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnMw=="},
                {"functionCall": {"id": "given", "name": "shell", "args": null}},
                {"functionCall": {"name": "noargs"}}]},
            "finishReason": "STOP"}], "modelVersion": "m", "responseId": "r/2 é"}),
        json!({"candidates": [{"content": {"parts": [{"text": "cut"}]}, "finishReason": "MAX_TOKENS"}]}),
        json!({"candidates": [{"finishReason": "SAFETY"}], "responseId": "r4"}),
        json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}),
        json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finish_reason": "STOP"}],
            "usage_metadata": {"prompt_token_count": 1, "candidates_token_count": 2},
            "model_version": "snake", "response_id": "r5"}),
        json!({"candidates": [{"content": {"parts": [{"text": "both"}]}}], "modelVersion": "a", "model_version": "b"}),
        json!({"candidates": [{"content": {"parts": [{"text": "grounded"}]}, "groundingMetadata": {
            "webSearchQueries": ["q"], "groundingChunks": [{"web": {"uri": "https://a.example", "title": "A"}}],
            "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 8}, "groundingChunkIndices": [0]}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"functionCall": null}, {"text": "t"}]}}]}),
        json!({}),
        json!({"candidates": [{"content": {"parts": [{"text": "x", "thought": "yes"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "groundingMetadata": null}],
            "promptFeedback": {"blockReason": ""}}),
        json!({"candidates": [{"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "QUJD"}}, {"text": "img"}]}}]}),
    ]
}

fn corpus(target: Api) -> Vec<Value> {
    match target {
        Api::Chat => chat_corpus(),
        Api::Responses => responses_corpus(),
        Api::Messages => messages_corpus(),
        Api::Gemini => gemini_corpus(),
    }
}

/// Echoes a Responses client's answer may repeat: none, a request's (with a freeform tool),
/// and a kept one.
fn echoes() -> Vec<Echo> {
    let request = json!({"model": "m", "input": "hi", "instructions": "be brief", "temperature": 0,
        "max_output_tokens": 64, "metadata": {"k": "v"}, "user": "u1",
        "tools": [{"type": "custom", "name": "shell"}, {"type": "function", "name": "get_weather", "parameters": {}}],
        "tool_choice": "required", "reasoning": {"effort": "low"}});
    let Value::Object(request) = request else {
        unreachable!()
    };
    let echo = Echo::of(&request);
    vec![Echo::default(), echo.kept_as("resp_kept_1"), echo]
}

/// `summary` (a typed read's) is what `response_summary` reads of `body`: the same counts, the
/// same raw model.
fn assert_same_summary(body: &[u8], summary: &ResponseSummary<'_>) {
    let expected = response_summary(body).unwrap();
    let text = String::from_utf8_lossy(body);
    assert_eq!(summary.counts, expected.counts, "counts of {text}");
    assert_eq!(
        summary.model.map(RawValue::get),
        expected.model.map(RawValue::get),
        "model of {text}"
    );
}

/// The `Value` path's bytes.
fn value_path(direction: Direction, body: &[u8], echo: &Echo) -> Result<Bytes, String> {
    let mut form = value_answer(direction, body, CREATED)?;
    if direction.target == Api::Gemini && direction.client == Api::Messages {
        thinking_carry::mark_gemini_signatures(&mut form.parts);
    }
    value_bytes(direction.client, &form, CREATED, echo)
}

#[test]
fn typed_answers_give_the_value_paths_bytes() {
    let (mut read, mut written, mut plain) = (0, 0, 0);
    for target in Api::ALL {
        let answers = corpus(target).into_iter().enumerate();
        // Compact, and as a pretty-printing upstream sends it.
        let bodies = answers.flat_map(|(at, answer)| {
            [
                (at, serde_json::to_vec(&answer).unwrap()),
                (at, serde_json::to_vec_pretty(&answer).unwrap()),
            ]
        });
        for (at, body) in bodies {
            for client in Api::ALL {
                let direction = Direction { client, target };
                let signatures = carries_signatures(direction);
                let expected = value_answer(direction, &body, CREATED).unwrap();
                let typed = typed_answer::answer(target, &body, signatures, CREATED);
                if let Some(typed) = &typed {
                    assert_eq!(
                        typed.form, expected,
                        "{client:?} < {target:?} answer {at}: read"
                    );
                    assert_same_summary(&body, &typed.summary);
                    read += 1;
                }
                // Known plain only as a scan read it: written so, the bytes must not change.
                let texts_plain = typed.is_some_and(|typed| typed.texts_plain);
                if texts_plain {
                    plain += 1;
                }
                let mut marked = expected.clone();
                if target == Api::Gemini && client == Api::Messages {
                    thinking_carry::mark_gemini_signatures(&mut marked.parts);
                }
                for echo in echoes() {
                    let slow = value_path(direction, &body, &echo).unwrap();
                    if let Some(fast) =
                        answer_write::answer(client, &marked, texts_plain, CREATED, &echo)
                    {
                        assert_eq!(
                            String::from_utf8_lossy(&fast),
                            String::from_utf8_lossy(&slow),
                            "{client:?} < {target:?} answer {at}: written"
                        );
                        written += 1;
                    }
                    let whole = translate_answer(direction, &body, CREATED, &echo).unwrap();
                    assert_eq!(whole, slow, "{client:?} < {target:?} answer {at}");
                }
            }
        }
    }
    // Most of the corpus goes the typed way (the rest is what it declines).
    assert!(read > 200, "{read} read");
    assert!(written > 600, "{written} written");
    // Both ways are taken: texts read plain, and texts with escapes (or not scanned).
    assert!(plain > 50 && plain < read, "{plain} of {read} read plain");
}

#[test]
fn typed_readers_take_the_common_answers_and_decline_what_they_leave() {
    let takes = |target: Api, answer: &Value| {
        typed_answer::answer(target, &serde_json::to_vec(answer).unwrap(), true, CREATED).is_some()
    };
    // Text, thinking, calls, finish and usage.
    for target in Api::ALL {
        for at in [0, 1] {
            assert!(takes(target, &corpus(target)[at]), "{target:?} answer {at}");
        }
    }
    // Citations, searches, grounding and odd types: the `Value` readers'.
    assert!(!takes(Api::Chat, &chat_corpus()[4]));
    assert!(!takes(Api::Chat, &chat_corpus()[9]));
    assert!(!takes(Api::Chat, &chat_corpus()[11]));
    assert!(!takes(Api::Chat, &chat_corpus()[12]));
    assert!(!takes(Api::Responses, &responses_corpus()[5]));
    assert!(!takes(Api::Responses, &responses_corpus()[6]));
    assert!(!takes(Api::Messages, &messages_corpus()[4]));
    assert!(!takes(Api::Messages, &messages_corpus()[5]));
    assert!(!takes(Api::Gemini, &gemini_corpus()[6]));
    assert!(!takes(Api::Gemini, &gemini_corpus()[7]));
    assert!(!takes(Api::Gemini, &gemini_corpus()[8]));
}

#[test]
fn bodies_that_are_no_json_object_fail_as_before() {
    for target in Api::ALL {
        for body in [
            &b"[]"[..],
            b"\"text\"",
            b"not json",
            b"",
            b"{\"id\":\"x\"} trailing",
            b"[\"x\", null]",
        ] {
            assert!(typed_answer::answer(target, body, false, CREATED).is_none());
            let direction = Direction {
                client: Api::Chat,
                target,
            };
            assert_eq!(
                translate_answer(direction, body, CREATED, &Echo::default()),
                value_path(direction, body, &Echo::default())
            );
        }
    }
}

#[test]
fn a_duplicated_member_is_declined_and_read_as_the_value_reader_reads_it() {
    let bodies: [(Api, &[u8]); 3] = [
        (
            Api::Chat,
            br#"{"id":"a","id":"b","choices":[{"message":{"content":"x"}}]}"#,
        ),
        (
            Api::Messages,
            br#"{"id":"m","content":[{"type":"text","text":"a","text":"b"}]}"#,
        ),
        (
            Api::Gemini,
            br#"{"responseId":"r","response_id":"s","candidates":[]}"#,
        ),
    ];
    for (target, body) in bodies {
        assert!(typed_answer::answer(target, body, false, CREATED).is_none());
        let direction = Direction {
            client: Api::Responses,
            target,
        };
        let echo = Echo::default();
        assert_eq!(
            translate_answer(direction, body, CREATED, &echo),
            value_path(direction, body, &echo)
        );
    }
}

#[test]
fn non_ascii_and_escaped_text_is_written_as_serde_json_writes_it() {
    for text in ["", "plain", NASTY, "\u{0}\u{1f}", "emoji 👩‍👩‍👧 and \u{fffd}"] {
        let answer = json!({"id": "msg_1", "model": "m", "content": [{"type": "text", "text": text},
            {"type": "tool_use", "id": "t\"1", "name": "n\\", "input": {"q": text}}]});
        let body = serde_json::to_vec(&answer).unwrap();
        for client in Api::ALL {
            let direction = Direction {
                client,
                target: Api::Messages,
            };
            let echo = Echo::default();
            assert_eq!(
                translate_answer(direction, &body, CREATED, &echo).unwrap(),
                value_path(direction, &body, &echo).unwrap(),
                "{client:?}"
            );
        }
    }
}

/// An answer whose bytes are not all UTF-8 where no reader looks (a skipped member) is read by
/// bytes as before and translated; one with such bytes in a string a reader reads fails as
/// before. A request likewise: the same error either way.
#[test]
fn an_answer_or_request_not_all_utf8_reads_as_bytes_as_before() {
    let mut answer = br#"{"id":"c1","model":"m","system_fingerprint":"fp_"#.to_vec();
    answer.extend_from_slice(&[0xff, 0xfe]);
    answer.extend_from_slice(
        br#"","choices":[{"message":{"content":"kept"},"finish_reason":"stop"}]}"#,
    );
    let typed = typed_answer::answer(Api::Chat, &answer, false, CREATED);
    assert!(typed.is_some(), "the typed read takes it by bytes");
    for client in [Api::Responses, Api::Messages, Api::Gemini] {
        let direction = Direction::between(client, Api::Chat).unwrap();
        let out = translate_answer(direction, &answer, CREATED, &Echo::default()).unwrap();
        assert!(String::from_utf8(out.to_vec()).unwrap().contains("kept"));
    }
    let mut broken = br#"{"id":"c1","choices":[{"message":{"content":"x"#.to_vec();
    broken.extend_from_slice(&[0xff]);
    broken.extend_from_slice(br#""}}]}"#);
    assert!(typed_answer::answer(Api::Chat, &broken, false, CREATED).is_none());
    assert_same_summary(&answer, &typed.unwrap().summary);

    let mut request = br#"{"model":"m","messages":[{"role":"user","content":"hi "#.to_vec();
    request.extend_from_slice(&[0xff]);
    request.extend_from_slice(br#""}]}"#);
    let settings = RequestSettings {
        model: "m",
        default_max_tokens: 1024,
        reasoning: None,
    };
    let error = translate_request(Direction::CHAT_TO_MESSAGES, &request, settings).unwrap_err();
    let bytes_error = serde_json::from_slice::<Value>(&request).unwrap_err();
    assert_eq!(
        error,
        TranslateError::Invalid(format!("the body is not JSON: {bytes_error}"))
    );
    let valid = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3,}"#;
    let error = translate_request(Direction::CHAT_TO_MESSAGES, valid, settings).unwrap_err();
    let bytes_error = serde_json::from_slice::<Value>(valid).unwrap_err();
    assert_eq!(
        error,
        TranslateError::Invalid(format!("the body is not JSON: {bytes_error}"))
    );
}

/// Answers the typed read takes, with members the summary reads.
fn summary_bodies_taken() -> Vec<(Api, &'static str)> {
    vec![
        (
            Api::Chat,
            r#"{"id":"c","model":"gpt","choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"cache_read_input_tokens":4,"cache_creation_input_tokens":1}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[{"message":{"content":"x"}}],"usage":null,"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":1,"cachedContentTokenCount":3}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[{"message":{"content":"x"}}],"usage":{"total_tokens":3},"usageMetadata":{"promptTokenCount":5}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","model":null,"modelVersion":"v","choices":[]}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","modelVersion":{"v":[1]},"choices":[]}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","model":"m\u00e9\"q","choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{},"input_tokens_details":{"cached_tokens":4}}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","model":7.5,"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":null,"input_tokens_details":{"cached_tokens":4}}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[],"usage":{"input_tokens":8,"output_tokens":3,"prompt_tokens":9}}"#,
        ),
        (
            Api::Responses,
            r#"{"id":"r","model":"m","output":[],"usage":{"input_tokens":6,"output_tokens":2,"cache_read_input_tokens":1,"input_tokens_details":{"cached_tokens":2}}}"#,
        ),
        (
            Api::Responses,
            r#"{"id":"r","output":[],"usageMetadata":{"candidatesTokenCount":4},"modelVersion":"g"}"#,
        ),
        (Api::Responses, r#"{"id":"r","output":[],"usage":{}}"#),
        (
            Api::Messages,
            r#"{"id":"m","model":"claude","content":[],"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}"#,
        ),
        (
            Api::Messages,
            r#"{"id":"m","content":[],"usage":{"prompt_tokens":4,"completion_tokens":1,"input_tokens":10,"output_tokens":5}}"#,
        ),
        (
            Api::Messages,
            r#"{"id":"m","content":[],"usage":null,"usageMetadata":{"promptTokenCount":2},"model":null}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"model":"x","modelVersion":"y","usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"modelVersion":null,"usage":{"prompt_tokens":3,"completion_tokens":1},"usageMetadata":{"promptTokenCount":9}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"usage":{"total_tokens":3},"usageMetadata":{"promptTokenCount":9}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"model_version":"snake","usage_metadata":{"promptTokenCount":9}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"modelVersion":"camel","usageMetadata":null}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"usageMetadata":{"totalTokenCount":9}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"usageMetadata":{},"model":{"name":"odd"}}"#,
        ),
        (
            Api::Gemini,
            r#"{"responseId":"r","candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"thoughtsTokenCount":3,"cachedContentTokenCount":0}}"#,
        ),
    ]
}

/// Answers the typed read declines (the summary path reads them).
fn summary_bodies_declined() -> Vec<(Api, &'static str)> {
    vec![
        (
            Api::Chat,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":2}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":"7"}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":5}}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","model":"a","model":"b","choices":[]}"#,
        ),
        (
            Api::Chat,
            r#"{"id":"c","choices":[],"usageMetadata":"n/a","usage":{"prompt_tokens":1}}"#,
        ),
        (Api::Responses, r#"{"id":"r","output":[],"usage":[1,2]}"#),
        (
            Api::Responses,
            r#"{"id":"r","output":[],"usage":{"input_tokens":1},"usage":{"input_tokens":2}}"#,
        ),
        (
            Api::Messages,
            r#"{"id":"m","content":[],"usage":{"input_tokens":2.5}}"#,
        ),
        (
            Api::Messages,
            r#"{"id":"m","content":[],"modelVersion":1,"modelVersion":2}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"usageMetadata":{"promptTokenCount":1.5}}"#,
        ),
        (
            Api::Gemini,
            r#"{"candidates":[],"usageMetadata":{"promptTokenCount":1},"usage_metadata":{"promptTokenCount":2}}"#,
        ),
        (Api::Gemini, r#"{"candidates":[],"model":1,"model":2}"#),
    ]
}

/// The members `usage::response_summary` reads, in every API's answer, in the shapes the
/// summary reads some way the readers do not (a Chat answer's `usageMetadata`, a Gemini
/// answer's `model` and `usage`, Anthropic's cache counts beside OpenAI's names, details of one
/// spelling and not the other), and the ones the typed read declines (flawed counts, a
/// duplicated member, a `usage` of another type): where the typed read takes an answer it gives
/// the summary's model and counts exactly (billing, the journal and telemetry read them), and
/// the client's bytes the `Value` path gives.
#[test]
fn a_typed_read_gives_the_summarys_model_and_counts() {
    let taken = summary_bodies_taken();
    let declined = summary_bodies_declined();
    for (target, body) in taken.iter().chain(&declined) {
        let body = body.as_bytes();
        let takes = declined.iter().all(|(_, other)| other.as_bytes() != body);
        for client in Api::ALL {
            let direction = Direction {
                client,
                target: *target,
            };
            let echo = Echo::default();
            let value = value_path(direction, body, &echo);
            match typed_translation(direction, body, CREATED, &echo) {
                Some((translated, summary)) => {
                    assert!(
                        takes,
                        "{client:?} < {target:?} takes {}",
                        String::from_utf8_lossy(body)
                    );
                    assert_same_summary(body, &summary);
                    assert_eq!(Ok(translated), value, "{client:?} < {target:?}");
                }
                None => assert!(
                    !takes,
                    "{client:?} < {target:?} declines {}",
                    String::from_utf8_lossy(body)
                ),
            }
            assert_eq!(translate_answer(direction, body, CREATED, &echo), value);
        }
    }
}
