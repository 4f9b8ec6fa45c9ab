//! Tool calls, as the providers answer them: a request whose last user text says
//! `mock-tool-call:NAME {json arguments}` (and which offers a tool NAME) is answered with a
//! call of that tool — Chat Completions `tool_calls`, Anthropic `tool_use`, Responses
//! `function_call` — as JSON or as a stream with the arguments in pieces. A turn that carries
//! a tool result is answered with text, as a model answers once it has the result.
//!
//! Owns reading the marker and the shapes of a tool-call answer.

use serde_json::{json, Value};

use super::exchange::{sse, Endpoint, ToolCall, Turn};
use super::thinking;

/// What marks a prompt that asks the mock for a tool call.
pub const MARKER: &str = "mock-tool-call:";

/// The text of the last user turn (its consecutive user messages, as a model reads them
/// together, instructions between them skipped), and whether that turn hands back a tool
/// result — in any of the three formats.
fn last_text(endpoint: Endpoint, body: &Value) -> (String, bool) {
    let text_of = |content: &Value| -> String {
        match content {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    };
    let items = match endpoint {
        Endpoint::Responses => match body.get("input") {
            Some(Value::String(text)) => return (text.clone(), false),
            Some(Value::Array(items)) => items.as_slice(),
            _ => &[],
        },
        _ => body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
    };
    let is_result = |item: &Value| {
        item.get("role").and_then(Value::as_str) == Some("tool")
            || item.get("type").and_then(Value::as_str) == Some("function_call_output")
            || item
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    };
    let mut texts = Vec::new();
    for item in items.iter().rev() {
        if is_result(item) {
            return (String::new(), true);
        }
        match item.get("role").and_then(Value::as_str) {
            Some("user") => {}
            // Instructions between turns (Claude Code sends some after the prompt) are not
            // the user's words.
            Some("system" | "developer") => continue,
            _ => break,
        }
        texts.push(text_of(item.get("content").unwrap_or(&Value::Null)));
    }
    texts.reverse();
    (texts.join("\n"), false)
}

/// The names of the tools the request offers.
fn offered(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| {
            tool.get("name")
                .or_else(|| tool.get("function").and_then(|f| f.get("name")))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

/// The tool call a request asks for, if its last user text carries the marker and the tool is
/// offered.
pub fn requested(endpoint: Endpoint, body: &Value) -> Option<ToolCall> {
    if !matches!(
        endpoint,
        Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::Responses
    ) {
        return None;
    }
    let (text, is_result) = last_text(endpoint, body);
    if is_result {
        return None;
    }
    let rest = &text[text.find(MARKER)? + MARKER.len()..];
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if !offered(body).contains(&name) {
        return None;
    }
    let after = rest[name.len()..].trim_start();
    let arguments = if after.starts_with('{') {
        let mut stream = serde_json::Deserializer::from_str(after).into_iter::<Value>();
        match stream.next() {
            Some(Ok(object @ Value::Object(_))) => object.to_string(),
            _ => "{}".to_string(),
        }
    } else {
        "{}".to_string()
    };
    Some(cut_to_max_tokens(body, name, arguments))
}

/// The call as the model gets to write it within the request's explicit `max_tokens` (or
/// `max_completion_tokens` / `max_output_tokens`), the mock counting a token per streamed piece
/// of the arguments (as it counts one per piece of text): fewer tokens than pieces cut the
/// arguments there, mid-JSON, as a provider's are.
fn cut_to_max_tokens(body: &Value, name: String, arguments: String) -> ToolCall {
    let tokens = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|field| body.get(*field).and_then(Value::as_u64))
        .and_then(|tokens| usize::try_from(tokens).ok());
    let pieces = pieces(&arguments);
    match tokens {
        Some(tokens) if tokens < pieces.len() => ToolCall {
            name,
            arguments: pieces[..tokens].concat(),
            cut_short: true,
        },
        _ => ToolCall {
            name,
            arguments,
            cut_short: false,
        },
    }
}

/// The arguments in three pieces (at character boundaries), as providers stream them.
fn pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn call_id(turn: &Turn) -> String {
    match turn.endpoint {
        Endpoint::Messages => format!("toolu_mock_{}", turn.sequence),
        _ => format!("call_mock_{}", turn.sequence),
    }
}

/// The whole JSON answer calling `call`.
pub fn json_body(turn: &Turn, call: &ToolCall, usage: Value) -> Value {
    let id = call_id(turn);
    match turn.endpoint {
        Endpoint::Messages => json!({
            "id": format!("msg_mock_{}", turn.sequence),
            "type": "message",
            "role": "assistant",
            "model": turn.model,
            // Thinking on: the signed thinking block before the call, as Anthropic answers.
            "content": turn.thinking_signature.iter().map(|s| thinking::block(s)).chain([
                json!({"type": "tool_use", "id": id, "name": call.name,
                       "input": serde_json::from_str::<Value>(&call.arguments).unwrap_or(json!({}))})
            ]).collect::<Vec<_>>(),
            "stop_reason": if call.cut_short { "max_tokens" } else { "tool_use" },
            "stop_sequence": null,
            "usage": usage,
        }),
        Endpoint::Responses => json!({
            "id": format!("resp_mock_{}", turn.sequence),
            "object": "response",
            "created_at": 1_700_000_000u64,
            "status": if call.cut_short { "incomplete" } else { "completed" },
            "model": turn.model,
            "output": [function_call_item(turn, call, if call.cut_short { "incomplete" } else { "completed" }, &call.arguments)],
            "usage": usage,
        }),
        _ => json!({
            "id": format!("chatcmpl-mock-{}", turn.sequence),
            "object": "chat.completion",
            "created": 1_700_000_000u64,
            "model": turn.model,
            "choices": [{"index": 0, "logprobs": null, "finish_reason": if call.cut_short { "length" } else { "tool_calls" }, "message": {
                "role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}],
            }}],
            "usage": usage,
        }),
    }
}

fn function_call_item(turn: &Turn, call: &ToolCall, status: &str, arguments: &str) -> Value {
    json!({
        "type": "function_call",
        "id": format!("fc_mock_{}", turn.sequence),
        "call_id": call_id(turn),
        "name": call.name,
        "arguments": arguments,
        "status": status,
    })
}

/// The streamed answer calling `call`: `message_start` (Anthropic) or the role chunk, the
/// call's start, its arguments in pieces, its end and the usage the format carries.
#[expect(
    clippy::too_many_lines,
    reason = "the mock's frames of each format in turn, as the providers send them"
)]
pub fn stream_frames(turn: &Turn, call: &ToolCall, usage: Value) -> Vec<String> {
    let id = call_id(turn);
    let mut frames = Vec::new();
    match turn.endpoint {
        Endpoint::Messages => {
            let event = |kind: &str, data: Value| sse(Some(kind), &data.to_string());
            let mut start_usage = usage.clone();
            start_usage["output_tokens"] = json!(1);
            frames.push(event("message_start", json!({"type": "message_start", "message": {
                "id": format!("msg_mock_{}", turn.sequence), "type": "message", "role": "assistant",
                "model": turn.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}})));
            let index = match &turn.thinking_signature {
                Some(signature) => {
                    for (kind, data) in thinking::stream_events(signature) {
                        frames.push(event(kind, data));
                    }
                    1
                }
                None => 0,
            };
            frames.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": call.name, "input": {}}}),
            ));
            frames.push(event("ping", json!({"type": "ping"})));
            for piece in pieces(&call.arguments) {
                frames.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            frames.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            frames.push(event(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": if call.cut_short { "max_tokens" } else { "tool_use" }, "stop_sequence": null},
                "usage": {"output_tokens": usage["output_tokens"]}}),
            ));
            frames.push(event("message_stop", json!({"type": "message_stop"})));
        }
        Endpoint::Responses => {
            let mut sequence_number = 0u64;
            let mut push = |kind: &str, mut data: Value| {
                data["type"] = json!(kind);
                data["sequence_number"] = json!(sequence_number);
                sequence_number += 1;
                frames.push(sse(Some(kind), &data.to_string()));
            };
            let response = |status: &str, output: Value, usage: Value| {
                json!({
                "id": format!("resp_mock_{}", turn.sequence), "object": "response",
                "created_at": 1_700_000_000u64, "status": status, "model": turn.model,
                "output": output, "usage": usage})
            };
            push(
                "response.created",
                json!({"response": response("in_progress", json!([]), Value::Null)}),
            );
            push(
                "response.in_progress",
                json!({"response": response("in_progress", json!([]), Value::Null)}),
            );
            let item_id = format!("fc_mock_{}", turn.sequence);
            push(
                "response.output_item.added",
                json!({"output_index": 0,
                "item": function_call_item(turn, call, "in_progress", "")}),
            );
            for piece in pieces(&call.arguments) {
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": 0, "delta": piece}),
                );
            }
            push(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": 0, "arguments": call.arguments}),
            );
            let (status, event) = if call.cut_short {
                ("incomplete", "response.incomplete")
            } else {
                ("completed", "response.completed")
            };
            let done = function_call_item(turn, call, status, &call.arguments);
            push(
                "response.output_item.done",
                json!({"output_index": 0, "item": done}),
            );
            push(
                event,
                json!({"response": response(status, json!([done]), usage)}),
            );
        }
        _ => {
            let chunk = |delta: Value, finish: Value| {
                let mut chunk = json!({"id": format!("chatcmpl-mock-{}", turn.sequence),
                    "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": turn.model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
                if turn.include_usage {
                    chunk["usage"] = Value::Null;
                }
                sse(None, &chunk.to_string())
            };
            frames.push(chunk(
                json!({"role": "assistant", "content": null}),
                Value::Null,
            ));
            frames.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
                Value::Null,
            ));
            for piece in pieces(&call.arguments) {
                frames.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
            frames.push(chunk(
                json!({}),
                json!(if call.cut_short {
                    "length"
                } else {
                    "tool_calls"
                }),
            ));
            if turn.include_usage {
                frames.push(sse(None, &json!({"id": format!("chatcmpl-mock-{}", turn.sequence),
                    "object": "chat.completion.chunk", "created": 1_700_000_000u64, "model": turn.model,
                    "choices": [], "usage": usage}).to_string()));
            }
            frames.push(sse(None, "[DONE]"));
        }
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_an_offered_tool_and_its_arguments() {
        let body = json!({"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather"}}],
            "messages": [{"role": "user", "content": "mock-tool-call:get_weather {\"city\":\"Paris\"} please"}]});
        assert_eq!(
            requested(Endpoint::ChatCompletions, &body),
            Some(ToolCall {
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into(),
                cut_short: false,
            })
        );
        let unoffered = json!({"model": "m", "messages": [{"role": "user", "content": "mock-tool-call:get_weather"}]});
        assert_eq!(requested(Endpoint::ChatCompletions, &unoffered), None);
        let answered = json!({"model": "m", "tools": [{"name": "get_weather"}], "messages": [
            {"role": "user", "content": "mock-tool-call:get_weather"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "sunny"}]}]});
        assert_eq!(
            requested(Endpoint::Messages, &answered),
            None,
            "a result gets text"
        );
        assert_eq!(
            pieces("{\"city\":\"Paris\"}").concat(),
            "{\"city\":\"Paris\"}"
        );
        assert_eq!(pieces("{\"city\":\"Paris\"}").len(), 3);
    }
}
