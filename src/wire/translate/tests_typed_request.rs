//! The typed reads of a client's request give exactly what the `Value` readers give (the hub's
//! form, the dropped names, the refusal), or decline: over real-shaped requests of each API
//! they cover (text, escapes, non-ASCII, numbers, tool calls and results, images, tools,
//! thinking settings, dropped members) and shapes they leave to the `Value` readers.

use serde_json::{json, Value};

use super::thinking_carry::ReasoningCounts;
use super::*;

/// A body and whether the typed read takes it.
type Case = (Vec<u8>, bool);

fn taken(body: Value) -> Case {
    (serde_json::to_vec(&body).unwrap(), true)
}

fn declined(body: Value) -> Case {
    (serde_json::to_vec(&body).unwrap(), false)
}

fn gemini_cases() -> Vec<Case> {
    let user = |text: &str| json!({"role": "user", "parts": [{"text": text}]});
    vec![
        taken(json!({"systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            "contents": [user("Say hello")],
            "generationConfig": {"maxOutputTokens": 64, "temperature": 0}})),
        // Escapes, non-ASCII, an empty text, two system parts, a role-less content.
        (r#"{"systemInstruction":{"role":"system","parts":[{"text":"a \"q\"\n\t\\ \u00e9"},{"text":""},{"text":"\ud83d\ude00 b"}]},
            "contents":[{"parts":[{"text":"caf\u00e9 \"x\" \/ 😀 ü"},{"text":""}]},{"role":"user","parts":[{"text":"two"}]}]}"#
            .as_bytes().to_vec(), true),
        // Tool calls and results: ids given and made, results by name and order, a call in
        // a user turn (not carried), arguments of every JSON type, results of every shape.
        taken(json!({"contents": [
            user("weather?"),
            {"role": "model", "parts": [
                {"text": "calling"},
                {"functionCall": {"name": "get_weather", "args": {"z": 1, "a": [1.5, "x", null, true], "é": {"n": -3}}}},
                {"functionCall": {"name": "get_time", "id": "given-1", "args": null}},
                {"functionCall": {"name": "get_weather"}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}},
                {"functionResponse": {"name": "get_time", "id": "given-1", "response": {"error": {"code": 1}}}},
                {"functionResponse": {"name": "get_weather", "response": {"a": 1, "b": 2}}},
                {"functionResponse": {"name": "unknown", "response": null}},
                {"functionCall": {"name": "user_call", "args": {}}}]},
            {"role": "model", "parts": [{"text": "done"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "again", "args": {"q": "\"é\""}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "again", "response": {"result": "ok"}}}]}
        ]})),
        // Images, tools, tool config, sampling, stop sequences, thinking, dropped members.
        taken(json!({"model": "models/x", "labels": {"team": "a"},
            "contents": [{"role": "user", "parts": [
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}, {"text": "what is it?"}]}],
            "tools": [{"functionDeclarations": [
                {"name": "f", "description": "does f", "parameters": {"type": "OBJECT",
                    "properties": {"a": {"type": "STRING", "enum": ["x", "y"]}}, "required": ["a"]}},
                {"name": "g", "parametersJsonSchema": {"type": "object"}},
                {"name": "h"}]}, {"googleSearch": {}}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}},
            "generationConfig": {"temperature": 1.5, "topP": 0.95, "maxOutputTokens": 1024,
                "stopSequences": ["END", "\n\n"], "candidateCount": 1,
                "thinkingConfig": {"thinkingBudget": 2048}},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]})),
        taken(json!({"contents": [user("x")], "safetySettings": null, "tools": null, "toolConfig": null,
            "generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}, "temperature": null, "topP": 1e-3,
                "maxOutputTokens": null, "stopSequences": null}})),
        taken(json!({"contents": [user("x")], "systemInstruction": null,
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}, "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}})),
        taken(json!({"contents": [{"role": "model", "parts": null}, {"role": null, "parts": [{"text": "y"}]}],
            "generationConfig": {"thinkingConfig": null}})),
        taken(json!({"contents": []})),
        // Refused by the tools' reader: the same refusal.
        taken(json!({"contents": [user("x")], "tools": [{"codeExecution": {}}]})),
        // Left to the `Value` reader.
        declined(json!({"contents": [user("x")], "generationConfig": {"candidateCount": 2}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"responseMimeType": "application/json"}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"responseModalities": ["TEXT"]}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"seed": 3, "presencePenalty": 0.5}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"max_output_tokens": 3}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"maxOutputTokens": 64.5}})),
        declined(json!({"contents": [user("x")], "generation_config": {"maxOutputTokens": 3}})),
        declined(json!({"contents": [user("x")], "system_instruction": {"parts": [{"text": "s"}]}})),
        declined(json!({"contents": [user("x")], "systemInstruction": "bare"})),
        declined(json!({"contents": [user("x")], "cachedContent": "cachedContents/1"})),
        declined(json!({"contents": [user("x")], "stream": true})),
        declined(json!({"contents": [user("x")], "unknownMember": 1})),
        declined(json!({"contents": [{"role": "model", "parts": [{"text": "t", "thought": true}, {"text": "a", "thoughtSignature": "c2ln"}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"text": null}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"text": "a", "functionCall": {"name": "f"}}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"functionCall": null, "functionResponse": {"name": "f"}}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"inline_data": {"mimeType": "image/png", "data": "x"}}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "application/pdf", "data": "x"}}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"fileData": {"mimeType": "image/png", "fileUri": "gs://b/x"}}]}]})),
        declined(json!({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "thoughtSignature": "x"}}]}]})),
        declined(json!({"contents": [["user", [{"text": "x"}]]]})),
        declined(json!({"contents": [{"role": 3, "parts": [{"text": "x"}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": ["x"]}]})),
        declined(json!({"contents": {"role": "user"}})),
        declined(json!({"systemInstruction": {"parts": [{"text": "s"}]}})),
        declined(json!([{"role": "user", "parts": [{"text": "x"}]}])),
        (br#"{"contents":[],"contents":[]}"#.to_vec(), false),
        (b"{\"contents\":[{\"parts\":[{\"text\":\"\xff\"}]}]}".to_vec(), false),
        (b"not json".to_vec(), false),
        // Not UTF-8 in a member the shape skips: the `Value` parse fails.
        (b"{\"labels\":{\"a\":\"\xff\"},\"contents\":[]}".to_vec(), false),
    ]
}

fn chat_cases() -> Vec<Case> {
    let user = |text: &str| json!({"role": "user", "content": text});
    vec![
        taken(json!({"model": "c", "messages": [{"role": "system", "content": "You are a helpful assistant."},
            user("Say hello")], "max_tokens": 64, "temperature": 0, "stream": false})),
        taken(json!({"model": "c", "messages": [user("x")], "stream": true,
            "stream_options": {"include_usage": true}, "max_completion_tokens": 10, "max_tokens": 99,
            "temperature": 1.25, "top_p": 0.5, "stop": "END", "user": "u-1", "store": true,
            "parallel_tool_calls": false, "reasoning_effort": "high"})),
        (r#"{"model":"c","messages":[{"role":"developer","content":[{"type":"text","text":"a \"q\"\n\u00e9"},{"text":"\ud83d\ude00"}]},
            {"role":"user","content":"caf\u00e9 \/ 😀 ü","name":"me"}],"stop":["a","\n"],"stream_options":null}"#
            .as_bytes().to_vec(), true),
        // Tool calls and results, images, tools and a named tool choice.
        taken(json!({"model": "c", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}},
                {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": {"b": [1, 2]}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "ok"}]},
            {"role": "assistant", "content": "", "refusal": "I can't"}],
            "tools": [{"type": "function", "function": {"name": "f", "description": "does f",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}}, "max_tokens": 64.5})),
        taken(json!({"messages": [user("x")], "tool_choice": "required", "temperature": "hot", "user": 3,
            "stop": 3, "max_completion_tokens": null, "max_tokens": 5, "stream": "yes"})),
        taken(json!({"messages": []})),
        // The `Value` reader's refusals and errors, the same.
        taken(json!({"messages": [{"role": "function", "content": "x"}]})),
        taken(json!({"messages": [{"role": "wizard", "content": "x"}]})),
        taken(json!({"messages": [{"content": "x"}]})),
        taken(json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})),
        taken(json!({"messages": [{"role": "user", "content": 3}]})),
        taken(json!({"messages": [user("x")], "tools": [{"type": "web_search_preview"}]})),
        // Left to the `Value` reader.
        declined(json!({"messages": [user("x")], "response_format": {"type": "json_object"}})),
        declined(json!({"messages": [user("x")], "web_search_options": {}})),
        declined(json!({"messages": [user("x")], "n": 2})),
        declined(json!({"messages": [user("x")], "seed": 1, "frequency_penalty": 0.5})),
        declined(json!({"messages": [user("x")], "metadata": {"a": "b"}})),
        declined(json!({"messages": [["user", "x"]]})),
        declined(json!({"messages": [{"role": 1, "content": "x"}]})),
        declined(json!({"messages": "x"})),
        declined(json!({"model": "c"})),
        declined(json!([user("x")])),
        (br#"{"messages":[],"messages":[]}"#.to_vec(), false),
        (br#"{"messages":[{"role":"user","role":"system","content":"x"}]}"#.to_vec(), false),
        (b"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}".to_vec(), false),
        // Not UTF-8 in a member the shape skips: the `Value` parse fails.
        (b"{\"model\":\"\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"\xfe\"}]}".to_vec(), false),
    ]
}

fn messages_cases() -> Vec<Case> {
    let user = |text: &str| json!({"role": "user", "content": text});
    vec![
        taken(json!({"model": "c", "system": "You are a helpful assistant.", "messages": [user("Say hello")],
            "max_tokens": 64, "temperature": 0, "stream": false})),
        (r#"{"model":"c","system":[{"type":"text","text":"a \"q\"\n\u00e9","cache_control":{"type":"ephemeral"}},{"type":"text","text":"\ud83d\ude00"}],
            "messages":[{"role":"user","content":"caf\u00e9 \/ 😀 ü"}],"stream":true,"max_tokens":1e2}"#
            .as_bytes().to_vec(), true),
        // Tool calls and results, thinking with signatures, images, tools, choices, formats.
        taken(json!({"model": "c", "max_tokens": 1024, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "c2lnbmF0dXJl"},
                {"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"z": 1, "a": [true, null, 1.5]}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                    "content": [{"type": "text", "text": "failed"}]}]}],
            "tools": [{"name": "f", "description": "does f", "input_schema": {"type": "object",
                "properties": {"a": {"type": "string"}}}},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["a.com"]}],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "output_format": {"type": "json_schema", "schema": {"type": "object"}},
            "metadata": {"user_id": "u-1"}, "stop_sequences": ["END"], "top_p": 0.9, "top_k": 40})),
        // The same turns without a format or a web search (the Responses byte writer's).
        taken(json!({"model": "c", "max_tokens": 1024, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "let me think"},
                {"type": "thinking", "thinking": "hmm", "signature": "c2lnbmF0dXJl"},
                {"type": "text", "text": "calling \"f\" é"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"z": 1, "a": [true, null, 1.5]}},
                {"type": "text", "text": "after"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": "failed \n"},
                {"type": "text", "text": "and now?"}]}],
            "tools": [{"name": "f", "description": "does f", "input_schema": {"type": "object",
                "properties": {"a": {"type": "string"}}}}, {"name": "g", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 2048}, "stream": true,
            "metadata": {"user_id": "u-0123456789-0123456789-0123456789-0123456789-0123456789-0123456789-0123456789"},
            "stop_sequences": ["END"], "top_p": 0.9, "temperature": 0.5})),
        taken(json!({"messages": [user("x")], "tools": [{"name": "f", "input_schema": {}}],
            "tool_choice": {"type": "tool", "name": "f"}})),
        taken(json!({"messages": [user("x")], "tools": [{"name": "f", "input_schema": {}}],
            "tool_choice": {"type": "none"}})),
        taken(json!({"messages": [user("x")], "tools": [{"name": "f", "input_schema": {}}],
            "tool_choice": {"type": "auto"}})),
        taken(json!({"messages": [user("x")], "tool_choice": null, "top_k": null, "system": null,
            "temperature": "hot", "metadata": null, "thinking": {"type": "disabled"}})),
        taken(json!({"messages": []})),
        // The `Value` reader's refusals and errors, the same.
        taken(json!({"messages": [{"role": "user", "content": 3}]})),
        taken(json!({"messages": [{"role": "user", "content": null}]})),
        taken(json!({"messages": [{"role": "user"}]})),
        taken(json!({"messages": [user("x")], "tools": [{"type": "bash_20250124", "name": "bash"}]})),
        taken(json!({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})),
        // Left to the `Value` reader.
        declined(json!({"messages": [user("x")], "service_tier": "auto"})),
        declined(json!({"messages": [user("x")], "container": "c"})),
        declined(json!({"messages": [["user", "x"]]})),
        declined(json!({"messages": [{"role": 1, "content": "x"}]})),
        declined(json!({"messages": "x"})),
        declined(json!({"system": "s"})),
        declined(json!([user("x")])),
        (br#"{"messages":[],"system":"a","system":"b"}"#.to_vec(), false),
        (b"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}".to_vec(), false),
        // Not UTF-8 in a member the shape skips: the `Value` parse fails.
        (b"{\"model\":\"\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"id\":\"\xfe\"}]}".to_vec(), false),
    ]
}

