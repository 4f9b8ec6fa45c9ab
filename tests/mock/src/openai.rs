//! OpenAI response shapes: chat completions, completions, embeddings and the Responses API, as
//! JSON and as SSE (chat/completions: `data:` chunks and `[DONE]`; Responses: typed events).
//! A Responses request with OpenAI's `web_search` tool runs one search (its `web_search_call`
//! item first) and its message cites the source (`url_citation`), as OpenAI answers.
//!
//! Owns the shapes; the words, tokens and where a stream breaks come from [`Turn`].

use serde_json::{json, Value};

use super::anthropic::SEARCH_RESULT_URL;
use super::error_bodies::stream_error_payload;
use super::exchange::{sse, Endpoint, StreamEnding, Turn};
use super::rate_headers::Dialect;
use super::thinking::THINKING_TEXT;

/// A fixed `created` time so bodies are byte-for-byte deterministic.
const CREATED: u64 = 1_700_000_000;

fn usage(turn: &Turn) -> Value {
    if let Some(usage) = &turn.usage_override {
        return usage.clone();
    }
    json!({
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens(),
        "total_tokens": turn.total_tokens(),
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
    })
}

fn responses_usage(turn: &Turn) -> Value {
    if let Some(usage) = &turn.usage_override {
        return usage.clone();
    }
    json!({
        "input_tokens": turn.prompt_tokens,
        "input_tokens_details": {"cached_tokens": turn.cached_tokens},
        "output_tokens": turn.completion_tokens(),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.total_tokens(),
    })
}

/// The usage object of `turn` in its endpoint's terms (Chat Completions or Responses).
pub(crate) fn usage_for(turn: &Turn) -> Value {
    match turn.endpoint {
        Endpoint::Responses => responses_usage(turn),
        _ => usage(turn),
    }
}

/// The non-streaming body for an OpenAI-format endpoint.
pub fn json_body(turn: &Turn) -> Value {
    let sequence = turn.sequence;
    match turn.endpoint {
        Endpoint::Completions => json!({
            "id": format!("cmpl-mock-{sequence}"),
            "object": "text_completion",
            "created": CREATED,
            "model": turn.model,
            "choices": [{"text": turn.text(), "index": 0, "logprobs": null, "finish_reason": "stop"}],
            "usage": usage(turn),
        }),
        Endpoint::Embeddings => json!({
            "object": "list",
            "data": turn.embedding_inputs.iter().enumerate().map(|(index, input)| json!({
                "object": "embedding",
                "index": index,
                "embedding": if turn.embedding_base64 {
                    json!(embedding_base64(input))
                } else {
                    json!(embedding(input))
                },
            })).collect::<Vec<_>>(),
            "model": turn.model,
            "usage": {"prompt_tokens": turn.prompt_tokens, "total_tokens": turn.prompt_tokens},
        }),
        Endpoint::Responses => response_object(turn, "completed", true),
        Endpoint::Compact => compaction_object(turn),
        Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::CountTokens => {
            let mut message = json!({"role": "assistant", "content": turn.text(), "refusal": null});
            if turn.reasoning_content {
                message["reasoning_content"] = json!(THINKING_TEXT);
            }
            json!({
                "id": format!("chatcmpl-mock-{sequence}"),
                "object": "chat.completion",
                "created": CREATED,
                "model": turn.model,
                "choices": [{
                    "index": 0,
                    "message": message,
                    "logprobs": null,
                    "finish_reason": "stop",
                }],
                "usage": usage(turn),
                "system_fingerprint": "fp_mock",
            })
        }
    }
}

/// A small vector that depends only on the input text.
fn embedding(input: &str) -> Vec<f64> {
    let seed: u64 = input.bytes().map(u64::from).sum();
    (1..=8u64)
        .map(|index| ((seed * index * 7919) % 2000) as f64 / 1000.0 - 1.0)
        .collect()
}

