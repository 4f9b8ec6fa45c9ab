//! Anthropic Messages API shapes: the JSON message (and `count_tokens`' `{"input_tokens": N}`)
//! and the SSE event sequence
//! (`message_start`, `content_block_start`, `ping`, `content_block_delta`…, `content_block_stop`,
//! `message_delta` with `usage.output_tokens`, `message_stop`).
//!
//! Owns the shapes; the words, tokens and where a stream breaks come from [`Turn`].

use serde_json::{json, Value};

use super::error_bodies::stream_error_payload;
use super::exchange::{sse, Endpoint, StreamEnding, Turn};
use super::rate_headers::Dialect;
use super::thinking;

/// The page the mock's web search finds and its answer cites.
pub const SEARCH_RESULT_URL: &str = "https://example.org/quotaroute-mock";

/// The answer's content: its thinking block (thinking on) and its text — and, when the
/// request offered web search, one search, its result and a sentence citing it, as Claude
/// answers with `web_search_20250305`.
fn content(turn: &Turn) -> Value {
    let text = json!({"type": "text", "text": turn.text()});
    let mut blocks = match &turn.thinking_signature {
        Some(signature) => vec![thinking::block(signature), text],
        None => vec![text],
    };
    if turn.web_search {
        let id = format!("srvtoolu_mock_{}", turn.sequence);
        blocks.splice(
            0..0,
            [
                json!({"type": "server_tool_use", "id": id, "name": "web_search",
                       "input": {"query": "quotaroute mock"}}),
                json!({"type": "web_search_tool_result", "tool_use_id": id, "content": [
                    {"type": "web_search_result", "url": SEARCH_RESULT_URL,
                     "title": "The mock's source", "encrypted_content": "bW9jaw==",
                     "page_age": null}]}),
            ],
        );
        blocks.push(
            json!({"type": "text", "text": " The mock cites one source.",
            "citations": [{"type": "web_search_result_location", "url": SEARCH_RESULT_URL,
                           "title": "The mock's source", "cited_text": "one source",
                           "encrypted_index": "bW9jaw=="}]}),
        );
    }
    Value::Array(blocks)
}

fn message(turn: &Turn, complete: bool) -> Value {
    json!({
        "id": format!("msg_mock_{}", turn.sequence),
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": if complete { content(turn) } else { json!([]) },
        "stop_reason": if complete { json!("end_turn") } else { Value::Null },
        "stop_sequence": null,
        "usage": turn.usage_override.clone().unwrap_or_else(|| json!({
            // Anthropic's `input_tokens` excludes cache reads and writes.
            "input_tokens": turn
                .prompt_tokens
                .saturating_sub(turn.cached_tokens + turn.cache_write_tokens),
            "cache_read_input_tokens": turn.cached_tokens,
            "cache_creation_input_tokens": turn.cache_write_tokens,
            "output_tokens": if complete { turn.completion_tokens() } else { 1 },
        })),
    })
}

/// The usage object of a complete Anthropic answer to `turn`.
pub(crate) fn usage_for(turn: &Turn) -> Value {
    message(turn, true)["usage"].clone()
}

pub fn json_body(turn: &Turn) -> Value {
    match turn.endpoint {
        Endpoint::CountTokens => json!({"input_tokens": turn.prompt_tokens}),
        _ => message(turn, true),
    }
}

/// A web search's two blocks as Claude streams them: `server_tool_use` with its query in
/// `input_json_delta` pieces, then `web_search_tool_result` whole (indices 0 and 1).
fn search_frames(turn: &Turn) -> Vec<String> {
    let event = |kind: &str, data: Value| sse(Some(kind), &data.to_string());
    let blocks = content(turn);
    let (Some(call), Some(result)) = (blocks.get(0), blocks.get(1)) else {
        return Vec::new();
    };
    let mut call = call.clone();
    call["input"] = json!({});
    vec![
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": call}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"quotaroute"}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": " mock\"}"}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": result}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
    ]
}

pub fn stream_frames(turn: &Turn, ending: StreamEnding) -> Vec<String> {
    let event = |kind: &str, data: Value| sse(Some(kind), &data.to_string());
    let mut frames = vec![event(
        "message_start",
        json!({"type": "message_start", "message": message(turn, false)}),
    )];
    // Web search offered: the search and its result first (as Claude streams them).
    let mut index = 0;
    if turn.web_search {
        frames.extend(search_frames(turn));
        index = 2;
    }
    // Thinking on: the signed thinking block first, the text after it.
    if let Some(signature) = &turn.thinking_signature {
        for (kind, mut data) in thinking::stream_events(signature) {
            data["index"] = json!(index);
            frames.push(event(kind, data));
        }
        index += 1;
    }
    frames.push(event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    ));
    frames.push(event("ping", json!({"type": "ping"})));
    for text in turn.chunks.iter().take(ending.content_chunks(turn)) {
        frames.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
        ));
    }
    if ending != StreamEnding::Complete {
        frames.push(event("error", stream_error_payload(Dialect::Anthropic)));
        return frames;
    }
    frames.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    if turn.web_search {
        // The cited sentence: its citation first, then its text.
        let cited = index + 1;
        let citation = content(turn)
            .as_array()
            .and_then(|blocks| blocks.last())
            .map(|block| block["citations"][0].clone())
            .unwrap_or_default();
        frames.extend([
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": cited,
                "content_block": {"type": "text", "text": "", "citations": []}}),
            ),
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": cited,
                "delta": {"type": "citations_delta", "citation": citation}}),
            ),
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": cited,
                "delta": {"type": "text_delta", "text": " The mock cites one source."}}),
            ),
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": cited}),
            ),
        ]);
    }
    frames.push(event(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": turn
                .usage_override
                .clone()
                .unwrap_or_else(|| json!({"output_tokens": turn.completion_tokens()})),
        }),
    ));
    frames.push(event("message_stop", json!({"type": "message_stop"})));
    frames
}