/// What a request read gives: the form (or refusal), the names dropped, `stream`,
/// `include_usage`.
type ReadOf = (Result<(Request, bool, bool), TranslateError>, Vec<String>);

fn typed_read(client: Api, body: &[u8]) -> Option<ReadOf> {
    let mut dropped = Vec::new();
    let read = match client {
        Api::Chat => chat::typed_request::request(body)?,
        Api::Messages => messages::typed_request::request(body, &mut dropped)?
            .map(|(form, stream)| (form, stream, false)),
        Api::Gemini => {
            gemini::typed_request::request(body, &mut dropped)?.map(|form| (form, false, false))
        }
        _ => return None,
    };
    Some((read, dropped))
}

fn value_read(client: Api, body: &[u8]) -> ReadOf {
    let object = std::sync::OnceLock::new();
    let source = Source {
        body,
        object: &object,
        scanned: None,
        typed: false,
    };
    let mut dropped = Vec::new();
    let mut counts = ReasoningCounts::default();
    let direction = Direction {
        client,
        target: Api::Messages,
    };
    let read = read_request(direction, source, None, &mut dropped, &mut counts);
    assert_eq!(counts, ReasoningCounts::default());
    (read, dropped)
}

fn cases() -> Vec<(Api, Vec<u8>, bool)> {
    let of = |client, cases: Vec<Case>| {
        cases
            .into_iter()
            .map(move |(body, taken)| (client, body, taken))
    };
    of(Api::Chat, chat_cases())
        .chain(of(Api::Messages, messages_cases()))
        .chain(of(Api::Gemini, gemini_cases()))
        .collect()
}

