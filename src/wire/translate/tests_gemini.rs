//! Gemini on the hub: its requests to every other API and theirs to Gemini (tools with made
//! ids matched by name and order, cleaned schemas, thinking, structured output), answers both
//! ways (thoughts, calls, signatures sealed only for a Responses client, safety finishes,
//! usage with cached and thought tokens) and errors in each client's shape.

use serde_json::{json, Value};

use super::tests::{anthropic_answer, carried_block, down, refused, up};
use super::*;

/// A Gemini CLI-style turn: a system instruction, an image, a model turn calling one tool twice
/// (no ids, as Gemini writes them), the two results by name, and thinking asked for.
fn gemini_request() -> Value {
    json!({
        "systemInstruction": {"role": "user", "parts": [{"text": "you are gemini cli"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "read both"},
                {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}]},
            {"role": "model", "parts": [
                {"text": "thinking it over", "thought": true, "thoughtSignature": "GEMSIG"},
                {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                {"functionCall": {"name": "read_file", "args": {"path": "b"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read_file", "response": {"output": "A"}}},
                {"functionResponse": {"name": "read_file", "response": {"error": "no b"}}}]},
            {"role": "user", "parts": [{"text": "and now?"}]}
        ],
        "tools": [{"functionDeclarations": [{"name": "read_file", "description": "reads",
            "parameters": {"type": "OBJECT", "properties": {"path": {"type": "STRING"}}, "required": ["path"]}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read_file"]}},
        "generationConfig": {"temperature": 0.2, "topP": 0.9, "topK": 40, "maxOutputTokens": 900,
            "stopSequences": ["END"], "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": true}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    })
}

#[test]
fn gemini_requests_become_chat_requests_with_made_ids_matched_by_name_and_order() {
    let (out, dropped) = up(Direction::GEMINI_TO_CHAT, gemini_request());
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "you are gemini cli"})
    );
    assert_eq!(
        messages[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,QUJD"
    );
    // The thought and its signature are left out; the calls get stable ids.
    let calls = messages[2]["tool_calls"].as_array().unwrap();
    assert_eq!(messages[2]["content"], Value::Null);
    assert_eq!(calls.len(), 2);
    let (first, second) = (calls[0]["id"].clone(), calls[1]["id"].clone());
    assert_ne!(first, second);
    assert_eq!(calls[1]["function"]["arguments"], "{\"path\":\"b\"}");
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": first, "content": "A"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": second, "content": "Error: no b"})
    );
    assert_eq!(messages[5], json!({"role": "user", "content": "and now?"}));
    assert_eq!(
        out["tool_choice"],
        json!({"type": "function", "function": {"name": "read_file"}})
    );
    assert_eq!(out["reasoning_effort"], "medium");
    assert_eq!(out["max_completion_tokens"], 900);
    assert_eq!(out["stop"], json!(["END"]));
    assert_eq!(out["temperature"], 0.2);
    assert_eq!(out["top_p"], 0.9);
    assert_eq!(dropped, vec!["topK", "safetySettings"]);
    assert!(!out.to_string().contains("GEMSIG"), "{out}");
    // The same conversation sent again gets the same ids.
    let (again, _) = up(Direction::GEMINI_TO_CHAT, gemini_request());
    assert_eq!(again["messages"][2]["tool_calls"][0]["id"], first);
}

#[test]
fn gemini_requests_become_messages_and_responses_requests() {
    let (out, _) = up(Direction::GEMINI_TO_MESSAGES, gemini_request());
    assert_eq!(out["system"][0]["text"], "you are gemini cli");
    let turn = &out["messages"][1]["content"];
    assert_eq!(turn[0]["type"], "tool_use", "no thinking block: {turn}");
    let ids = [turn[0]["id"].clone(), turn[1]["id"].clone()];
    let results = &out["messages"][2]["content"];
    assert_eq!(results[0]["tool_use_id"], ids[0]);
    assert_eq!(results[1]["tool_use_id"], ids[1]);
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(out["messages"][2]["content"][2]["text"], "and now?");
    assert_eq!(
        out["tool_choice"],
        json!({"type": "tool", "name": "read_file"})
    );
    assert_eq!(out["stop_sequences"], json!(["END"]));
    // A tool turn without its thinking cannot have thinking on at Anthropic.
    assert!(out.get("thinking").is_none(), "{out}");
    // Google's OpenAPI types (the SDKs write `OBJECT`) as JSON Schema's.
    assert_eq!(
        out["tools"][0]["input_schema"],
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    );

    let (out, _) = up(Direction::GEMINI_TO_RESPONSES, gemini_request());
    assert_eq!(out["instructions"], "you are gemini cli");
    let input = out["input"].as_array().unwrap();
    let calls: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .collect();
    let outputs: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(outputs[0]["call_id"], calls[0]["call_id"]);
    assert_eq!(outputs[1]["call_id"], calls[1]["call_id"]);
    assert_eq!(out["reasoning"]["effort"], "medium");
}

#[test]
fn a_gemini_client_asks_for_json_and_streams_by_its_path() {
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "propertyOrdering": ["n"], "properties": {
                "n": {"type": "INTEGER", "nullable": true},
                "tags": {"type": "ARRAY", "items": {"type": "STRING", "enum": ["a"]}}}}}});
    let (out, _) = up(Direction::GEMINI_TO_CHAT, request.clone());
    assert_eq!(out["response_format"]["type"], "json_schema");
    assert_eq!(
        out["response_format"]["json_schema"]["schema"],
        json!({"type": "object", "properties": {
            "n": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a"]}}}})
    );
    assert!(out.get("stream").is_none());
    let streamed = translate_request_as(
        Direction::GEMINI_TO_MESSAGES,
        request.to_string().as_bytes(),
        super::tests::SETTINGS,
        Some(true),
    )
    .unwrap();
    assert!(streamed.stream);
    let body: Value = serde_json::from_slice(&streamed.body).unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(body["output_format"]["type"], "json_schema");
}

#[test]
fn what_gemini_cannot_carry_is_refused_by_name() {
    let base = |extra: Value| {
        let mut request = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        for (key, value) in extra.as_object().unwrap() {
            request[key] = value.clone();
        }
        request
    };
    for (extra, parameter) in [
        (
            json!({"generationConfig": {"candidateCount": 2}}),
            "candidateCount",
        ),
        (
            json!({"generationConfig": {"responseLogprobs": true}}),
            "responseLogprobs",
        ),
        (
            json!({"generationConfig": {"responseModalities": ["AUDIO"]}}),
            "responseModalities",
        ),
        (json!({"tools": [{"codeExecution": {}}]}), "codeExecution"),
        (
            json!({"cachedContent": "cachedContents/x"}),
            "cachedContent",
        ),
        (
            json!({"generationConfig": {"responseMimeType": "text/x.enum"}}),
            "responseMimeType",
        ),
        (
            json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "AA"}}]}]}),
            "inlineData",
        ),
    ] {
        assert_eq!(refused(Direction::GEMINI_TO_CHAT, base(extra)), parameter);
    }
    // A candidate count of one, a search tool, snake case: carried.
    let (out, _) = up(
        Direction::GEMINI_TO_RESPONSES,
        json!({"contents": [{"role": "user", "parts": [{"text": "news"}]}],
               "tools": [{"google_search": {}}],
               "generation_config": {"candidate_count": 1, "max_output_tokens": 10}}),
    );
    assert_eq!(out["tools"][0]["type"], "web_search");
    assert_eq!(out["max_output_tokens"], 10);
}

