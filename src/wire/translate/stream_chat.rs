//! A Messages stream as Chat Completions chunks, event by event (behaviour §14): the role
//! chunk, `content` / `reasoning_content` / `tool_calls[i]` deltas (arguments in the pieces
//! they came in), the `finish_reason` chunk, the usage chunk when the client asked for it, and
//! `data: [DONE]`. State is the open block and a few counters: nothing grows with the stream.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::answer_chat::{chat_id, chat_usage};
use super::params;
use super::sse_write::write_data;
use crate::wire::stream_error::openai_stream_error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A `tool_use` block, as the client's `tool_calls[i]`.
    Tool(u32),
    Other,
}

#[derive(Debug)]
pub struct ChatFromMessages {
    id: String,
    model: Value,
    created: u64,
    include_usage: bool,
    open: Option<Open>,
    tools: u32,
    usage: Value,
    output_tokens: u64,
    stop_reason: Option<String>,
    done: bool,
}

impl ChatFromMessages {
    pub fn new(include_usage: bool, created: u64) -> Self {
        ChatFromMessages {
            id: chat_id(""),
            model: Value::Null,
            created,
            include_usage,
            open: None,
            tools: 0,
            usage: json!({}),
            output_tokens: 0,
            stop_reason: None,
            done: false,
        }
    }

    fn chunk(&self, out: &mut BytesMut, delta: Value, finish: Option<&str>) {
        write_data(
            out,
            None,
            &json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            }),
        );
    }

    pub fn event(&mut self, data: &Value, out: &mut BytesMut) {
        match data.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.id = chat_id(message.get("id").and_then(Value::as_str).unwrap_or(""));
                self.model = message.get("model").cloned().unwrap_or(Value::Null);
                if let Some(usage) = message.get("usage") {
                    self.usage = usage.clone();
                }
                self.chunk(out, json!({"role": "assistant", "content": ""}), None);
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                self.open = Some(match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(text) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            self.chunk(out, json!({"content": text}), None);
                        }
                        Open::Text
                    }
                    Some("thinking") => Open::Thinking,
                    Some("tool_use") => {
                        let index = self.tools;
                        self.tools += 1;
                        self.chunk(
                            out,
                            json!({"tool_calls": [{
                                "index": index,
                                "id": block.get("id").cloned().unwrap_or(json!("")),
                                "type": "function",
                                "function": {"name": block.get("name").cloned().unwrap_or(json!("")), "arguments": ""},
                            }]}),
                            None,
                        );
                        Open::Tool(index)
                    }
                    _ => Open::Other,
                });
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let piece = |key: &str| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                };
                match (delta.get("type").and_then(Value::as_str), self.open) {
                    (Some("text_delta"), _) => {
                        if let Some(text) = piece("text") {
                            self.chunk(out, json!({"content": text}), None);
                        }
                    }
                    (Some("thinking_delta"), _) => {
                        if let Some(thinking) = piece("thinking") {
                            self.chunk(out, json!({"reasoning_content": thinking}), None);
                        }
                    }
                    (Some("input_json_delta"), Some(Open::Tool(index))) => {
                        if let Some(json) = piece("partial_json") {
                            self.chunk(
                                out,
                                json!({"tool_calls": [{"index": index, "function": {"arguments": json}}]}),
                                None,
                            );
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => self.open = None,
            "message_delta" => {
                if let Some(stop) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(stop.to_string());
                }
                if let Some(usage) = data.get("usage").and_then(Value::as_object) {
                    for (key, value) in usage {
                        if !value.is_null() {
                            self.usage[key.as_str()] = value.clone();
                        }
                    }
                    self.output_tokens = usage
                        .get("output_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(self.output_tokens);
                }
                let finish = params::finish_reason(self.stop_reason.as_deref());
                self.chunk(out, json!({}), Some(finish));
            }
            "message_stop" => self.end(out),
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("upstream error");
                let kind = error
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                out.extend_from_slice(&openai_stream_error(message, kind));
                self.done = true;
            }
            _ => {}
        }
    }

    fn end(&mut self, out: &mut BytesMut) {
        if self.done {
            return;
        }
        self.done = true;
        if self.include_usage {
            write_data(
                out,
                None,
                &json!({
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": chat_usage(&self.usage),
                }),
            );
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The upstream ended: a stream that never said `message_stop` is not ended here (the
    /// relay reports it as broken).
    pub fn finish(&mut self, _out: &mut BytesMut) {}
}