#[test]
fn a_typed_read_gives_the_value_readers_form_or_declines() {
    for (client, body, expect_taken) in cases() {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let typed = typed_read(client, &body);
        assert_eq!(typed.is_some(), expect_taken, "taken? {shown}");
        if let Some(typed) = typed {
            assert_eq!(typed, value_read(client, &body), "{shown}");
        }
    }
}

/// `body` translated with the `Value` readers only.
fn translate_by_value(
    direction: Direction,
    body: &[u8],
    settings: RequestSettings<'_>,
    stream: Option<bool>,
) -> Result<TranslatedRequest, TranslateError> {
    let object = std::sync::OnceLock::new();
    let source = Source {
        body,
        object: &object,
        scanned: None,
        typed: false,
    };
    translate_source(direction, source, settings, stream)
}

/// Every pair from a client API with a typed read: the translation (bytes, dropped names,
/// refusals, errors) is the `Value` readers', whether the typed read took the body or declined
/// it.
#[test]
fn a_translation_is_the_value_readers() {
    let settings = RequestSettings {
        model: "target-model",
        default_max_tokens: 4096,
        reasoning: None,
    };
    for (client, body, _) in cases() {
        let shown = String::from_utf8_lossy(&body).into_owned();
        for target in [Api::Chat, Api::Responses, Api::Messages, Api::Gemini] {
            let direction = Direction { client, target };
            for stream in [None, Some(true)] {
                let got = translate_request_as(direction, &body, settings, stream);
                let expected = translate_by_value(direction, &body, settings, stream);
                assert_eq!(got, expected, "{} {shown}", direction.label());
            }
        }
    }
}