#[test]
fn chat_requests_become_gemini_requests_with_cleaned_schemas() {
    let request = json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":\"x\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_2", "content": "grepped"},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"seen\":true}"}
        ],
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {
            "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "additionalProperties": false, "properties": {"at": {"type": ["string", "null"]}}}}},
            {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "max_completion_tokens": 500,
        "stop": "END",
        "reasoning_effort": "low",
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "strict": true,
            "schema": {"type": "object", "additionalProperties": false, "properties": {"ok": {"type": "boolean"}}}}},
        "seed": 1
    });
    let (out, dropped) = up(Direction::CHAT_TO_GEMINI, request);
    assert!(out.get("model").is_none(), "the model is in the path");
    assert_eq!(
        out["systemInstruction"],
        json!({"parts": [{"text": "be brief"}]})
    );
    let contents = out["contents"].as_array().unwrap();
    assert_eq!(contents[0]["role"], "user");
    assert_eq!(
        contents[0]["parts"][1],
        json!({"fileData": {"mimeType": "image/png", "fileUri": "https://x.test/cat.png"}})
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][0],
        json!({"functionCall": {"name": "look", "args": {"at": "x"}}})
    );
    // Results go back by the name of the call they answer, in the client's order.
    assert_eq!(
        contents[2]["parts"],
        json!([
            {"functionResponse": {"name": "grep", "response": {"output": "grepped"}}},
            {"functionResponse": {"name": "look", "response": {"output": "{\"seen\":true}"}}}
        ])
    );
    let declaration = &out["tools"][0]["functionDeclarations"][0];
    assert_eq!(
        declaration["parameters"],
        json!({"type": "object", "properties": {"at": {"type": "string", "nullable": true}}})
    );
    assert_eq!(
        out["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    let config = &out["generationConfig"];
    assert_eq!(config["maxOutputTokens"], 500);
    assert_eq!(config["stopSequences"], json!(["END"]));
    assert_eq!(
        config["thinkingConfig"],
        json!({"thinkingBudget": 2048, "includeThoughts": true})
    );
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseSchema"],
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})
    );
    for name in ["seed", "$schema", "additionalProperties"] {
        assert!(dropped.contains(&name.to_string()), "{dropped:?}");
    }
}