/// [`embedding`] as the API's base64 form: little-endian float32s.
fn embedding_base64(input: &str) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = embedding(input)
        .into_iter()
        .flat_map(|value| (value as f32).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The id of the reasoning item of the response numbered `sequence`.
pub(crate) fn reasoning_id(sequence: u64) -> String {
    format!("rs_mock_{sequence}")
}

/// The id of the compaction item of the compaction numbered `sequence`.
pub(crate) fn compaction_id(sequence: u64) -> String {
    format!("cmp_mock_{sequence}")
}

/// The reasoning item a reasoning model's response starts with (its summary when the request
/// asked for one and the item is `done`, else empty), with its encrypted content when the
/// request included it.
fn reasoning_item(turn: &Turn, done: bool) -> Value {
    let summary = if turn.reasoning_summary && done {
        json!([{"type": "summary_text", "text": THINKING_TEXT}])
    } else {
        json!([])
    };
    let mut item =
        json!({"type": "reasoning", "id": reasoning_id(turn.sequence), "summary": summary});
    if let Some(content) = &turn.encrypted_content {
        item["encrypted_content"] = json!(content);
    }
    item
}

/// The web search a Responses request with OpenAI's `web_search` tool runs, as its output
/// item (`ws_mock_<sequence>`): one query, one source.
fn search_item(turn: &Turn, status: &str) -> Value {
    json!({"type": "web_search_call", "id": format!("ws_mock_{}", turn.sequence), "status": status,
           "action": {"type": "search", "query": "quotaroute mock",
                      "sources": [{"type": "url", "url": SEARCH_RESULT_URL}]}})
}

/// The search item's stream events (output index 0): added, in progress, searching,
/// completed, done.
fn search_events(turn: &Turn) -> Vec<(String, Value)> {
    let id = format!("ws_mock_{}", turn.sequence);
    let mut events = vec![(
        "response.output_item.added".to_owned(),
        json!({"output_index": 0, "item": search_item(turn, "in_progress")}),
    )];
    for kind in ["in_progress", "searching", "completed"] {
        events.push((
            format!("response.web_search_call.{kind}"),
            json!({"output_index": 0, "item_id": id}),
        ));
    }
    events.push((
        "response.output_item.done".to_owned(),
        json!({"output_index": 0, "item": search_item(turn, "completed")}),
    ));
    events
}

/// The answer's `url_citation` annotations: with web search, one citing the whole text.
fn annotations(turn: &Turn, text: &str) -> Value {
    if !turn.web_search {
        return json!([]);
    }
    json!([{"type": "url_citation", "start_index": 0, "end_index": text.chars().count(),
            "url": SEARCH_RESULT_URL, "title": "The mock's source"}])
}

fn message_item(turn: &Turn, status: &str, text: Option<&str>) -> Value {
    let content = match text {
        Some(text) => {
            json!([{"type": "output_text", "text": text, "annotations": annotations(turn, text)}])
        }
        None => json!([]),
    };
    json!({
        "type": "message",
        "id": format!("msg_mock_{}", turn.sequence),
        "status": status,
        "role": "assistant",
        "content": content,
    })
}

/// The Responses API's response object (`resp_mock_<sequence>`): with output (a reasoning item,
/// then the message) and usage once complete. Also what `GET …/responses/{id}` returns.
pub(crate) fn response_object(turn: &Turn, status: &str, with_output: bool) -> Value {
    let output = if with_output && turn.compaction_trigger {
        json!([compaction_item(turn)])
    } else if with_output {
        let searched = turn.web_search.then(|| search_item(turn, "completed"));
        let items = [
            reasoning_item(turn, true),
            message_item(turn, "completed", Some(&turn.text())),
        ];
        Value::Array(searched.into_iter().chain(items).collect())
    } else {
        json!([])
    };
    let mut object = json!({
        "id": response_id(turn),
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "max_output_tokens": null,
        "max_tool_calls": null,
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": turn.previous_response_id,
        "prompt_cache_key": null,
        "reasoning": {"effort": null, "summary": null},
        "safety_identifier": null,
        "service_tier": "default",
        "store": turn.store,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": if with_output { responses_usage(turn) } else { Value::Null },
        "user": null,
        "metadata": {},
    });
    // The request's own parameters, as the API repeats them.
    if let Some(fields) = object.as_object_mut() {
        for (name, value) in &turn.echo {
            fields.insert(name.clone(), value.clone());
        }
    }
    object
}

/// The compaction item of a compaction (endpoint or inline trigger): only this key can read it.
fn compaction_item(turn: &Turn) -> Value {
    json!({
        "type": "compaction",
        "id": compaction_id(turn.sequence),
        "encrypted_content": turn.encrypted_content,
    })
}

/// `POST …/responses/compact`'s answer: the conversation's user messages kept as sent, then one
/// compaction item whose encrypted content only this key can read; usage like a response's.
fn compaction_object(turn: &Turn) -> Value {
    let mut output: Vec<Value> = turn.kept_messages.clone();
    output.push(compaction_item(turn));
    json!({
        "id": response_id(turn),
        "object": "response.compaction",
        "created_at": CREATED,
        "output": output,
        "usage": responses_usage(turn),
    })
}

/// `resp_mock_<sequence>`: unique across keys because the sequence is global.
pub(crate) fn response_id(turn: &Turn) -> String {
    format!("resp_mock_{}", turn.sequence)
}

/// The SSE events of a streamed reply, ending as `ending` says.
pub fn stream_frames(turn: &Turn, ending: StreamEnding) -> Vec<String> {
    match turn.endpoint {
        Endpoint::Responses => responses_frames(turn, ending),
        _ => chunk_frames(turn, ending),
    }
}

/// Chat completions and legacy completions: `data: {chunk}` lines and `data: [DONE]`.
fn chunk_frames(turn: &Turn, ending: StreamEnding) -> Vec<String> {
    let chat = turn.endpoint != Endpoint::Completions;
    let (id, object) = if chat {
        (
            format!("chatcmpl-mock-{}", turn.sequence),
            "chat.completion.chunk",
        )
    } else {
        (format!("cmpl-mock-{}", turn.sequence), "text_completion")
    };
    let usage_field = if turn.include_usage {
        Value::Null
    } else {
        Value::Bool(false)
    };
    let chunk = |choice: Value| {
        let mut chunk = json!({
            "id": id, "object": object, "created": CREATED, "model": turn.model,
            "system_fingerprint": "fp_mock", "choices": [choice],
        });
        // OpenAI sends `"usage": null` on every chunk when usage was asked for.
        if usage_field.is_null() {
            chunk["usage"] = Value::Null;
        }
        sse(None, &chunk.to_string())
    };
    let choice = |delta_text: Option<&str>, finish: Option<&str>, role: bool| {
        if chat {
            let mut delta = json!({});
            if role {
                delta["role"] = json!("assistant");
                delta["content"] = json!("");
            }
            if let Some(text) = delta_text {
                delta["content"] = json!(text);
            }
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"text": delta_text.unwrap_or(""), "index": 0, "logprobs": null, "finish_reason": finish})
        }
    };
    let mut frames = Vec::new();
    if chat {
        frames.push(chunk(choice(None, None, true)));
    }
    if chat && turn.reasoning_content {
        let delta = json!({"reasoning_content": THINKING_TEXT});
        frames.push(chunk(
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}),
        ));
    }
    for text in turn.chunks.iter().take(ending.content_chunks(turn)) {
        frames.push(chunk(choice(Some(text), None, false)));
    }
    if ending != StreamEnding::Complete {
        frames.push(sse(
            None,
            &stream_error_payload(Dialect::OpenAi).to_string(),
        ));
        return frames;
    }
    frames.push(chunk(choice(None, Some("stop"), false)));
    if turn.include_usage {
        let last = json!({
            "id": id, "object": object, "created": CREATED, "model": turn.model,
            "system_fingerprint": "fp_mock", "choices": [], "usage": usage(turn),
        });
        frames.push(sse(None, &last.to_string()));
    }
    frames.push(sse(None, "[DONE]"));
    frames
}