/// A byte writer, and the `Value` writer it stands in for.
type Writers = (
    fn(&Request, RequestSettings<'_>) -> Option<(bytes::BytesMut, std::ops::Range<usize>)>,
    fn(&Request, RequestSettings<'_>) -> Value,
);

/// Each target API's byte writer writes the bytes of its `Value` writer's request (the model
/// where it says), over the forms every case reads into (it takes most of them).
#[test]
fn a_byte_writer_writes_the_value_writers_bytes() {
    let settings = RequestSettings {
        model: "target-\"model\"",
        default_max_tokens: 4096,
        reasoning: None,
    };
    let writers: [Writers; 3] = [
        (chat::request_bytes::request, |form, settings| {
            chat::write::request(form, settings).unwrap()
        }),
        (responses::request_bytes::request, |form, settings| {
            responses::write::request(form, settings).unwrap()
        }),
        (messages::request_bytes::request, |form, settings| {
            let mut dropped = Vec::new();
            let value = messages::write::request(form, settings, &mut dropped).unwrap();
            assert_eq!(dropped, Vec::<String>::new());
            value
        }),
    ];
    for (bytes_writer, value_writer) in writers {
        let mut written = 0;
        for (client, body, _) in cases() {
            let Ok((mut form, _, _)) = value_read(client, &body).0 else {
                continue;
            };
            for stream in [false, true] {
                form.stream = stream;
                let Some((bytes, model)) = bytes_writer(&form, settings) else {
                    continue;
                };
                let value = value_writer(&form, settings);
                let shown = String::from_utf8_lossy(&body).into_owned();
                assert_eq!(
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&serde_json::to_vec(&value).unwrap()),
                    "{shown}"
                );
                assert_eq!(&bytes[model], br#""target-\"model\"""#);
                written += 1;
            }
        }
        assert!(written >= 40, "{written}");
    }
}
