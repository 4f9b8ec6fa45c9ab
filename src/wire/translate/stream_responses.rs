//! A Messages stream as the Responses event sequence (behaviour §14): `response.created`,
//! `response.in_progress`, per block `response.output_item.added` … its deltas
//! (`response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.reasoning_summary_text.delta`) … its `*.done` events and
//! `response.output_item.done`, then `response.completed` with the output and usage.
//!
//! The protocol's `*.done` events and `response.completed` repeat what was streamed, so the
//! open block's text and the finished items are kept — at most [`MAX_HELD_OUTPUT_BYTES`]; past
//! it the items are still streamed and done, but `response.completed` lists only those kept.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::answer_responses::{
    function_call_item, message_item, reasoning_item, response_id, response_object, responses_usage,
};
use super::sse_write::write_data;

/// Most output bytes kept for the `*.done` events and `response.completed`.
pub const MAX_HELD_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking {
        signature: String,
    },
    /// A redacted thinking block: no text, its data carried whole.
    Redacted {
        data: String,
    },
    Tool {
        call_id: String,
        name: String,
    },
    Other,
}

#[derive(Debug)]
struct OpenItem {
    kind: Kind,
    id: String,
    output_index: u32,
    text: String,
}

pub struct ResponsesFromMessages {
    id: String,
    bare: String,
    model: Value,
    created: u64,
    sequence: u64,
    next_output: u32,
    open: Option<OpenItem>,
    output: Vec<Value>,
    held: usize,
    usage: Value,
    stop_reason: Option<String>,
    done: bool,
}

impl std::fmt::Debug for ResponsesFromMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesFromMessages")
            .field("id", &self.id)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

impl ResponsesFromMessages {
    pub fn new(created: u64) -> Self {
        ResponsesFromMessages {
            id: response_id(""),
            bare: String::new(),
            model: Value::Null,
            created,
            sequence: 0,
            next_output: 0,
            open: None,
            output: Vec::new(),
            held: 0,
            usage: json!({}),
            stop_reason: None,
            done: false,
        }
    }

    fn emit(&mut self, out: &mut BytesMut, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        write_data(out, Some(kind), &data);
    }

    fn response(&self, status: &str, output: Vec<Value>, usage: Value) -> Value {
        response_object(&self.id, &self.model, self.created, status, output, usage)
    }