#[test]
fn messages_requests_become_gemini_requests_without_foreign_signatures() {
    let request = json!({
        "model": "m", "max_tokens": 1000, "stop_sequences": ["X"],
        "system": [{"type": "text", "text": "sys"}],
        "thinking": {"type": "enabled", "budget_tokens": 20000},
        "tool_choice": {"type": "tool", "name": "look"},
        "tools": [{"name": "look", "input_schema": {"type": "object", "properties": {}}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "ANTHROPIC-SIG"},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"at": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": true}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "look", "input": {"at": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": [
                {"type": "text", "text": "a cat"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "Q0FU"}}]}]}
        ]
    });
    let (out, _) = up(Direction::MESSAGES_TO_GEMINI, request);
    assert!(!out.to_string().contains("ANTHROPIC-SIG"), "{out}");
    assert!(
        !out.to_string().contains("\"hm\""),
        "thought text never goes back: {out}"
    );
    assert_eq!(
        out["contents"][1]["parts"],
        json!([{"functionCall": {"name": "look", "args": {"at": 1}}}])
    );
    assert_eq!(
        out["contents"][2]["parts"],
        json!([{"functionResponse": {"name": "look", "response": {"error": "ok"}}}])
    );
    // A result with an image: its text in the response, the image after it.
    assert_eq!(
        out["contents"][4]["parts"],
        json!([{"functionResponse": {"name": "look", "response": {"output": "a cat"}}},
               {"inlineData": {"mimeType": "image/png", "data": "Q0FU"}}])
    );
    assert_eq!(
        out["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["look"]}})
    );
    assert_eq!(
        out["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        24576
    );
    assert_eq!(out["generationConfig"]["stopSequences"], json!(["X"]));
}

/// A Gemini answer: a thought, text, a signed call, usage with cached and thought tokens.
fn gemini_answer(finish: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "let me see", "thought": true},
            {"text": "I will look."},
            {"functionCall": {"name": "look", "args": {"at": "x"}}, "thoughtSignature": "GEMSIG"}
        ]}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "cachedContentTokenCount": 60,
            "candidatesTokenCount": 20, "thoughtsTokenCount": 12, "totalTokenCount": 132},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-G1"
    })
}

