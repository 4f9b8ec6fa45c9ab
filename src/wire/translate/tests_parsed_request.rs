//! A request parsed once for the carry check and the attempt: the translation of the parsed
//! body is the translation of the bytes, refusals and errors included, and a body other than
//! the parsed one is parsed anew.

use serde_json::{json, Value};

use super::*;

fn settings() -> RequestSettings<'static> {
    RequestSettings {
        model: "target-model",
        default_max_tokens: 4096,
        reasoning: None,
    }
}

fn bodies() -> Vec<Vec<u8>> {
    vec![
        serde_json::to_vec(&json!({"model": "c", "messages": [{"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"}], "max_tokens": 64, "temperature": 0, "stream": false}))
        .unwrap(),
        serde_json::to_vec(&json!({"model": "c", "input": "hi", "instructions": "x",
            "tools": [{"type": "web_search"}], "max_output_tokens": 64}))
        .unwrap(),
        serde_json::to_vec(&json!({"model": "c", "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_object"}}))
        .unwrap(),
        serde_json::to_vec(&json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})).unwrap(),
        b"not json".to_vec(),
        b"[1, 2]".to_vec(),
    ]
}

#[test]
fn a_parsed_request_translates_as_its_bytes_do() {
    for body in bodies() {
        let parsed = ParsedRequest::new(Bytes::from(body.clone()));
        for direction in Direction::ALL {
            for stream in [None, Some(true)] {
                let expected = translate_request_as(direction, &body, settings(), stream);
                // Twice: the second reads what the first parsed.
                for _ in 0..2 {
                    let got = translate_parsed_as(
                        direction,
                        (Some(&parsed), parsed.body()),
                        settings(),
                        stream,
                    );
                    assert_eq!(got, expected, "{}", direction.label());
                }
                assert_eq!(
                    carries(direction, &parsed, settings(), stream),
                    expected.map(|_| ()),
                    "{}",
                    direction.label()
                );
            }
        }
    }
}

#[test]
fn another_body_than_the_parsed_one_is_parsed_anew() {
    let bodies = bodies();
    let parsed = ParsedRequest::new(Bytes::from(bodies[0].clone()));
    assert!(parsed.holds(&bodies[0]));
    assert!(!parsed.holds(&bodies[2]));
    let direction = Direction::CHAT_TO_MESSAGES;
    assert_eq!(
        translate_parsed_as(direction, (Some(&parsed), &bodies[2]), settings(), None),
        translate_request_as(direction, &bodies[2], settings(), None)
    );
    assert_ne!(
        translate_parsed_as(direction, (Some(&parsed), &bodies[2]), settings(), None),
        translate_request_as(direction, &bodies[0], settings(), None)
    );
}

#[test]
fn the_attempt_takes_what_the_check_wrote_with_its_own_model() {
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let check = RequestSettings {
        model: "",
        default_max_tokens: 4096,
        reasoning: None,
    };
    for body in bodies() {
        for direction in Direction::ALL {
            for stream in [None, Some(false), Some(true)] {
                let keyed = RequestSettings {
                    reasoning: Some(ReasoningKey {
                        key: &key,
                        client: "client-a",
                        connection: "conn-1",
                    }),
                    ..settings()
                };
                for attempt in [settings(), keyed] {
                    let parsed = ParsedRequest::new(Bytes::from(body.clone()));
                    let carried = carries(direction, &parsed, check, stream);
                    assert_eq!(parsed.checked_len(), usize::from(carried.is_ok()));
                    let got =
                        translate_parsed_as(direction, (Some(&parsed), &body), attempt, stream);
                    let expected = translate_request_as(direction, &body, attempt, stream);
                    assert_eq!(got, expected, "{}", direction.label());
                    // A check with another limit is not taken.
                    let parsed = ParsedRequest::new(Bytes::from(body.clone()));
                    let _ = carries(
                        direction,
                        &parsed,
                        RequestSettings {
                            default_max_tokens: 7,
                            ..check
                        },
                        stream,
                    );
                    let got =
                        translate_parsed_as(direction, (Some(&parsed), &body), attempt, stream);
                    assert_eq!(got, expected, "{}", direction.label());
                }
            }
        }
    }
    // The common case is taken: a Chat client's request for Messages.
    let body = &bodies()[0];
    let parsed = ParsedRequest::new(Bytes::from(body.clone()));
    carries(Direction::CHAT_TO_MESSAGES, &parsed, check, None).unwrap();
    assert_eq!(parsed.checked_len(), 1);
    let taken = translate_parsed_as(
        Direction::CHAT_TO_MESSAGES,
        (Some(&parsed), body),
        settings(),
        None,
    )
    .unwrap();
    assert_eq!(parsed.checked_len(), 0);
    let body: Value = serde_json::from_slice(&taken.body).unwrap();
    assert_eq!(body["model"], "target-model");
}