/// The Responses API: typed `event:` lines, usage in `response.completed`. The reasoning item
/// comes first (`response.created`, `response.in_progress`, its `response.output_item.added`
/// are the preamble), then the message at output index 1.
fn responses_frames(turn: &Turn, ending: StreamEnding) -> Vec<String> {
    let item_id = format!("msg_mock_{}", turn.sequence);
    let mut sequence_number = 0u64;
    let mut frames = Vec::new();
    let mut push = |frames: &mut Vec<String>, kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(sequence_number);
        sequence_number += 1;
        frames.push(sse(Some(kind), &data.to_string()));
    };
    let in_progress = response_object(turn, "in_progress", false);
    push(
        &mut frames,
        "response.created",
        json!({"response": in_progress}),
    );
    push(
        &mut frames,
        "response.in_progress",
        json!({"response": in_progress}),
    );
    if turn.compaction_trigger {
        // Inline compaction: the one compaction item, then the completed response.
        let mut added = compaction_item(turn);
        added["encrypted_content"] = Value::Null;
        push(
            &mut frames,
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        );
        push(
            &mut frames,
            "response.output_item.done",
            json!({"output_index": 0, "item": compaction_item(turn)}),
        );
        push(
            &mut frames,
            "response.completed",
            json!({"response": response_object(turn, "completed", true)}),
        );
        return frames;
    }
    // With web search: the search first, as OpenAI streams it.
    let first = u64::from(turn.web_search);
    if turn.web_search {
        for (kind, data) in search_events(turn) {
            push(&mut frames, &kind, data);
        }
    }
    let message_index = first + 1;
    push(
        &mut frames,
        "response.output_item.added",
        json!({"output_index": first, "item": reasoning_item(turn, false)}),
    );
    push(
        &mut frames,
        "response.output_item.done",
        json!({"output_index": first, "item": reasoning_item(turn, true)}),
    );
    push(
        &mut frames,
        "response.output_item.added",
        json!({"output_index": message_index, "item": message_item(turn, "in_progress", None)}),
    );
    push(
        &mut frames,
        "response.content_part.added",
        json!({"item_id": item_id, "output_index": message_index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    );
    for text in turn.chunks.iter().take(ending.content_chunks(turn)) {
        push(
            &mut frames,
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": message_index, "content_index": 0, "delta": text}),
        );
    }
    if ending != StreamEnding::Complete {
        push(
            &mut frames,
            "error",
            json!({"code": "server_error", "message": "The server had an error while processing your request. Sorry about that!", "param": null}),
        );
        return frames;
    }
    let text = turn.text();
    let annotations = annotations(turn, &text);
    for (index, annotation) in annotations.as_array().into_iter().flatten().enumerate() {
        push(
            &mut frames,
            "response.output_text.annotation.added",
            json!({"item_id": item_id, "output_index": message_index, "content_index": 0,
                   "annotation_index": index, "annotation": annotation}),
        );
    }
    push(
        &mut frames,
        "response.output_text.done",
        json!({"item_id": item_id, "output_index": message_index, "content_index": 0, "text": text}),
    );
    push(
        &mut frames,
        "response.content_part.done",
        json!({"item_id": item_id, "output_index": message_index, "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": annotations}}),
    );
    push(
        &mut frames,
        "response.output_item.done",
        json!({"output_index": message_index, "item": message_item(turn, "completed", Some(&text))}),
    );
    push(
        &mut frames,
        "response.completed",
        json!({"response": response_object(turn, "completed", true)}),
    );
    frames
}
