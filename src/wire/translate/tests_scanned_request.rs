//! The scanned read of a Gemini client's plain text request gives exactly what the typed
//! shape gives, and so what the `Value` reader gives (the hub's form, the dropped names), or
//! declines: over real-shaped text requests (escapes, non-ASCII, empty texts, several system
//! parts, turns of one role in a row, every kind of sampling number, members passed over,
//! whitespace between tokens) and over shapes it leaves to the typed shape.

use serde_json::{json, Value};

use super::thinking_carry::ReasoningCounts;
use super::*;

/// A body and whether the scan takes it.
type Case = (Vec<u8>, bool);

fn taken(body: Value) -> Case {
    (serde_json::to_vec(&body).unwrap(), true)
}

fn declined(body: Value) -> Case {
    (serde_json::to_vec(&body).unwrap(), false)
}

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

fn plain_cases() -> Vec<Case> {
    vec![
        // The bench's request, and a client SDK's with its members in another order.
        taken(json!({"systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            "contents": [user("Say hello in one short sentence.")],
            "generationConfig": {"maxOutputTokens": 64, "temperature": 0}})),
        taken(json!({"generationConfig": {"temperature": 0.7, "topP": 0.95, "maxOutputTokens": 8192,
                "stopSequences": ["END", "\n\n", "é"]},
            "contents": [user("hi"), {"role": "model", "parts": [{"text": "hello"}]}, user("again")],
            "model": "models/gemini-2.5-flash", "labels": {"team": "a", "n": [1, 2.5, null, true]},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]})),
        // Escapes, non-ASCII, empty texts, two system parts (one empty), role-less and
        // repeated-role turns (merged), a part-less turn, an empty system instruction.
        (r#"{"systemInstruction":{"role":"system","parts":[{"text":"a \"q\"\n\t\\ \u00e9"},{"text":""},{"text":"😀 b"}]},
            "contents":[{"parts":[{"text":"caf\u00e9 \"x\" \/ 😀 ü"},{"text":""}]},{"role":"user","parts":[{"text":"two"}]},
            {"role":"model"},{"role":"model","parts":[]},{"role":"model","parts":[{"text":"m1"},{"text":"m2"}]},
            {"role":"model","parts":[{"text":""}]},{"role":"model","parts":[{"text":"m3"}]},{"role":"other","parts":[{"text":"u"}]}]}"#
            .as_bytes().to_vec(), true),
        taken(json!({"systemInstruction": {"parts": []}, "contents": []})),
        taken(json!({"systemInstruction": {"parts": [{"text": ""}, {"text": ""}]}, "contents": [user("x")]})),
        // Sampling numbers of every kind serde_json reads into a `Number`.
        taken(json!({"contents": [user("x")], "generationConfig": {"temperature": 1, "topP": 1.0, "maxOutputTokens": 0}})),
        (br#"{"contents":[],"generationConfig":{"temperature":-0,"topP":0.30000000000000004}}"#.to_vec(), true),
        (br#"{"contents":[],"generationConfig":{"temperature":-1.50,"topP":123456789012345678,"stopSequences":[]}}"#.to_vec(), true),
        (br#"{"contents":[],"generationConfig":{}}"#.to_vec(), true),
        // Whitespace everywhere JSON allows it.
        (b" \n{ \"contents\" :\t[ { \"role\" : \"user\" , \"parts\" : [ { \"text\" : \"x\" } ] } ] ,\r\n \"generationConfig\" : { \"temperature\" : 0.5 } } \n"
            .to_vec(), true),
        // Keys spelled with escapes are the same keys.
        (br#"{"cont\u0065nts":[{"role":"user","parts":[{"t\u0065xt":"x"}]}]}"#.to_vec(), true),
        // Left to the typed shape (which reads most of them).
        declined(json!({"contents": [user("x")], "tools": [{"functionDeclarations": [{"name": "f"}]}]})),
        declined(json!({"contents": [user("x")], "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}})),
        declined(json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "x"}}]}]})),
        declined(json!({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"text": "x", "thought": true}]}]})),
        declined(json!({"contents": [{"role": null, "parts": [{"text": "x"}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": null}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{"text": null}]}]})),
        declined(json!({"contents": [{"role": "user", "parts": [{}]}]})),
        declined(json!({"contents": [user("x")], "systemInstruction": null})),
        declined(json!({"contents": [user("x")], "safetySettings": null})),
        declined(json!({"contents": [user("x")], "generationConfig": null})),
        declined(json!({"contents": [user("x")], "generationConfig": {"temperature": null}})),
        (br#"{"contents":[],"generationConfig":{"topP":1e-3}}"#.to_vec(), false),
        declined(json!({"contents": [user("x")], "generationConfig": {"maxOutputTokens": 64.5}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"stopSequences": [1]}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"candidateCount": 1}})),
        declined(json!({"contents": [user("x")], "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}})),
        declined(json!({"contents": [user("x")], "generation_config": {"temperature": 0}})),
        declined(json!({"contents": [user("x")], "system_instruction": {"parts": [{"text": "s"}]}})),
        declined(json!({"contents": [user("x")], "stream": true})),
        declined(json!({"systemInstruction": {"parts": [{"text": "s"}]}})),
        declined(json!({"contents": {"role": "user"}})),
        declined(json!([user("x")])),
        (br#"{"contents":[],"contents":[]}"#.to_vec(), false),
        (br#"{"contents":[{"role":"user","parts":[{"text":"a","text":"b"}]}]}"#.to_vec(), false),
        (br#"{"contents":[],"generationConfig":{"temperature":1,"temperature":2}}"#.to_vec(), false),
        (br#"{"contents":[]} x"#.to_vec(), false),
        (br#"{"contents":[{"parts":[{"text":"\ud83d\ude00"}]}]}"#.to_vec(), false),
        (br#"{"contents":[],"generationConfig":{"maxOutputTokens":1234567890123456789}}"#.to_vec(), false),
        (b"{\"contents\":[{\"parts\":[{\"text\":\"\xff\"}]}]}".to_vec(), false),
        (b"{\"contents\":[{\"parts\":[{\"text\":\"a\tb\"}]}]}".to_vec(), false),
        (b"not json".to_vec(), false),
    ]
}

/// What a read gives: the form (or refusal) and the names dropped.
type ReadOf = (Result<Request, TranslateError>, Vec<String>);

fn value_read(body: &[u8]) -> ReadOf {
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
        client: Api::Gemini,
        target: Api::Chat,
    };
    let read = read_request(direction, source, None, &mut dropped, &mut counts);
    (read.map(|(form, _, _)| form), dropped)
}

#[test]
fn a_scanned_read_gives_the_typed_shapes_form_or_declines() {
    for (body, expect_taken) in plain_cases() {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let mut dropped = Vec::new();
        let scanned = gemini::scanned_request::request(&body, &mut dropped);
        assert_eq!(scanned.is_some(), expect_taken, "taken? {shown}");
        let Some(form) = scanned else {
            assert_eq!(dropped, Vec::<String>::new(), "{shown}");
            continue;
        };
        let mut typed_dropped = Vec::new();
        let typed = gemini::typed_request::shaped(&body, &mut typed_dropped)
            .expect("the typed shape takes what the scan takes");
        assert_eq!(
            (Ok(form.clone()), dropped.clone()),
            (typed, typed_dropped),
            "{shown}"
        );
        assert_eq!((Ok(form), dropped), value_read(&body), "{shown}");
    }
}

/// The translation of each plain case on every target API is the `Value` readers' and
/// writers' (bytes, dropped names), whether the scan took the body or declined it.
#[test]
fn a_scanned_translation_is_the_value_readers() {
    let settings = RequestSettings {
        model: "target-model",
        default_max_tokens: 4096,
        reasoning: None,
    };
    for (body, _) in plain_cases() {
        let shown = String::from_utf8_lossy(&body).into_owned();
        for target in [Api::Chat, Api::Responses, Api::Messages, Api::Gemini] {
            let direction = Direction {
                client: Api::Gemini,
                target,
            };
            for stream in [Some(false), Some(true)] {
                let got = translate_request_as(direction, &body, settings, stream);
                let object = std::sync::OnceLock::new();
                let source = Source {
                    body: &body,
                    object: &object,
                    scanned: None,
                    typed: false,
                };
                let expected = translate_source(direction, source, settings, stream);
                assert_eq!(got, expected, "{} {shown}", direction.label());
            }
        }
    }
}