#[test]
fn gemini_answers_become_chat_and_messages_answers() {
    let out = down(Direction::CHAT_TO_GEMINI, &gemini_answer("STOP"));
    let message = &out["choices"][0]["message"];
    assert_eq!(out["model"], "gemini-2.5-flash");
    assert_eq!(message["content"], "I will look.");
    assert_eq!(message["reasoning_content"], "let me see");
    assert_eq!(message["tool_calls"][0]["id"], "call_resp-G1_0");
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        "{\"at\":\"x\"}"
    );
    assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(out["usage"]["prompt_tokens"], 100);
    assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 60);
    assert_eq!(out["usage"]["completion_tokens"], 32);
    assert_eq!(
        out["usage"]["completion_tokens_details"]["reasoning_tokens"],
        12
    );
    assert!(!out.to_string().contains("GEMSIG"));
    // No `responseId` (a proxy in between dropped it): the calls are told apart by the time.
    let mut bare = gemini_answer("STOP");
    bare.as_object_mut().unwrap().remove("responseId");
    let out = down(Direction::CHAT_TO_GEMINI, &bare);
    assert_eq!(
        out["choices"][0]["message"]["tool_calls"][0]["id"],
        "call_gemini1700000000_0"
    );

    let out = down(Direction::MESSAGES_TO_GEMINI, &gemini_answer("STOP"));
    assert_eq!(out["content"][0]["type"], "thinking");
    assert_eq!(
        out["content"][0]["signature"], "",
        "a Gemini signature is not Anthropic's"
    );
    // The call's signature in a thinking block of its own just before it, in the plain form
    // the node seals before it leaves.
    assert_eq!(
        out["content"][2],
        json!({"type": "thinking", "thinking": "", "signature": "qrgplain1.GEMSIG"})
    );
    assert_eq!(out["content"][3]["type"], "tool_use");
    assert_eq!(out["content"][3]["input"], json!({"at": "x"}));
    assert_eq!(out["stop_reason"], "tool_use");
    assert_eq!(
        out["usage"]["input_tokens"], 40,
        "cache reads are not in Anthropic's input"
    );
    assert_eq!(out["usage"]["cache_read_input_tokens"], 60);
}

/// A Gemini account's signature goes to a Messages client in a thinking block, sealed by the
/// node, and back to the Gemini account on the call it signed only on that connection.
#[test]
fn a_gemini_signature_goes_round_a_messages_client_only_to_its_connection() {
    let out = down(Direction::MESSAGES_TO_GEMINI, &gemini_answer("STOP"));
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let client = super::thinking_carry::TEST_CLIENT;
    let text = out.to_string();
    let sealed = crate::wire::item_seal::seal_all(
        text.as_bytes(),
        &key,
        crate::wire::item_seal::SealedFor {
            client,
            connection: "gm-1",
        },
        crate::wire::item_seal::Items::MessagesTranslated,
    );
    let answer: Value = serde_json::from_slice(&sealed).unwrap();
    let signature = answer["content"][2]["signature"].as_str().unwrap();
    assert!(signature.starts_with("qrg1"), "{signature}");
    assert!(!answer.to_string().contains("qrgplain1"));
    let request = json!({"model": "m", "max_tokens": 100, "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": answer["content"][3]["id"], "content": "seen"}]}
    ]});
    let on = |connection: &str| {
        let settings = RequestSettings {
            reasoning: Some(ReasoningKey {
                key: &key,
                client,
                connection,
            }),
            ..super::tests::SETTINGS
        };
        let translated = translate_request(
            Direction::MESSAGES_TO_GEMINI,
            request.to_string().as_bytes(),
            settings,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&translated.body).unwrap();
        (body, translated.reasoning)
    };
    let (body, counts) = on("gm-1");
    assert_eq!(counts.restored, 1);
    let parts = &body["contents"][1]["parts"];
    let call = parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap();
    assert_eq!(call["thoughtSignature"], "GEMSIG", "{body}");
    let (body, counts) = on("gm-2");
    assert_eq!(counts.left_out, 1);
    assert!(!body.to_string().contains("GEMSIG"), "{body}");
    assert!(!body.to_string().contains("qrg1"), "{body}");
}

#[test]
fn safety_finishes_and_blocked_prompts_are_content_filters() {
    for reason in [
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
    ] {
        let mut answer = gemini_answer(reason);
        answer["candidates"][0]["content"]["parts"] = json!([]);
        let out = down(Direction::CHAT_TO_GEMINI, &answer);
        assert_eq!(
            out["choices"][0]["finish_reason"], "content_filter",
            "{reason}"
        );
        let out = down(Direction::MESSAGES_TO_GEMINI, &answer);
        assert_eq!(out["stop_reason"], "refusal", "{reason}");
    }
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}});
    let out = down(Direction::RESPONSES_TO_GEMINI, &blocked);
    assert_eq!(out["status"], "incomplete");
    assert_eq!(out["incomplete_details"]["reason"], "content_filter");
    let out = down(Direction::CHAT_TO_GEMINI, &gemini_answer("MAX_TOKENS"));
    assert_eq!(out["choices"][0]["finish_reason"], "length");
}