    pub fn event(&mut self, data: &Value, out: &mut BytesMut) {
        match data.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                let message_id = message.get("id").and_then(Value::as_str).unwrap_or("");
                self.id = response_id(message_id);
                self.bare = message_id
                    .strip_prefix("msg_")
                    .unwrap_or(message_id)
                    .to_string();
                self.model = message.get("model").cloned().unwrap_or(Value::Null);
                if let Some(usage) = message.get("usage") {
                    self.usage = usage.clone();
                }
                let created = self.response("in_progress", Vec::new(), Value::Null);
                self.emit(out, "response.created", json!({"response": created}));
                let progress = self.response("in_progress", Vec::new(), Value::Null);
                self.emit(out, "response.in_progress", json!({"response": progress}));
            }
            "content_block_start" => self.start_block(data, out),
            "content_block_delta" => self.delta(data, out),
            "content_block_stop" => self.stop_block(out),
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
                }
            }
            "message_stop" => {
                if self.done {
                    return;
                }
                self.done = true;
                self.stop_block(out);
                let (status, kind) = match self.stop_reason.as_deref() {
                    Some("max_tokens") => ("incomplete", "response.incomplete"),
                    _ => ("completed", "response.completed"),
                };
                let output = std::mem::take(&mut self.output);
                let response = self.response(status, output, responses_usage(&self.usage));
                self.emit(out, kind, json!({"response": response}));
            }
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("upstream error");
                let code = error
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                self.error(message, code, out);
            }
            _ => {}
        }
    }

    /// The Responses `error` event (a break after commit, or the upstream's own error).
    pub fn error(&mut self, message: &str, code: &str, out: &mut BytesMut) {
        self.done = true;
        self.emit(
            out,
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
    }

    fn start_block(&mut self, data: &Value, out: &mut BytesMut) {
        self.stop_block(out);
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let output_index = self.next_output;
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let str_of = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (kind, id) = match block.get("type").and_then(Value::as_str) {
            Some("text") => (Kind::Text, format!("msg_{}_{index}", self.bare)),
            Some("thinking") => (
                Kind::Thinking {
                    signature: str_of("signature"),
                },
                format!("rs_{}_{index}", self.bare),
            ),
            Some("redacted_thinking") => (
                Kind::Redacted {
                    data: str_of("data"),
                },
                format!("rs_{}_{index}", self.bare),
            ),
            Some("tool_use") => (
                Kind::Tool {
                    call_id: str_of("id"),
                    name: str_of("name"),
                },
                format!("fc_{}_{index}", self.bare),
            ),
            _ => (Kind::Other, String::new()),
        };
        let item = match &kind {
            Kind::Text => {
                json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
            }
            Kind::Thinking { .. } | Kind::Redacted { .. } => {
                json!({"id": id, "type": "reasoning", "summary": []})
            }
            Kind::Tool { call_id, name } => {
                function_call_item(&id, call_id, name, "", "in_progress")
            }
            Kind::Other => {
                self.open = Some(OpenItem {
                    kind,
                    id,
                    output_index,
                    text: String::new(),
                });
                return;
            }
        };
        self.next_output += 1;
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
        );
        match &kind {
            Kind::Text => self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
            Kind::Thinking { .. } => self.emit(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
            ),
            _ => {}
        }
        self.open = Some(OpenItem {
            kind,
            id,
            output_index,
            text: String::new(),
        });
    }

    fn delta(&mut self, data: &Value, out: &mut BytesMut) {
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let piece = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (kind, body) = match (delta.get("type").and_then(Value::as_str), &mut open.kind) {
            (Some("text_delta"), Kind::Text) => {
                let text = piece("text");
                open.text.push_str(&text);
                (
                    "response.output_text.delta",
                    json!({"item_id": open.id, "output_index": open.output_index, "content_index": 0, "delta": text, "logprobs": []}),
                )
            }
            (Some("thinking_delta"), Kind::Thinking { .. }) => {
                let text = piece("thinking");
                open.text.push_str(&text);
                (
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": open.id, "output_index": open.output_index, "summary_index": 0, "delta": text}),
                )
            }
            (Some("signature_delta"), Kind::Thinking { signature }) => {
                signature.push_str(&piece("signature"));
                return;
            }
            (Some("input_json_delta"), Kind::Tool { .. }) => {
                let json = piece("partial_json");
                open.text.push_str(&json);
                (
                    "response.function_call_arguments.delta",
                    json!({"item_id": open.id, "output_index": open.output_index, "delta": json}),
                )
            }
            _ => return,
        };
        self.emit(out, kind, body);
    }

    fn stop_block(&mut self, out: &mut BytesMut) {
        let Some(open) = self.open.take() else {
            return;
        };
        let OpenItem {
            kind,
            id,
            output_index,
            text,
        } = open;
        let item = match kind {
            Kind::Text => {
                self.emit(out, "response.output_text.done",
                    json!({"item_id": id, "output_index": output_index, "content_index": 0, "text": text, "logprobs": []}));
                self.emit(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": output_index, "content_index": 0,
                           "part": {"type": "output_text", "text": text, "annotations": []}}),
                );
                message_item(&id, &text, "completed")
            }
            Kind::Thinking { signature } => {
                self.emit(out, "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": output_index, "summary_index": 0, "text": text}));
                self.emit(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": text}}),
                );
                let block = json!({"type": "thinking", "thinking": text, "signature": signature});
                reasoning_item(&id, &block)
            }
            Kind::Redacted { data } => {
                reasoning_item(&id, &json!({"type": "redacted_thinking", "data": data}))
            }
            Kind::Tool { call_id, name } => {
                let arguments = if text.is_empty() {
                    "{}".to_string()
                } else {
                    text
                };
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": output_index, "arguments": arguments}),
                );
                function_call_item(&id, &call_id, &name, &arguments, "completed")
            }
            Kind::Other => return,
        };
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        );
        let size = item.to_string().len();
        if self.held + size <= MAX_HELD_OUTPUT_BYTES {
            self.held += size;
            self.output.push(item);
        }
    }
}
