//! A Chat Completions stream as a Messages stream, chunk by chunk (behaviour §14):
//! `message_start`, one `content_block_*` run per thinking / text / tool call (arguments as
//! `input_json_delta` pieces), then `message_delta` (stop reason, usage with cache reads) and
//! `message_stop` at `[DONE]`. Blocks are sequential in Messages; a piece for a tool call that
//! is no longer open (providers send calls one after another) is left out rather than held.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::answer_messages::message_id;
use super::params;
use super::sse_write::write_data;
use crate::wire::stream_error::anthropic_stream_error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// The client's block for the upstream's `tool_calls[i]`.
    Tool(u64),
}

#[derive(Debug, Default)]
pub struct MessagesFromChat {
    started: bool,
    /// (its index, what it holds)
    open: Option<(u32, Open)>,
    next_index: u32,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

impl MessagesFromChat {
    pub fn new() -> Self {
        MessagesFromChat::default()
    }

    fn start(&mut self, chunk: &Value, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        write_data(
            out,
            Some("message_start"),
            &json!({"type": "message_start", "message": {
                "id": message_id(chunk.get("id").and_then(Value::as_str).unwrap_or("")),
                "type": "message",
                "role": "assistant",
                "model": chunk.get("model").cloned().unwrap_or(json!("")),
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }}),
        );
    }

    fn close(&mut self, out: &mut BytesMut) {
        if let Some((index, _)) = self.open.take() {
            write_data(
                out,
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    /// The open block when it holds `want`, else a new one started by `block`.
    fn ensure(&mut self, want: Open, block: Value, out: &mut BytesMut) -> u32 {
        if let Some((index, open)) = self.open {
            if open == want {
                return index;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        write_data(
            out,
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        self.open = Some((index, want));
        index
    }

    fn delta(out: &mut BytesMut, index: u32, delta: Value) {
        write_data(
            out,
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }

    pub fn event(&mut self, data: &str, out: &mut BytesMut) {
        if data.trim() == "[DONE]" {
            self.end(out);
            return;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("upstream error");
            out.extend_from_slice(&anthropic_stream_error(message, "api_error"));
            self.done = true;
            return;
        }
        self.start(&chunk, out);
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        let text_of = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(thinking) = text_of("reasoning_content").or_else(|| text_of("reasoning")) {
            let index = self.ensure(
                Open::Thinking,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                out,
            );
            Self::delta(
                out,
                index,
                json!({"type": "thinking_delta", "thinking": thinking}),
            );
        }
        if let Some(text) = text_of("content").or_else(|| text_of("refusal")) {
            let index = self.ensure(Open::Text, json!({"type": "text", "text": ""}), out);
            Self::delta(out, index, json!({"type": "text_delta", "text": text}));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let call_index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = call.get("function").unwrap_or(&Value::Null);
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                self.close(out);
                let block = json!({
                    "type": "tool_use",
                    "id": id,
                    "name": function.get("name").cloned().unwrap_or(json!("")),
                    "input": {},
                });
                self.ensure(Open::Tool(call_index), block, out);
            }
            let Some(piece) = function
                .get("arguments")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            else {
                continue;
            };
            if let Some((index, Open::Tool(open))) = self.open {
                if open == call_index {
                    Self::delta(
                        out,
                        index,
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    );
                }
            }
        }
        if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(finish.to_string());
            self.close(out);
        }
    }

    fn end(&mut self, out: &mut BytesMut) {
        if self.done || !self.started {
            return;
        }
        self.done = true;
        self.close(out);
        let usage =
            super::answer_messages::anthropic_usage(self.usage.as_ref().unwrap_or(&Value::Null));
        write_data(
            out,
            Some("message_delta"),
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": params::stop_reason(self.finish_reason.as_deref()), "stop_sequence": null},
                "usage": usage,
            }),
        );
        write_data(out, Some("message_stop"), &json!({"type": "message_stop"}));
    }

    /// The upstream ended: one that finished its answer (a finish reason) without `[DONE]`
    /// still gets its closing events.
    pub fn finish(&mut self, out: &mut BytesMut) {
        if self.finish_reason.is_some() {
            self.end(out);
        }
    }
}