#[test]
fn a_thought_signature_goes_to_a_responses_client_sealed_and_back_only_to_its_connection() {
    let out = down(Direction::RESPONSES_TO_GEMINI, &gemini_answer("STOP"));
    let output = out["output"].as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    // OpenAI's order: reasoning items, the message, the calls.
    assert_eq!(
        kinds,
        ["reasoning", "reasoning", "message", "function_call"]
    );
    assert_eq!(output[0]["summary"][0]["text"], "let me see");
    assert!(output[0]
        .get("encrypted_content")
        .is_none_or(Value::is_null));
    assert_eq!(
        carried_block(&output[1]),
        json!({"type": "thinking", "thinking": "", "signature": "GEMSIG"})
    );
    assert_eq!(out["usage"]["input_tokens_details"]["cached_tokens"], 60);
    assert_eq!(
        out["usage"]["output_tokens_details"]["reasoning_tokens"],
        12
    );
    // The client sends the turn back: the node had sealed the block for gm-1.
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let plain = output[1]["encrypted_content"].as_str().unwrap();
    let sealed = super::thinking_carry::encrypted(&key, "gm-1", plain);
    // Sent back as the client got it: the signature's item before the text, the call after.
    let request = json!({"model": "m", "input": [
        {"role": "user", "content": "look"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": sealed},
        {"role": "assistant", "content": [{"type": "output_text", "text": "I will look."}]},
        {"type": "function_call", "call_id": "call_resp-G1_0", "name": "look", "arguments": "{\"at\":\"x\"}"},
        {"type": "function_call_output", "call_id": "call_resp-G1_0", "output": "seen"}
    ]});
    let on = |connection: &str| {
        let settings = RequestSettings {
            reasoning: Some(ReasoningKey {
                key: &key,
                client: super::thinking_carry::TEST_CLIENT,
                connection,
            }),
            ..super::tests::SETTINGS
        };
        let translated = translate_request(
            Direction::RESPONSES_TO_GEMINI,
            request.to_string().as_bytes(),
            settings,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&translated.body).unwrap();
        (body, translated.reasoning)
    };
    let (body, counts) = on("gm-1");
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "I will look."},
               {"functionCall": {"name": "look", "args": {"at": "x"}}, "thoughtSignature": "GEMSIG"}])
    );
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"],
        json!({"name": "look", "response": {"output": "seen"}})
    );
    assert_eq!(counts.restored, 1);
    let (body, counts) = on("gm-2");
    assert!(!body.to_string().contains("GEMSIG"), "{body}");
    assert_eq!(counts.left_out, 1);
}

#[test]
fn answers_of_every_api_become_gemini_answers() {
    let out = down(Direction::GEMINI_TO_MESSAGES, &anthropic_answer());
    let candidate = &out["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    let parts = candidate["content"]["parts"].as_array().unwrap();
    // The signed block rides in the next part's `thoughtSignature`, in its plain carried form
    // (the node encrypts it before it leaves).
    let carried = parts[1]["thoughtSignature"].as_str().unwrap();
    assert_eq!(
        super::thinking_carry::block_of(carried),
        Some(json!({"type": "thinking", "thinking": "let me see", "signature": "sig-1"}))
    );
    let mut without = candidate["content"]["parts"].clone();
    without[1]
        .as_object_mut()
        .unwrap()
        .remove("thoughtSignature");
    assert_eq!(
        without,
        json!([
            {"text": "let me see", "thought": true},
            {"text": "I will look."},
            {"functionCall": {"id": "toolu_7", "name": "look", "args": {"at": "x"}}}
        ])
    );
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(out["modelVersion"], "claude-x");
    assert_eq!(
        out["usageMetadata"],
        json!({"promptTokenCount": 105, "cachedContentTokenCount": 90,
               "candidatesTokenCount": 20, "totalTokenCount": 125})
    );
    assert!(
        !out.to_string().contains("sig-1"),
        "no Anthropic signature in clear to a Gemini client"
    );

    let chat = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "cut"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 2}}});
    let out = down(Direction::GEMINI_TO_CHAT, &chat);
    assert_eq!(out["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert_eq!(
        out["candidates"][0]["content"]["parts"],
        json!([{"text": "cut"}])
    );
    assert_eq!(out["usageMetadata"]["candidatesTokenCount"], 3);
    assert_eq!(out["usageMetadata"]["thoughtsTokenCount"], 2);
    assert_eq!(out["usageMetadata"]["totalTokenCount"], 15);

    let refusal = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "c",
        "content": [], "stop_reason": "refusal", "usage": {"input_tokens": 1, "output_tokens": 0}});
    let out = down(Direction::GEMINI_TO_MESSAGES, &refusal);
    assert_eq!(out["candidates"][0]["finishReason"], "SAFETY");
}