#[test]
fn a_gemini_clients_stream_takes_what_the_check_wrote_for_its_path() {
    // A Gemini client streams by its path: the check told so writes the streamed request, and
    // the attempt takes it (with its model) instead of writing it again.
    let body = &bodies()[3];
    let check = RequestSettings {
        model: "",
        ..settings()
    };
    for direction in [
        Direction::GEMINI_TO_CHAT,
        Direction::GEMINI_TO_RESPONSES,
        Direction::GEMINI_TO_MESSAGES,
    ] {
        let parsed = ParsedRequest::new(Bytes::from(body.clone()));
        carries(direction, &parsed, check, Some(true)).unwrap();
        assert_eq!(parsed.checked_len(), 1);
        let got =
            translate_parsed_as(direction, (Some(&parsed), body), settings(), Some(true)).unwrap();
        assert_eq!(parsed.checked_len(), 0, "{}", direction.label());
        assert!(got.stream);
        assert_eq!(
            got,
            translate_request_as(direction, body, settings(), Some(true)).unwrap()
        );
    }
}

#[test]
fn a_request_whose_reasoning_a_key_opens_is_translated_with_the_key() {
    let key = crate::wire::item_seal::SealKey::from_secret(b"node secret");
    let block = json!({"type": "thinking", "thinking": "hm", "signature": "SIG"});
    let sealed = thinking_carry::encrypted(&key, "an-1", &thinking_carry::carried(&block));
    let request = json!({"model": "m", "reasoning": {"effort": "low"}, "input": [
        {"role": "user", "content": "look"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": sealed},
        {"type": "function_call", "call_id": "toolu_1", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "seen"},
    ]});
    let body = serde_json::to_vec(&request).unwrap();
    let check = RequestSettings {
        model: "",
        ..settings()
    };
    let attempt = RequestSettings {
        reasoning: Some(ReasoningKey {
            key: &key,
            client: thinking_carry::TEST_CLIENT,
            connection: "an-1",
        }),
        ..settings()
    };
    let direction = Direction::RESPONSES_TO_MESSAGES;
    let parsed = ParsedRequest::new(Bytes::from(body.clone()));
    carries(direction, &parsed, check, None).unwrap();
    let got = translate_parsed_as(direction, (Some(&parsed), &body), attempt, None).unwrap();
    // The check left the item out; the attempt's key restores it.
    assert_eq!(got.reasoning.restored, 1);
    assert_eq!(
        got,
        translate_request_as(direction, &body, attempt, None).unwrap()
    );
    assert_eq!(parsed.checked_len(), 1, "what the check wrote is not taken");
    // Without reasoning items, what the check wrote is taken with a key too.
    let body = serde_json::to_vec(&json!({"model": "m", "input": "hi"})).unwrap();
    let parsed = ParsedRequest::new(Bytes::from(body.clone()));
    carries(direction, &parsed, check, None).unwrap();
    let got = translate_parsed_as(direction, (Some(&parsed), &body), attempt, None).unwrap();
    assert_eq!(parsed.checked_len(), 0);
    assert_eq!(
        got,
        translate_request_as(direction, &body, attempt, None).unwrap()
    );
}

/// A Gemini client's request scanned at its intake: each translation of it (the first takes
/// the form the scan read, any other reads the bytes; one the scan declined is read by the
/// typed shape or the `Value` reader) is the translation of its bytes, dropped names included,
/// on every target API, streamed or not, through the carry check and the attempt or the
/// attempt alone.
#[test]
fn a_gemini_request_scanned_at_its_intake_translates_as_its_bytes_do() {
    let user = |text: &str| json!({"role": "user", "parts": [{"text": text}]});
    let cases = [
        // Plain text: read into the form.
        (
            json!({"systemInstruction": {"parts": [{"text": "You are a helpful assistant."}]},
            "contents": [user("Say hello in one short sentence.")],
            "generationConfig": {"maxOutputTokens": 64, "temperature": 0}}),
            true,
        ),
        (
            json!({"contents": [{"role": "user", "parts": [{"text": "caf\u{e9} \"q\"\n😀"}, {"text": ""}]},
                {"role": "model", "parts": [{"text": "m1"}, {"text": "m2"}]}, user("again")],
            "systemInstruction": {"parts": [{"text": "a"}, {"text": ""}, {"text": "b\\c"}]},
            "generationConfig": {"temperature": 0.7, "topP": 0.95, "maxOutputTokens": 8192,
                "stopSequences": ["END", "\n\n"]},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]}),
            true,
        ),
        // Declined: by the typed shape (tools, a call, a refusal of its tools), by the
        // `Value` reader (a `null` it reads as absent), or refused.
        (
            json!({"contents": [user("x")], "tools": [{"functionDeclarations": [{"name": "f"}]}],
            "safetySettings": []}),
            false,
        ),
        (
            json!({"contents": [user("x"), {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}]}),
            false,
        ),
        (
            json!({"contents": [user("x")], "tools": [{"codeExecution": {}}]}),
            false,
        ),
        (
            json!({"contents": [user("x")], "generationConfig": null}),
            false,
        ),
        (
            json!({"contents": [user("x")], "generationConfig": {"candidateCount": 2}}),
            false,
        ),
        (json!([1, 2]), false),
    ];
    let check = RequestSettings {
        model: "",
        ..settings()
    };
    for (body, plain) in cases {
        let shown = body.to_string();
        let body = serde_json::to_vec(&body).unwrap();
        let scanned = || ParsedRequest::scanned_gemini(Bytes::from(body.clone()));
        assert_eq!(scanned().holds_scanned(), plain, "{shown}");
        let gemini = Direction::ALL
            .into_iter()
            .filter(|d| d.client == Api::Gemini);
        for direction in gemini {
            for stream in [Some(false), Some(true)] {
                let label = format!("{} {shown}", direction.label());
                let expected = translate_request_as(direction, &body, settings(), stream);
                // The carry check takes the form; the attempt takes what the check wrote.
                let parsed = scanned();
                let carried = carries(direction, &parsed, check, stream);
                assert_eq!(carried, expected.clone().map(|_| ()), "{label}");
                assert!(!parsed.holds_scanned(), "{label}");
                let got = translate_parsed_as(
                    direction,
                    (Some(&parsed), parsed.body()),
                    settings(),
                    stream,
                );
                assert_eq!(got, expected, "{label}");
                // The attempt alone takes the form, and a second reads the bytes.
                let parsed = scanned();
                for _ in 0..2 {
                    let got = translate_parsed_as(
                        direction,
                        (Some(&parsed), parsed.body()),
                        settings(),
                        stream,
                    );
                    assert_eq!(got, expected, "{label}");
                    assert!(!parsed.holds_scanned(), "{label}");
                }
            }
        }
    }
}