#[test]
fn errors_cross_between_googles_shape_and_the_others() {
    let google = json!({"error": {"code": 429, "message": "Resource has been exhausted",
        "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com"}]}});
    let body = google.to_string();
    let out: Value =
        serde_json::from_slice(&error_body(Direction::CHAT_TO_GEMINI, 429, body.as_bytes()))
            .unwrap();
    assert_eq!(out["error"]["message"], "Resource has been exhausted");
    assert_eq!(out["error"]["type"], "rate_limit_error");
    assert_eq!(out["error"]["code"], "RATE_LIMIT_EXCEEDED");
    let out: Value = serde_json::from_slice(&error_body(
        Direction::MESSAGES_TO_GEMINI,
        503,
        br#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
    ))
    .unwrap();
    assert_eq!(out["type"], "error");
    assert_eq!(out["error"]["type"], "overloaded_error");
    assert_eq!(out["error"]["message"], "The model is overloaded.");

    let anthropic =
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let out: Value =
        serde_json::from_slice(&error_body(Direction::GEMINI_TO_MESSAGES, 529, anthropic)).unwrap();
    assert_eq!(
        out,
        json!({"error": {"code": 529, "message": "Overloaded", "status": "UNAVAILABLE", "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "overloaded_error", "domain": "quotaroute"}]}})
    );
    let out: Value =
        serde_json::from_slice(&error_body(Direction::GEMINI_TO_CHAT, 400, b"plain words"))
            .unwrap();
    assert_eq!(out["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(out["error"]["message"], "plain words");
    assert_eq!(out["error"]["details"], json!([]));
}

/// An Anthropic account's thinking block goes to a Gemini client encrypted for its connection
/// in a `thoughtSignature`, and comes back as the same block (before the part that carried it)
/// only when the next turn goes to that connection; elsewhere it is left out.
#[test]
fn an_anthropic_thinking_block_goes_to_a_gemini_client_and_back_only_to_its_connection() {
    let out = down(Direction::GEMINI_TO_MESSAGES, &anthropic_answer());
    let parts = out["candidates"][0]["content"]["parts"].clone();
    let plain = parts[1]["thoughtSignature"].as_str().unwrap();
    // What the node hands out: encrypted for an-1, wrapped as base64 the SDKs keep.
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let encrypted = super::thinking_carry::encrypted(&key, "an-1", plain);
    let signature = crate::wire::item_seal::carried_signature(&encrypted);
    assert!(!signature.contains("sig-1") && !signature.contains("let me see"));
    let mut model_parts = parts.clone();
    model_parts[1]["thoughtSignature"] = json!(signature);
    let request = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "look"}]},
            {"role": "model", "parts": model_parts},
            {"role": "user", "parts": [{"functionResponse": {"name": "look", "response": {"output": "seen"}}}]},
        ],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 4096, "includeThoughts": true}},
    });
    let on = |connection: &str| {
        let settings = RequestSettings {
            reasoning: Some(ReasoningKey {
                key: &key,
                client: super::thinking_carry::TEST_CLIENT,
                connection,
            }),
            ..super::tests::SETTINGS
        };
        let translated = translate_request(
            Direction::GEMINI_TO_MESSAGES,
            request.to_string().as_bytes(),
            settings,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&translated.body).unwrap();
        (body, translated.reasoning)
    };
    let (body, counts) = on("an-1");
    assert_eq!(counts.restored, 1);
    let assistant = &body["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "let me see", "signature": "sig-1"})
    );
    assert_eq!(assistant[1]["type"], "text");
    assert_eq!(assistant[2]["type"], "tool_use");
    assert!(body.get("thinking").is_some(), "thinking stays on: {body}");
    let (body, counts) = on("an-2");
    assert_eq!(counts.left_out, 1);
    assert!(!body.to_string().contains("sig-1"), "{body}");
    // Sent back URL-safe (as Google's Python SDK re-encodes bytes): it still opens.
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&signature)
        .unwrap();
    let url_safe = base64::engine::general_purpose::URL_SAFE.encode(raw);
    assert_eq!(
        crate::wire::item_seal::carried_in_signature(&url_safe).as_deref(),
        Some(encrypted.as_str())
    );
}
